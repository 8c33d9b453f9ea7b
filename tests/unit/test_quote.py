"""Arithmetic a viewer asks for (livehost/understanding/quote.py) and the reference policy's use of it."""
from __future__ import annotations

import pytest

from livehost.understanding.quote import (
    Coupon,
    asks_after_coupon,
    best_coupon,
    derived_numbers,
    pack_count,
    per_unit_asked,
    quantities,
)


@pytest.mark.parametrize(("text", "counts"), [
    ("also 3 of them, total price?", [3]),
    ("how much for two?", [2]),
    ("I want 2 of the black ones", [2]),
    ("3 pcs price", [3]),
    ("两个空气炸锅+一个榨汁杯一共多少钱", [2, 1]),
    ("纸尿裤买两包多少钱", [2]),
    # not counts of items: a size, an age, a duration, shorthand for "for", a set's own name
    ("size 2 price?", []),
    ("my kid is 2 is that ok", []),
    ("ships in 2 days", []),
    ("hw much 4 this", []),
    ("我昨天买的四件套今天便宜了", []),
])
def test_quantities(text: str, counts: list[int]) -> None:
    assert quantities(text) == counts


def test_after_coupon_and_per_unit_questions() -> None:
    assert asks_after_coupon("how much after the coupon?") and asks_after_coupon("用券后到手多少")
    assert not asks_after_coupon("how much is it?")
    assert per_unit_asked("每日坚果一袋合多少钱") == (True, "bag")
    assert per_unit_asked("how much per bag") == (True, "bag")
    assert per_unit_asked("how much each?") == (True, None)
    assert per_unit_asked("how much is it?") == (False, None)
    assert per_unit_asked("一包多少卡") == (False, None)  # calories of one pack, not its price
    assert per_unit_asked("每包多少克") == (False, None)


def test_pack_count_reads_title_and_attributes_not_measures() -> None:
    # a per-bag weight and a total weight are measures, not the number of bags
    assert pack_count("Daily Nuts (30 bags)", {"bags": 30, "grams_per_bag": 25, "total_g": 750}, None) == (30, "bag")
    assert pack_count("Gel Pens 12支装", {}, "piece") == (12, "piece")
    assert pack_count("Cotton Tee 3-pack", {"pack_of": 3}, None) == (3, None)
    assert pack_count("Kettle 1.7L", {"capacity_l": 1.7, "power_w": 1800}, None) is None


def test_best_coupon_prefers_the_named_one_and_says_why_one_does_not_apply() -> None:
    coupons = [Coupon("A10", 10, 100), Coupon("B20", 20, 500)]
    assert best_coupon(600, coupons) == (Coupon("B20", 20, 500), None)
    assert best_coupon(600, coupons, "a10") == (Coupon("A10", 10, 100), None)
    assert best_coupon(200, coupons, "B20") == (None, Coupon("B20", 20, 500))
    assert best_coupon(50, coupons) == (None, Coupon("A10", 10, 100))


def test_derived_numbers_need_supported_operands_and_right_arithmetic() -> None:
    assert derived_numbers("2 × 159 = 318. With X: 318 - 15% = 270.3", {159.0, 15.0}) == {2.0, 318.0, 270.3}
    assert derived_numbers("89 ÷ 30 = 2.97 per bag", {89.0, 30.0}) == {30.0, 2.97}
    assert derived_numbers("2 × 159 = 320", {159.0}) == set()
    assert derived_numbers("2 × 158 = 316", {159.0}) == set()
    assert derived_numbers("100 × 159 = 15900", {159.0}) == set()  # 100 is no count of items


def _case_context(comment: str, **product: object) -> dict[str, object]:
    prod = {"link_id": 4, "title": "Travel mug", "price": 59.9, "currency": "CNY", "attributes": {}} | product
    return {"comments": [{"user_id": "u1", "text": comment}], "room": {"current_link": 4}, "product": prod,
            "tools": [], "skills": [], "rules": {}}


def test_reference_policy_says_a_total_and_a_per_unit_price_with_their_calculation() -> None:
    from livehost.policy.reference import _Decider

    facts = {"price": 59.9, "currency": "CNY", "title": "Travel mug", "attributes": {}}
    d = _Decider(_case_context("3 of them, total price?"))
    assert [s for s, _, _ in d.quote_sentences(facts)] == ["3 of them: 3 × 59.9 = 179.7 yuan."]
    nuts = {"price": 89, "currency": "CNY", "title": "Nuts (30 bags)", "attributes": {"bags": 30}}
    d = _Decider(_case_context("how much per bag?"))
    assert [s for s, _, _ in d.quote_sentences(nuts)] == ["That's 89 ÷ 30 = 2.97 yuan per bag."]
    d = _Decider(_case_context("how much is it?"))
    assert d.quote_sentences(facts) == []


def test_calculation_multiplies_before_it_adds() -> None:
    assert derived_numbers("All together: 329 × 2 + 89 = 747 yuan.", {329.0, 89.0}) == {2.0, 747.0}
    assert derived_numbers("329 × 2 + 89 = 59050", {329.0, 89.0}) == set()  # left to right would give this


def test_reference_policy_totals_several_products_named_in_one_question() -> None:
    from livehost.policy.reference import _Decider

    ctx = _case_context("two kettles + one mug, how much altogether?")
    ctx["room"] = {"current_link": 4, "lineup": [{"link_id": 2, "title": "Glass kettle 1.7L", "available": True},
                                                 {"link_id": 4, "title": "Travel mug", "available": True}]}
    d = _Decider(ctx)
    assert d.items == {2: 2, 4: 1} and d.links == [2, 4]


def test_second_item_rules_are_read_from_campaign_text() -> None:
    from livehost.understanding.quote import second_item_discount

    assert second_item_discount(["free shipping over 99", "buy 2, get 10% off the second item"]) == (
        "buy 2, get 10% off the second item", 0.1)
    assert second_item_discount(["第二件半价"])[1] == 0.5  # type: ignore[index]
    assert second_item_discount(["Second item at half price"])[1] == 0.5  # type: ignore[index]
    assert second_item_discount(["one coupon per order"]) is None


def test_reference_policy_applies_a_second_item_rule_to_a_total() -> None:
    from livehost.policy.reference import _Decider

    ctx = _case_context("2 of them, how much in total?")
    ctx["room"] = {"current_link": 4, "campaign": {"name": "Sale", "rules": ["buy 2, get 10% off the second item"]}}
    d = _Decider(ctx)
    facts = {"price": 29.9, "currency": "CNY", "title": "Gel pens", "attributes": {}}
    said = " ".join(s for s, _, _ in d.quote_sentences(facts))
    assert "29.9 - 10% = 26.91" in said and "29.9 + 26.91 = 56.81 yuan" in said
    assert derived_numbers(said, {29.9, 10.0}) >= {26.91, 56.81}
