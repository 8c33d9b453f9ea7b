"""Arithmetic a viewer asks for: what several items come to, the price after a coupon, and what one
unit of a pack costs. Pure functions over the comment's text and the catalog's numbers; no word here
names a product, only how people count and pay ("two of them", "三瓶", "per bag", "到手")."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

EN_NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
              "ten": 10, "a couple of": 2, "a pair of": 2}
ZH_NUMBERS = {"一": 1, "两": 2, "二": 2, "俩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
              "十": 10}
# Chinese measure words: a number before one of them counts items ("两个", "三瓶"), not a size or money
ZH_CLASSIFIERS = {"个": "piece", "件": "piece", "只": "piece", "条": "piece", "把": "piece", "台": "piece",
                  "瓶": "bottle", "包": "pack", "袋": "bag", "盒": "box", "支": "piece", "套": "set",
                  "双": "pair", "张": "sheet", "份": "portion", "罐": "can", "箱": "box", "桶": "tub",
                  "片": "piece", "颗": "piece", "粒": "piece"}
# the most a viewer is taken to order in one go: a bigger number is a size, a year or a weight
MAX_QUANTITY = 50

_NUM = r"\d{1,2}|" + "|".join(sorted(EN_NUMBERS, key=len, reverse=True))
_ZH_NUM = "[" + "".join(ZH_NUMBERS) + r"]|\d{1,2}"
# "四件套" (a four-piece set) and "12支装" (a pack of 12) name a product, not how many the viewer buys
_ZH_QTY_RE = re.compile(rf"({_ZH_NUM})\s*([{''.join(ZH_CLASSIFIERS)}])(?![装套])")
_ZH_BUY_RE = re.compile(rf"(?:买|拍|来|要|下单|入|拿)\s*({_ZH_NUM})(?![\d.%])")
_EN_FOR_RE = re.compile(rf"\bfor\s+({_NUM})\s*(?:[?!.,]|$)")
# "3 of them", "two bottles", "buy 2", "x3": a count of items. A number before a unit of measure,
# money or time ("2 kg", "5 days") is not one, nor a number that names a link or a size.
_NOT_COUNTED = {"ml", "l", "g", "kg", "cm", "mm", "m", "inch", "inches", "oz", "lb", "lbs", "yuan", "rmb",
                "dollars", "usd", "cny", "percent", "pct", "days", "day", "weeks", "week", "months", "month",
                "years", "year", "hours", "hour", "minutes", "mins", "times", "stars", "people", "kids",
                "w", "v", "mah", "gb", "tb", "pm", "am", "and", "or", "more", "less", "left", "in", "this", "is", "was",
                "has", "does", "yes", "his", "its", "pls", "plus", "thanks", "thx", "yrs", "mos", "secs", "hrs"}
_EN_QTY_RE = re.compile(rf"(?<![\w#.])(?<!link )(?<!size )(?<!no\. )(?<!number )(?<!item )"
                        rf"({_NUM})\s+(?:of\s+)?([a-z]+)")
_EN_BUY_RE = re.compile(rf"\b(?:buy|buying|get|getting|take|taking|order|ordering|want|need|grab)\s+({_NUM})\b"
                        r"(?!\s*(?:%|[.,]\d))")
_X_RE = re.compile(r"(?<![\w.])(?:x\s?(\d{1,2})|(\d{1,2})\s?x)(?![\w.])")

# "after the coupon", "with the code", "final price", "用券后", "到手": the price to pay once a coupon applies
AFTER_COUPON_RE = re.compile(
    r"\b(?:after|with|using|use|apply(?:ing)?)\s+(?:the\s+|a\s+|this\s+|that\s+|your\s+)?"
    r"(?:coupon|code|voucher|discount|promo)s?\b|\bfinal price\b|\bnet price\b|\bi(?:'d| would) pay\b"
    r"|\b(?:what|how much)\b[^?]*\b(?:do|would|will|should) i (?:actually |really |end up )?pay\b"
    r"|券后|用券|用了券|用上券|到手|叠券|减完|折后|优惠后")
# "per bag", "each", "a piece", "单价", "一袋合", "每支": the price of one unit of a pack
_PER_EN_RE = re.compile(r"\b(?:per|each|a|one|every|single)\s+([a-z]+)\b"
                        r"|\bhow much (?:is |are |for )?(?:it |they )?each\b|\bunit price\b|\beach\s*\?")
# ... and not "一包多少卡 / 多少克": a measure of one unit (calories, grams), not its price
_PER_ZH_RE = re.compile(rf"(?:[一每单]|平均)\s*([{''.join(ZH_CLASSIFIERS)}])\s*(?:合|算|是|多少|几|价|要)"
                        r"(?!\s*(?:卡|大卡|千卡|克|毫升|ml|g|kcal|cal|热量|片|粒|根))|单价|平均")
# words of a count in a title or an attribute key ("(30 bags)", "3-pack", "pack_of", "12支装")
_COUNT_WORDS = {"pack", "pc", "pcs", "piece", "pieces", "count", "ct", "bag", "bags", "sachet", "sachets",
                "pod", "pods", "bottle", "bottles", "can", "cans", "roll", "rolls", "sheet", "sheets", "pair",
                "pairs", "set", "sets", "box", "boxes", "bar", "bars", "stick", "sticks", "tablet", "tablets",
                "capsule", "capsules", "serving", "servings", "packs", "pack_of", "quantity", "qty", "units"}
# units things are counted in ("2 jars", "3 packs"): the count words and containers; a counted unit names
# no product
COUNTED_UNITS = frozenset(_COUNT_WORDS | {"jar", "jars", "tube", "tubes", "carton", "cartons", "case", "cases",
                                          "tin", "tins", "bowl", "bowls", "cup", "cups", "item", "items", "unit"})


def _as_int(token: str) -> int | None:
    token = token.strip().lower()
    if token.isdigit():
        return int(token)
    return EN_NUMBERS.get(token) or ZH_NUMBERS.get(token)


def quantities(text: str) -> list[int]:
    """Counts of items the comment asks about, in order ("两个 … 一个 …" → 2, 1)."""
    low = text.lower()
    found: dict[int, int] = {}
    for m in _ZH_QTY_RE.finditer(text):
        n = _as_int(m.group(1))
        if n:
            found[m.start()] = n
    for m in _ZH_BUY_RE.finditer(text):
        n = _as_int(m.group(1))
        if n and not any(abs(s - m.start(1)) <= 1 for s in found):
            found[m.start(1)] = n
    for m in _EN_QTY_RE.finditer(low):
        # "3 of them", "two bottles": counted things are plural; "4 this" is shorthand for "for this"
        plural = m.group(0).split()[1] == "of" or m.group(2).endswith("s")
        if not plural or m.group(2) in _NOT_COUNTED:
            continue
        n = _as_int(m.group(1))
        if n:
            found[m.start()] = n
    for m in _EN_BUY_RE.finditer(low):
        n = _as_int(m.group(1))
        if n and m.start(1) not in found:
            found[m.start(1)] = n
    for m in _EN_FOR_RE.finditer(low):  # "how much for two?"
        n = _as_int(m.group(1))
        if n and m.start(1) not in found:
            found[m.start(1)] = n
    for m in _X_RE.finditer(low):
        n = int(m.group(1) or m.group(2))
        found.setdefault(m.start(), n)
    return [n for _, n in sorted(found.items()) if 0 < n <= MAX_QUANTITY]


# the viewer asks what their items come to ("how much for 3", "total?", "一共多少"), not for a discount
# ("half price and I'll buy two")
_TOTAL_ASK_RE = re.compile(r"\bhow much\b|\btotals?\b|\bcosts?\b|\bprice\s*[?？]|\baltogether\b|\bin all\b"
                           r"|多少|一共|总共|合计|共计|几块|几钱")


def asks_total(text: str) -> bool:
    return _TOTAL_ASK_RE.search(text.lower()) is not None


# the items of one question ("the pan + the kettle", "两个空气炸锅和一个榨汁杯")
ITEM_SPLIT_RE = re.compile(r"\s*(?:\+|&|\band\b|\bplus\b|\bwith\b|\bvs\.?|\bversus\b|\bor\b"
                           r"|和|加上|加|跟|还有|以及|,|，|、)\s*")


def item_segments(text: str) -> list[str]:
    return [s for s in ITEM_SPLIT_RE.split(text) if s and s.strip()]


def asks_after_coupon(text: str) -> bool:
    return AFTER_COUPON_RE.search(text.lower()) is not None


def per_unit_asked(text: str) -> tuple[bool, str | None]:
    """(the viewer asks what one unit costs, the unit they name in English if any)."""
    low = text.lower()
    m = _PER_ZH_RE.search(text)
    if m:
        return True, ZH_CLASSIFIERS.get(m.group(1) or "")
    for m in _PER_EN_RE.finditer(low):
        unit = m.group(1)
        if unit is None:
            return True, None
        if not m.group(0).startswith("per") and not asks_total(low):
            continue  # "buying one set for my mom" counts sets; "how much is one set" asks a unit price
        if unit in _COUNT_WORDS or unit + "s" in _COUNT_WORDS:
            return True, _singular(unit)
        if m.group(0).startswith("per") and unit in ("one", "item", "unit"):
            return True, None
        if m.group(0).startswith("per") and unit not in _NOT_COUNTED:
            return True, _singular(unit)  # "per bowl": whatever the pack counts
    return False, None


def _singular(word: str) -> str:
    return word[:-2] if word.endswith("es") and word[:-2] in _COUNT_WORDS else word.rstrip("s")


def pack_count(title: str, attributes: dict[str, Any], unit: str | None) -> tuple[int, str | None] | None:
    """How many units one listing holds, and what the units are called, from the title ("(30 bags)",
    "3-pack", "12支装") or an attribute ("bags": 30, "pack_of": 3). ``unit`` prefers the viewer's word."""
    candidates: list[tuple[int, str | None]] = []
    for key, value in attributes.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 10000:
            continue
        parts = [p for p in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", str(key).lower()) if p]
        # "bags": 30 counts; "grams_per_bag": 25 and "total_g": 750 measure
        # a key that is the viewer's own unit ("bowls": 12 for "per bowl") counts too
        said = unit is not None and len(parts) == 1 and _singular(parts[0]) == _singular(unit)
        measures = any(p in _NOT_COUNTED or p in ("per", "gram", "grams", "total", "size", "weight") for p in parts)
        if measures or not parts or not (said or any(p in _COUNT_WORDS for p in parts)):
            continue
        generic = ("pack_of", "quantity", "qty", "units", "count", "ct", "pack", "packs")
        word = _singular(parts[0]) if said else next(
            (_singular(p) for p in parts if p in _COUNT_WORDS and p not in generic), None)
        candidates.append((value, word))
    for m in re.finditer(r"(\d{1,5})\s*-?\s*([a-z]+)", title.lower()):
        said = unit is not None and _singular(m.group(2)) == _singular(unit)
        if (m.group(2) in _COUNT_WORDS or said) and 2 <= int(m.group(1)) <= 10000:
            word = _singular(m.group(2))
            candidates.append((int(m.group(1)), None if word in ("pack", "pc", "ct", "count") else word))
    for m in re.finditer(rf"(\d{{1,5}})\s*([{''.join(ZH_CLASSIFIERS)}])装", title):
        candidates.append((int(m.group(1)), ZH_CLASSIFIERS[m.group(2)]))
    if not candidates:
        return None
    if unit:
        u = _singular(unit)
        chosen = [c for c in candidates if c[1] == u]
        if chosen:
            return chosen[0]
    counts = {c[0] for c in candidates}
    if len(counts) > 1:
        return None  # two different counts and no word to choose: not guessed
    return candidates[0]


# a campaign rule that discounts the second item ("second item half price", "buy 2, get 10% off the second
# item", "第二件半价", "第二件8折")
_SECOND_ITEM_RE = re.compile(
    r"(?:second|2nd)\s+(?:item|one|piece|unit)?[^.;,]*?(half[- ]price|(\d{1,2})\s*%\s*off)"
    r"|(\d{1,2})\s*%\s*off\s+(?:the\s+)?(?:second|2nd)\b"
    r"|第二件\s*(半价|(\d)\s*折)", re.IGNORECASE)


def second_item_discount(rules: list[str]) -> tuple[str, float] | None:
    """(the rule, the share taken off the second item: 0.5 for half price) of a campaign's rules."""
    for rule in rules:
        m = _SECOND_ITEM_RE.search(rule)
        if not m:
            continue
        if m.group(1):
            return rule, 0.5 if "half" in m.group(1).lower() else int(m.group(2)) / 100
        if m.group(3):
            return rule, int(m.group(3)) / 100
        if m.group(4):
            return rule, 0.5 if m.group(4) == "半价" else 1 - int(m.group(5)) / 10
    return None


def money(value: float) -> str:
    rounded = round(value + 1e-9, 2)
    return str(int(rounded)) if float(rounded).is_integer() else f"{rounded:.2f}".rstrip("0")


@dataclass(frozen=True)
class Coupon:
    code: str
    pct: float
    min_spend: float


def best_coupon(subtotal: float, coupons: list[Coupon], named: str | None = None) -> tuple[Coupon | None,
                                                                                            Coupon | None]:
    """(the coupon that applies to ``subtotal`` — the one named if it applies, else the largest saving;
    the named or cheapest-threshold coupon that does not apply, to say why)."""
    if named:
        wanted = [c for c in coupons if c.code.upper() == named.upper()]
        if wanted:
            c = wanted[0]
            return (c, None) if subtotal >= c.min_spend else (None, c)
    usable = [c for c in coupons if subtotal >= c.min_spend]
    if usable:
        return max(usable, key=lambda c: subtotal * c.pct), None
    return None, (min(coupons, key=lambda c: c.min_spend) if coupons else None)


# A calculation a reply shows ("2 × 159 = 318", "599 - 10% = 539.1", "89 ÷ 30 = 2.97"): its result is a
# fact when its operands are facts (or a count of items) and the arithmetic is right, so a checker of
# grounded numbers can accept it without trusting the writer.
_N = r"\d[\d,]*(?:\.\d+)?"
CALC_RE = re.compile(rf"({_N})((?:\s*[×x*÷/+\-−]\s*{_N}%?)+)\s*[=≈]\s*({_N})")
_STEP_RE = re.compile(rf"([×x*÷/+\-−])\s*({_N})(%?)")
# the rounding a spoken price allows (2 decimals)
TOLERANCE = 0.006


def _f(raw: str) -> float:
    return float(raw.replace(",", ""))


def calculation(a: float, steps: list[tuple[str, float, bool]]) -> float | None:
    """× and ÷ before + and −, as written arithmetic reads; "- 10%" takes ten percent off what comes
    before it."""
    total, term = 0.0, a
    for op, b, pct in steps:
        if op in "×x*":
            term = term * (b / 100 if pct else b)
        elif op in "÷/":
            if b == 0:
                return None
            term = term / b
        elif pct:
            total += term
            total, term = total * (1 + b / 100 if op == "+" else 1 - b / 100), 0.0
        else:
            total, term = total + term, (b if op == "+" else -b)
    return total + term


def derived_numbers(text: str, supported: set[float]) -> set[float]:
    """Numbers of ``text`` that its correct calculations support: each result whose operands are in
    ``supported`` (or are counts of items), and those counts. A result can feed a later calculation."""
    known = set(supported)
    out: set[float] = set()
    for m in CALC_RE.finditer(text):
        a = _f(m.group(1))
        steps = [(op, _f(num), bool(pct)) for op, num, pct in _STEP_RE.findall(m.group(2))]
        operands = [(a, False)] + [(b, pct) for _, b, pct in steps]
        counts = {v for v, pct in operands if not pct and v.is_integer() and 0 < v <= MAX_QUANTITY}
        if not all(any(abs(v - k) < 1e-9 for k in known) or v in counts for v, _ in operands):
            continue
        value = calculation(a, steps)
        result = _f(m.group(3))
        if value is None or abs(value - result) > TOLERANCE:
            continue
        out |= counts | {result}
        known.add(result)
    return out
