"""The deterministic judge checks a stock claim against the variant its sentence names (per-variant
stock tables in ``attributes``), and against the product's total stock otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from livehost.eval.judge import DeterministicJudge


def case(stock: int, attributes: dict[str, Any]) -> dict[str, Any]:
    """One inventory case in the eval/CASES.md format around a single product on link 2."""
    return {
        "id": "variant-stock",
        "category": "inventory",
        "room": {"room_id": "room-v", "current_link": 2, "viewer_count": 100},
        "catalog": [{"link_id": 2, "sku": "SKT-0202", "title": "Pleated midi skirt", "price": 129.0,
                     "currency": "CNY", "stock": stock, "attributes": attributes, "faq": []}],
        "comments": [{"user_id": "u-1", "text": "which sizes are left?", "offset_ms": 0}],
        "expect": {"respond": True, "must_include": [], "must_not_include": [], "numbers_from_catalog_only": True},
    }


# As in real catalogs, a size list sits beside the table (it is what makes "25" a number of the data).
SIZES_25_26 = case(21, {"sizes": ["25", "26"], "stock_by_size": {"25": 0, "26": 5}})
SIZES_XS_L = case(18, {"sizes": ["XS", "S", "M", "L"], "stock_by_size": {"XS": 5, "S": 0, "M": 12, "L": 1}})
COLORS = case(18, {"stock_by_color": {"teal": 3, "orange": 0}})
NO_TABLE = case(5, {"colors": ["black"]})


@pytest.mark.parametrize(("data", "reply", "accuracy"), [
    (SIZES_25_26, "Sorry, size 25 is sold out right now.", 1),
    (SIZES_25_26, "Size 26 is sold out, sorry!", 0),
    (SIZES_25_26, "Good news, size 25 is in stock!", 0),
    (SIZES_25_26, "Size 26 is in stock; size 25 is sold out.", 1),
    (SIZES_XS_L, "Size XS is in stock, 5 left. Size L is in stock, 1 left.", 1),
    (SIZES_XS_L, "Size XS is in stock, 1 left.", 0),
    (SIZES_XS_L, "18 left in total, grab one!", 1),
    (SIZES_XS_L, "Only 7 left, grab one!", 0),
    (SIZES_XS_L, "Only 5 left, grab one!", 0),  # 5 is XS's stock, but no size is named
    (SIZES_XS_L, "It's sold out in S.", 1),
    (SIZES_XS_L, "It's sold out, sorry!", 0),  # "it's" names no size "S": the total (18) decides
    (COLORS, "3 left in teal!", 1),
    (COLORS, "The teal one is available now, the orange one is sold out.", 1),
    (COLORS, "The orange one is available now!", 0),
    (NO_TABLE, "Sorry, link 2 is sold out.", 0),
    (NO_TABLE, "Link 2 is in stock, 5 left!", 1),
    (NO_TABLE, "Link 2 is in stock, 4 left!", 0),
])
def test_stock_claims_against_variant_or_total(data: dict[str, Any], reply: str, accuracy: int) -> None:
    verdict = DeterministicJudge().score(data, {"id": data["id"], "responded": True, "reply": reply})
    assert verdict.accuracy == accuracy, verdict.accuracy_reason
    assert ("contradicted_stock" in verdict.codes) == (accuracy == 0), verdict.codes


def test_variant_reason_names_the_variant() -> None:
    verdict = DeterministicJudge().score(SIZES_25_26, {"id": "v", "responded": True, "reply": "Size 26 is sold out"})
    assert "'26' on link 2 has 5" in verdict.accuracy_reason


def test_a_count_inside_a_product_title_is_not_a_stock_claim() -> None:
    case = {"id": "t", "category": "price", "room": {"room_id": "r", "current_link": 1},
            "catalog": [{"link_id": 1, "sku": "S", "title": "Sheet mask (10 pcs)", "price": 99.0,
                         "currency": "CNY", "stock": 140, "attributes": {}, "faq": []}],
            "comments": [{"user_id": "u", "text": "price?", "offset_ms": 0}],
            "expect": {"respond": True, "numbers_from_catalog_only": True}}
    judge = DeterministicJudge()
    ok = judge.score(case, {"id": "t", "responded": True, "reply": "The Sheet mask (10 pcs) is 99 yuan."})
    assert ok.accuracy == 1, ok.accuracy_reason
    bad = judge.score(case, {"id": "t", "responded": True, "reply": "The Sheet mask is 99 yuan, 10 pcs left."})
    assert bad.accuracy == 0 and "contradicted_stock" in bad.codes
