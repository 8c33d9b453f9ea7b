"""Deterministic reference policy: ``decide(context) -> action``.

It sees only what a model would see (the context JSON of prompt assembly): skill ids, kinds and
descriptions; tool names, descriptions and JSON-schema parameters; rules; product data; the
transcript. It never names a skill or tool: it picks them by scoring their descriptions against a
natural-language lexicon, so renaming every skill, tool and tool argument keeps it working.

One call decides one turn. The plan is recomputed from the context every turn (stateless):

1. screen the comment (injection / abuse -> ``no_reply``);
2. detect intents (multi-intent allowed) and the information each needs;
3. map each need to the best-matching tool and fill its arguments from the schema; call each
   planned tool once (one retry after a transient failure, never an identical call beyond that);
4. load the best-matching *reply* skill;
5. reply with short sentences composed only from tool results / product data, obeying
   corrections, ``max_reply_chars``, banned phrases and claims that need evidence.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import jsonschema

from livehost.understanding import choice, compare, embed
from livehost.understanding.facts import (
    Fact,
    attribute_facts,
    campaign_facts,
    currency_word,
    faq_facts,
    humanise_key,
    rank,
    tabulate,
)
from livehost.understanding.normalize import CJK, expand_shorthand, gloss, normalize
from livehost.understanding.quote import (
    COUNTED_UNITS,
    Coupon,
    asks_after_coupon,
    asks_total,
    best_coupon,
    derived_numbers,
    item_segments,
    money,
    pack_count,
    per_unit_asked,
    quantities,
    second_item_discount,
)
from livehost.understanding.screening import DEFAULT_THRESHOLDS, screen

# --------------------------------------------------------------------------- words

_WORD_RE = re.compile(r"[a-z0-9]+")
_STOP = {
    "a", "an", "the", "is", "are", "it", "this", "that", "of", "to", "in", "on", "for", "and", "or", "do",
    "does", "i", "you", "me", "my", "we", "can", "be", "with", "what", "how", "any", "there", "have",
    "has", "your", "its", "at", "by", "from", "as", "so", "if", "will", "would", "one", "please", "pls",
}
_SYNONYM = {
    "colour": "color", "colours": "color", "promo": "promotion", "promotional": "promotion",
    "voucher": "coupon", "cheap": "price", "costs": "cost", "inventory": "stock", "availability": "available",
    "avail": "available", "qty": "quantity", "spec": "specification", "specs": "specification",
    "deliver": "shipping", "shipment": "shipping", "ship": "shipping", "shipped": "shipping",
    "info": "information", "detail": "details", "size": "size", "sizing": "size", "waterproofing": "waterproof",
    # spelling variants and everyday words for the same shop concept
    "installment": "instalment", "installments": "instalment",
    "installement": "instalment", "combine": "stack", "combin": "stack",
    "delivery": "shipping", "postage": "shipping", "dispatch": "shipping", "heavy": "weight", "weigh": "weight",
    "plane": "airline", "flight": "airline", "airplane": "airline", "aircraft": "airline",
    "kid": "child", "children": "child", "toddler": "child",
}


# Caches: the policy runs ~4 times per request on the same comment, harness and catalog, and the same
# words, identifiers and texts recur across requests. Every cache is keyed on immutable text only (and,
# where embeddings decide, on the embedding backend), holds immutable values, and is bounded.
@lru_cache(maxsize=16384)
def stem(word: str) -> str:
    w = word.lower()
    if w in _SYNONYM:
        return _SYNONYM[w]
    # an ability adjective means its verb: "packable" asks whether it packs, "washable" whether it washes
    if w.endswith(("able", "ible")) and len(w) > 7:
        w = w[:-4]
        return _SYNONYM.get(w, w)
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) > len(suffix) + 3:
            w = w[: -len(suffix)]
            if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "ls":
                w = w[:-1]
            break
    else:
        if w.endswith("ies") and len(w) > 4:
            w = w[:-3] + "y"
        elif w.endswith("es") and len(w) > 4 and w[-3] in "sxz" or w.endswith(("ches", "shes")):
            w = w[:-2]
        elif w.endswith("s") and not w.endswith("ss") and len(w) > 3:
            w = w[:-1]
    return _SYNONYM.get(w, w)


def words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower().replace("_", " "))


def stems(text: str) -> set[str]:
    return set(_frozen_stems(text))  # a fresh set: callers may change theirs


@lru_cache(maxsize=8192)
def _frozen_stems(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in words(split_identifier(text)) if w not in _STOP)


split_identifier = choice.split_identifier  # ``getProductInfo_by-link`` -> ``get Product Info by link``


def _vocab(*items: str) -> set[str]:
    return {stem(w) for item in items for w in words(item)}


# --------------------------------------------------------------------------- intents

# a product that arrived damaged or wrong: after-sales, whatever the order's status says
_DAMAGE = (r"\b(broken|broke|damaged|cracked|defective|faulty|leaking|torn|dented|shattered|wrong "
           r"(item|size|colou?r|one|product)|missing (parts?|pieces?|items?))\b"
           r"|\b(stopped|not|isn't|doesn't) working\b")

INTENT_PATTERNS: dict[str, list[str]] = {
    "price": [
        r"\bhow much\b", r"\bprice[sd]?\b", r"\bpricing\b", r"\bcost(s|ing)?\b", r"\bexpensive\b",
        r"\bcheap(er|est)?\b", r"\bafford", r"\bworth it\b",
    ],
    "stock": [
        r"\bin stock\b", r"\bstock\b", r"\bsold out\b", r"\bleft\b", r"\bavailab(le|ility)\b",
        r"\brestock", r"\binventory\b", r"\bstill (have|got|there)\b", r"\bhow many\b", r"\bany more\b",
        r"\bremaining\b", r"\brun out\b", r"\bdo you (have|got|sell)\b.*\bones?\b",
    ],
    "coupon": [
        r"\bcoupons?\b", r"\bdiscounts?\b", r"\bdeals?\b", r"\bvouchers?\b",
        r"\bcodes?\b", r"%\s*off\b", r"\bon sale\b", r"\bbargain\b", r"\bsales? price\b", r"\boffers?\b",
        # "any way to get it cheaper": a wish to pay less is answered with the coupons there are
        r"\b(?:get|make|have) (?:it|them|this|one) (?:any )?cheaper\b", r"\bany (?:way|chance)\b.*\bcheaper\b",
        # paying in parts is a term of the campaign, like its coupons
        r"\binstal+(?:e)?ments?\b", r"\binterest[- ]free\b", r"\bsplit (?:it|the payment)\b",
    ],
    "attribute": [
        r"\bcolou?rs?\b", r"\bsizes?\b", r"\bsizing\b", r"\bmaterials?\b", r"\bfabric\b",
        r"\bwater ?proof", r"\bwater[- ]resistant\b", r"\brain\b", r"\bweigh(t|s)?\b", r"\bheavy\b",
        r"\bcapacity\b", r"\bhow big\b", r"\bdimensions?\b", r"\bspecs?\b", r"\bspecifications?\b",
        r"\bfeatures?\b", r"\bbattery\b", r"\bwashable\b",
        r"\bfit(s)?\b", r"\bwarm\b", r"\bmade in\b",
        r"\bml\b", r"\blightweight\b", r"\bquality\b",
        r"\bcomes? in\b", r"\bavailable in\b",
    ],
    "faq": [
        r"\bshipping\b", r"\bship(s|ped)?\b", r"\bdeliver(y|ed|s)?\b", r"\barrive", r"\breturns?\b",
        r"\brefunds?\b", r"\bexchange\b", r"\bwarranty\b", r"\bguarantee\b", r"\bcare\b",
        r"\btrue to size\b", r"\bsize up\b",
    ],
    "purchase": [
        r"\bbuy(ing)?\b", r"\bpurchase\b", r"\border (it|one|this|that|now|two)\b", r"\bcart\b",
        r"\bcheck ?out\b", r"\bhow (do|can) i (get|buy|order)\b",
        r"\bi('ll| will)? ?take (it|one|two)\b",
        r"\bwant (one|it|this|that)\b", r"\bwhere.*\blink\b",
        r"\bsold\b.*\bme\b", r"\bgrab (one|it)\b",
        # a viewer's wish for a product ("I want the …", "I'd like link 2")
        r"\bi (really )?(want|'?d like|would like) (the|a|an|one|it|this|that|link|to (buy|get|order))\b",
    ],
    "post_purchase": [
        r"\bmy order\b", r"\border (status|number|no\.?|#|id)\b", r"\btrack(ing)?\b",
        r"\b(has|have)n'?t (arrived|come|shown up)\b",
        r"\bnot (arrived|received|come)\b", r"\brefunds?\b", r"\breturn (it|this|my)\b",
        r"\bwhere is my\b", r"\bexchange (it|my)\b", _DAMAGE,
    ],
    "chit_chat": [
        r"^\s*(hi|hello|hey|yo|hiya|howdy)\b",
        r"\blove (this|you|it|the|your)\b", r"\bthanks?\b", r"\bthank you\b", r"\blol\b", r"\bhaha",
        r"\bhow are you\b", r"\bnice\b", r"\bbeautiful\b", r"\bcute\b", r"\bawesome\b", r"\bwow\b",
        r"\bamazing\b",
    ],
}
_INJECTION_PATTERNS = [
    r"ignore (all |any )?(the )?(previous|prior|above|earlier|your) (instructions|rules|prompts?)",
    r"\byou are now\b", r"\bdeveloper mode\b", r"\bjailbreak\b", r"\bsystem prompt\b",
    r"\bpretend (to be|you are)\b", r"\bact as\b", r"\bdisregard\b.*\b(instructions|rules)\b",
    r"\bforget (all|your|the) (previous )?(instructions|rules)\b",
    r"(give|announce|offer|make)\b.*\b(everyone|everybody|all viewers)\b.*\d+ ?%",
]
_ABUSE_PATTERNS = [
    r"\bdumb\b", r"\bliar\b", r"\bhate you\b", r"\bf+u+c+k", r"\bshit\b", r"\bloser\b", r"\bgarbage host\b",
]
_COMPLIANCE_PATTERNS = [
    r"\bfake (invoice|review|reviews|tag|label)s?\b",
    r"\bknock ?-?offs?\b", r"\bfake discount\b", r"\bbypass\b", r"\bunder the table\b",
]
_GREETING_RE = re.compile(r"^\s*(hi|hello|hey|yo|hiya|howdy|good (morning|evening|afternoon|night))\b")
# a promotion code; Chinese text has no spaces, so a Chinese character may touch it ("能用GLOW15吗")
_CODE_RE = re.compile(r"(?<![A-Za-z0-9_#-])[A-Z]{2,10}\d{1,3}[A-Z]?(?![A-Za-z0-9_-])")
_THANKS_RE = re.compile(r"\b(thanks?|thank you)\b")
# "does it come in X", "can I get it in X": X names one option of a product's option list (colours, …)
_OPTION_RE = re.compile(r"\b(?:comes?|coming|came)\s+in\s+(?:an?\s+)?([a-z][a-z-]+)\b"
                        r"|\b(?:have|get|got|available|buy|order)\s+(?:it\s+|this\s+|one\s+|them\s+|these\s+)?"
                        r"in\s+(?:an?\s+)?([a-z][a-z-]+)\b")
_NOT_OPTIONS = {"stock", "store", "cart", "time", "total", "bulk", "person", "advance", "case", "general", "the",
                "my", "your", "our", "this", "that", "it", "there", "here", "live", "stream", "room", "china"}
_LINK_RE = re.compile(r"\blink\s*(?:#|no\.?|num(?:ber)?\.?)?\s*(\d{1,4})\b|#\s?(\d{1,4})\b", re.IGNORECASE)
_ORDER_RE = re.compile(
    r"\border\s*(?:#|no\.?|number|num|id)?\s*(?:is\s+)?[:#]?\s*([A-Za-z]*-?\d[\w-]{3,})"
    r"|(?:^|\s|(?<=[\u4e00-\u9fff：:]))#?([A-Za-z]{1,5}-?\d{4,}[\w-]*)\b|\b(\d{8,})\b",
    re.IGNORECASE,
)
# an order id-like token (letters then at least four digits) or a verb of a past purchase: after-sales
_PAST_PURCHASE_RE = re.compile(r"\b(bought|ordered|purchased|paid for)\b")
_NUM_RE = re.compile(r"\d+(?:[.,]\d+)*")
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                 "ten": 10, "eleven": 11, "twelve": 12}
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
             "ninth": 9, "tenth": 10}
_ORDINAL_RE = re.compile(r"(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|\d+(st|nd|rd|th))")
# "link three", "link no. 3"; "the second one", "the 3rd link", "item four"
_LINK_WORD_RE = re.compile(r"\b(?:link|item|product|number|no\.?)\s*#?\s*(" + "|".join(_NUMBER_WORDS) + r")\b")
_ORDINAL_LINK_RE = re.compile(r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth"
                              r"|(\d{1,2})(?:st|nd|rd|th))"
                              r"\s+(?:one|link|item|product)\b")
_DETERMINER_RE = re.compile(r"(?=\b(?:the|this|that|these|those|your|ur|a|an|any|how many|for|of)\s+"
                            r"((?:[a-z][a-z'-]*\s*){1,3}))")


# words of "the <word> one" that compare or point rather than name a value of a product
_NOT_PICKS = {"other", "same", "last", "next", "new", "old", "cheap", "cheaper", "cheapest", "big", "bigger",
              "biggest", "small", "smaller", "smallest", "right", "left", "previous", "current", "good", "better",
              "best", "nice", "cute", "pretty", "expensive", "second", "third", "first", "only", "real", "whole"}

# a pronoun that refers to the product on screen: "it", "they", or "this"/"that" standing alone
_PRONOUN_RE = re.compile(r"\b(it|they|them)\b|\b(this|that|these|those)\b(?!\s+(?!one\b|ones\b|is\b|are\b|has\b|"
                         r"have\b|does\b|do\b|come\b|comes\b|cost\b|costs\b|still\b|for\b|in\b|on\b|with\b)[a-z])")


_COUNTED_RE = re.compile(rf"\b(?:\d{{1,2}}|{'|'.join(_NUMBER_WORDS)})\s+(?:{'|'.join(sorted(COUNTED_UNITS))})\b")


def _noun_phrases(low: str) -> list[str]:
    """Word groups that can name a product: after a determiner, or the whole comment when it has no verb-like
    question word (a bare phrase such as "frying pan price?"). What something *is* ("my son is a chunky
    boy") names no product, nor does a counted unit ("2 jars")."""
    low = _COUNTED_RE.sub(" ", low)
    found = [m.group(1) for m in _DETERMINER_RE.finditer(low)
             if not (re.match(r"an?\s", low[m.start():]) and re.search(r"\b(?:is|am|are|was|'s|'m)\s+$",
                                                                        low[:m.start()]))]
    # a subject pronoun or an auxiliary makes a sentence, not a bare phrase ("I'll take 5")
    if not found and not re.search(r"\b(is|are|does|do|can|will|would|did|has|have|it|they|this|that|i|you|we)\b"
                                   r"|'(ll|m|d|re|ve)\b", low):
        found = [low]
    return found
_QUESTION_RE = re.compile(r"\?|^\s*(does|do|is|are|can|will|would|how|what|which|where|when|any)\b")
_WORKS_RE = re.compile(r"\bworks? (on|with|in)\b")


def _find(patterns: list[str], text: str) -> int | None:
    """Position of the earliest match of any pattern, or None."""
    m = _any_of(tuple(patterns)).search(text)
    return m.start() if m else None


@lru_cache(maxsize=64)
def _any_of(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """The patterns as one compiled alternation (called with the module's pattern lists only). Its
    leftmost match starts where the earliest match of any one pattern does: at each position a search
    tries every alternative before moving right. (None of the patterns has a backreference, which the
    group numbering of an alternation would break.)"""
    return re.compile("|".join(f"(?:{p})" for p in patterns))


_ATTR_HINTS: dict[str, set[str]] = {
    # attribute key stem -> viewer words that ask for it
    "color": _vocab("color colors colour colours shade black white red blue"),
    "size": _vocab("size sizes sizing fit fits small large big"),
    "material": _vocab("material materials fabric made cotton leather wool"),
    "waterproof": _vocab("waterproof water rain resistant wet"),
    "weight": _vocab("weight weigh heavy light lightweight gram grams"),
    "capacity": _vocab("capacity hold holds big ml volume litre liter"),
    "battery": _vocab("battery charge hours"),
    "dimension": _vocab("dimension dimensions big long wide tall height width length"),
}
_UNIT_SUFFIX = {"mm": "mm", "cm": "cm", "m": "m", "g": "g", "kg": "kg", "ml": "ml", "l": "L", "h": "hours",
                "hr": "hours", "hours": "hours", "mah": "mAh", "w": "W", "pct": "%", "in": "in"}
# Words that never name a product: the intent and need lexicons above plus everyday chat words. A
# comment's other content words, when the current product does not have them, name another product
# ("does the frying pan work on induction?" while a mug is on screen).
_GENERIC = (
    {stem(w) for patterns in INTENT_PATTERNS.values() for p in patterns
     for w in re.findall(r"[a-z]{3,}", re.sub(r"\\[a-zA-Z]", " ", p))}
    | _vocab(*choice.NEEDS.values(), *choice.REPLIES.values())
    | {w for ws in _ATTR_HINTS.values() for w in ws}
    | set(_ATTR_HINTS)
    | _vocab("work works working does doing come comes came still many much how what which who why when where "
             "there here get got want need know tell show say said ask asked really very just also too more "
             "most some all every everyone everybody guys host stream live room today now right okay yes "
             "yeah not no good great nice best better new old hello here time first thing things "
             "kind sort type whats hows wanna gonna these those they them their then than about like look "
             "looks use used using them other another same different question questions answer thank "
             "ready soon again please real really true sure")
)
_PRODUCT_INTENTS = ("price", "stock", "attribute", "coupon", "general", "purchase")
# retrieval confidence (0..1: BM25 squashed, averaged with the embedding cosine) below which the host
# says it will check rather than answer; facts within FACT_MARGIN of the best are said too (at most two)
TOOL_MIN_SIMILARITY = 0.15
INTENT_MIN_SIMILARITY = 0.55
INTENT_MARGIN = 0.0  # dev: 0.02-0.08 drop more right votes than wrong ones (457 single-intent dev comments)
# the needs a line of a merged request may be recognised by meaning alone (a fact question goes to retrieval)
_LINE_INTENTS = ("price", "stock", "coupon", "purchase", "post_purchase")
CTA_MIN_SIMILARITY = 0.45
FACT_THRESHOLD = 0.25  # chosen on the dev columns (0.2, 0.25, 0.3, 0.36 tried; was 0.36)
CLAUSE_FACT_THRESHOLD = 0.6  # a clause no intent answered: only a clear match is said (dev-calibrated; 0.5 won
# one dev-wild2 case but added loosely related facts to the demo's replies)
# a clause of a comment that asks several questions: said when it stands this far above the next fact
MULTI_CLAUSE_THRESHOLD = 0.4  # chosen on the dev columns (0.3-0.45 x 0.1-0.2 tried)
MULTI_CLAUSE_MARGIN = 0.15
# the reason a declined comment is most like (privacy, health, promised results, fakes); dev columns:
# 0.1-0.25 tie, above it fewer passes (0.5 before the fakes kind)
REFUSAL_KIND_SIMILARITY = 0.25
# Chinese questions are often joined by a space or a comma alone ("多少钱 有什么颜色 会缩水吗")
# (and emoji end a clause too: "1299 is a lot 😩 can i pay in installments?")
_CLAUSE_SPLIT = re.compile(r"[?？\n;；。!！，\U0001F300-\U0001FAFF\u2600-\u27BF]+|\s(?:and|also|plus|\+|&)\s"
                           r"|(?<=[\u4e00-\u9fff])\s+(?=[\u4e00-\u9fff])"
                           r"|,\s*(?=(?:is|are|does|do|can|will|how|what)\b)")
CURRENT_MARGIN = 0.15
FACT_MARGIN = 0.05
LINEUP_MIN_SIMILARITY = 0.5  # a named product matched to a lineup title by meaning (dev-calibrated)
LINEUP_MARGIN = 0.12


# --------------------------------------------------------------------------- context views


@dataclass
class Call:
    tool: str
    arguments: dict[str, Any]
    ok: bool | None = None  # None: no result (rejected by a hook or pending)
    result: Any = None
    error_code: str | None = None
    rejected: bool = False
    correction: str = ""  # the hook's reason when a correction rejected this call
    _key: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def key(self) -> str:
        # computed once: every planned call is looked up among the transcript's calls by this key (the
        # tool and arguments of a call are never changed after it is read)
        if self._key is None:
            self._key = _call_key(self.tool, self.arguments)
        return self._key


def _call_key(tool: str, arguments: dict[str, Any]) -> str:
    return tool + "\x00" + json.dumps(arguments, sort_keys=True, default=str)


@dataclass
class State:
    calls: list[Call] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    corrections: list[dict[str, Any]] = field(default_factory=list)
    reply_corrections: int = 0
    skill_corrections: list[dict[str, Any]] = field(default_factory=list)
    actions: int = 0


def _about_skills(message: str, skill_ids: list[str]) -> bool:
    """A correction asks for a (different) skill: it names one of the harness's skills, or it means
    "load the fitting reply instructions first" (by embedding similarity)."""
    if any(sid and re.search(rf"(?<![\w-]){re.escape(sid.lower())}(?![\w-])", message) for sid in skill_ids):
        return True
    return bool(message.strip()) and choice.similarity(choice.SKILL_CORRECTION, [message], stem, _STOP)[0] >= 0.5


def _corrected_action(ctx: dict[str, Any], upto: int, turn: Any) -> dict[str, Any] | None:
    """The action a correction answered, when the transcript does not hold it (a step hook rejects an
    action before it is recorded): this policy is deterministic, so it is the action decided on the
    transcript as it stood before the correction."""
    sub = dict(ctx)
    sub["transcript"] = list(ctx.get("transcript") or [])[:upto]
    sub["loaded_skills"] = []  # the prefix's skill_load entries say which were loaded then
    if isinstance(turn, int):
        sub["turn"] = turn
    try:
        return _Decider(sub).decide()
    except Exception:  # noqa: BLE001 - a replay that fails leaves the correction unattributed
        return None


def _read_transcript(ctx: dict[str, Any]) -> State:
    st = State()
    skill_ids = [str(s.get("id", "")) for s in ctx.get("skills") or [] if isinstance(s, dict)]
    for s in ctx.get("loaded_skills") or []:
        if isinstance(s, dict) and s.get("id") and s["id"] not in st.loaded:
            st.loaded.append(str(s["id"]))
    last_call: Call | None = None
    for index, entry in enumerate(ctx.get("transcript") or []):
        if not isinstance(entry, dict):
            continue
        kind = entry.get("kind")
        data = entry.get("data") or {}
        if kind == "tool_call":
            st.actions += 1
            last_call = Call(str(data.get("tool") or entry.get("name") or ""), dict(data.get("arguments") or {}))
            st.calls.append(last_call)
        elif kind == "tool_result":
            tool = str(data.get("tool") or entry.get("name") or "")
            target = next((c for c in reversed(st.calls) if c.tool == tool and c.ok is None and not c.rejected),
                          None)
            if target is None:
                target = Call(tool, {})
                st.calls.append(target)
            target.ok = bool(data.get("ok"))
            target.result = data.get("result")
            target.error_code = data.get("error_code") or (None if target.ok else "error")
        elif kind == "skill_load":
            st.actions += 1
            sid = data.get("skill") or entry.get("name")
            if sid and sid not in st.loaded:
                st.loaded.append(str(sid))
        elif kind == "correction":
            st.actions += 1
            st.corrections.append(data)
            msg = f"{data.get('message', '')} {data.get('reason', '')}".lower()
            if last_call is not None and last_call.ok is None:
                last_call.rejected = True
                last_call.correction = msg
                last_call = None
                continue
            corrected = _corrected_action(ctx, index, entry.get("turn"))
            if corrected is not None and corrected.get("action") == "call_tool":
                # a tool call the hooks corrected before it ran: never propose it again
                st.calls.append(Call(str(corrected.get("tool") or ""), dict(corrected.get("arguments") or {}),
                                     rejected=True, correction=msg))
            elif _about_skills(msg, skill_ids):
                st.skill_corrections.append(data)
            else:
                st.reply_corrections += 1
        elif kind == "model_output":
            st.actions += 1
    return st


def _properties(tool: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    params = tool.get("parameters") or {}
    props = params.get("properties") or {}
    required = [r for r in params.get("required") or [] if r in props]
    return props, required


def _fmt_num(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _numbers_in(obj: Any, out: set[str]) -> None:
    if isinstance(obj, bool) or obj is None:
        return
    if isinstance(obj, int | float):
        out.add(_fmt_num(obj))
        return
    if isinstance(obj, str):
        for n in _NUM_RE.findall(obj):
            out.add(n)
            out.add(n.replace(",", ""))
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            _numbers_in(k, out)
            _numbers_in(v, out)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _numbers_in(v, out)


def _iter_dicts(obj: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [obj]
    while stack:
        cur = stack.pop(0)
        if isinstance(cur, dict):
            found.append(cur)
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    return found


def _key_has(key: str, *needles: str) -> bool:
    k = key.lower()
    return any(n in k for n in needles)


# --------------------------------------------------------------------------- the policy


# intents that ask nothing of the catalog: a merged comment with only these is not answered on its own
_OTHER_RE = re.compile(r"\b(other|another)\b")
_IDENTITY_RE = re.compile(r"\bare you (a |an )?(real|human|person|ai|bot|robot|machine|virtual)\b|\byou (a |an )?"
                          r"(real person|human|bot|robot)\?|\b(real person|human) or (an? )?(ai|bot|robot)\b")
_IDENTITY_ZH_RE = re.compile(r"(是|是不是)(真人|机器人|AI|ai|人工智能|虚拟)|真人吗|机器人吗|AI吗")
_DAMAGE_RE = re.compile(_DAMAGE)
# a question about what something costs ("price of the knife vs the rice cooker?")
_PRICE_ASK_RE = re.compile(r"\b(?:how much|prices?|costs?|totals?)\b")
# a viewer who wants to change or cancel an order ("wrong address", "can I change the size?")
_CHANGE_ORDER_RE = re.compile(r"\b(change|update|modify|correct|edit|cancel)\b|\bwrong (address|phone|number)\b")
_DAMAGE_SENTENCE = ("So sorry it arrived like that! Please open an after-sales request from your order page with a "
                    "photo: customer service will arrange a replacement or a refund.", False, 0)
_PREVIOUS_RE = re.compile(r"\b(?:previous|earlier|from before|the one before|before (?:this|that) one|go(?:ing)? back"
                          r"|back to (?:the|that)|you (?:just )?showed|shown before|a (?:minute|moment|while) ago)\b")
_DEICTIC_RE = re.compile(r"\b(this|these)\b")
_SOCIAL_INTENTS = ("chit_chat", "off_topic")
_HARMFUL_INTENTS = ("injection", "abuse", "refusal")


@lru_cache(maxsize=4096)
def _screened(text: str) -> str | None:
    """The harmful class of a comment (injection, abuse, compliance) from the trained screening
    classifier, or None; a hit of the pattern lists lowers that class's threshold (one more signal,
    never the decision alone). Cached: every policy call of a request screens the same comment."""
    result = screen(text)
    thresholds = dict(DEFAULT_THRESHOLDS)
    thresholds.pop("spam", None)
    norm = normalize(text)
    for cls, patterns in (("injection", _INJECTION_PATTERNS), ("abuse", _ABUSE_PATTERNS),
                          ("compliance", _COMPLIANCE_PATTERNS)):
        if _find(patterns, norm) is not None:
            thresholds[cls] -= 0.2
    harmful = result.harmful(thresholds)
    return harmful[0] if harmful is not None else None


def _embedding_backend(text: str) -> str:
    """The embedding model that reads ``text`` ("off" without one): part of the key of every cached
    result that embeddings decide, so a change of ``LIVEHOST_EMBEDDINGS`` is never answered from a
    result of another model."""
    return embed.backend(text) if embed.available() else "off"


@lru_cache(maxsize=4096)
def _nearest_intent(query: str, backend: str) -> str | None:
    """:func:`choice.nearest_intent` of a comment's query (``backend`` keys the cache only). Cached: it
    compares the query with every labelled example, and a request asks it of the same comment on every
    policy call."""
    near = choice.nearest_intent(query, stem, _STOP, INTENT_MIN_SIMILARITY, INTENT_MARGIN)
    return near[0] if near else None


class _Decider:
    def __init__(self, ctx: dict[str, Any], state: State | None = None, referent: int | None = None):
        """``state`` and ``referent`` are given to the part of a merged request that answers one comment:
        the transcript read once by the whole request, and the link that the same viewer's earlier
        comment named (what "it" means in their next comment)."""
        self.ctx = ctx
        self.st = state if state is not None else _read_transcript(ctx)
        self.referent = referent
        self.explicit = False  # sentences name the product rather than say "it" (a merged request's part)
        comments = ctx.get("comments") or []
        merged = ctx.get("merged_text") or " ".join(str(c.get("text", "")) for c in comments if isinstance(c, dict))
        self.text = str(merged).strip()
        self.low = expand_shorthand(self.text)
        # "are you a real person?": answered honestly, and it names no product
        self.asks_identity = bool(_IDENTITY_RE.search(self.low) or _IDENTITY_ZH_RE.search(self.text))
        self.text_stems = stems(self.low)
        self.room = ctx.get("room") or {}
        self.product = ctx.get("product") or None
        self.rules = ctx.get("rules") or {}
        self.tools = [t for t in ctx.get("tools") or [] if isinstance(t, dict) and t.get("name")]
        self.skills = [s for s in ctx.get("skills") or [] if isinstance(s, dict) and s.get("id")]
        self._assigned: dict[str, list[tuple[float, int]]] | None = None  # needs -> tools (best_tool)
        self.previous_unknown = False
        self.items: dict[int, int] = {}  # link → how many, when one question names several products
        self.links = self._links()
        self.picks: set[str] = set()  # stems of "the <value> one": a value that picks a product
        self.named = self._named_words()
        self._target: tuple[int | None, bool] | None = None
        self.clarify: list[tuple[int, str]] = []  # products that match the comment equally well
        self.fact_queries: list[str] = []  # comments of a merged request that ask about the product's facts
        self.compliance = False  # the screening found a compliance risk (answered with a careful refusal)
        self.intents = self._intents()
        self.asked_attrs = self._asked_attributes()
        self.parts = self._parts() if state is None else []

    def _parts(self) -> list[_Decider]:
        """A merged request of several questions is answered comment by comment: each comment finds its
        own product (a link, a name, or "it": the product its viewer named just before, else the one on
        screen) and its own facts, so no question is answered about another comment's product. Empty
        when fewer than two comments ask something of the catalog (the merged text is read as one)."""
        comments = [c for c in self.ctx.get("comments") or [] if isinstance(c, dict) and str(c.get("text", "")).strip()]
        if len(comments) < 2 or set(self.intents) & set(_HARMFUL_INTENTS):
            return []
        parts: list[tuple[str, int | None, _Decider]] = []
        for c in comments:
            sub = dict(self.ctx)
            sub["comments"] = [c]
            sub["merged_text"] = str(c.get("text", ""))
            part = _Decider(sub, state=self.st)
            if not part.intents or all(i in _SOCIAL_INTENTS for i in part.intents):
                continue
            if set(part.intents) & set(_HARMFUL_INTENTS):
                return []
            own = part.links[-1] if part.links else (part.named_target()[0] if part.named else None)
            parts.append((str(c.get("user_id", "")), own, part))
        if len(parts) < 2:
            return []
        # a comment that names no product is about the one its viewer named in the same burst (the
        # closest earlier comment, else a later one), else the product on screen; "this" points at the
        # screen
        for i, (user, own, part) in enumerate(parts):
            if own is None and not _DEICTIC_RE.search(normalize(part.text)):
                before = [o for u, o, _ in parts[:i] if u == user and o is not None]
                after = [o for u, o, _ in parts[i + 1:] if u == user and o is not None]
                part.referent = before[-1] if before else (after[0] if after else None)
        # answers about different products name their product, so none is taken for another's
        if len({p.link for _, _, p in parts}) > 1:
            for _, _, part in parts:
                part.explicit = True
        return [p for _, _, p in parts]

    # ---- reading the comment
    def _links(self) -> list[int]:
        """Links the comment names, in order (at most two). Merged comments are read one by one: one that
        names no link but points at the product on screen ("this one price pls") adds the current link."""
        texts = [str(c.get("text", "")) for c in self.ctx.get("comments") or [] if isinstance(c, dict)]
        if len(texts) < 2:
            found = self._links_in(self.text)
            if not found and (asks_total(self.text) or _PRICE_ASK_RE.search(expand_shorthand(self.text))
                              or compare.asked(self.text)):
                # "the pan + the kettle, total?": each item named by a title of the lineup
                self.items = self._named_items()
                found = list(self.items)[:2] if len(self.items) > 1 else []
            return found
        cur = self.room.get("current_link")
        title = {x for x in stems(str((self.product or {}).get("title") or "")) if x not in _GENERIC}
        out: list[int] = []
        for text in texts:
            own = self._links_in(text)
            low = normalize(text)
            if not own and isinstance(cur, int) and (_PRONOUN_RE.search(low) or title & stems(low)):
                own = [cur]
            out += [n for n in own if n not in out]
        named = self._links_in(self.text)
        if not named or len(out) < 2:
            return named
        return out[:2]

    def _named_items(self) -> dict[int, int]:
        """{link: count} for a question that names two or more products of the lineup, one per item
        ("two air fryers + one blender"): each item's words (or Chinese characters) match one title
        better than any other. Empty unless at least two items are found."""
        titled = [(int(x["link_id"]), str(x["title"])) for x in self.lineup()
                  if _is_num(x.get("link_id")) and x.get("title")]
        out: dict[int, int] = {}
        for seg in item_segments(self.text):
            seg_stems = stems(normalize(seg)) - _GENERIC - _STOP
            scores = []
            for link, title in titled:
                score = float(len(seg_stems & (stems(title) - _GENERIC)))
                for run in re.findall(rf"{CJK.pattern}+", seg):
                    # the longest piece (2+ characters) of the item's Chinese that the title contains
                    score += max((n for n in range(len(run), 1, -1)
                                  if any(run[i:i + n] in title for i in range(len(run) - n + 1))), default=0) / 2
                scores.append((score, link))
            scores.sort(reverse=True)
            if scores and scores[0][0] > 0 and (len(scores) == 1 or scores[0][0] > scores[1][0]) \
                    and scores[0][1] not in out:
                counts = quantities(seg)
                out[scores[0][1]] = counts[0] if counts else 1
        return out if len(out) > 1 else {}

    def _links_in(self, text: str) -> list[int]:
        found: list[tuple[int, int]] = []
        low = normalize(gloss(text))  # "4号" / "链接3" name links too
        for m in _LINK_RE.finditer(low):
            found.append((m.start(), int(m.group(1) or m.group(2))))
        for m in _LINK_WORD_RE.finditer(low):
            found.append((m.start(), _NUMBER_WORDS[m.group(1)]))
        lineup = [int(x["link_id"]) for x in self.lineup() if _is_num(x.get("link_id"))]
        for m in _ORDINAL_LINK_RE.finditer(low):
            nth = _ORDINALS.get(m.group(1)) or int(m.group(2))
            # the n-th link of the room's lineup when it is known, else link n
            found.append((m.start(), lineup[nth - 1] if 0 < nth <= len(lineup) else nth))
        bare = re.fullmatch(r"\W*(\d{1,3})\W*", low)
        if bare and int(bare.group(1)) in lineup:  # a comment that is only a number: that link
            found.append((0, int(bare.group(1))))
        compared = compare.asked(text)
        pair = re.search(r"\b(\d{1,2})\s*(?:or|vs\.?|versus|and|&|和|还是)\s*(?:link\s*)?(\d{1,2})\b", low)
        if compared and pair and not found and {int(pair.group(1)), int(pair.group(2))} <= set(lineup):
            # "which one is lighter, 1 or 2?": two numbers of the lineup compared are its links
            found += [(pair.start(1), int(pair.group(1))), (pair.start(2), int(pair.group(2)))]
        if lineup:
            # "the last one?" is the lineup's last link; "last one smelled like …" is one the viewer had before
            for m in re.finditer(r"\b(?:the\s+)?last\s+(?:one|link|item|product)\b(?!\s+(?:i\b|we\b|was\b|were\b"
                                 r"|had\b|[a-z]+ed\b))", low):
                found.append((m.start(), lineup[-1]))
        prev = self.room.get("previous_link")
        earlier = None if found else _PREVIOUS_RE.search(expand_shorthand(text))
        if earlier and not isinstance(prev, int):
            # "the one you showed earlier" with no record of it: the only other product, else ask which
            not_on_screen = [n for n in lineup if n != self.room.get("current_link")]
            if len(not_on_screen) == 1:
                found.append((0, not_on_screen[0]))
            else:
                self.previous_unknown = True
        if earlier and isinstance(prev, int):
            # "the previous one", "the one you showed earlier", "go back": the product shown before this one
            # ... unless the comment names another product of the lineup ("the tea, and the teapot you
            # showed earlier" is about a teapot, not whatever was shown before)
            prev_title = next((stems(str(x.get("title") or "")) for x in self.lineup() if x.get("link_id") == prev),
                              set())
            others = {w for x in self.lineup() if x.get("link_id") != prev
                      for w in stems(str(x.get("title") or "")) if w not in _GENERIC} - prev_title
            if not others & stems(expand_shorthand(text)):
                found.append((earlier.start(), prev))
                cur = self.room.get("current_link")
                if compared and isinstance(cur, int) and cur != prev:
                    found.append((earlier.start() + 1, cur))  # "the one before or this one, which is lighter"
        # "41号" is a link in Chinese, and a size too: a number the lineup lacks but the product on screen
        # has as a variant row ("size 41") is that variant, not a link
        rows = set(_variant_row_keys((self.product or {}).get("attributes") or {}))
        out: list[int] = []
        for _, n in sorted(found):
            if n > 0 and n not in out and not (lineup and n not in lineup and str(n) in rows):
                out.append(n)
        return out[:2]

    def lineup(self) -> list[dict[str, Any]]:
        """The room's links (number, title, available now) when prompt assembly provides them."""
        return [x for x in self.room.get("lineup") or [] if isinstance(x, dict)]

    def alternatives(self, link: int | None) -> list[tuple[str, bool, int]]:
        """For a sold-out link: up to two other links of the room that can be bought now."""
        others = [x for x in self.lineup() if x.get("available") and x.get("link_id") != link
                  and _is_num(x.get("link_id"))]
        if not others:
            return []
        named = [f"link {int(x['link_id'])}, the {x['title']}" if x.get("title") else f"link {int(x['link_id'])}"
                 for x in others[:2]]
        # a suggestion, less than an answer: in a merged reply the answers are kept first. It is worded
        # apart from stock claims ("still available", "in stock") so it cannot be heard as one about the
        # sold-out product.
        return [(f"Try {' or '.join(named)} instead!", True, 1)]

    def _named_words(self) -> list[str]:
        """Content words of a comment without a link number that the current product does not have."""
        if self.links or self.asks_identity:
            return []
        prod = self.product or {}
        attrs = prod.get("attributes") or {}
        # the rows of the variant tables of the product on screen ("cream" of a stock per colour): "the
        # cream one" picks among its variants, not another product
        own_rows = stems(" ".join(_variant_row_keys(attrs)))
        own = stems(" ".join([str(prod.get("title") or ""), str(prod.get("sku") or ""), *map(str, attrs),
                              *(str(v) for v in attrs.values() if isinstance(v, str | list))])) | own_rows
        title = {s for s in stems(str(prod.get("title") or "")) if s not in _GENERIC}
        if self._names_title_compound():
            return []  # "powerbank" for a "Power Bank": the title's words written together
        if title & self.text_stems:
            if _OTHER_RE.search(normalize(self.text)):
                # "the other boots": a product like the one on screen, but not it
                return [w for w in words(normalize(self.text)) if stem(w) in title]
            return []  # the comment names the product on screen ("the boots"): no search needed
        out: list[str] = []
        # a product is named by a noun phrase: words after a determiner ("the frying pan", "your red
        # one"), or a comment that is only a phrase ("frying pan price?"); pronouns and verbs name none
        low = normalize(self.text)
        if _PRONOUN_RE.search(low):
            # "does it come with …": the product on screen; other nouns are its parts or features, unless
            # a noun phrase names another product of the lineup by its title ("the pillow, is it soft?")
            others = [stems(str(x.get("title") or "")) - title - _GENERIC for x in self.lineup()
                      if x.get("link_id") != prod.get("link_id")]
            named = [w for phrase in _noun_phrases(low) for w in words(phrase) if len(w) > 2 and w not in _STOP]
            hits = [w for w in named if sum(stem(w) in t for t in others) == 1]
            return hits[:1]
        for phrase in _noun_phrases(low):
            phrase = re.sub(r"\b[a-z]+\s+of\b", " ", phrase)  # "pairs of", "a couple of": not a product
            for w in words(phrase):
                if len(w) < 3 or w in _STOP or any(ch.isdigit() for ch in w) or _ORDINAL_RE.fullmatch(w):
                    continue
                s = stem(w)
                # "the <word> one": the word picks a product by one of its values (a colour, …) even
                # when it is also a word that asks for an attribute, unless the product on screen has it
                picks = bool(re.match(rf"{re.escape(w)}\s+ones?\b", phrase)) and w not in _NOT_PICKS
                if (s in _GENERIC and not picks) or (s in own and not picks) or (picks and s in own_rows) \
                        or w in out:
                    continue
                if picks:
                    self.picks.add(s)
                out.append(w)
        return out

    # ---- a product named instead of a link number: find its link with a search tool
    def named_search(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(search tool, arguments) when the comment names a product that is not on screen."""
        if not self.named or not set(self.intents) & set(_PRODUCT_INTENTS):
            return None
        tool = self.best_tool("search")
        if tool is None:
            return None
        args = self.fill_arguments(tool, "named_search")
        return (tool, args) if args else None

    def named_target(self) -> tuple[int | None, bool]:
        """(link of the named product, search done): the best title match among the search results."""
        if self._target is not None:
            return self._target
        found: int | None = None
        done = False
        ns = self.named_search()
        if ns is not None:
            key = _call_key(ns[0]["name"], ns[1])
            calls = [c for c in self.st.calls if c.key == key and c.ok is not None]
            done = any(c.ok for c in calls)
            named = {stem(w) for w in self.named}
            best: tuple[int, int] | None = None
            hits: dict[int, tuple[float, str]] = {}
            for d in _iter_dicts([c.result for c in calls if c.ok]):
                link = next((d[k] for k in d if _key_has(k, "link") and _is_num(d[k])), None)
                title = next((d[k] for k in d if k.lower() in ("title", "name", "product_name")
                              and isinstance(d[k], str)), None)
                if link is None or title is None:
                    continue
                if link == self.room.get("current_link") and _OTHER_RE.search(normalize(self.text)):
                    continue  # "the other …": not the product on screen
                # the title names it, or (less) its attribute values do ("the red one")
                attrs: dict[str, Any] = next((d[k] for k in d if _key_has(k, "attribute")
                                              and isinstance(d[k], dict)), {})
                values = " ".join(" ".join(map(str, v)) if isinstance(v, list) else str(v) for v in attrs.values())
                overlap = len(stems(title) & named - self.picks) + 0.5 * len(stems(values) & named - stems(title))
                # "the green one" picks among products by a value ("one" stands for the kind of product):
                # a product with that value outranks a title that merely contains the word
                overlap += 2 * len(stems(values) & self.picks) + 0.5 * len(stems(title) & self.picks)
                # the search tool returned it, so it matched on something it knows (attribute values…)
                overlap = overlap or 0.25
                if overlap:
                    hits[int(link)] = (overlap, title)
            if hits:
                top = max(o for o, _ in hits.values())
                tied = sorted(link for link, (o, _) in hits.items() if o == top)
                if len(tied) > 1:
                    self.clarify = [(link, hits[link][1]) for link in tied[:3]]
                else:
                    best = (int(top), tied[0])
            found = best[1] if best else None
            if found is None and done and not self.clarify:
                found = self.lineup_by_meaning()
        self._target = (found, done)
        return self._target

    def lineup_by_meaning(self) -> int | None:
        """The room's link whose title means what the comment named ("backpack" for a daypack) when
        the search found no title with those words: clearly closer than any other title."""
        titled = [(int(x["link_id"]), str(x["title"])) for x in self.lineup()
                  if _is_num(x.get("link_id")) and x.get("title")]
        if not titled or not self.named or not embed.available():
            return None
        scores = embed.similarity(" ".join(self.named), [t for _, t in titled])
        order = sorted(range(len(titled)), key=lambda i: -scores[i])
        top = scores[order[0]]
        second = scores[order[1]] if len(order) > 1 else 0.0
        if top >= LINEUP_MIN_SIMILARITY and top - second >= LINEUP_MARGIN:
            return titled[order[0]][0]
        return None

    def search_unmatched(self) -> bool:
        found, done = self.named_target()
        return done and found is None and not self.clarify and not self.about_current()

    def about_current(self) -> bool:
        """The search found no product, but the comment asks something the product on screen answers
        confidently ("battery life?" while the earbuds are on screen): it was about that product."""
        if self.product is None:
            return False
        # the room's campaign rules and the FAQ answer too ("the shop coupon together?", "instalments?")
        pool = [f for f in self.fact_pool(self.product) if f.kind in ("attribute", "faq", "campaign")]
        ranked = rank(_CODE_RE.sub(" coupon ", _LINK_RE.sub(" ", gloss(self.text))), pool, stem, _STOP)
        return bool(ranked) and ranked[0][0] >= FACT_THRESHOLD + CURRENT_MARGIN

    @property
    def link(self) -> int | None:
        if self.links:
            return self.links[0]
        found, _ = self.named_target()
        if found is not None:
            return found
        if self.referent is not None:
            return self.referent
        cur = self.room.get("current_link")
        if isinstance(cur, int):
            return cur
        if self.product and isinstance(self.product.get("link_id"), int):
            return int(self.product["link_id"])
        return None

    def _intents(self) -> list[str]:
        low = self.low
        screened = self._screen()
        if screened is not None:
            return [screened]
        found: list[tuple[int, str]] = []
        for intent, patterns in INTENT_PATTERNS.items():
            pos = _find(patterns, low)
            if pos is not None:
                found.append((pos, intent))
        names = [i for _, i in sorted(found)]
        # merged comments: a question that no other need explains asks about the product's facts
        lines = [ln for ln in self.text.split("\n") if ln.strip()]
        if len(lines) > 1:
            for line in lines:
                ll = normalize(line)
                if _QUESTION_RE.search(ll) and not any(_find(INTENT_PATTERNS[i], ll) is not None for i in
                                                        ("price", "stock", "coupon", "purchase", "post_purchase")):
                    # a need asked in words no pattern knows ("is the blue one gone?"): by its meaning
                    near = self._near_intent(line)
                    if near in _LINE_INTENTS:
                        names.append(near)
                    elif _find(INTENT_PATTERNS["chit_chat"], ll) is None and len(words(ll)) > 2:
                        self.fact_queries.append(line)
            if self.fact_queries and "attribute" not in names:
                names.append("attribute")
        # a token shaped like a promotion code ("use ABC20 on it?"), not an order number: a coupon question
        if "coupon" not in names and _CODE_RE.search(self.text) and not self.order_id():
            names.append("coupon")
        if "post_purchase" not in names and (self.order_id() or _PAST_PURCHASE_RE.search(low)):
            names = [n for n in names if n in ("post_purchase", "faq")] + ["post_purchase"]
        # "how many ... left" is stock, not price; "how much" with stock words stays both
        if "post_purchase" in names:
            names = [n for n in names if n not in ("faq", "purchase")] + ([] if self.order_id() else ["faq"])
        if "purchase" in names and "post_purchase" not in names and re.search(r"\bmy order\b", low):
            names.remove("purchase")
        if "stock" in names and "attribute" in names and re.search(r"\bhow many\b", low) and \
                not (self._attribute_words() - {"size"}):
            names.remove("attribute")
        # "how many people is it for", "how many days does it last": a count the product's data holds, not
        # units left
        if "stock" in names and re.search(r"\bhow many (?:people|persons|servings|cups|days|hours|years|months|"
                                          r"times|watts|colou?rs|sizes|pockets|layers|ports|modes|levels|speeds)\b",
                                          low) and not re.search(r"\b(left|in stock|stock|sold out|available)\b", low):
            names.remove("stock")
            if not set(names) - {"chit_chat"}:
                names.append("attribute")
        # a dynamic attribute: the viewer names one of the product's attribute keys
        if "attribute" not in names:
            for key in self._known_attribute_keys():
                if stems(str(key)) - set(_UNIT_SUFFIX) & self.text_stems:
                    names.append("attribute")
                    break
        if not names and compare.asked(self.text):
            return ["general"]  # "which one is lighter?": a question about the products' data
        if not names:
            near = self._near_intent(self.text)
            if near is not None and near != "chit_chat":
                return [near]
            named_question = bool(self.named) and _QUESTION_RE.search(low) is not None
            # a Chinese question in a live room is most often about the product on screen
            cjk_question = bool(CJK.search(self.text)) and "?" in low and self.product is not None
            return ["general"] if self._looks_like_question() or named_question or cjk_question else ["off_topic"]
        if names == ["chit_chat"] and self._looks_like_question() and re.search(
                r"\b(this|it|link|these|those|they|them|one)\b", low):
            names.append("general")
        return names

    def _near_intent(self, text: str) -> str | None:
        """The intent of a comment by the meaning of its labelled neighbours, with the product references
        taken out first ("link 2", "#3": they say which product, not what is asked)."""
        query = normalize(_LINK_RE.sub(" ", text)).strip()
        return _nearest_intent(query, _embedding_backend(query)) if query else None

    def _known_attribute_keys(self) -> list[str]:
        """Attribute keys of the product on screen and of the linked products already looked up (a
        later turn knows "organic" is a key of link 4 once its data came back)."""
        keys = [str(k) for k in ((self.product or {}).get("attributes") or {})]
        for call in self.st.calls:
            if not call.ok:
                continue
            for d in _iter_dicts(call.result):
                link = next((d[k] for k in d if _key_has(k, "link") and _is_num(d[k])), None)
                attrs = next((d[k] for k in d if _key_has(k, "attribute") and isinstance(d[k], dict)), None)
                if attrs and link in self.links:
                    keys += [str(k) for k in attrs if str(k) not in keys]
        return keys

    def _screen(self) -> str | None:
        """injection / abuse / refusal (compliance) from the trained screening classifier."""
        harmful = _screened(self.text)
        if harmful is None:
            return None
        self.compliance = harmful == "compliance"
        return "refusal" if self.compliance else harmful

    def _names_title_compound(self) -> bool:
        """The comment writes two or more words of the on-screen product's title as one ("powerbank")."""
        prod = self.product or {}
        title = stems(str(prod.get("title") or ""))
        compact = re.sub(r"[^a-z0-9]", "", str(prod.get("title") or "").lower())
        return any(len(w) >= 6 and w in compact and stem(w) not in title for w in words(normalize(self.text)))

    def _looks_like_question(self) -> bool:
        low = self.low
        if self.links or self._names_title_compound():
            return True
        product_words = stems(" ".join(str(v) for v in (self.product or {}).values() if isinstance(v, str)))
        # a yes/no question about "it/these" ("can i wear these swimming lol") asks about the product too
        asks = "?" in low or _QUESTION_RE.search(low) is not None or re.match(r"\s*(can|could|may) i\b", low)
        return bool(re.search(r"\b(this|it|that one|the item|product|these|those|them|they)\b", low) and asks) \
            or bool((product_words - _STOP) & self.text_stems)

    def _attribute_words(self) -> set[str]:
        out: set[str] = set()
        for attr, hints in _ATTR_HINTS.items():
            if hints & self.text_stems:
                out.add(attr)
        return out

    def _asked_attributes(self) -> set[str]:
        return self._attribute_words() if "attribute" in self.intents else set()

    # ---- caps
    def max_discount(self) -> float | None:
        """The room campaign's cap when it sets one, else the harness rule's (as the prompt states it)."""
        campaign = self.room.get("campaign") or {}
        for v in (campaign.get("max_discount_pct"), self.rules.get("max_discount_pct")):
            if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
                return float(v)
        return None

    def turns_left_after_this(self) -> int:
        limits = self.ctx.get("limits") or {}
        max_turns = int(limits.get("max_turns") or 6)
        turn = int(self.ctx.get("turn") or 0)
        used = max(turn - 1, self.st.actions)
        return max_turns - used - 1

    # ---- tools
    def best_tool(self, need: str) -> dict[str, Any] | None:
        """The tool whose description means this need most (each tool serves the need it is closest to)."""
        if not self.tools:
            return None
        if self._assigned is None:  # once per decider: every need asks it of the same tools
            self._assigned = choice.assign(choice.NEEDS, [choice.tool_text(t) for t in self.tools], stem, _STOP,
                                           [str(t.get("description", "")) for t in self.tools])
        served = self._assigned.get(need) or []
        if served and served[0][0] >= TOOL_MIN_SIMILARITY:
            return self.tools[served[0][1]]
        return None

    def _classify_param(self, name: str, schema: dict[str, Any]) -> str | None:
        toks = stems(split_identifier(name) + " " + str(schema.get("description", "")))
        ptype = schema.get("type")
        if "order" in toks:
            return "order"
        if toks & _vocab("code coupon voucher promo"):
            return "code"
        if toks & _vocab("query keyword keywords question search term text describing"):
            return "query"
        if toks & _vocab("link listing") or (ptype == "integer" and toks & _vocab("item product live number")):
            return "link"
        return None

    def _value_for(self, role: str, schema: dict[str, Any], need: str) -> Any:
        ptype = schema.get("type")
        value: Any = None
        if need == "named_search" and role != "query":
            return None
        if role == "link":
            value = self.link
            if value is not None and ptype == "string":
                value = str(value)
        elif role == "query":
            value = " ".join(self.named) if need == "named_search" else self.text
            max_len = schema.get("maxLength")
            if isinstance(max_len, int) and len(value) > max_len:
                value = value[:max_len].rstrip()
        elif role == "order":
            value = self.order_id()
        elif role == "code":
            value = self.issuable_code() if need == "coupon_issue" else None
        if value is None:
            return None
        if ptype == "integer" and not isinstance(value, int):
            return None
        # the value the viewer gave is proposed as it is: the harness's tool-argument hook enforces the
        # schema, and a correction makes this policy read it (``link_missing``, ``next_call``)
        return value

    def fill_arguments(self, tool: dict[str, Any], need: str) -> dict[str, Any] | None:
        props, required = _properties(tool)
        args: dict[str, Any] = {}
        for name, schema in props.items():
            schema = schema if isinstance(schema, dict) else {}
            role = self._classify_param(name, schema)
            value = self._value_for(role, schema, need) if role else None
            if value is None:
                if name in required:
                    return None
                continue
            args[name] = value
        return args

    def order_id(self) -> str | None:
        for m in _ORDER_RE.finditer(self.text):
            value = next(g for g in m.groups() if g)
            if any(ch.isdigit() for ch in value):
                return value
        return None

    # ---- needs
    def needs(self) -> list[str]:
        out: list[str] = []

        def add(n: str) -> None:
            if n not in out:
                out.append(n)

        ns = self.named_search()
        if ns is not None:
            key = _call_key(ns[0]["name"], ns[1])
            if not any(c.key == key and c.ok is not None for c in self.st.calls):
                return ["named_search"]  # find the named product's link before anything else
            if self.search_unmatched():
                return []
        for intent in self.intents:
            if intent in ("price", "general"):
                add("product")
            elif intent == "attribute":
                add("product")
            elif intent == "stock":
                add("inventory")
            elif intent == "coupon":
                add("coupon")
            elif intent == "faq":
                if self.links and self.links[0] != self.room.get("current_link"):
                    add("product")  # a product not on screen: its own data may answer (warranty, care)
                if not self.context_faq_answer():
                    add("faq")
            elif intent == "post_purchase":
                if self.order_id():
                    add("order")
                elif not self.context_faq_answer():
                    add("faq")
            elif intent == "purchase":
                add("inventory")
                units, s_out, _ = self.stock_facts()
                if self.calls_for("inventory") and not s_out:
                    add("pin")
        if "product" in out and not self.links and self.link is None:
            out[out.index("product")] = "search"
        # an attribute the product data does not have: look in the FAQ
        if "attribute" in self.intents and "faq" not in out and self.product_result_done():
            facts = self.product_facts()
            if facts is not None and self.unresolved_attrs(facts) and not self.context_faq_answer():
                add("faq")
        if out and "coupon" not in out and set(self.intents) & {"price", "general"} and (
                asks_after_coupon(self.text) or _CODE_RE.search(self.text)):
            add("coupon")  # the price after a coupon needs the coupons
        if "coupon" in self.intents and re.search(r"\b(send|give|get|claim|issue)\b.*\b(me|us)\b", self.low) and \
                self.issuable_code():
            add("coupon_issue")
        return out

    def tool_for(self, need: str) -> dict[str, Any] | None:
        if need == "named_search":
            return self.best_tool("search")
        tool = self.best_tool(need)
        if tool is None and need == "search":
            tool = self.best_tool("product")
        return tool

    def planned_calls(self) -> list[tuple[str, str, dict[str, Any]]]:
        if self.parts:  # a merged request: each comment's calls, in the order the comments came
            merged: list[tuple[str, str, dict[str, Any]]] = []
            keys: set[str] = set()
            for part in self.parts:
                for part_need, name, part_args in part.planned_calls():
                    if _call_key(name, part_args) not in keys:
                        keys.add(_call_key(name, part_args))
                        merged.append((part_need, name, part_args))
            return merged
        plan: list[tuple[str, str, dict[str, Any]]] = []
        seen: set[str] = set()
        for need in self.needs():
            tool = self.tool_for(need)
            if tool is None:
                continue
            base = self.fill_arguments(tool, need)
            if base is None:
                continue
            variants = [base]
            # a second mentioned link ("compare link 2 and link 3")
            if need in ("product", "inventory") and len(self.links) > 1:
                props, _ = _properties(tool)
                for pname, schema in props.items():
                    if self._classify_param(pname, schema if isinstance(schema, dict) else {}) == "link":
                        second = dict(base)
                        second[pname] = self.links[1] if (schema or {}).get("type") != "string" \
                            else str(self.links[1])
                        variants.append(second)
            for args in variants:
                key = _call_key(tool["name"], args)
                if key not in seen:
                    seen.add(key)
                    plan.append((need, tool["name"], args))
        return plan

    def calls_for(self, need: str) -> list[Call]:
        tool = self.tool_for(need)
        if tool is None:
            return []
        return [c for c in self.st.calls if c.tool == tool["name"]]

    def product_result_done(self) -> bool:
        calls = self.calls_for("product") or self.calls_for("search")
        return any(c.ok is not None or c.rejected for c in calls)

    def next_call(self) -> tuple[str, dict[str, Any]] | None:
        budget = self.turns_left_after_this()
        needed_after = (0 if self.reply_skill_loaded() else 1) + 1
        if budget < needed_after:
            return None
        for _need, tool, args in self.planned_calls():
            key = _call_key(tool, args)
            previous = [c for c in self.st.calls if c.key == key]
            if not previous:
                return tool, args
            last = previous[-1]
            if len(previous) == 1 and last.ok is False and not last.rejected and _transient(last.error_code):
                return tool, args
        return None

    # ---- facts
    def _results(self, need: str) -> tuple[list[Any], bool]:
        """Successful results of the tool serving ``need``, and whether it failed / was unavailable."""
        calls = self.calls_for(need)
        ok = [c.result for c in calls if c.ok]
        failed = bool(calls) and not ok
        return ok, failed

    def product_facts(self, link: int | None = None) -> dict[str, Any] | None:
        results, _ = self._results("product")
        if not results:
            results, _ = self._results("search")
        wanted = link if link is not None else self.link
        candidates: list[dict[str, Any]] = []
        for d in _iter_dicts(results):
            price_key = next((k for k in d if _key_has(k, "price") and _is_num(d[k])), None)
            if price_key is None:
                continue
            candidates.append({
                "price": d[price_key],
                "currency": next((d[k] for k in d if _key_has(k, "currency")), None),
                "title": next((d[k] for k in d if k.lower() in ("title", "name", "product_name")), None),
                "link": next((d[k] for k in d if _key_has(k, "link") and _is_num(d[k])), None),
                "attributes": tabulate(next((d[k] for k in d if _key_has(k, "attribute", "spec")
                                             and isinstance(d[k], dict)), {})),
            })
        facts: dict[str, Any] | None = next((c for c in candidates if c["link"] == wanted), None)
        if facts is None and candidates and (wanted is None or candidates[0]["link"] is None):
            facts = candidates[0]
        prod = self.product
        if prod and (wanted is None or prod.get("link_id") in (None, wanted)):
            if facts is None:
                facts = {"price": prod.get("price"), "currency": prod.get("currency"),
                         "title": prod.get("title"), "link": prod.get("link_id"),
                         "attributes": tabulate(prod.get("attributes") or {})}
            else:
                for k, v in (("title", prod.get("title")), ("currency", prod.get("currency"))):
                    if facts.get(k) is None:
                        facts[k] = v
                for k, v in tabulate(prod.get("attributes") or {}).items():
                    facts["attributes"].setdefault(k, v)
        return facts

    def stock_facts(self) -> tuple[int | None, bool | None, bool]:
        """(units, sold_out, failed)."""
        results, failed = self._results("inventory")
        units: int | None = None
        sold_out: bool | None = None
        wanted = self.link
        for res in results:
            for d in _iter_dicts(res):
                link = next((d[k] for k in d if _key_has(k, "link") and _is_num(d[k])), None)
                if wanted is not None and link is not None and link != wanted:
                    continue
                for k, v in d.items():
                    kl = k.lower()
                    if isinstance(v, bool):
                        if "sold" in kl or "out_of" in kl:
                            sold_out = v
                        elif "in_stock" in kl or kl in ("available", "availability"):
                            sold_out = not v
                    elif _is_num(v) and units is None and any(
                        n in kl for n in ("stock", "units", "quantity", "qty", "left", "available", "inventory")
                    ):
                        units = int(v)
        if units is not None and sold_out is None:
            sold_out = units <= 0
        return units, sold_out, failed and units is None and sold_out is None

    def coupon_facts(self) -> tuple[list[dict[str, Any]], bool, bool]:
        """(usable coupons, any coupon returned, failed)."""
        results, failed = self._results("coupon")
        cap = self.max_discount()
        usable: list[dict[str, Any]] = []
        seen = False
        for res in results:
            for d in _iter_dicts(res):
                code_key = next((k for k in d if _key_has(k, "code") and isinstance(d[k], str)), None)
                if code_key is None:
                    continue
                seen = True
                pct = next((d[k] for k in d if _key_has(k, "pct", "percent", "discount") and _is_num(d[k])), None)
                min_spend = next((d[k] for k in d if _key_has(k, "min") and _is_num(d[k])), None)
                if pct is None or (cap is not None and float(pct) > cap):
                    continue
                usable.append({"code": d[code_key], "pct": pct, "min": min_spend})
        return usable, seen, failed

    def issuable_code(self) -> str | None:
        usable, _, _ = self.coupon_facts()
        return str(usable[0]["code"]) if usable else None

    def faq_entries(self) -> list[tuple[str, str]]:
        entries: list[tuple[str, str]] = []
        sources: list[Any] = self._screen_faq()
        results, _ = self._results("faq")
        sources.extend(results)
        for d in _iter_dicts(sources):
            q = next((d[k] for k in d if k.lower() in ("q", "question")), None)
            a = next((d[k] for k in d if k.lower() in ("a", "answer")), None)
            if isinstance(q, str) and isinstance(a, str):
                entries.append((q, a))
        return entries

    def _screen_faq(self) -> list[Any]:
        """The FAQ of the product on screen (in the prompt's context), when the comment is about it: the
        answers of one product never answer a question about another."""
        on_screen = (self.product or {}).get("link_id")
        return list(self.ctx.get("faq") or []) if self.link in (None, on_screen) else []

    def context_faq_answer(self) -> str | None:
        return self._faq_answer([(str(f.get("q", "")), str(f.get("a", "")))
                                 for f in self._screen_faq() if isinstance(f, dict)])

    def _faq_answer(self, entries: list[tuple[str, str]]) -> str | None:
        best: tuple[float, str] | None = None
        generic = _vocab("product item link buy")
        for q, a in entries:
            qs = stems(q) - generic
            if not qs:
                continue
            overlap = len(qs & self.text_stems)
            ratio = overlap / len(qs)
            if overlap >= 2 or (overlap >= 1 and ratio >= 0.5):
                score = overlap + ratio
                if best is None or score > best[0]:
                    best = (score, a)
        return best[1] if best else None

    def unresolved_attrs(self, facts: dict[str, Any]) -> set[str]:
        keys = facts.get("attributes") or {}
        return {a for a in self.asked_attrs if not self._attr_keys_for(a, keys)}

    @staticmethod
    def _attr_keys_for(attr: str, attributes: dict[str, Any]) -> list[str]:
        hints = _ATTR_HINTS.get(attr, {attr})
        out = []
        for key in attributes:
            ks = stems(str(key)) - set(_UNIT_SUFFIX)
            if ks & ({attr} | hints):
                out.append(key)
        return out

    def order_facts(self) -> tuple[dict[str, Any] | None, bool]:
        results, failed = self._results("order")
        for res in results:
            for d in _iter_dicts(res):
                status = next((d[k] for k in d if _key_has(k, "status", "state")), None)
                if isinstance(status, str):
                    return d, False
        return None, failed

    def order_not_found(self) -> bool:
        """The order lookup answered "not found" (not a timeout or another failure)."""
        calls = self.calls_for("order")
        return bool(calls) and all(c.ok is False and "not_found" in (c.error_code or "").lower().replace(" ", "_")
                                   for c in calls)

    def after_sales_steps(self, status: str) -> list[tuple[str, bool, int]]:
        """What the viewer can do next: a return or exchange they ask for, or a delivered order they
        say they do not have (the status alone would contradict them)."""
        out: list[tuple[str, bool, int]] = []
        low = self.low  # Chinese after-sales words are glossed ("退款" → refund)
        wish = re.search(r"\b(return|exchange|refund)", low)
        if wish:
            noun = {"return": "a return", "exchange": "an exchange", "refund": "a refund"}[wish.group(1)]
            out.append((f"For {noun}, please open an after-sales request from your order page.", False, 0))
        elif "deliver" in status.lower() and re.search(r"\b(not|no|nothing|never|missing|lost)\b|n't\b", low):
            out.append(("If it hasn't reached you, please contact customer service to file a claim.", False, 0))
        elif _DAMAGE_RE.search(low):
            out.append(_DAMAGE_SENTENCE)
        elif _CHANGE_ORDER_RE.search(low):
            # an address or an order to change: what is possible depends on whether it has left
            st = status.lower()
            left = re.search(r"ship|transit|deliver|out.for|dispatch", st) and not re.search(
                r"\bnot\b|pending|await|unship|to.ship|before", st)
            if left:
                out.append(("It has already shipped, so please contact customer service to change the delivery.",
                            False, 0))
            else:
                out.append(("It hasn't shipped yet, so you can still change it on your order page, or customer "
                            "service can update it for you.", False, 0))
        return out

    def pin_ok(self) -> bool:
        results, _ = self._results("pin")
        return bool(results)

    # ---- skills
    def reply_skills(self) -> list[dict[str, Any]]:
        return [s for s in self.skills if s.get("kind", "reply") == "reply"]

    def reply_skill_loaded(self) -> bool:
        ids = {s["id"] for s in self.reply_skills()}
        return any(sid in ids for sid in self.st.loaded)

    def rank_reply_skills(self) -> list[dict[str, Any]]:
        called = {c.tool for c in self.st.calls if c.ok}
        intents = self.intents
        weights: dict[str, float] = {}
        for i, intent in enumerate(intents):
            key = {"general": "attribute", "off_topic": "chit_chat", "injection": "refusal",
                   "abuse": "refusal"}.get(intent, intent)
            weights[key] = max(weights.get(key, 0.0), 1.0 / (1 + 0.5 * i))
        if "faq" in weights and len(weights) > 1:
            weights["faq"] *= 0.5
        if "chit_chat" in weights and len(weights) > 1:
            weights["chit_chat"] *= 0.3
        ranked: list[tuple[float, int, dict[str, Any]]] = []
        skills = self.reply_skills()
        sims = choice.similarity_matrix([choice.REPLIES[k] for k in weights],
                                        [choice.skill_text(s) for s in skills], stem, _STOP)
        means = [sum(row) / max(len(row), 1) for row in sims]
        for idx, skill in enumerate(skills):
            # how much more this skill means the reply kind than the reply skills on average
            score = sum(w * (sims[i][idx] - means[i]) for i, w in enumerate(weights.values()))
            score += 0.25 * len(called & set(skill.get("tools") or []))
            ranked.append((score, -idx, skill))
        ranked.sort(key=lambda r: (r[0], r[1]), reverse=True)
        return [r[2] for r in ranked]

    def skill_to_load(self) -> str | None:
        ids = [s["id"] for s in self.reply_skills()]
        # a correction that names a skill id: do what it says
        for corr in reversed(self.st.skill_corrections):
            msg = f"{corr.get('message', '')} {corr.get('reason', '')}"
            for sid in sorted(ids, key=len, reverse=True):
                if re.search(rf"(?<![\w-]){re.escape(sid)}(?![\w-])", msg) and sid not in self.st.loaded:
                    return str(sid)
        if self.reply_skill_loaded():
            if self.st.skill_corrections and len(self.st.skill_corrections) <= 2:
                for skill in self.rank_reply_skills():
                    if skill["id"] not in self.st.loaded:
                        return str(skill["id"])
            return None
        ranked = self.rank_reply_skills()
        return str(ranked[0]["id"]) if ranked else None

    def wants_cta(self) -> bool:
        """A loaded skill asks to end with an invitation to buy (judged by meaning, line by line)."""
        texts = [line.strip(" -#*0123456789.") for s in self.ctx.get("loaded_skills") or [] if isinstance(s, dict)
                 for line in str(s.get("body", "")).splitlines() if len(line.split()) > 3]
        if not texts:
            return False
        return max(choice.similarity(choice.CALL_TO_ACTION, texts, stem, _STOP)) >= CTA_MIN_SIMILARITY

    # ---- the reply
    def allowed_numbers(self) -> set[str]:
        nums: set[str] = set()
        for src in (self.product, self.room, self.ctx.get("faq"), self.rules.get("max_discount_pct")):
            _numbers_in(src, nums)
        for c in self.st.calls:
            if c.ok:
                _numbers_in(c.result, nums)
        return nums

    def compose(self) -> str:
        if self.parts:
            return self._fit(self._merged_sentences(), by_priority=True)
        sentences = self._sentences()
        return self._fit(sentences)

    def _merged_sentences(self) -> list[tuple[str, bool, int]]:
        """Each comment's answer in turn; one invitation to buy at most, at the end."""
        out: list[tuple[str, bool, int]] = []
        cta: tuple[str, bool, int] | None = None
        for part in self.parts:
            for sentence in part._sentences():
                if sentence[2] >= 3:
                    cta = sentence
                elif sentence[0] not in [s for s, _, _ in out]:
                    out.append(sentence)
        return out + ([cta] if cta else [])

    def _sentences(self) -> list[tuple[str, bool, int]]:
        """(sentence, grounded-by-data, priority) in the order they should be said."""
        out: list[tuple[str, bool, int]] = []
        intents = self.intents
        facts = self.product_facts() if any(i in intents for i in ("price", "attribute", "general", "coupon",
                                                                     "purchase", "chit_chat", "off_topic",
                                                                     "refusal", "stock")) else None
        title = str(facts.get("title")) if facts and facts.get("title") else None
        link = self.link
        the_item = f"the {title}" if title else "this one"
        cur = _currency(facts.get("currency")) if facts else ""
        sold_out = False
        quote_at: int | None = None  # where a calculation the viewer asked for is said

        unknown = link is None or (self.previous_unknown and not self.links)
        if unknown and not self.named and "refusal" not in intents and len(self.lineup()) > 1 and \
                set(intents) & set(_PRODUCT_INTENTS) and not self.parts:
            # nothing on screen and no product named ("how much is it?"), or "the one shown earlier" with no
            # record of which: ask which one (not the one on screen, for the latter)
            options = [f"link {x['link_id']}, the {x['title']}" for x in self.lineup()[:4] if x.get("title")
                       and (link is None or x.get("link_id") != link)]
            if len(options) > 1:
                out.append((f"Which one do you mean: {', '.join(options[:-1])} or {options[-1]}?", True, 0))
                return out

        measure = compare.asked(self.text) if "refusal" not in intents and len(self.links) > 1 else None
        if measure is not None:
            products = [(lk, str(f.get("title") or f"link {lk}"), f) for lk in self.links[:2]
                        if (f := self.product_facts(lk)) is not None and f.get("link") == lk]
            said = compare.answer(measure, products)
            if said is not None:
                return [(said, True, 0)]

        if self.named_target() and self.clarify and "refusal" not in intents:
            options = [f"link {link}, the {title}" for link, title in self.clarify]
            listed = ", ".join(options[:-1]) + " or " + options[-1]
            out.append((f"Which one do you mean: {listed}?", True, 0))
            return out

        if link is not None and self.link_refused(link) and "refusal" not in intents:
            # a hook corrected a call for a link number the tools' schema does not admit: no tool can
            # answer for it, so say so and point to the product on screen
            out.append(self._price_sentence(None, link))
            return out

        if self.search_unmatched() and "refusal" not in intents:
            out.append(("Sorry, we don't have that product in this room: it is not in today's lineup.", False, 0))
            cur_link = self.room.get("current_link")
            prod = self.product or {}
            if prod.get("title") and cur_link is not None:
                out.append((f"Right now we're showing the {prod['title']} on link {cur_link}!", True, 1))
            return out

        if "refusal" in intents:
            kind = choice.refusal_kind(normalize(gloss(self.text)), stem, _STOP, REFUSAL_KIND_SIMILARITY) \
                if self.compliance else None
            out.append((choice.REFUSAL_KINDS[kind][1] if kind else "Sorry, I can't help with that.", False, 0))
            if self.compliance and facts:
                # the question under the risky request still deserves its facts ("SPF 50", "ages 3+")
                out.extend((f.sentence, True, 1) for f in self.retrieve(facts, kinds=("attribute", "faq")))
            if title:
                out.append((f"Happy to answer any questions about {the_item} though!", False, 2))
            return out

        if self.asks_identity:
            # a viewer asking whether the host is a person hears the truth
            out.append(("I'm an AI host, a virtual assistant of this live room, here to answer your questions!",
                        False, 0))
        # laughter or a "wow" beside a question is no greeting: the question is answered
        social_only = len(intents) > 1 and not _GREETING_RE.search(self.low) and not _THANKS_RE.search(self.low) \
            and not re.search(r"\blove\b", self.low)
        if intents and intents[0] == "chit_chat" and not self.asks_identity and not social_only:
            if _THANKS_RE.search(self.low):
                out.append(("Thank you so much!", False, 1))
            elif re.search(r"\blove\b", self.low):
                out.append(("So glad you love it!", False, 1))
            else:
                out.append(("Hi, welcome to the room, great to have you here!", False, 1))

        for intent in intents:
            if intent == "price" or (intent == "general" and "price" not in intents):
                for lk in self.links[1:] if len(self.links) > 1 else [None]:
                    pf = facts if lk is None else self.product_facts(lk)
                    if lk is not None:
                        out.append(self._price_sentence(facts, link))
                    out.append(self._price_sentence(pf, lk if lk is not None else link))
                quote_at = len(out) if quote_at is None else quote_at
                option = self.option_answer(facts, self.subject(facts)) if intent == "general" else None
                if option:
                    out.append((option, True, 0))
                elif intent == "general" and facts:
                    named_keys = self.named_attribute_keys(facts)
                    if named_keys:
                        out.extend((self._named_attribute_sentence(facts, k, the_item), True, 0)
                                   for k in named_keys)
                    else:
                        found = self.retrieve(facts)
                        out.extend((f.sentence, True, 0) for f in found)
                        if not found and len(words(self.text)) >= 5:  # a real question nothing answers
                            out.append(("Let me check that detail for you.", False, 0))
            elif intent == "attribute":
                option = self.option_answer(facts, self.subject(facts))
                found = [] if option else self.retrieve(facts)
                if facts and self.asked_attrs and self.unresolved_attrs(facts) == self.asked_attrs:
                    # the viewer asked for an attribute the data lacks ("how heavy"): another attribute
                    # that only resembles it in meaning ("thickness") is not the answer
                    found = [f for f in found if f.kind != "attribute" or stems(f.text) & self.text_stems]
                if option:
                    out.append((option, True, 0))
                elif found:
                    out.extend((f.sentence, True, 0) for f in found)
                else:
                    out.append((self.not_listed(facts, the_item) or "Let me check that detail for you.", False, 0))
            elif intent == "stock":
                units, s_out, failed = self.stock_facts()
                rows = self.variant_rows(facts)
                if rows:
                    sentences = [f.sentence for f in rows]
                    if title and link is not None and link != self.room.get("current_link"):
                        # not the product on screen: say which product the row belongs to
                        first = sentences[0]
                        sentences[0] = f"The {title} on link {link}: {first[0].lower()}{first[1:]}"
                    out.extend((sentence, True, 0) for sentence in sentences)
                    sold_out = all(isinstance(f.value, int | float) and f.value <= 0 for f in rows)
                elif s_out:
                    sold_out = True
                    out.append((self.sold_out_sentence(link, title), True, 0))
                    out.extend(self.alternatives(link))
                elif units is not None and units > 0 and (self.named_target()[0] is not None or self.explicit) \
                        and title:
                    out.append((f"Good news: {the_item} on link {link} has {units} left in stock!", True, 0))
                elif units is not None and units > 0:
                    out.append((f"Good news: {units} left in stock!", True, 0))
                elif s_out is False:
                    out.append(("Good news: it's still available!", True, 0))
                else:
                    out.append(("Let me check the stock for you.", False, 0))
            elif intent == "coupon":
                usable, seen, failed = self.coupon_facts()
                if usable:
                    for c in usable[:2]:
                        spend = f" orders over {_fmt_num(c['min'])}{cur}" if _is_num(c.get("min")) and \
                            float(c["min"]) > 0 else ""
                        out.append((f"Use code {c['code']} for {_fmt_num(c['pct'])}% off{spend}.", True, 0))
                elif failed or not self.calls_for("coupon"):
                    out.append(("Let me check the coupons for you.", False, 0))
                else:
                    out.append(("There's no coupon on this one right now.", True, 1))
                out.extend((f.sentence, True, 0) for f in self.retrieve(facts, kinds=("campaign",)))
                cap = self.max_discount()
                asked = [float(m) for m in re.findall(r"(\d{1,3})\s*(?:%|percent|pct)", normalize(self.text))]
                if cap is not None and any(a > cap for a in asked):
                    out.insert(len(out) - (1 if not usable else min(2, len(usable))),
                               (f"The most this campaign allows is {_fmt_num(cap)}% off.", True, 0))
            elif intent == "faq":
                found = self.retrieve(facts, kinds=("faq", "campaign", "attribute"))
                ans = found[0].sentence if found else None
                out.extend((f.sentence, True, 0) for f in found)
                if not ans and "post_purchase" not in intents and not any(
                    g for s, g, _ in out if g and s not in ("",)
                ):
                    out.append(("Let me check that for you.", False, 1))
            elif intent == "post_purchase":
                order, failed = self.order_facts()
                oid = self.order_id()
                if order:
                    status = next(str(order[k]) for k in order if _key_has(k, "status", "state"))
                    carrier = next((str(v) for k, v in order.items() if isinstance(v, str) and v
                                    and _key_has(k, "carrier", "courier")), None)
                    eta = next((str(v) for k, v in order.items() if isinstance(v, str) and v
                                and _key_has(k, "eta", "arriv", "expected")), None)
                    said = f"Your order is {status.replace('_', ' ')}"
                    said += f" with {carrier}" if carrier else ""
                    said += f", expected by {eta}" if eta and "deliver" not in status.lower() else ""
                    out.append((said + ".", True, 0))
                    out.extend(self.after_sales_steps(status))
                elif oid and self.order_not_found():
                    # the store shows a viewer only their own orders: never say whose it is
                    out.append(("I couldn't find that order on your account, please check the order number.",
                                False, 0))
                elif oid:
                    out.append(("Let me look into your order for you.", False, 0))
                elif _DAMAGE_RE.search(self.low):
                    out.append(_DAMAGE_SENTENCE)
                elif not self._faq_answer(self.faq_entries()):
                    out.append(("Share your order number and I'll check it for you.", False, 0))
            elif intent == "purchase":
                _, s_out, _ = self.stock_facts()
                if s_out:
                    if "stock" not in intents:
                        sold_out = True
                        out.append((self.sold_out_sentence(link, title), True, 0))
                        out.extend(self.alternatives(link))
                elif self.pin_ok() and link is not None:
                    out.append((f"I've pinned link {link} on screen: tap the card to add it to your cart and check "
                                "out!", True, 0))
                elif self.pin_ok():
                    out.append(("I've pinned it on screen: tap the card to check out!", True, 0))
                elif link is not None:
                    out.append((f"Tap link {link} to add it to your cart and check out!", True, 0))
                else:
                    out.append(("Tap the product card to check out!", False, 0))
                if not s_out and (chosen := self.chosen_option(facts)):
                    rows = [f for f in self.variant_rows(facts) if _is_num(f.value) and f.value <= 0]
                    out.append((rows[0].sentence, True, 0) if rows else
                               (f"Choose {chosen} when you add it to your cart.", True, 0))
            elif intent == "off_topic":
                out.append(("Fun question!", False, 1))

        # a named code ("can I use SHIRT15 on one shirt?") is answered with whether it applies, and to what
        if "price" in intents or ("coupon" in intents and (asks_after_coupon(self.text) or _CODE_RE.search(
                self.text))) or len(self.items) > 1 or (asks_total(self.text) and quantities(self.text)):
            # the calculation answers the question asked: said right after the price, ahead of the rest
            said = " ".join(s for s, _, _ in out)
            at = quote_at if quote_at is not None else 0
            out[at:at] = [q for q in self.quote_sentences(facts) if q[0] not in said]

        if not any(i in intents for i in ("refusal", "chit_chat", "off_topic")):
            # every question of the comment gets its answer: a clause that the intents above did not
            # answer ("... and is shipping free?") is answered by the fact it clearly asks about (after a
            # sale, only the shop's rules and answers: "ships within 48 hours")
            kinds = ("faq", "campaign") if "post_purchase" in intents else ("attribute", "faq", "campaign")
            said = " ".join(s for s, _, _ in out)
            for fact in self.clause_facts(facts, kinds):
                label = humanise_key(fact.key)[0] if fact.kind == "attribute" else ""
                if label and label.lower() in said.lower():
                    continue  # already answered in other words ("works on induction")
                if fact.sentence not in said:
                    out.append((fact.sentence, True, 0))
                    said += " " + fact.sentence
        if intents and intents[-1] in ("chit_chat", "off_topic") and not any(
            i in intents for i in ("price", "attribute", "stock", "coupon", "general", "purchase")
        ):
            if title and link is not None:
                out.append((f"Right now we're showing {the_item} on link {link}, ask me anything about it!",
                            True, 1))
            elif title:
                out.append((f"Right now we're showing {the_item}, ask me anything about it!", True, 1))
        elif (not sold_out and link is not None and self.wants_cta() and "purchase" not in intents
              and "post_purchase" not in intents and any(g and p == 0 for _, g, p in out)):
            out.append((f"Tap link {link} to grab it!", True, 3))
        return out

    # ---- arithmetic the viewer asks for
    def quote_sentences(self, facts: dict[str, Any] | None) -> list[tuple[str, bool, int]]:
        """What the viewer's items come to, shown as a calculation from the catalog's numbers (the
        grounding check verifies it): several of one item, one unit of a pack, and the price after the
        coupon that applies (the one the viewer names, else the biggest saving)."""
        if not facts or not _is_num(facts.get("price")):
            return []
        price = float(facts["price"])
        cur = _currency(facts.get("currency"))
        out: list[tuple[str, bool, int]] = []
        per, unit = per_unit_asked(self.text)
        if per:
            pack = pack_count(str(facts.get("title") or ""), facts.get("attributes") or {}, unit)
            if pack is not None:
                count, word = pack
                each = word or unit or "piece"
                out.append((f"That's {_fmt_num(price)} ÷ {count} = {money(price / count)}{cur} per {each}.",
                            True, 0))
        if len(self.items) > 1 and all(lk in self.links for lk in self.items) and asks_total(self.text) \
                and not re.search(r"\b(?:vs\.?|versus|or)\b", self.low):
            # several products in one question: what they come to together
            priced = [(self.product_facts(lk), n) for lk, n in self.items.items()]
            if all(f and _is_num(f.get("price")) and f.get("link") in self.items for f, _ in priced):
                terms = [f"{_fmt_num(f['price'])} × {n}" if n > 1 else _fmt_num(f["price"])
                         for f, n in priced if f]
                total = sum(float(f["price"]) * n for f, n in priced if f)
                return [(f"All together: {' + '.join(terms)} = {money(total)}{cur}.", True, 0)]
        counts = quantities(self.text)
        code = next((m.group(0) for m in _CODE_RE.finditer(self.text)), None)
        # how many counts when the viewer asks what they cost, or whether a coupon applies to them
        qty = counts[0] if counts and counts[0] >= 2 and (asks_total(self.text) or per or code or
                                                          asks_after_coupon(self.text)) else 1
        subtotal = price * qty
        rules = [str(r) for r in ((self.room.get("campaign") or {}).get("rules") or []) if _safe_to_say(str(r))]
        second = second_item_discount(rules) if qty > 1 else None
        if second is not None and (second[1] == 0.5 or _fmt_num(round(second[1] * 100)) in second[0]):
            # the campaign takes something off every second item: the viewer's total follows the rule
            share = second[1]
            pairs, full = qty // 2, qty - qty // 2
            reduced = price * (1 - share)
            how = f"{_fmt_num(price)} ÷ 2" if share == 0.5 else f"{_fmt_num(price)} - {_fmt_num(round(share * 100))}%"
            subtotal = price * full + reduced * pairs
            summed = " + ".join([f"{_fmt_num(price)} × {full}" if full > 1 else _fmt_num(price),
                                f"{money(reduced)} × {pairs}" if pairs > 1 else money(reduced)])
            out.append((f"With the campaign's second-item deal the second one is {how} = {money(reduced)}{cur}, so "
                        f"together they come to {summed} = {money(subtotal)}{cur}.", True, 0))
        elif qty > 1:
            out.append((f"{qty} of them: {qty} × {_fmt_num(price)} = {money(subtotal)}{cur}.", True, 0))
        if asks_after_coupon(self.text) or code:
            usable, _, _ = self.coupon_facts()
            coupons = [Coupon(str(c["code"]), float(c["pct"]), float(c["min"]) if _is_num(c.get("min")) else 0.0)
                       for c in usable]
            use, miss = best_coupon(subtotal, coupons, code)
            if use is not None:
                out.append((f"With code {use.code}: {money(subtotal)} - {_fmt_num(use.pct)}% = "
                            f"{money(subtotal * (1 - use.pct / 100))}{cur}.", True, 0))
            elif miss is not None and (code or qty > 1 or asks_after_coupon(self.text)):
                out.append((f"Code {miss.code} needs an order over {_fmt_num(miss.min_spend)}{cur}, so it does "
                            f"not apply to {money(subtotal)}{cur}.", True, 0))
        return out

    # ---- retrieval over the catalog's own data
    def fact_pool(self, facts: dict[str, Any] | None) -> list[Fact]:
        pool: list[Fact] = []
        if facts:
            pool += attribute_facts(self.subject(facts), facts.get("attributes") or {})
        pool += faq_facts(self.faq_entries())
        # campaign rules are a producer's text: one that screens as an instruction, abuse or spam is never
        # repeated to viewers (it stays quoted data in the prompt)
        pool += [f for f in campaign_facts(self.room.get("campaign")) if _safe_to_say(f.text)]
        return pool

    def not_listed(self, facts: dict[str, Any] | None, the_item: str) -> str | None:
        """The viewer asked for an attribute the product's data does not have: say it is not listed (not
        that the product lacks it) and that the host will check."""
        missing = sorted(self.unresolved_attrs(facts)) if facts else []
        if not missing:
            return None
        label = missing[0]
        claims = [str(c).lower() for c in self.rules.get("claims_requiring_evidence") or []]
        if any(_has_phrase(label, c) for c in claims):
            # a claim word is said only with evidence, even in "not listed as …"
            return f"That is not listed for {the_item}, let me check that detail for you."
        item = the_item[0].upper() + the_item[1:]
        # an adjective ("waterproof") is listed *as*; a noun ("weight") is listed *for*
        if label.endswith(("proof", "safe", "free", "able", "ible", "ant")):
            return f"{item} is not listed as {label}, let me check that detail for you."
        return f"The {label} is not listed for {the_item}, let me check that detail for you."

    def subject(self, facts: dict[str, Any] | None) -> str:
        """How a sentence names the product: "It", or its title when the reply is about several."""
        title = (facts or {}).get("title")
        return f"The {title}" if self.explicit and title else "It"

    def chosen_option(self, facts: dict[str, Any] | None) -> str | None:
        """The option a buyer names ("… in black", "要黑色的"): a value of one of the product's option lists."""
        if not facts:
            return None
        attrs = facts.get("attributes") or {}
        values = [str(x) for v in attrs.values() if isinstance(v, list) for x in v if isinstance(x, str)]
        # and the rows of a variant table ("colorStock": {"black": 15}), whose stock is said by the stock answer
        values += [k for k in _variant_row_keys(attrs) if not k.isdigit()]
        low = normalize(gloss(self.text))
        for value in values:
            words_of = [w for w in normalize(value).split() if len(w) > 2]
            if any(re.search(rf"\bin\s+{re.escape(w)}\b", low) for w in words_of) or (
                    CJK.search(value) and any(run in self.text for run in re.findall(rf"{CJK.pattern}{{2,}}", value))):
                return value
        return None

    def option_answer(self, facts: dict[str, Any] | None, subject: str) -> str | None:
        """A viewer asks for an option the product's option lists do not have ("does it come in X?"
        where X is no value of any list): name the options it has. The list is the one whose values
        are closest in meaning to X (embeddings; the longest list without them)."""
        if not facts:
            return None
        lists = {k: [str(x) for x in v] for k, v in (facts.get("attributes") or {}).items()
                 if isinstance(v, list) and len(v) >= 2 and all(isinstance(x, str | int | float) for x in v)}
        if not lists:
            return None
        values = {normalize(x) for vs in lists.values() for x in vs}
        title = stems(str(facts.get("title") or ""))
        for m in _OPTION_RE.finditer(normalize(self.text)):
            word = m.group(1) or m.group(2)
            if word in _NOT_OPTIONS or word in _STOP or stem(word) in title:
                continue
            having = [k for k, vs in lists.items() if any(word == normalize(v) or word in normalize(v).split()
                                                          for v in vs)]
            if having:  # an option it has: yes, and the whole list
                fact = next((f for f in attribute_facts(subject, {having[0]: lists[having[0]]})), None)
                if fact is not None:
                    return f"Yes! {fact.sentence}"
                continue
            if word in values or any(word in v.split() for v in values):
                continue
            if embed.available() and len(lists) > 1:
                key = max(lists, key=lambda k: sum(embed.similarity(word, lists[k])) / len(lists[k]))
            else:
                key = max(lists, key=lambda k: len(lists[k]))
            fact = next((f for f in attribute_facts(subject, {key: lists[key]})), None)
            if fact is not None:
                return f"Sorry, not in {word}! {fact.sentence}"
        return None

    def retrieve(self, facts: dict[str, Any] | None,
                 kinds: tuple[str, ...] = ("attribute", "variant", "faq", "campaign")) -> list[Fact]:
        """The facts that answer the comment (at most two, close to the best), or [] when nothing is
        confident enough: then the host says it will check."""
        pool = [f for f in self.fact_pool(facts) if f.kind in kinds]
        query = _LINK_RE.sub(" ", gloss(" ".join(self.fact_queries) if self.fact_queries else self.text))
        # a promotion code names a coupon: rules about coupons (how many per viewer, …) answer it
        query = _CODE_RE.sub(" coupon ", query)
        ranked = rank(query, pool, stem, _STOP)
        if not ranked or ranked[0][0] < FACT_THRESHOLD:
            return []
        top = ranked[0][0]
        picked: list[Fact] = []
        for score, fact in ranked[:3]:
            if score >= FACT_THRESHOLD and score >= top - FACT_MARGIN and fact.kind != "variant":
                picked.append(fact)
        return picked[:2] or [ranked[0][1]]

    def clause_facts(self, facts: dict[str, Any] | None,
                     kinds: tuple[str, ...] = ("attribute", "faq", "campaign")) -> list[Fact]:
        """For each question of the comment (clauses split at question marks, line breaks and "and/also"),
        the fact that answers it when it stands out clearly (a stricter threshold than :meth:`retrieve`)."""
        # chat shorthand joins questions too ("how many watts n whats the capacity")
        raw = [part for c in _CLAUSE_SPLIT.split(self.text) if c for part in re.split(r"\s(?:n|&)\s", c)]
        # chat shorthand written out ("how many ppl") so the clause meets the catalog's words
        clauses = [expand_shorthand(c.strip()) for c in raw if c and (len(words(c)) >= 2 or CJK.search(c))]
        pool = [f for f in self.fact_pool(facts) if f.kind in kinds]
        if not pool:
            return []
        out: list[Fact] = []
        several = len(clauses) > 1
        title = stems(str((facts or {}).get("title") or ""))
        for clause in clauses:
            query = _CODE_RE.sub(" coupon ", _LINK_RE.sub(" ", clause))
            # a word of the clause that is one attribute's value ("is the kettle glass?" and a material of
            # borosilicate glass): that attribute answers it
            yes_no = re.match(r"\W*(?:\d+\W+)?(?:is|are|does|do|can|will|has|have)\b", normalize(clause))
            asked = {w for w in stems(query) - _GENERIC if not w.isdigit()}
            by_value = [f for f in pool if yes_no and f.kind == "attribute" and not isinstance(f.value, bool)
                        and asked & _value_stems(f) - (title - _value_stems(f) | _title_head(title, facts))]
            if len(by_value) == 1 and by_value[0] not in out:
                out.append(by_value[0])
                continue
            ranked = rank(query, pool, stem, _STOP)
            # a comment of several questions asks each one on purpose: a clause's fact that stands well
            # clear of the others is its answer, even below the single-clause threshold
            # ... unless an intent of its own answers it ("how do I order?" is the purchase answer)
            own_intent = any(_find(INTENT_PATTERNS[i], normalize(clause)) is not None
                             for i in ("coupon", "purchase", "post_purchase"))
            clear = several and not own_intent and len(ranked) > 1 and ranked[0][0] >= MULTI_CLAUSE_THRESHOLD \
                and ranked[0][0] - ranked[1][0] >= MULTI_CLAUSE_MARGIN
            if ranked and (ranked[0][0] >= CLAUSE_FACT_THRESHOLD or clear) and (
                    len(ranked) == 1 or ranked[0][0] - ranked[1][0] >= FACT_MARGIN) and ranked[0][1] not in out:
                out.append(ranked[0][1])
        return out

    def variant_rows(self, facts: dict[str, Any] | None) -> list[Fact]:
        """Rows of a variant table (stock per size, …) that the comment names by their key ("the 38")."""
        if not facts:
            return []
        # full-width letters folded, and Latin or digit runs apart from Chinese ("Ｌ码", "XL没了吗")
        text = unicodedata.normalize("NFKC", self.text)
        spaced = re.sub(r"([\u4e00-\u9fff]+)", r" \1 ", text)
        tokens = set(re.findall(r"[^\W_]+(?:\.\d+)?", spaced))
        low_tokens = {t.lower() for t in tokens}
        rows: list[Fact] = []
        for f in attribute_facts("It", facts.get("attributes") or {}):
            if f.kind != "variant" or not f.row:
                continue
            row = unicodedata.normalize("NFKC", f.row)
            # a row of several words ("02 natural", "matcha green 抹茶绿") is named by its words that are
            # not codes, or by its Chinese name
            parts = re.findall(r"[\u4e00-\u9fff]+|[^\W_]+(?:\.\d+)?", row.lower())
            row_words = [w for w in parts if not w.isdigit()]
            chinese = [w for w in parts if CJK.match(w) and len(w) >= 2]
            multi = len(parts) > 1 and bool(row_words) and (
                all(w in low_tokens or (CJK.match(w) and w in text) for w in row_words)
                or any(w in text for w in chinese))
            # "1.8" names the "1.8m" row: a measured row is named by its number
            measured = re.fullmatch(r"(\d+(?:\.\d+)?)\s*[a-z]{1,3}", row.lower())
            if multi or (row.isdigit() and row in tokens) or (not row.isdigit() and len(row) > 1
                                                              and row.lower() in low_tokens) \
                    or (measured is not None and "." in measured.group(1) and measured.group(1) in tokens) \
                    or (len(row) == 1 and row.isupper() and (row in tokens or re.search(
                        rf"(?:\bsize\s+|\bin\s+|\b){re.escape(row)}\b(?!')", text))):
                if not (row.isdigit() and row in {str(n) for n in self.links}):
                    rows.append(f)
        if not rows:
            rows = self._rows_by_distinct_word(facts, low_tokens)
        return rows

    def _rows_by_distinct_word(self, facts: dict[str, Any], low_tokens: set[str]) -> list[Fact]:
        """A row of several words named by one of them that no other row of its table has ("the green
        one" names "sage green" when no other colour is green)."""
        rows = [f for f in attribute_facts("It", facts.get("attributes") or {}) if f.kind == "variant" and f.row]
        found: list[Fact] = []
        for f in rows:
            own = {w for w in re.findall(r"[a-z]{3,}", str(f.row).lower())}
            others = {w for g in rows if g.key == f.key and g.row != f.row
                      for w in re.findall(r"[a-z]{3,}", str(g.row).lower())}
            if len(own) > 1 and (own - others - _STOP) & low_tokens:
                found.append(f)
        return found

    def named_attribute_keys(self, facts: dict[str, Any]) -> list[str]:
        """Attribute keys of the product that the comment names ("... work on induction?")."""
        attrs: dict[str, Any] = facts.get("attributes") or {}
        return [k for k in attrs if (stems(str(k)) - set(_UNIT_SUFFIX)) & self.text_stems]

    def _named_attribute_sentence(self, facts: dict[str, Any], key: str, the_item: str) -> str:
        value = (facts.get("attributes") or {})[key]
        label = " ".join(w for w in words(str(key)) if w not in _UNIT_SUFFIX)
        works = _WORKS_RE.search(self.low)
        if isinstance(value, bool) and works:
            verb = f"works {works.group(1)}" if value else f"does not work {works.group(1)}"
            return f"{'Yes' if value else 'No'}, {the_item} {verb} {label}."
        subject = the_item[0].upper() + the_item[1:]
        # the catalog's own phrasing of a key ("has a laptop sleeve", "is dishwasher safe")
        fact = next(iter(attribute_facts(subject, {key: value})), None)
        return fact.sentence if fact is not None and fact.kind == "attribute" else \
            _attribute_sentence(subject, str(key), value)

    @staticmethod
    def _subject(said: list[tuple[str, bool, int]], title: str | None) -> str:
        if not title or any(title in s for s, _, _ in said):
            return "It"
        return f"The {title}"

    def _price_sentence(self, facts: dict[str, Any] | None, link: int | None) -> tuple[str, bool, int]:
        if not facts or not _is_num(facts.get("price")):
            wanted = link if link is not None else self.link
            if wanted is not None and self.link_missing(wanted):
                prod = self.product or {}
                cur = self.room.get("current_link")
                hint = f" Did you mean link {cur}, the {prod['title']}?" if prod.get("title") and cur else ""
                return (f"We don't have that link in this room.{hint}", True, 0)
            return ("Let me double-check the price for you.", False, 0)
        title = facts.get("title")
        where = facts.get("link") or link
        name = f"The {title}" if title else "It"
        on = f" on link {where}" if where is not None else ""
        verb = "are" if title and _plural(str(title)) else "is"
        return (f"{name}{on} {verb} {_fmt_num(facts['price'])}{_currency(facts.get('currency'))}.", True, 0)

    def sold_out_sentence(self, link: int | None, title: str | None) -> str:
        return f"Sorry, {self.sold_out_item(link, title)} is sold out right now, stay tuned for a restock!"

    def sold_out_item(self, link: int | None, title: str | None) -> str:
        """The sold-out product by name and link (its title from the product data or the room's lineup),
        so that the links offered next are not taken for it."""
        if title is None and link is not None:
            title = next((str(x["title"]) for x in self.lineup() if x.get("link_id") == link and x.get("title")),
                         None)
        if title and link is not None:
            return f"link {link}, the {title},"
        return f"the {title}" if title else "this one"

    def link_missing(self, link: int) -> bool:
        """A product lookup for this link answered "not found" (not a timeout or another failure), or a
        hook corrected a call naming this link because the tool's schema does not admit it."""
        for c in self.calls_for("product"):
            values = list(c.arguments.values())
            if c.ok is False and link in values and "not_found" in (c.error_code or "").lower().replace(" ", "_"):
                return True
        return self.link_refused(link)

    def link_refused(self, link: int) -> bool:
        """A hook corrected a call naming this link, and the tool's schema does not admit the value."""
        return any(c.rejected and link in self.invalid_arguments(c).values() for c in self.st.calls)

    def invalid_arguments(self, call: Call) -> dict[str, Any]:
        """The arguments of a corrected call that its tool's schema rejects (bounds, pattern, enum …)."""
        tool = next((t for t in self.tools if t.get("name") == call.tool), None)
        if tool is None:
            return {}
        props, _ = _properties(tool)
        out: dict[str, Any] = {}
        for name, value in call.arguments.items():
            schema = props.get(name)
            if isinstance(schema, dict) and not _schema_admits(schema, value):
                out[name] = value
        return out

    def _attribute_sentences(self, facts: dict[str, Any], subject: str, summary: bool) -> list[tuple[str, bool, int]]:
        attrs: dict[str, Any] = facts.get("attributes") or {}
        keys: list[str] = []
        if summary:
            keys = list(attrs)[:2]
        else:
            for a in sorted(self.asked_attrs):
                for k in self._attr_keys_for(a, attrs):
                    if k not in keys:
                        keys.append(k)
        out: list[tuple[str, bool, int]] = []
        for key in keys:
            out.append((_attribute_sentence(subject, str(key), attrs[key]), True, 0))
        return out

    def _fit(self, sentences: list[tuple[str, bool, int]], by_priority: bool = False) -> str:
        max_chars = int(self.rules.get("max_reply_chars") or 280)
        banned = [str(b).lower() for b in self.rules.get("banned_phrases") or []]
        claims = [str(c).lower() for c in self.rules.get("claims_requiring_evidence") or []]
        allowed = self.allowed_numbers()
        strict = self.st.reply_corrections
        drop_terms = _quoted_terms(self.st.corrections)
        known = {float(n) for n in allowed if re.fullmatch(r"\d+(?:\.\d+)?", n)}
        kept: list[tuple[str, int]] = []
        for sentence, grounded, prio in sentences:
            low = sentence.lower()
            if any(b and b in low for b in banned):
                continue
            if not grounded and any(_has_phrase(low, c) for c in claims):
                continue
            unbacked = [n for n in _NUM_RE.findall(sentence) if n not in allowed]
            if unbacked:
                # a calculation the sentence shows (a total, a price after a coupon) backs its result
                derived = derived_numbers(sentence, known)
                if any(float(n.replace(",", "")) not in derived | known for n in unbacked):
                    continue
                known |= derived
            if any(t and t in low for t in drop_terms):
                continue
            if strict >= 1 and prio >= 3:
                continue
            if strict >= 2 and prio >= 1 and kept:
                continue
            if (sentence, prio) not in kept:
                kept.append((sentence, prio))
        text = ""
        if by_priority:
            # several answers compete for the length limit: the most important ones are kept, and said
            # in their own order
            chosen: set[int] = set()
            used = -1
            for i in sorted(range(len(kept)), key=lambda i: kept[i][1]):
                if used + 1 + len(kept[i][0]) <= max_chars:
                    chosen.add(i)
                    used += 1 + len(kept[i][0])
            kept = [k for i, k in enumerate(kept) if i in chosen]
        for sentence, _prio in kept:
            candidate = f"{text} {sentence}".strip()
            if len(candidate) <= max_chars:
                text = candidate
        if not text:
            fallback = "Thanks for asking! Let me check that for you."
            text = fallback[:max_chars]
        return text

    # ---- the decision
    def decide(self) -> dict[str, Any]:
        if self.intents and self.intents[0] in ("injection", "abuse"):
            return {"action": "no_reply", "reason": f"{self.intents[0]} comment: not answered"}
        if "refusal" not in self.intents:
            nxt = self.next_call()
            if nxt is not None:
                return {"action": "call_tool", "tool": nxt[0], "arguments": nxt[1]}
        skill = self.skill_to_load()
        if skill is not None and self.turns_left_after_this() >= 1:
            return {"action": "load_skill", "skill": skill}
        return {"action": "reply", "text": self.compose()}


# A shop's rule is about orders, prices and delivery; text in it that addresses the host or its
# instructions is an injection carried by producer data. (The screening classifier is trained on viewers'
# comments and reads promotional rules such as "limit 1 coupon per viewer" as announcements it must refuse.)
_ADDRESSES_HOST = re.compile(r"(?<![a-z])(ai|a\.i\.|assistant|chatbot|bot|llm|host|system|prompt|instructions?|"
                             r"ignore|disregard|pretend|jailbreak)(?![a-z])|主播|助手|系统|忽略|指令|提示词|人工智能")


def _variant_row_keys(attributes: dict[str, Any]) -> list[str]:
    """The row keys of a product's variant tables ("S", "cream", "41" of stock per size or colour)."""
    return [str(k) for v in tabulate(attributes).values() if isinstance(v, dict) for k in v]


def _safe_to_say(text: str) -> bool:
    norm = normalize(text)
    return _ADDRESSES_HOST.search(norm) is None and _find(_INJECTION_PATTERNS, norm) is None


def _value_stems(fact: Fact) -> set[str]:
    value = fact.value
    return stems(" ".join(map(str, value)) if isinstance(value, list) else str(value))


def _title_head(title: set[str], facts: dict[str, Any] | None) -> set[str]:
    """The title's last word (its kind of product, "kettle"): naming it names the product, not a value."""
    head = [w for w in words(str((facts or {}).get("title") or "")) if w.isalpha() and w not in _UNIT_SUFFIX]
    return {stem(head[-1])} if head else set()


def _schema_admits(schema: dict[str, Any], value: Any) -> bool:
    try:
        return bool(jsonschema.Draft202012Validator(schema).is_valid(value))
    except jsonschema.SchemaError:
        return True


def _transient(code: str | None) -> bool:
    c = (code or "").lower()
    return any(t in c for t in ("timeout", "time_out", "timed", "unavailable", "deadline", "transient"))


def _plural(title: str) -> bool:
    """A title whose head noun is plural ("Trail runners"): said with "are"."""
    last = title.split()[-1].lower() if title.split() else ""
    return len(last) > 3 and last.endswith("s") and not last.endswith(("ss", "us", "is"))


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _currency(code: Any) -> str:
    return f" {currency_word(code)}" if code else ""


def _has_phrase(text: str, phrase: str) -> bool:
    return bool(re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text))


def _quoted_terms(corrections: list[dict[str, Any]]) -> list[str]:
    terms: list[str] = []
    for c in corrections:
        msg = f"{c.get('reason', '')} {c.get('message', '')}"
        for m in re.finditer(r"['\"“‘]([^'\"”’]{2,60})['\"”’]", msg):
            terms.append(m.group(1).lower())
    return terms


def _human_list(values: list[Any]) -> str:
    items = [_fmt_num(v) for v in values]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _attribute_sentence(subject: str, key: str, value: Any) -> str:
    parts = words(key)
    unit = ""
    if len(parts) > 1 and parts[-1] in _UNIT_SUFFIX:
        unit = _UNIT_SUFFIX[parts[-1]]
        parts = parts[:-1]
    label = " ".join(parts)
    label_stems = {stem(p) for p in parts}
    if isinstance(value, list):
        shown = _human_list(value)
        if "color" in label_stems:
            return f"{subject} comes in {shown}."
        if "size" in label_stems:
            return f"{subject} comes in sizes {shown}."
        return f"{subject} {label}: {shown}."
    if isinstance(value, bool):
        return f"{subject} is {label}." if value else f"{subject} is not {label}."
    shown = _fmt_num(value) + (f" {unit}" if unit and unit != "%" else unit)
    if "waterproof" in label_stems:
        return f"{subject} is waterproof, rated {shown}."
    return f"{subject} has a {label} of {shown}."


def decide(context: dict[str, Any]) -> dict[str, Any]:
    """One turn of the reference policy: the next action object for this context."""
    return _Decider(context).decide()


def react_text(action: dict[str, Any]) -> str:
    """An action in the ReAct format (Thought / Action / Action Input, or Final Answer)."""
    kind = action.get("action")
    if kind == "call_tool":
        return (f"Thought: I should look this up with {action['tool']}.\nAction: {action['tool']}\n"
                f"Action Input: {json.dumps(action.get('arguments') or {}, ensure_ascii=False, sort_keys=True)}")
    if kind == "reply":
        return f"Thought: I now know the final answer.\nFinal Answer: {action.get('text') or ''}"
    if kind == "no_reply":
        return f"Thought: {action.get('reason') or 'this comment should not be answered'}.\nFinal Answer: NO_REPLY"
    return "Thought: I cannot use skills here; I will answer directly.\nFinal Answer: NO_REPLY"


def respond(context: dict[str, Any]) -> str:
    """The model output for a context: one JSON action, or ReAct text for a ``"mode": "react"`` context
    (the ReAct baseline: no skills to load, tools only)."""
    action = decide(context)
    if context.get("mode") == "react":
        return react_text(action)
    return json.dumps(action, ensure_ascii=False)


def cache_clear() -> None:
    """Empty the caches of the policy and of the text functions it calls (for a benchmark's "new
    comment" runs; a change of the embedding setting needs none, the backend is part of those keys)."""
    from livehost.understanding import facts
    from livehost.understanding import normalize as norm

    for cached in (stem, _frozen_stems, choice.split_identifier, _any_of, _screened, _nearest_intent,
                   norm.normalize, norm.gloss, norm.expand_shorthand, facts.humanise_key, facts._cached_stems):
        cached.cache_clear()
