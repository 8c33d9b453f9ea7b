"""Comparisons a viewer asks for ("which one is lighter, 1 or 2?", "刚才那双和这双哪个更轻"): the
measure a comparative word is about, and which of two products wins on it.

The comparative words are English and Chinese grammar, mapped to the measures they compare (weight,
price, size, length, …) and to the direction that wins; the measures are found in each product's own
data by the words and units of its attribute keys, so no product or key of any catalog is named here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from livehost.understanding.facts import currency_word, fmt, humanise_key


@dataclass(frozen=True)
class Measure:
    word: str  # how the answer says the winner is ("lighter")
    labels: tuple[str, ...]  # words of an attribute key that hold the measure ("weight"); "price" is the price
    units: tuple[str, ...]  # units that hold it ("g", "kg")
    least_wins: bool


_WEIGHT = (("weight",), ("g", "kg"))
_SIZE = (("capacity", "size", "volume"), ("L", "ml"))
_LENGTH = (("length",), ("cm", "mm", "m"))
_COMPARATIVES: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {
    "lighter": (*_WEIGHT, True), "heavier": (*_WEIGHT, False),
    "cheaper": (("price",), (), True), "pricier": (("price",), (), False),
    "bigger": (*_SIZE, False), "larger": (*_SIZE, False), "smaller": (*_SIZE, True),
    "longer": (*_LENGTH, False), "shorter": (*_LENGTH, True),
    "thicker": (("thickness",), ("mm", "cm"), False), "thinner": (("thickness",), ("mm", "cm"), True),
    "quieter": (("noise",), ("dB",), True), "louder": (("noise",), ("dB",), False),
    "brighter": (("lumens", "brightness"), ("lumens",), False),
}
_ZH = {"轻": "lighter", "重": "heavier", "便宜": "cheaper", "贵": "pricier", "大": "bigger", "小": "smaller",
       "长": "longer", "短": "shorter", "厚": "thicker", "薄": "thinner", "安静": "quieter", "亮": "brighter"}
_EN_RE = re.compile(r"\b(" + "|".join(_COMPARATIVES) + r"|more expensive|less expensive)\b")
# a comparison is asked, not stated: "which", "or", "vs", "than", or Chinese 哪个 / 还是 / 比
_ASKS_RE = re.compile(r"\b(which|what|who|or|vs\.?|versus|than)\b|哪|还是|比")
_ZH_RE = re.compile(r"哪(?:个|一个|款|双|件)?(?:更|比较)?(" + "|".join(sorted(_ZH, key=len, reverse=True)) + ")")
_BASE = {"kg": 1000.0, "g": 1.0, "L": 1000.0, "ml": 1.0, "m": 100.0, "cm": 1.0, "mm": 0.1}


def asked(text: str) -> Measure | None:
    """The measure a comment asks to compare two products on, or None."""
    low = text.lower()
    word = None
    if (m := _ZH_RE.search(text)) is not None:
        word = _ZH[m.group(1)]
    elif (m := _EN_RE.search(low)) is not None and _ASKS_RE.search(low):
        word = {"more expensive": "pricier", "less expensive": "cheaper"}.get(m.group(1), m.group(1))
    if word is None:
        return None
    labels, units, least = _COMPARATIVES[word]
    return Measure(word if word != "pricier" else "more expensive", labels, units, least)


def value(measure: Measure, facts: dict[str, Any]) -> tuple[float, str] | None:
    """(comparable number, how it is said) of the measure in a product's data."""
    if measure.labels == ("price",):
        price = facts.get("price")
        said = f"{fmt(price)} {currency_word(facts.get('currency') or 'CNY')}"
        return (float(price), said) if isinstance(price, int | float) else None
    numeric = [(humanise_key(str(k)), v) for k, v in (facts.get("attributes") or {}).items()
               if isinstance(v, int | float) and not isinstance(v, bool)]
    # a key that names the measure ("weight_g") first, then one in a unit only that measure has ("net_kg")
    for named in (True, False):
        for (label, unit), v in numeric:
            if (set(label.split()) & set(measure.labels)) if named else bool(unit and unit in measure.units):
                return float(v) * _BASE.get(unit, 1.0), f"{fmt(v)} {unit}".strip()
    return None


def answer(measure: Measure, products: list[tuple[int, str, dict[str, Any]]]) -> str | None:
    """The sentence that says which of two products (link, title, facts) wins, with both figures."""
    rows = [(link, title, value(measure, facts)) for link, title, facts in products[:2]]
    if len(rows) < 2 or any(v is None for _, _, v in rows):
        return None
    (la, ta, va), (lb, tb, vb) = rows
    assert va is not None and vb is not None
    if va[0] == vb[0]:
        return f"Link {la}, the {ta}, and link {lb}, the {tb}, are the same there: {va[1]} each."
    a_wins = (va[0] < vb[0]) == measure.least_wins
    (lw, tw, vw), (ll, _, vl) = (rows[0], rows[1]) if a_wins else (rows[1], rows[0])
    assert vw is not None and vl is not None
    return f"Link {lw}, the {tw}, is {measure.word}: {vw[1]}, against {vl[1]} for link {ll}."
