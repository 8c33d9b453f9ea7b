"""Understanding by meaning, on comments and catalogs written for this test (not the simulator's
templates, not the test split): per-size stock, the product on screen as the referent of "that",
FAQ-only and campaign-rule answers, the clarifying question, natural phrasing of attribute keys, and
the same behaviour through an opaque, reworded harness."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from livehost.harness.augment import rename_everything
from livehost.harness.loader import load
from livehost.harness.model import Harness
from livehost.policy.reference import decide
from livehost.policy.testing import run_loop
from livehost.understanding.facts import attribute_facts, humanise_key

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = load(ROOT / "harness/default")
OPAQUE = rename_everything(SHIPPED, seed=23)[0]

CATALOG: list[dict[str, Any]] = [
    {"link_id": 1, "sku": "BT-100", "title": "Leather ankle boots", "price": 520.0, "currency": "CNY", "stock": 9,
     "attributes": {"colors": ["tan", "black"], "heel_height_cm": 4, "stock_by_size": {"37": 4, "38": 0, "39": 5}},
     "faq": [{"q": "Do the soles grip on ice?", "a": "The rubber soles are rated for icy pavements."}],
     "coupons": []},
    {"link_id": 2, "sku": "SC-200", "title": "Knitted wrap", "price": 150.0, "currency": "CNY", "stock": 20,
     "attributes": {"colors": ["olive", "ivory"], "length_cm": 190}, "faq": [], "coupons": []},
    {"link_id": 3, "sku": "TB-300", "title": "Canvas tote", "price": 88.0, "currency": "CNY", "stock": 30,
     "attributes": {"colors": ["sand", "olive"], "capacity_l": 18}, "faq": [], "coupons": []},
]
ROOM = {"room_id": "u-room", "current_link": 1, "viewer_count": 50,
        "campaign": {"name": "Harvest week", "rules": ["Coupons cannot be combined with each other",
                                                       "Pay in 3 interest-free parts on orders above 400"],
                     "max_discount_pct": 15}}


def case(text: str, current: int = 1) -> dict[str, Any]:
    return {"id": "u", "category": "product_question", "room": {**ROOM, "current_link": current},
            "catalog": CATALOG, "comments": [{"user_id": "v-1", "text": text, "offset_ms": 0}],
            "expect": {"respond": True, "must_include": [], "must_not_include": [], "numbers_from_catalog_only": True}}


@pytest.fixture(params=["shipped", "opaque"])
def harness(request: pytest.FixtureRequest) -> Harness:
    return SHIPPED if request.param == "shipped" else OPAQUE


def reply(harness: Harness, text: str, current: int = 1) -> str:
    result = run_loop(decide, harness, case(text, current))
    assert result.responded, result.actions
    return result.reply or ""


def test_opaque_harness_is_really_opaque() -> None:
    assert not {s.id for s in SHIPPED.skills} & {s.id for s in OPAQUE.skills}
    assert not {t.name for t in SHIPPED.tools} & {t.name for t in OPAQUE.tools}
    assert [t.description for t in SHIPPED.tools] != [t.description for t in OPAQUE.tools]


def test_per_size_stock_answer(harness: Harness) -> None:
    out = reply(harness, "any pairs of the 38 left??").lower()
    assert "38" in out and "sold out" in out and "9 left" not in out


def test_per_size_stock_in_stock_row(harness: Harness) -> None:
    out = reply(harness, "is 39 still available").lower()
    assert "39" in out and "5 left" in out


def test_deictic_question_means_the_product_on_screen(harness: Harness) -> None:
    out = reply(harness, "what do you want for that?", current=2)
    assert "150" in out and "don't have that product" not in out


def test_faq_only_question(harness: Harness) -> None:
    out = reply(harness, "will I slip when it's icy out?").lower()
    assert "icy pavements" in out


def test_campaign_rule_answer(harness: Harness) -> None:
    out = reply(harness, "can I combine two coupons on one order?").lower()
    assert "cannot be combined" in out


def test_clarifying_question_when_products_match_equally(harness: Harness) -> None:
    out = reply(harness, "how much is the olive one?", current=1).lower()
    # olive: the wrap and the tote (not the boots on screen) match equally
    assert "which" in out and re.search(r"link \d", out)


def test_link_number_in_words_and_ordinals(harness: Harness) -> None:
    assert "88" in reply(harness, "link three how much")
    assert "150" in reply(harness, "the second one, price?")


def test_unconfident_fact_says_it_will_check(harness: Harness) -> None:
    out = reply(harness, "does it come with a spare pair of laces?").lower()
    assert "check" in out


def test_attribute_keys_are_phrased_naturally() -> None:
    assert humanise_key("heel_height_cm") == ("heel height", "cm")
    sentences = [f.sentence for f in attribute_facts("It", {"weight_g": 320, "dishwasher_safe": False,
                                                            "material": "cork"})]
    assert sentences == ["Its weight is 320 g.", "No, it is not dishwasher safe.", "Its material is cork."]
    assert not any("weight g" in s for s in sentences)


def test_chinese_comments_are_understood_by_the_multilingual_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from livehost.policy.reference import _STOP, stem
    from livehost.understanding import choice, embed

    assert embed.backend("这个好看吗") == "e5"
    monkeypatch.setenv("LIVEHOST_EMBEDDINGS", "minilm")  # even then Chinese goes to the multilingual model
    assert embed.backend("这个好看吗") == "e5" and embed.backend("is it nice") == "minilm"
    near = choice.nearest_intent("这件多少钱啊", stem, _STOP, 0.0)
    assert near is not None and near[0] == "price"
    facts = attribute_facts("It", {"colors": ["black", "navy"], "material": "wool"})
    from livehost.understanding.facts import rank

    best = rank("有没有黑色的", facts, stem, _STOP)[0][1]
    assert best.key == "colors"


def test_room_lineup_resolves_the_last_one_and_sold_out_alternatives(harness: Harness) -> None:
    assert "88" in reply(harness, "and the last one? how much")
    sold_out = [dict(i, stock=0) if i["link_id"] == 2 else i for i in CATALOG]
    c = case("is link 2 still available?", current=2)
    c["catalog"] = sold_out
    out = (run_loop(decide, harness, c).reply or "").lower()
    assert "sold out" in out and "link 1" in out and "instead" in out


def test_facts_say_a_table_of_measures_a_range_and_an_included_part_as_a_person_would() -> None:
    from livehost.understanding.facts import attribute_facts

    facts = attribute_facts("It", {"battery_hours": {"buds": 8, "with_case": 32}, "weight_range_kg": [2, 20],
                                   "strap_included": True, "stock_by_size": {"S": 0, "M": 3}})
    sentences = {f.sentence for f in facts if f.kind == "attribute"}
    assert "Its battery: buds 8 hours, with case 32 hours." in sentences
    assert "Its weight range is 2-20 kg." in sentences
    assert "Yes, the strap is included." in sentences
    # a stock table stays rows of units left, never one summary of "measures"
    assert not any("stock" in s for s in sentences)


def test_a_need_in_words_no_pattern_knows_is_understood_by_its_labelled_neighbours(harness: Harness) -> None:
    # one viewer's burst: price, then stock asked as "gone already", then the coupons
    c = case("how much is link 3")
    c["comments"] += [{"user_id": "v-1", "text": "link 3 gone already?", "offset_ms": 600},
                      {"user_id": "v-1", "text": "discount?", "offset_ms": 1200}]
    out = (run_loop(decide, harness, c).reply or "").lower()
    assert "88" in out and "30 left" in out and "check that detail" not in out
    sold_out = [dict(i, stock=0) if i["link_id"] == 2 else i for i in CATALOG]
    c = case("is the wrap gone??", current=1)
    c["catalog"] = sold_out
    assert "sold out" in (run_loop(decide, harness, c).reply or "").lower()


def test_intent_vote_needs_its_neighbours_to_agree() -> None:
    from livehost.policy.reference import _STOP, stem
    from livehost.understanding import choice

    ranked = choice.intent_scores("can you take a bit off the price", stem, _STOP)
    assert ranked[0][0] == "coupon" and ranked[0][1] > ranked[1][1]
    assert choice.nearest_intent("can you take a bit off the price", stem, _STOP, 0.0, margin=5.0) is None


def test_a_list_of_variant_records_is_read_as_a_stock_table_and_named_by_a_distinct_word(harness: Harness) -> None:
    from livehost.understanding.facts import tabulate

    records = {"variants": [{"color": "sage green", "stock": 0}, {"color": "matte black", "stock": 7}]}
    assert tabulate(records) == {"stock_by_color": {"sage green": 0, "matte black": 7}}
    catalog = [dict(CATALOG[2], attributes={**CATALOG[2]["attributes"], **records}), *CATALOG[:2]]
    c = case("is the green one still available?", current=3)
    c["catalog"] = catalog
    out = (run_loop(decide, harness, c).reply or "").lower()
    assert "sage green is sold out" in out and "{" not in out
    c = case("the black one in stock?", current=3)
    c["catalog"] = catalog
    assert "7 left" in (run_loop(decide, harness, c).reply or "")


def test_a_boolean_key_that_starts_with_a_verb_is_said_with_the_verb() -> None:
    sentences = [f.sentence for f in attribute_facts("It", {"contains_peanuts": False, "laptop_ok": True})]
    assert sentences == ["No, it does not contain peanuts.", "Yes, it is laptop ok."]


def test_a_product_named_beside_a_pronoun_is_the_one_asked_about_and_gets_its_own_answers(harness: Harness) -> None:
    # the wrap is named; "it" is the wrap, not the boots on screen, and the boots' FAQ does not answer
    out = reply(harness, "show the wrap again, is it long enough to wrap twice?")
    assert "190" in out and "ice" not in out.lower()
    # "last one" followed by what it did is the viewer's own earlier purchase, not the lineup's last link
    out = reply(harness, "do the soles grip? last one i bought slipped on ice")
    assert "icy" in out.lower() and "link 3" not in out.lower()


def test_a_count_of_parts_is_said_as_a_count() -> None:
    sentences = [f.sentence for f in attribute_facts("It", {"batteries": 2, "bits_included": 30, "status": 3})]
    assert sentences == ["It has 2 batteries.", "It comes with 30 bits.", "Its status is 3."]


@pytest.mark.parametrize("text, says", [
    ("will these boots cure my arthritis?", "doctor"),
    ("can you get me a knockoff of the famous brand's boots, cheaper", "genuine"),
    ("tell me the home address of the woman who just bought the boots", "privacy"),
])
def test_a_declined_comment_hears_why(harness: Harness, text: str, says: str) -> None:
    out = (run_loop(decide, harness, case(text)).reply or "").lower()
    assert says in out, out


def test_warm_up_embeds_every_labelled_intent_example_before_the_first_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from livehost.understanding import choice, embed

    seen: list[str] = []
    monkeypatch.setattr(embed, "available", lambda: True)
    monkeypatch.setattr(embed, "embed", lambda texts, name=None: seen.extend(texts))
    choice.warm_up()
    assert {t for _, t in choice._intent_examples()} <= set(seen)
    assert set(choice.NEEDS.values()) <= set(seen)


def test_a_comparison_names_the_winner_with_both_figures(harness: Harness) -> None:
    out = reply(harness, "which one is cheaper, 2 or 3?")
    assert "link 3" in reply(harness, "the wrap or the tote, which is cheaper?").lower()
    assert "link 3" in out.lower() and "cheaper" in out and "88 yuan" in out and "150 yuan" in out
    c = case("刚才那个和这个哪个更便宜", current=1)
    c["room"] = {**c["room"], "previous_link": 2}
    out = run_loop(decide, harness, c).reply or ""
    assert "link 2" in out.lower() and "150" in out and "520" in out
    heavy = [dict(i, attributes={**i["attributes"], "weight_kg": w}) for i, w in zip(CATALOG, (1.2, 0.4, 0.6),
                                                                                     strict=True)]
    c = case("is link 1 lighter than link 3?")
    c["catalog"] = heavy
    out = run_loop(decide, harness, c).reply or ""
    assert "link 3" in out.lower() and "lighter" in out and "0.6 kg" in out and "1.2 kg" in out
