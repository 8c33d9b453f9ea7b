"""Facts of the catalog's own data, phrased as a person would say them, and ranked against a comment.

A product's attributes become one fact each: the key is split and humanised ("weight_g" → "weight",
unit "g"), the value phrased by its shape (a list → options, a boolean → is / is not, a number → with
its unit, a table such as stock per size → one fact per row). FAQ entries and campaign rules are facts
too. :func:`rank` scores every fact against the comment with BM25 over word stems plus, when the
embedding model is installed, the cosine similarity of sentence embeddings; callers answer only above
a confidence threshold and otherwise say they will check.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

UNITS = {"mm": "mm", "cm": "cm", "m": "m", "g": "g", "kg": "kg", "ml": "ml", "l": "L", "h": "hours",
         "hr": "hours", "hours": "hours", "mah": "mAh", "w": "W", "pct": "%", "in": "inches", "gsm": "gsm",
         "v": "V", "mins": "minutes", "min": "minutes", "minutes": "minutes", "days": "days", "weeks": "weeks",
         "months": "months", "years": "years", "yrs": "years", "hrs": "hours", "kw": "kW",
         "pa": "Pa", "db": "dB", "lm": "lumens", "cl": "cl"}
UNIT_NAMES = {"mm": "millimetres", "cm": "centimetres", "m": "metres", "g": "grams", "kg": "kilograms",
              "ml": "millilitres", "L": "litres", "W": "watts", "mAh": "battery capacity", "hours": "hours",
              "inches": "inches", "gsm": "grams per square metre", "V": "volts", "minutes": "minutes",
              "days": "days", "weeks": "weeks", "months": "months", "years": "years", "kW": "kilowatts",
              "Pa": "pascals", "dB": "decibels", "lumens": "lumens"}
CURRENCY_WORDS = {"CNY": "yuan", "RMB": "yuan", "USD": "dollars", "EUR": "euros", "GBP": "pounds", "JPY": "yen"}


def currency_word(code: Any) -> str:
    """How a price's currency is said ("CNY" → "yuan"); an unknown code is said as it is."""
    return CURRENCY_WORDS.get(str(code).upper(), str(code))


# words of a data schema (not of viewers) that mark a table of units left
COUNT_WORDS = ("stock", "inventory", "units", "qty", "quantity", "left", "available")
VARIANT_DIMENSIONS = {"size", "sizes", "colour", "colours", "color", "colors", "shade", "shades", "variant",
                      "variants", "style", "styles", "flavour", "flavours", "flavor", "flavors", "scent", "scents",
                      "model", "models", "pattern", "patterns", "option", "options", "version", "versions",
                      "edition", "editions", "finish", "finishes"}
_WORD = re.compile(r"[a-z0-9]+")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")


@dataclass(frozen=True)
class Fact:
    kind: str  # attribute | variant | faq | campaign
    key: str  # attribute key, "faq", "campaign"
    text: str  # what retrieval reads (humanised key and value, or question and answer)
    sentence: str  # how the host says it
    row: str = ""  # a variant table's row key ("38")
    value: Any = None


_ENDS = (".", "!", "?", "。", "！", "？")  # a sentence already ended, in English or Chinese
_PREPOSITIONS = {"from", "in", "with", "to", "for", "by", "at", "on"}
_PREFIXES = ("non", "anti", "pre", "self", "semi", "multi", "co")


# a pure function of a key, cached: the same keys are humanised on every policy call and rank (typed, as a
# key that is not a string is said through str(): 1 and 1.0 are not the same key)
@lru_cache(maxsize=4096, typed=True)
def humanise_key(key: str) -> tuple[str, str]:
    """``weight_g`` → ("weight", "g"); ``stockBySize`` → ("stock by size", ""); ``non_slip`` → ("non-slip", "")."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", str(key)).replace("_", " ").replace("-", " ").lower()
    parts = spaced.split()
    # a boolean key named as a question of the schema ("is_dishwasher_safe", "has_lid") says its label
    if len(parts) > 1 and parts[0] in ("is", "has", "can", "supports"):
        parts = parts[1:]
    if len(parts) > 1 and parts[0] in _PREFIXES:
        parts = [parts[0] + "-" + parts[1], *parts[2:]]
    unit = ""
    if len(parts) > 1 and parts[-1] in UNITS:
        unit = UNITS[parts[-1]]
        parts = parts[:-1]
    return " ".join(parts), unit


def fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def human_list(values: list[Any]) -> str:
    items = [fmt(v) for v in values]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _adjective(label: str) -> bool:
    """Labels said with "is" ("dishwasher safe", "waterproof", "organic", "non-slip"); a label of
    several words ending in a noun is said with "has" ("juice groove")."""
    parts = label.split()
    if not parts:
        return False
    if len(parts) == 1 or "-" in parts[0]:
        return True
    # "wireless charging", "noise cancelling": a feature it has, not what it is
    return parts[-1].endswith(("proof", "safe", "free", "able", "ible", "ed", "ive", "ous", "ic", "al", "friendly",
                               "ready")) or parts[-1] == "ok"


# a boolean key that starts with a verb ("contains_nuts", "fits_carry_on"): said with the verb itself
_VERBS = {"contains": "contain", "includes": "include", "fits": "fit", "needs": "need", "requires": "require",
          "works": "work", "comes": "come", "uses": "use", "holds": "hold", "supports": "support"}


def tabulate(attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes with each list of records (``"variants": [{"color": "navy", "stock": 0}, …]``) turned
    into one table per field, keyed by the records' naming field (``"stock_by_color": {"navy": 0, …}``):
    the shape every table of variants is read in. Other attributes are kept as they are."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        records = isinstance(value, list) and len(value) > 1 and all(isinstance(r, dict) for r in value)
        names = [f for f in value[0] if all(isinstance(r.get(f), str) for r in value)] if records else []
        if not names:
            out[key] = value
            continue
        name = names[0]
        for field in dict.fromkeys(f for r in value for f in r if f != name):
            out[f"{field}_by_{name}"] = {str(r[name]): r[field] for r in value if field in r}
    return out


def attribute_facts(subject: str, attributes: dict[str, Any]) -> list[Fact]:
    """``subject`` is how the sentence names the product ("It", "The Alpine shell jacket")."""
    out: list[Fact] = []
    attributes = tabulate(attributes)
    # the subject after "Yes, " / "No, ": "it", "the Alpine shell jacket"
    inner = subject[0].lower() + subject[1:] if subject in ("It",) or subject.startswith("The ") else subject
    for key, value in attributes.items():
        label, unit = humanise_key(key)
        if unit and isinstance(value, str) and not re.match(r"\s*[\d.]", value):
            # a word that only looks like a unit ("made_in": "Vietnam" is not in inches)
            label, unit = humanise_key(f"{key}_x")[0].removesuffix(" x"), ""
        if not label:
            continue
        if isinstance(value, dict):
            rows = _table_facts(subject, key, label, value)
            out.extend(rows)
            summary = _table_summary(subject, key, label, value, unit)
            if summary is not None and not _counts_units(label, value):
                out.append(summary)  # a table of measures answers as one fact ("battery: buds 8 h, case 32 h")
            continue
        numbers = isinstance(value, list) and len(value) == 2 and all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in value)
        if numbers and "range" in label.split():
            # "weight_range_kg": [2, 20] is one range, not two options
            shown = f"{fmt(value[0])}-{fmt(value[1])}" + (f" {unit}" if unit else "")
            possessive = "Its" if subject == "It" else f"The {subject.removeprefix('The ')}'s"
            out.append(Fact("attribute", key, f"{label} {shown}", f"{possessive} {label} is {shown}.", value=value))
            continue
        if isinstance(value, list):
            shown = human_list(value)
            words = set(label.split())
            if words & {"color", "colors", "colour", "colours"}:
                sentence = f"{subject} comes in {shown}."
            elif words & {"size", "sizes"}:
                sentence = f"{subject} comes in sizes {shown}."
            else:
                sentence = f"The {label} options are {shown}."
            out.append(Fact("attribute", key, f"{label} {shown}", sentence, value=value))
        elif isinstance(value, bool):
            parts = label.split()
            if len(parts) > 1 and parts[-1] == "included":
                # "strap_included": the strap is (not) included
                thing = " ".join(parts[:-1])
                sentence = f"Yes, the {thing} is included." if value else f"No, the {thing} is not included."
            elif len(parts) > 1 and parts[0] in _VERBS:
                rest = " ".join(parts[1:])
                sentence = f"Yes, {inner} {label}." if value else f"No, {inner} does not {_VERBS[parts[0]]} {rest}."
            elif _adjective(label):
                sentence = f"Yes, {inner} is {label}." if value else f"No, {inner} is not {label}."
            else:
                sentence = f"Yes, {inner} has {label}." if value else f"No, {inner} has no {label}."
            out.append(Fact("attribute", key, f"{label} {'yes' if value else 'no'}", sentence, value=value))
        else:
            shown = fmt(value) + (f" {unit}" if unit and unit != "%" else unit)
            possessive = "Its" if subject == "It" else f"The {subject.removeprefix('The ')}'s"
            parts = label.split()
            if len(parts) > 1 and parts[-1] in _PREPOSITIONS:
                # a key that is a phrase of its own ("ships_from", "made_in", "comes_with"): said as one
                verb = "is " if parts[0].endswith("ed") or parts[0] in ("made", "built", "grown", "sold") else ""
                sentence = f"{subject} {verb}{label} {shown}."
            elif _adjective(label) and isinstance(value, int | float) and parts[-1].endswith(("proof", "safe")):
                sentence = f"{subject} is {label}, rated {shown}."
            elif isinstance(value, str) and value.strip().lower() in ("all", "any", "every", "universal"):
                # "skin_type": "all" → it suits every skin type
                sentence = f"{subject} suits all {label if label.endswith('s') else label + 's'}."
            elif _count_of(label, value, unit):
                # "batteries": 2, "bits_included": 30 → a count of parts: "It has 2 batteries."
                thing = label.removesuffix(" included")
                sentence = f"{subject} {'comes with' if thing != label else 'has'} {fmt(value)} {thing}."
            else:
                verb = "are" if label.endswith("s") and not label.endswith(("ss", "us", "is")) else "is"
                sentence = f"{possessive} {label} {verb} {shown}."
            out.append(Fact("attribute", key, f"{label} {shown} {UNIT_NAMES.get(unit, '')}".strip(), sentence,
                            value=value))
    return out


def _count_of(label: str, value: Any, unit: str) -> bool:
    """A whole number of things named by a plural noun, with no unit ("batteries": 2, "ports": 3)."""
    thing = label.removesuffix(" included").split()
    return (not unit and isinstance(value, int) and not isinstance(value, bool) and value > 1 and len(thing) == 1
            and thing[0].endswith("s") and not thing[0].endswith(("ss", "us", "is")))


def _table_head(words: list[str]) -> list[str]:
    """What a table's key names before its dimension ("stock" of "stock by size")."""
    return words[: words.index("by")] if "by" in words else words[: words.index("per")] if "per" in words else words


def _counts_units(label: str, table: dict[str, Any]) -> bool:
    """A table of units left: its key says so ("stock by size"), or it maps a variant dimension alone
    ("sizes": {"S": 4, "XL": 0}) to whole numbers."""
    head = _table_head(label.split())
    return any(w in COUNT_WORDS for w in head) or (
        set(head) <= VARIANT_DIMENSIONS and bool(table)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in table.values()))


def _table_summary(subject: str, key: str, label: str, table: dict[str, Any], unit: str = "") -> Fact | None:
    """A small table of plain values as one fact: "Its battery: buds 8 hours, with case 32 hours."; a
    row without a unit of its own takes the table's ("battery_hours")."""
    cells = []
    for row, value in table.items():
        if isinstance(value, dict | list) or value is None:
            return None
        row_label, row_unit = humanise_key(str(row))
        row_unit = row_unit or (unit if isinstance(value, int | float) and not isinstance(value, bool) else "")
        shown = fmt(value) + (f" {row_unit}" if row_unit and row_unit != "%" else row_unit)
        # a short row key is a code ("XL", "S"): said as written
        cells.append(f"{row if len(str(row)) <= 4 else row_label or row} {shown}")
    if not cells or len(cells) > 6:
        return None
    possessive = "Its" if subject == "It" else f"The {subject.removeprefix('The ')}'s"
    return Fact("attribute", key, f"{label} {' '.join(cells)}", f"{possessive} {label}: {', '.join(cells)}.")


def _table_facts(subject: str, key: str, label: str, table: dict[str, Any]) -> list[Fact]:
    words = label.split()
    dim = words[words.index("by") + 1] if "by" in words[:-1] else (
        words[words.index("per") + 1] if "per" in words[:-1] else "")
    head = " ".join(_table_head(words))
    counts = _counts_units(label, table)
    out: list[Fact] = []
    for row, value in table.items():
        name = f"{dim} {row}".strip() if dim else str(row)
        if counts and isinstance(value, int | float) and not isinstance(value, bool):
            sentence = (f"Sorry, {name} is sold out right now." if value <= 0
                        else f"{name[0].upper() + name[1:]} is in stock, {fmt(value)} left.")
        else:
            sentence = f"{head[0].upper() + head[1:] if head else 'It'} for {name}: {fmt(value)}."
        out.append(Fact("variant", key, f"{head} {name} {fmt(value)}", sentence, row=str(row), value=value))
    return out


def faq_facts(entries: list[tuple[str, str]]) -> list[Fact]:
    return [Fact("faq", "faq", f"{q} {a}", a.strip() if a.strip().endswith(_ENDS) else a.strip() + ".")
            for q, a in entries]



def campaign_facts(campaign: dict[str, Any] | None) -> list[Fact]:
    if not campaign:
        return []
    name = str(campaign.get("name") or "").strip()
    out = []
    for rule in campaign.get("rules") or []:
        r = str(rule).strip().rstrip(".。")
        sentence = f"In our {name}: {r[0].lower() + r[1:] if r[:1].isupper() and not r[:2].isupper() else r}." \
            if name and "\n" not in name else f"{r}."
        out.append(Fact("campaign", "campaign", r, sentence))
    return out


# ---------------------------------------------------------------------------------------- ranking

def _stems(text: str, stem: Any) -> list[str]:
    """Word stems, and the character pairs of Chinese text (it has no spaces between words; a pair of
    characters is the usual unit of Chinese lexical retrieval)."""
    return list(_cached_stems(text, stem))  # a fresh list: callers may change theirs


@lru_cache(maxsize=8192)  # every rank re-reads the same facts' texts: keyed on the text and the stemmer
def _cached_stems(text: str, stem: Any) -> tuple[str, ...]:
    out = [stem(w) for w in _WORD.findall(text.lower())]
    for run in _CJK_RUN.findall(text):
        out += [run[i:i + 2] for i in range(len(run) - 1)] if len(run) > 1 else [run]
    return tuple(out)


def bm25(query: list[str], docs: list[list[str]], k1: float = 1.2, b: float = 0.75) -> list[float]:
    n = len(docs)
    if not n:
        return []
    avg = sum(len(d) for d in docs) / n or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    scores = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in set(query):
            if t not in tf:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
        scores.append(s)
    return scores


LEXICAL_WEIGHT = 0.4
MARGIN = 0.08
MARGIN_BONUS = 0.15


def rank(query: str, facts: list[Fact], stem: Any, stop: set[str], *, use_embeddings: bool = True
         ) -> list[tuple[float, Fact]]:
    """(score, fact), best first. Score: BM25 over stems squashed to 0..1 (``s / (s + 1.5)``), averaged
    with the embedding cosine when embeddings are on."""
    if not facts:
        return []
    q = [t for t in _stems(query, stem) if t not in stop]
    lex = bm25(q, [_stems(f.text, stem) for f in facts])
    qset = set(q)
    # the comment names the fact's own key ("waterproof", "capacity"): full lexical confidence
    lex01 = [1.0 if f.kind == "attribute" and set(_stems(humanise_key(f.key)[0], stem)) & qset - stop
             else s / (s + 1.5) for s, f in zip(lex, facts, strict=True)]
    if use_embeddings:
        from livehost.understanding import embed

        if embed.available():
            labels = [humanise_key(f.key)[0] if f.kind == "attribute" else f.text for f in facts]
            cos_text = embed.similarity(query, [f.text for f in facts])
            cos_label = embed.similarity(query, labels)
            cos = [max(a, b, 0.0) for a, b in zip(cos_text, cos_label, strict=True)]
            scores = [LEXICAL_WEIGHT * a + (1 - LEXICAL_WEIGHT) * c for a, c in zip(lex01, cos, strict=True)]
            # a fact that stands out from the others by meaning is more likely the one asked about
            order = sorted(range(len(facts)), key=lambda i: -cos[i])
            if len(order) > 1 and cos[order[0]] >= 0.3 and cos[order[0]] - cos[order[1]] >= MARGIN:
                scores[order[0]] += MARGIN_BONUS
            return sorted(zip(scores, facts, strict=True), key=lambda p: -p[0])
    return sorted(zip(lex01, facts, strict=True), key=lambda p: -p[0])
