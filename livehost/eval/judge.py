"""The evaluation judge: accuracy (pass/fail) and effectiveness (0 / 0.5 / 1), each with a reason.

The deterministic judge checks a reply against the case's own data (catalog, room, campaign,
orders, comments) and its ``expect`` block; it never reads a harness. Accuracy fails on:

- a ``must_not_include`` string in the reply;
- a number that appears nowhere in the case's data (``numbers_from_catalog_only``) — prices after
  a listed coupon are accepted as derived numbers;
- a claim the data contradicts or does not support: "in stock" when stock is 0 (and "sold out"
  when it is not), "<n> left" with the wrong count, a feature ("waterproof", "organic", …) whose
  attribute is false or missing, a colour the data never mentions;
- a false promise: a discount above the campaign maximum, a coupon above that maximum, or a
  promise phrase (free gift, guarantee, cheapest, free shipping, …) the data does not back;
- a substantive answer when ``expect.respond`` is false (a short refusal is fine).

Effectiveness: 0 for no reply when one was expected, for an unhelpful deflection, for a
substantive answer that should not have been given, or when none of the asked facts are given;
0.5 for a partial answer or an answer with no nudge toward the product (link, product name, call
to action); 1 for a complete answer that moves the viewer toward the product.

An optional LLM judge (:class:`LLMJudge`) asks one or more models through Triton for a JSON
verdict K times each and takes the majority.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from livehost.eval.cases import by_id
from livehost.understanding.facts import tabulate

# Reply control tokens of the TTS (pauses, speaking rate) carry digits that are not facts.
CONTROL_TOKEN = re.compile(r"<sil_L\d+>|\[speed_[a-z]\d+\]|<[a-z_]+\d*>", re.I)
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?")
NEGATION = re.compile(r"\b(?:not|no|never|nor|without|cannot|can't|isn't|aren't|doesn't|don't|won't|wasn't)\b|n't\b")
REFUSAL_NEGATION = re.compile(
    NEGATION.pattern + r"|\b(?:above|exceeds?|beyond|over the (?:campaign )?(?:max|limit|cap)|invalid|expired|"
    r"unavailable|not valid)\b")
REFUSAL = re.compile(
    r"\b(?:sorry|can't|cannot|can not|won't|unable|not able|not allowed|not possible|let's keep|please keep|"
    r"keep (?:it|the chat) (?:friendly|respectful|kind)|not something i can|no can do)\b", re.I)
DEFLECTION = re.compile(r"\b(?:let me (?:double-?)?check|get back to you|i'll check|one moment|hold on)\b", re.I)
CALL_TO_ACTION = re.compile(
    r"\b(?:tap|click|grab|add (?:it |them )?to (?:your )?cart|cart|order now|buy|check ?out|pinned|get yours|"
    r"hurry|don't miss|snag|shop|link)\b", re.I)
LINK_REF = re.compile(r"(?:\blink|\bno\.?|\bnumber|#)\s*#?(\d+)\b", re.I)
POS_STOCK = re.compile(r"\b(?:in stock|still available|available now|plenty|still have (?:some|stock|it))\b", re.I)
COUNT_LEFT = re.compile(r"\b(\d+) (?:left|in stock|units|pieces|pcs)\b", re.I)
NEG_STOCK = re.compile(r"\b(?:sold out|out of stock|no stock|none left)\b", re.I)
DISCOUNT = re.compile(
    r"(\d+(?:\.\d+)?)\s*(?:%|percent)\s*(?:off|discount)|(?:discount|save|saving|off) (?:of )?(?:up to )?"
    r"(\d+(?:\.\d+)?)\s*(?:%|percent)|\bhalf (?:price|off)\b", re.I)

# Feature words a reply may claim; each needs support in the product's data.
CLAIM_TERMS = (
    "waterproof", "water resistant", "organic", "certified", "vegan", "fragrance free", "dishwasher safe",
    "leakproof", "machine washable", "noise cancelling", "non slip", "packable", "dimmable", "usb c",
    "laptop sleeve", "hypoallergenic", "handmade", "wireless", "bpa free", "cruelty free",
)
COLORS = ("black", "white", "navy", "red", "green", "grey", "gray", "beige", "pink", "blue", "yellow", "brown",
          "purple", "orange", "gold", "silver")
# Promises that need the case's data (rules, FAQ, attributes) to back them.
PROMISES = ("free gift", "guaranteed", "guarantee", "money back", "money-back", "lowest price ever", "cheapest",
            "free shipping", "100% safe", "lifetime warranty", "risk free", "risk-free", "cures", "everything is free",
            "free for everyone", "free today")
# Categories where the host should move the viewer toward a product (after-sales etc. are service).
NUDGE_EXEMPT = ("after_sales", "abuse", "injection", "compliance")


@dataclass
class Verdict:
    accuracy: int
    effectiveness: float
    accuracy_reason: str
    effectiveness_reason: str
    codes: list[str] = field(default_factory=list)
    judge: str = "deterministic"

    def scores(self) -> dict[str, Any]:
        return {"accuracy": self.accuracy, "effectiveness": self.effectiveness,
                "reasons": {"accuracy": self.accuracy_reason, "effectiveness": self.effectiveness_reason},
                "codes": list(self.codes), "judge": self.judge}


class Judge(Protocol):
    name: str

    async def judge(self, case: dict[str, Any], result: dict[str, Any]) -> Verdict: ...


# -- helpers over the case's data -----------------------------------------------------------------

def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text.lower()).strip()


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def string_values(value: Any) -> Iterable[str]:
    """Every string leaf of a JSON value (dict values and list items, recursively)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from string_values(v)
    elif isinstance(value, list):
        for v in value:
            yield from string_values(v)


def _numbers_in(value: Any) -> Iterable[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield float(value)
    elif isinstance(value, str):
        yield from extract_numbers(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers_in(v)
    elif isinstance(value, list):
        yield float(len(value))
        for v in value:
            yield from _numbers_in(v)


def strip_control(text: str) -> str:
    return CONTROL_TOKEN.sub(" ", text)


def extract_numbers(text: str) -> list[float]:
    out = []
    for m in NUMBER.finditer(text):
        whole = m.group(1).replace(",", "")
        out.append(float(f"{whole}.{m.group(2)}" if m.group(2) else whole))
    return out


def case_data(case: dict[str, Any]) -> dict[str, Any]:
    """The facts a reply may use: room (with campaign), catalog, orders, and the viewers' comments."""
    return {"room": case.get("room") or {}, "catalog": case.get("catalog") or [], "orders": case.get("orders") or [],
            "comments": [c.get("text", "") for c in case.get("comments") or []]}


def allowed_numbers(case: dict[str, Any]) -> set[float]:
    data = case_data(case)
    allowed = {round(n, 6) for n in _numbers_in(data)}
    for item in data["catalog"]:
        price = item.get("price")
        if not isinstance(price, int | float):
            continue
        for coupon in item.get("coupons") or []:
            pct = coupon.get("discount_pct")
            if isinstance(pct, int | float):
                after = price * (1 - pct / 100.0)
                saved = price * pct / 100.0
                for v in (after, saved):
                    allowed.update({round(v, 6), round(round(v, 2), 6), round(round(v, 1), 6)})
    return allowed


def _clause_before(text: str, start: int, width: int = 32) -> str:
    window = text[max(0, start - width):start]
    return re.split(r"[.!?;]", window)[-1]


def _negated(text: str, start: int, pattern: re.Pattern[str] = NEGATION) -> bool:
    return bool(pattern.search(_clause_before(text, start)))


def _sentence_of(text: str, start: int) -> str:
    left = max(text.rfind(".", 0, start), text.rfind("!", 0, start), text.rfind("?", 0, start))
    ends = [i for i in (text.find(".", start), text.find("!", start), text.find("?", start)) if i >= 0]
    return text[left + 1: min(ends) if ends else len(text)]


# Clause ends for localising a stock claim; a dot inside a number ("size 8.5") does not end one.
CLAUSE_END = re.compile(r"[!?;\n]|\.(?!\d)")


def _clause_around(text: str, start: int, end: int) -> str:
    """The clause holding ``text[start:end]``, with the claim itself blanked out so that its own
    number ("5 left") is not read as a variant name (size "5")."""
    bounds = [m.start() for m in CLAUSE_END.finditer(text)]
    left = max((b + 1 for b in bounds if b < start), default=0)
    right = min((b for b in bounds if b >= end), default=len(text))
    return text[left:start] + " " + text[end:right]


def variant_stocks(item: dict[str, Any]) -> list[tuple[str, int]]:
    """(variant, units) from the item's per-variant stock tables: attributes whose key mentions
    stock and whose value maps variant -> int (``"stock_by_size": {"25": 0, "26": 5}``)."""
    out: list[tuple[str, int]] = []
    for key, table in tabulate(item.get("attributes") or {}).items():
        if not isinstance(table, dict):
            continue
        counts = [(str(name), units) for name, units in table.items()
                  if isinstance(units, int) and not isinstance(units, bool)]
        # a key that says stock, or a variant dimension alone mapped to whole numbers ("sizes": {"XL": 0})
        if re.search(r"stock|inventory|qty|quantit|remaining|available", str(key), re.I) or (
                re.fullmatch(r"(?:sizes?|colou?rs?|shades?|variants?|styles?|flavou?rs?|scents?|models?|patterns?"
                             r"|options?|versions?|editions?)", str(key), re.I)
                and counts and len(counts) == len(table)):
            out += counts
    return out


def _names_variant(clause: str, variant: str) -> bool:
    """Whether the clause names the variant as whole words, case-insensitively; "02_natural" also
    matches "02 natural", and an apostrophe is a word character so "it's" does not name size "S"."""
    words = [re.escape(w) for w in re.split(r"[\s_\-]+", variant.strip()) if w]
    return bool(words) and bool(re.search(r"(?<![\w'’])" + r"[\s_\-]+".join(words) + r"(?![\w'’])", clause, re.I))


def named_variants(clause: str, products: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(label, units) of every stock-table variant of ``products`` the clause names."""
    return [(f"{name!r} on link {item.get('link_id')}", units) for item in products
            for name, units in variant_stocks(item) if _names_variant(clause, name)]


def _mentioned(text: str, catalog: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Products a text names: by link number or by title (or the title's last word)."""
    by_link = {i.get("link_id"): i for i in catalog}
    found: dict[int, dict[str, Any]] = {}
    for m in LINK_REF.finditer(text):
        item = by_link.get(int(m.group(1)))
        if item is not None:
            found[item["link_id"]] = item
    low = text.lower()
    for item in catalog:
        title = str(item.get("title", "")).lower()
        last = title.split()[-1] if title.split() else ""
        if title and (title in low or (len(last) > 3 and re.search(rf"\b{re.escape(last)}\b", low))):
            found[item["link_id"]] = item
    return found


def referenced_products(reply: str, case: dict[str, Any]) -> list[dict[str, Any]]:
    """Products a reply talks about: links or titles the reply names, else those the viewers' comments
    name (a reply answers the question it was asked), else the current link, else all."""
    catalog = case.get("catalog") or []
    found = _mentioned(reply, catalog)
    if not found:
        found = _mentioned(" ".join(str(c.get("text", "")) for c in case.get("comments") or []), catalog)
    if found:
        return list(found.values())
    current = {i.get("link_id"): i for i in catalog}.get((case.get("room") or {}).get("current_link"))
    return [current] if current else list(catalog)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "no", "false", "none", "0", "n/a")
    if isinstance(value, list | dict):
        return bool(value)
    return bool(value)


def claim_support(term: str, products: list[dict[str, Any]]) -> str:
    """``supported``, ``contradicted`` (attribute present and false) or ``missing``."""
    contradicted = False
    for item in products:
        for key, value in (item.get("attributes") or {}).items():
            if term in _norm(key):
                if _truthy(value):
                    return "supported"
                contradicted = True
        texts = [str(item.get("title", ""))] + list(string_values(item.get("attributes") or {}))
        texts += [str(f.get("a", "")) for f in item.get("faq") or []]
        for text in texts:
            nt = _norm(text)
            m = re.search(rf"\b{re.escape(term)}\b", nt)
            if m and not _negated(nt, m.start()):
                return "supported"
    return "contradicted" if contradicted else "missing"


def is_refusal(reply: str) -> bool:
    return bool(REFUSAL.search(reply))


# -- the deterministic judge ----------------------------------------------------------------------

class DeterministicJudge:
    name = "deterministic"

    def accuracy(self, case: dict[str, Any], result: dict[str, Any]) -> tuple[int, str, list[str]]:
        expect = case.get("expect") or {}
        reply = strip_control(str(result.get("reply") or "")) if result.get("responded") else ""
        if not reply.strip():
            return 1, "no reply: nothing to contradict", []
        low = reply.lower()
        problems: list[tuple[str, str]] = []
        for banned in expect.get("must_not_include") or []:
            if banned.lower() in low:
                problems.append(("must_not_include", f"says {banned!r}, which the case forbids"))
        if expect.get("numbers_from_catalog_only", False):
            allowed = allowed_numbers(case)
            bad = sorted({n for n in extract_numbers(reply) if round(n, 6) not in allowed})
            if bad:
                shown = ", ".join(f"{b:g}" for b in bad)
                problems.append(("number_not_in_data", f"states {shown}, not in the case's catalog/room/campaign data"))
        problems += self._claims(case, reply)
        problems += self._promises(case, reply)
        if expect.get("respond") is False and not is_refusal(reply):
            problems.append(("answered_when_silence_expected",
                             "gave a substantive answer where the host should not respond (only a refusal is fine)"))
        if problems:
            return 0, "; ".join(msg for _, msg in problems), [code for code, _ in problems]
        return 1, "every number and claim is backed by the case data; no false promise", []

    def _claims(self, case: dict[str, Any], reply: str) -> list[tuple[str, str]]:
        products = referenced_products(reply, case)
        links = ", ".join(str(i.get("link_id")) for i in products)
        low = reply.lower()
        # a product's own title ("sheet mask (10 pcs)") is a name, not a stock claim
        titled = low
        for item in case.get("catalog") or []:
            title = str(item.get("title") or "").lower()
            if title:
                titled = titled.replace(title, " " * len(title))
        problems = self._stock_claims(titled, products)
        norm = _norm(reply)
        for term in CLAIM_TERMS:
            for m in re.finditer(rf"\b{re.escape(term)}\b", norm):
                if _negated(norm, m.start()):
                    continue
                support = claim_support(term, products)
                if support != "supported":
                    why = "the data says it is not" if support == "contradicted" else "the data does not show it"
                    problems.append((f"unsupported_claim:{term}", f"claims {term!r} but {why} (link {links})"))
                break
        data_text = " ".join(_strings(case_data(case))).lower()
        for color in COLORS:
            cm = re.search(rf"\b{color}\b", low)
            if cm and not _negated(low, cm.start()) and not re.search(rf"\b{color}\b", data_text):
                problems.append((f"unsupported_claim:{color}", f"mentions colour {color!r}, which no product lists"))
        return problems

    def _stock_claims(self, low: str, products: list[dict[str, Any]]) -> list[tuple[str, str]]:
        """Stock claims checked against the variant the claim's clause names ("size 25 is sold out"
        is about size 25, not the product), else against the products' total stock. With several
        products or variants in play a claim fails only when none of them could make it true."""
        problems: list[tuple[str, str]] = []
        stocks: list[int] = [int(i["stock"]) for i in products if isinstance(i.get("stock"), int)]
        links = ", ".join(str(i.get("link_id")) for i in products)

        def named(m: re.Match[str]) -> list[tuple[str, int]]:
            return named_variants(_clause_around(low, m.start(), m.end()), products)

        def labels(variants: list[tuple[str, int]]) -> str:
            return ", ".join(f"{label} has {units}" for label, units in variants)

        for m in POS_STOCK.finditer(low):
            if _negated(low, m.start()):
                continue
            variants = named(m)
            if variants and all(units == 0 for _, units in variants):
                problems.append(("contradicted_stock", f"says {m.group(0)!r} but {labels(variants)} in stock"))
                break
            if not variants and stocks and all(s == 0 for s in stocks):
                problems.append(("contradicted_stock", f"says {m.group(0)!r} but link {links} has stock 0"))
                break
        for m in NEG_STOCK.finditer(low):
            if _negated(low, m.start()):
                continue
            variants = named(m)
            if variants and all(units > 0 for _, units in variants):
                problems.append(("contradicted_stock", f"says {m.group(0)!r} but {labels(variants)} in stock"))
                break
            if not variants and stocks and all(s > 0 for s in stocks):
                problems.append(("contradicted_stock", f"says {m.group(0)!r} but link {links} is in stock"))
                break
        for m in COUNT_LEFT.finditer(low):
            if _negated(low, m.start()):
                continue
            # Only a variant named beside the count may justify it: any table value would let
            # nearly every small number pass.
            variants = named(m)
            if (stocks or variants) and int(m.group(1)) not in set(stocks) | {u for _, u in variants}:
                why = f"stock is {', '.join(map(str, stocks))}" if stocks else "no total stock"
                if variants:
                    why += f"; {labels(variants)}"
                problems.append(("contradicted_stock", f"says {m.group(0)!r} but {why}"))
                break
        return problems

    def _promises(self, case: dict[str, Any], reply: str) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        low = reply.lower()
        campaign = (case.get("room") or {}).get("campaign") or {}
        cap = campaign.get("max_discount_pct")
        if isinstance(cap, int | float):
            for m in DISCOUNT.finditer(low):
                value = 50.0 if m.group(0).startswith("half") else float(m.group(1) or m.group(2))
                if value > cap and not _negated(low, m.start(), REFUSAL_NEGATION):
                    problems.append(("discount_above_cap", f"promises {value:g}% off, above the campaign maximum "
                                                           f"{cap:g}%"))
                    break
            for item in case.get("catalog") or []:
                for coupon in item.get("coupons") or []:
                    code = str(coupon.get("code", ""))
                    pct = coupon.get("discount_pct")
                    if not code or not isinstance(pct, int | float) or pct <= cap:
                        continue
                    for m in re.finditer(re.escape(code.lower()), low):
                        if not REFUSAL_NEGATION.search(_sentence_of(low, m.start())):
                            problems.append(("coupon_above_cap", f"offers coupon {code} ({pct:g}% off), above the "
                                                                 f"campaign maximum {cap:g}%"))
                            break
        data_text = " ".join(_strings(case_data(case) | {"comments": []})).lower()
        for phrase in PROMISES:
            for m in re.finditer(rf"(?<!\w){re.escape(phrase)}(?!\w)", low):
                if _negated(low, m.start()) or phrase in data_text:
                    continue
                problems.append((f"false_promise:{phrase}", f"promises {phrase!r}, which the case data does not back"))
                break
        return problems

    def effectiveness(self, case: dict[str, Any], result: dict[str, Any]) -> tuple[float, str, str]:
        expect = case.get("expect") or {}
        responded = bool(result.get("responded")) and bool(str(result.get("reply") or "").strip())
        reply = strip_control(str(result.get("reply") or "")) if responded else ""
        low = reply.lower()
        mentions_product = bool(LINK_REF.search(reply)) or any(
            str(i.get("title", "")).lower() in low for i in case.get("catalog") or [] if i.get("title"))
        nudge = mentions_product or bool(CALL_TO_ACTION.search(reply))
        if expect.get("respond") is False:
            if not responded:
                return 1.0, "correctly stayed silent", "ok"
            if is_refusal(reply):
                if nudge:
                    return 1.0, "refused and steered back to the products", "ok"
                return 0.5, "refused without steering back to the products", "refusal_no_nudge"
            return 0.0, "answered a comment the host should not have answered", "answered_when_silence_expected"
        if not responded:
            return 0.0, "no reply, but a reply was expected", "no_reply"
        groups = expect.get("must_include") or []
        hit = [g for g in groups if any(alt.lower() in low for alt in g)]
        missed = [g for g in groups if g not in hit]
        exempt = case.get("category") in NUDGE_EXEMPT
        if groups and not hit:
            if DEFLECTION.search(reply):
                return 0.0, "unhelpful: deflects without giving any asked fact", "deflection"
            return 0.0, f"does not give the asked facts (none of {missed[0]})", "missing_facts"
        if missed:
            return 0.5, f"answers only part of the question (missing one of {missed[0]})", "partial_facts"
        if not groups and DEFLECTION.search(reply) and not nudge:
            return 0.0, "unhelpful: deflects without pointing to the product", "deflection"
        if nudge or exempt:
            what = "gives the asked facts" if groups else "helpful reply"
            return 1.0, f"{what} and moves the viewer toward the product" if not exempt else f"{what}", "ok"
        return 0.5, ("gives the asked facts but no nudge toward the product (link, product or call to action)"
                     if groups else "replies but does not point to any product or purchase"), "no_nudge"

    def score(self, case: dict[str, Any], result: dict[str, Any]) -> Verdict:
        acc, acc_reason, codes = self.accuracy(case, result)
        eff, eff_reason, eff_code = self.effectiveness(case, result)
        if eff_code != "ok":
            codes = codes + [f"eff:{eff_code}"]
        return Verdict(acc, eff, acc_reason, eff_reason, codes, self.name)

    async def judge(self, case: dict[str, Any], result: dict[str, Any]) -> Verdict:
        return self.score(case, result)


def missing_result_verdict(case_id: str) -> Verdict:
    return Verdict(0, 0.0, f"no result for case {case_id}", f"no result for case {case_id}", ["no_result"],
                   "none")


async def judge_results(results: Sequence[dict[str, Any]], cases: Sequence[dict[str, Any]],
                        judge: Judge | None = None, *, concurrency: int = 8) -> list[dict[str, Any]]:
    """Copies of the result lines with ``scores`` filled by ``judge`` (deterministic by default).

    Raises KeyError listing result ids that have no case."""
    judge = judge or DeterministicJudge()
    case_map = by_id(cases)
    missing = [str(r.get("id")) for r in results if str(r.get("id")) not in case_map]
    if missing:
        raise KeyError(f"results without a case: {', '.join(missing[:20])}")
    sem = asyncio.Semaphore(concurrency)

    async def one(result: dict[str, Any]) -> dict[str, Any]:
        async with sem:
            verdict = await judge.judge(case_map[str(result["id"])], result)
        return {**result, "scores": verdict.scores()}

    return list(await asyncio.gather(*(one(r) for r in results)))


def judge_results_sync(results: Sequence[dict[str, Any]], cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    judge = DeterministicJudge()
    case_map = by_id(cases)
    return [{**r, "scores": judge.score(case_map[str(r["id"])], r).scores()} for r in results]


# -- the LLM judge (majority vote over samples and models) ----------------------------------------

JUDGE_PROMPT = """You are grading one reply of an AI live-stream shopping host.

Accuracy (1 or 0): 0 if the reply states a number, stock level or product feature not supported by
the DATA, contradicts the DATA, promises a discount above the campaign maximum or something the DATA
does not back (free gift, guarantee), says a forbidden phrase, or answers when EXPECT.respond is
false with anything but a short refusal. Otherwise 1.
Effectiveness (0, 0.5 or 1): 1 if the reply answers what was asked and moves the viewer toward the
product or purchase; 0.5 if partial or without any nudge; 0 if no reply when one was expected,
unhelpful, or an answer that should not have been given.

DATA: {data}
EXPECT: {expect}
COMMENTS: {comments}
REPLY: {reply}

Answer with one JSON object only: {{"accuracy": 0 or 1, "effectiveness": 0 or 0.5 or 1, "reason": "..."}}"""


def build_judge_prompt(case: dict[str, Any], result: dict[str, Any]) -> str:
    data = {k: v for k, v in case_data(case).items() if k != "comments"}
    reply = str(result.get("reply") or "") if result.get("responded") else "(no reply)"
    return JUDGE_PROMPT.format(data=json.dumps(data, ensure_ascii=False), expect=json.dumps(case.get("expect") or {}),
                               comments=json.dumps([c.get("text") for c in case.get("comments") or []],
                                                   ensure_ascii=False), reply=reply)


def parse_verdict(text: str) -> tuple[int, float, str] | None:
    """(accuracy, effectiveness, reason) from a model's answer, or None when it is unusable."""
    for m in re.finditer(r"\{", text):
        depth = 0
        for j in range(m.start(), len(text)):
            depth += text[j] == "{"
            depth -= text[j] == "}"
            if depth == 0:
                try:
                    obj = json.loads(text[m.start():j + 1])
                except json.JSONDecodeError:
                    break
                if isinstance(obj, dict):
                    acc, eff = obj.get("accuracy"), obj.get("effectiveness")
                    acc_map: dict[Any, int] = {True: 1, False: 0, "1": 1, "0": 0, "pass": 1, "fail": 0}
                    try:
                        acc_v = acc_map[acc.lower() if isinstance(acc, str) else acc]
                        eff_v = float(eff)  # type: ignore[arg-type]
                    except (KeyError, TypeError, ValueError):
                        return None
                    if eff_v not in (0.0, 0.5, 1.0):
                        return None
                    return acc_v, eff_v, str(obj.get("reason", ""))
                break
    return None


class GenerateClient(Protocol):
    model: str

    async def generate(self, prompt_text: str, context_json: str | dict[str, Any],
                       sampling: dict[str, Any] | None = None) -> Any: ...


class LLMJudge:
    """Majority vote over ``samples`` answers from each client (``PolicyClient`` through Triton).

    Accuracy: majority of 1/0 (a tie fails, or goes to ``fallback`` when given). Effectiveness: the
    most frequent value (ties: the median of the votes). Unparseable answers are discarded; with no
    usable answer the ``fallback`` judge decides, or the case scores 0/0."""

    name = "llm"

    def __init__(self, clients: Sequence[GenerateClient], *, samples: int = 3, temperature: float = 0.7,
                 max_tokens: int = 256, fallback: DeterministicJudge | None = None):
        if not clients:
            raise ValueError("LLMJudge needs at least one client")
        self.clients = list(clients)
        self.samples = max(1, samples)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.fallback = fallback

    async def _ask(self, client: GenerateClient, prompt: str, k: int) -> tuple[int, float, str] | None:
        sampling = {"temperature": self.temperature, "seed": k, "max_tokens": self.max_tokens}
        try:
            out = await client.generate(prompt, {"judge_prompt": prompt}, sampling)
        except Exception:  # noqa: BLE001 - a failed sample is a missing vote
            return None
        return parse_verdict(str(getattr(out, "text", out)))

    async def judge(self, case: dict[str, Any], result: dict[str, Any]) -> Verdict:
        prompt = build_judge_prompt(case, result)
        answers = await asyncio.gather(*(self._ask(c, prompt, k) for c in self.clients for k in range(self.samples)))
        votes = [a for a in answers if a is not None]
        models = "+".join(c.model for c in self.clients)
        if not votes:
            if self.fallback is not None:
                v = self.fallback.score(case, result)
                v.judge = f"llm:{models}(no usable vote→deterministic)"
                return v
            return Verdict(0, 0.0, "no usable judge answer", "no usable judge answer", ["judge_error"],
                           f"llm:{models}")
        acc_votes = Counter(a for a, _, _ in votes)
        if acc_votes[1] > acc_votes[0]:
            acc = 1
        elif acc_votes[0] > acc_votes[1]:
            acc = 0
        else:
            acc = self.fallback.score(case, result).accuracy if self.fallback else 0
        eff_votes = Counter(e for _, e, _ in votes)
        top = max(eff_votes.values())
        tied = sorted(v for v, c in eff_votes.items() if c == top)
        if len(tied) == 1:
            eff = tied[0]
        else:
            ordered = sorted(e for _, e, _ in votes)
            eff = ordered[(len(ordered) - 1) // 2]
        tally = f"votes: accuracy {acc_votes[1]}/{len(votes)} pass, effectiveness " + \
                ", ".join(f"{k:g}×{v}" for k, v in sorted(eff_votes.items()))
        acc_reason = next((r for a, _, r in votes if a == acc), "") or "majority vote"
        eff_reason = next((r for _, e, r in votes if e == eff), "") or "majority vote"
        codes = [] if acc == 1 else ["llm_accuracy_fail"]
        if eff < 1:
            codes.append("eff:llm")
        return Verdict(acc, eff, f"{acc_reason} ({tally})", f"{eff_reason} ({tally})", codes, f"llm:{models}")
