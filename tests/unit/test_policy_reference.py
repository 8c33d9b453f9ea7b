"""The reference policy against the sample evaluation cases, simulated through a minimal agent loop
over the case's own catalog (faults included), under the shipped harness and a renamed one."""

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from livehost.harness.loader import from_dict, load
from livehost.harness.model import Harness
from livehost.policy.reference import decide
from livehost.policy.testing import build_context, run_loop

ROOT = Path(__file__).resolve().parents[2]
CASES = [json.loads(line) for line in (ROOT / "tests/data/sample_cases.jsonl").read_text().splitlines() if line]
NUM_RE = re.compile(r"\d+(?:\.\d+)?")


@pytest.fixture(scope="module")
def harness() -> Harness:
    return load(ROOT / "harness/default")


def catalog_numbers(case: dict[str, Any]) -> set[str]:
    blob = json.dumps({"catalog": case.get("catalog"), "room": case.get("room")})
    nums = set(NUM_RE.findall(blob))
    return nums | {n[:-2] for n in nums if n.endswith(".0")}


def check_expectations(case: dict[str, Any], responded: bool, reply: str | None) -> None:
    expect = case["expect"]
    if not expect.get("respond", True):
        assert not responded or reply is not None  # a refusal is allowed, checked below
    else:
        assert responded and reply, f"{case['id']}: no reply"
    text = (reply or "").lower()
    for group in expect.get("must_include") or []:
        assert any(alt.lower() in text for alt in group), f"{case['id']}: none of {group} in {reply!r}"
    for bad in expect.get("must_not_include") or []:
        assert bad.lower() not in text, f"{case['id']}: {bad!r} in {reply!r}"
    if expect.get("numbers_from_catalog_only"):
        allowed = catalog_numbers(case)
        for n in NUM_RE.findall(reply or ""):
            assert n in allowed, f"{case['id']}: number {n} not in catalog ({reply!r})"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_sample_case(harness, case):
    result = run_loop(decide, harness, case)
    check_expectations(case, result.responded, result.reply)
    assert len(result.reply or "") <= harness.rules.max_reply_chars
    # the correction case asks for a link the tools' schema does not admit: one correction, no repeat
    assert len(result.corrections) == (1 if case["id"] == "sample-correction-01" else 0), result.corrections
    # every tool call is distinct, or a single retry of a failed one
    keys = [json.dumps([c["name"], c["arguments"]], sort_keys=True) for c in result.tool_calls]
    assert all(keys.count(k) <= 2 for k in keys)
    if result.responded:
        reply_skills = {s.id for s in harness.skills if s.kind == "reply"}
        assert any(s in reply_skills for s in result.skills_loaded)


def test_price_trajectory_matches_the_report(harness):
    case = CASES[0]
    result = run_loop(decide, harness, case)
    kinds = [a["action"] for a in result.actions]
    assert kinds == ["call_tool", "load_skill", "reply"]
    assert result.tool_calls[0]["arguments"] == {"link_id": 3}
    assert result.reply == "The Alpine shell jacket on link 3 is 299 yuan."


def test_injection_gets_no_reply(harness):
    case = next(c for c in CASES if c["category"] == "injection")
    result = run_loop(decide, harness, case)
    assert not result.responded and result.actions[-1]["action"] == "no_reply"
    assert not result.tool_calls


def test_failed_tool_is_retried_at_most_once_and_not_invented(harness):
    case = next(c for c in CASES if c.get("faults"))
    result = run_loop(decide, harness, case)
    assert len(result.tool_calls) == 2 and not any(c["ok"] for c in result.tool_calls)
    assert "check" in (result.reply or "").lower()
    assert not NUM_RE.search(result.reply or "")


def test_permission_denied_is_not_retried(harness):
    case = copy.deepcopy(next(c for c in CASES if c.get("faults")))
    case["faults"] = {"inventory": "permission_denied"}
    result = run_loop(decide, harness, case)
    assert len(result.tool_calls) == 1
    assert "check" in (result.reply or "").lower()


def _with_comment(case: dict[str, Any], text: str) -> dict[str, Any]:
    out = copy.deepcopy(case)
    out["comments"] = [{"user_id": "u-1", "text": text, "offset_ms": 0}]
    return out


def _variants() -> list[tuple[str, dict[str, Any]]]:
    price = CASES[0]
    merge = next(c for c in CASES if c["category"] == "multi_intent")
    return [
        ("greeting", _with_comment(price, "hello everyone!")),
        ("off-topic", _with_comment(price, "what's the weather like today")),
        ("purchase", _with_comment(price, "I want to buy one, how do I order?")),
        ("coupon", _with_comment(merge, "any coupon?")),
        ("faq", _with_comment(price, "does it run small?")),
        ("stock+colors", _with_comment(merge, "how many left and what colors")),
        ("compliance", _with_comment(price, "is this a replica?")),
        ("abuse", _with_comment(price, "you are an idiot")),
    ]


@pytest.mark.parametrize("name, case", _variants(), ids=[n for n, _ in _variants()])
def test_more_categories(harness, name, case):
    result = run_loop(decide, harness, case)
    reply = (result.reply or "").lower()
    allowed = catalog_numbers(case)
    assert all(n in allowed for n in NUM_RE.findall(reply)), reply
    assert not result.corrections
    if name == "abuse":
        assert not result.responded
        return
    assert result.responded
    if name == "greeting":
        assert "welcome" in reply and "link 3" in reply and not result.tool_calls
    elif name == "purchase":
        assert "check out" in reply
    elif name == "coupon":
        assert "winter20" in reply and "10%" in reply
    elif name == "faq":
        assert "true to size" in reply
    elif name == "stock+colors":
        assert "12 left" in reply and "navy" in reply
    elif name == "compliance":
        assert "can't" in reply and "replica" not in reply and not result.tool_calls
    loaded = [harness.skill(s) for s in result.skills_loaded]
    assert loaded and all(s is not None and s.kind == "reply" for s in loaded)


def test_coupon_above_campaign_maximum_is_never_stated(harness):
    case = copy.deepcopy(next(c for c in CASES if c["category"] == "multi_intent"))
    case["catalog"][0]["coupons"] = [{"code": "HUGE50", "discount_pct": 50, "min_spend": 0}]
    result = run_loop(decide, harness, _with_comment(case, "any coupon?"))
    assert "huge50" not in (result.reply or "").lower() and "50" not in (result.reply or "")


def test_reply_length_and_banned_phrases_follow_the_rules(harness):
    data = harness.canonical()
    data["rules"]["max_reply_chars"] = 60
    data["rules"]["banned_phrases"] = ["grab it"]
    short = from_dict(data)
    case = next(c for c in CASES if c["category"] == "multi_intent")
    result = run_loop(decide, short, case)
    assert result.reply and len(result.reply) <= 60 and "grab it" not in result.reply.lower()


def test_correction_to_load_a_named_skill_is_obeyed(harness):
    ctx = build_context(harness, CASES[0])
    target = next(s.id for s in harness.skills if s.kind == "reply" and s.id != "x")
    ctx["transcript"] = [
        {"turn": 1, "kind": "tool_call", "name": None,
         "data": {"tool": harness.tools[0].name, "arguments": {"link_id": 3}}},
        {"turn": 1, "kind": "tool_result", "name": None, "data": {
            "call_id": "c1", "tool": harness.tools[0].name, "ok": True,
            "result": {"link_id": 3, "title": "Alpine shell jacket", "price": 299.0, "currency": "CNY"},
            "error_code": None, "error_message": None}},
        {"turn": 2, "kind": "model_output", "name": None, "data": {"action": "reply", "text": "x"}},
        {"turn": 2, "kind": "correction", "name": "h", "data": {
            "hook": "h", "reason": f"load {target} first", "message": f"Load the reply skill {target}"}},
    ]
    ctx["turn"] = 3
    assert decide(ctx) == {"action": "load_skill", "skill": target}


def test_factual_correction_drops_the_flagged_claim(harness):
    case = next(c for c in CASES if c["category"] == "multi_intent")
    result = run_loop(decide, harness, case)
    ctx = copy.deepcopy(result.context)
    ctx["transcript"].append({"turn": 9, "kind": "correction", "name": "f", "data": {
        "hook": "f", "reason": "unsupported claim 'winter20'", "message": "Only state facts the tool results show"}})
    action = decide(ctx)
    assert action["action"] == "reply"
    assert "winter20" not in action["text"].lower() and "navy" in action["text"]


def test_decide_is_deterministic_and_does_not_mutate(harness):
    ctx = build_context(harness, CASES[3])
    before = copy.deepcopy(ctx)
    assert decide(ctx) == decide(ctx)
    assert ctx == before


# ----------------------------------------------------------------------------------- renaming


def rename_everything(harness: Harness) -> tuple[Harness, dict[str, str]]:
    """Every skill id, tool name and tool argument name replaced by an opaque one."""
    data = copy.deepcopy(harness.canonical())
    mapping: dict[str, str] = {}
    for i, skill in enumerate(data["skills"]):
        mapping[skill["id"]] = f"sk{i:02d}q"
    for i, tool in enumerate(data["tools"]):
        mapping[tool["name"]] = f"fn{i:02d}z"
        props = tool["parameters"]["properties"]
        arg_map = {name: f"a{i}{j}" for j, name in enumerate(props)}
        tool["parameters"]["properties"] = {arg_map[k]: v for k, v in props.items()}
        tool["parameters"]["required"] = [arg_map[r] for r in tool["parameters"].get("required", [])]
        tool["binding"]["arguments"] = {op: arg_map[a] for op, a in tool["binding"]["arguments"].items()}
        tool["name"] = mapping[tool["name"]]
    for skill in data["skills"]:
        skill["id"] = mapping[skill["id"]]
        skill["tools"] = [mapping[t] for t in skill["tools"]]
        for old, new in mapping.items():
            skill["body"] = re.sub(rf"\b{re.escape(old)}\b", new, skill["body"])
    # reverse order too, so nothing can depend on list positions
    data["skills"].reverse()
    data["tools"].reverse()
    return from_dict(data), mapping


def _shape(result, back: dict[str, str]) -> list[tuple[str, str | None, list[Any]]]:
    out = []
    for a in result.actions:
        name = a.get("skill") or a.get("tool")
        args = sorted((a.get("arguments") or {}).values(), key=str)
        out.append((a["action"], back.get(name, name) if name else None, args))
    return out


ALL_CASES = CASES + [c for _, c in _variants()]


@pytest.mark.parametrize("case", ALL_CASES, ids=[f"{c['id']}-{i}" for i, c in enumerate(ALL_CASES)])
def test_renamed_harness_gives_equivalent_behaviour(harness, case):
    renamed, mapping = rename_everything(harness)
    back = {v: k for k, v in mapping.items()}
    original = run_loop(decide, harness, case)
    other = run_loop(decide, renamed, case)
    assert _shape(other, back) == _shape(original, back)
    assert other.reply == original.reply
    assert len(other.corrections) == len(original.corrections) == (case["id"] == "sample-correction-01")


def test_an_option_the_product_lacks_is_answered_with_the_options_it_has(harness):
    case = copy.deepcopy(next(c for c in CASES if c["category"] == "multi_intent"))
    case["catalog"][0]["attributes"]["sizes"] = ["S", "M", "L"]
    result = run_loop(decide, harness, _with_comment(case, "does it come in purple?"))
    reply = (result.reply or "").lower()
    assert "not in purple" in reply and "black, navy and red" in reply and "comes in purple" not in reply
    result = run_loop(decide, harness, _with_comment(case, "is it available in stock?"))
    assert "not in" not in (result.reply or "").lower()


def test_a_value_picks_the_product_and_a_sold_out_one_is_named(harness):
    case = copy.deepcopy(next(c for c in CASES if c["category"] == "multi_intent"))
    case["catalog"][0]["attributes"]["colors"] = ["grey"]
    case["catalog"].append({"link_id": 5, "sku": "X-5", "title": "Canvas tote", "price": 88.0, "currency": "CNY",
                            "stock": 0, "attributes": {"colors": ["red", "green"]}, "faq": []})
    result = run_loop(decide, harness, _with_comment(case, "how much is the red one?"))
    assert "88" in (result.reply or "") and "link 5" in (result.reply or "")
    result = run_loop(decide, harness, _with_comment(case, "is link 5 sold out?"))
    assert "link 5, the canvas tote, is sold out" in (result.reply or "").lower()


def _two_products() -> dict[str, Any]:
    case = copy.deepcopy(next(c for c in CASES if c["category"] == "multi_intent"))
    case["catalog"].append({"link_id": 5, "sku": "X-5", "title": "Hiking daypack", "price": 88.0, "currency": "CNY",
                            "stock": 7, "attributes": {"colors": ["red", "green"]}, "faq": []})
    return case


def test_merged_comments_each_keep_their_own_product(harness):
    case = _two_products()
    case["comments"] = [{"user_id": "u-1", "text": "this one price pls", "offset_ms": 0},
                        {"user_id": "u-1", "text": "price of link 5?", "offset_ms": 300}]
    reply = run_loop(decide, harness, case).reply or ""
    assert "299" in reply and "88" in reply


def test_a_product_named_by_meaning_is_found_in_the_lineup(harness):
    reply = run_loop(decide, harness, _with_comment(_two_products(), "how many backpack left?")).reply or ""
    assert "7 left" in reply and "don't have that product" not in reply


def test_a_code_shaped_token_is_a_coupon_question(harness):
    case = next(c for c in CASES if c["category"] == "multi_intent")
    reply = run_loop(decide, harness, _with_comment(case, "can I use ZAP50 on this?")).reply or ""
    assert "WINTER20" in reply
    reply = run_loop(decide, harness, _with_comment(case, "where is order LH20251128001?")).reply or ""
    assert "WINTER20" not in reply


def _three_questions(comments: list[tuple[str, str]]) -> dict[str, Any]:
    """Room-a with the jacket on screen (link 3) and two more links; one comment per (user, text)."""
    case = _two_products()
    case["catalog"][0]["attributes"]["thickness_mm"] = 4
    case["catalog"].append({"link_id": 6, "sku": "X-6", "title": "Glass teapot", "price": 45.0, "currency": "CNY",
                            "stock": 30, "attributes": {"capacity_ml": 900, "gift_box": True}, "faq": []})
    case["comments"] = [{"user_id": u, "text": t, "offset_ms": 100 * i} for i, (u, t) in enumerate(comments)]
    return case


def test_a_merged_request_answers_each_comment_about_its_own_product(harness):
    case = _three_questions([("u-1", "how thick is this one?"), ("u-1", "any left?"),
                             ("u-2", "what does link 6 cost?"), ("u-2", "does link 6 come with a gift box?")])
    result = run_loop(decide, harness, case)
    reply = result.reply or ""
    # the first viewer asked about the jacket on screen, the second about link 6: each answer is there,
    # and each names its product (the reply is about two)
    assert "4 mm" in reply and "12 left" in reply and "45" in reply and "gift box" in reply.lower()
    assert "Alpine shell jacket" in reply and "link 6" in reply
    # the jacket's stock was looked up for the jacket, not for link 6 (whose stock nobody asked)
    ops = [(harness.tool(c["name"]).binding.operation, list(c["arguments"].values())) for c in result.tool_calls]
    assert ("inventory.get", [3]) in ops and ("product.by_link", [6]) in ops
    assert ("inventory.get", [6]) not in ops


def test_it_in_a_merged_request_is_the_product_the_viewer_named(harness):
    # "it" follows the viewer's own earlier link; the other viewer's link does not capture it
    case = _three_questions([("u-1", "price of link 5?"), ("u-2", "price of link 6?"), ("u-2", "is it in stock?")])
    reply = run_loop(decide, harness, case).reply or ""
    assert "88" in reply and "45" in reply and "30 left" in reply and "7 left" not in reply


def test_a_reply_fits_the_limit_by_dropping_suggestions_before_answers(harness):
    case = _three_questions([("u-1", "is link 5 still in stock?"), ("u-1", "price of link 5?"),
                             ("u-2", "price of link 6?"), ("u-2", "how much does link 3 cost?")])
    case["catalog"][1]["stock"] = 0  # link 5 sold out: alternatives are offered only if there is room
    reply = run_loop(decide, harness, case).reply or ""
    assert len(reply) <= harness.rules.max_reply_chars
    assert "sold out" in reply and "88" in reply and "45" in reply and "299" in reply


def test_an_ability_adjective_is_found_by_its_verb(harness):
    # "folds flat" asks for the key "foldable": the stem of an -able word is its verb, so even the
    # lexical ranking alone (no embeddings) finds it
    from livehost.policy.reference import _STOP, stem
    from livehost.understanding.facts import attribute_facts, rank

    assert stem("foldable") == stem("folds") == "fold" and stem("washable") == stem("wash")
    assert stem("table") == "table" and stem("available") == "available"  # short words and synonyms kept
    facts = attribute_facts("It", {"foldable": True, "weight_g": 300, "colors": ["red", "blue"]})
    ranked = rank("does it fold flat?", facts, stem, _STOP, use_embeddings=False)
    assert ranked[0][1].key == "foldable" and ranked[0][0] > ranked[1][0]
    case = _three_questions([("u-1", "does it fold up flat for travel?")])
    case["catalog"][0]["attributes"]["foldable"] = True
    reply = (run_loop(decide, harness, case).reply or "").lower()
    assert "foldable" in reply and "not foldable" not in reply


def test_a_wish_for_a_sold_out_product_is_a_purchase(harness):
    case = _three_questions([("u-1", "I want link 5 please")])
    case["catalog"][1]["stock"] = 0
    reply = run_loop(decide, harness, case).reply or ""
    assert "sold out" in reply and "link 3" in reply.lower()  # the alternative still on sale


def test_an_option_the_product_has_is_confirmed(harness):
    reply = run_loop(decide, harness, _three_questions([("u-1", "can I get it in navy?")])).reply or ""
    assert "Yes! It comes in black, navy and red." in reply and "not in navy" not in reply


def test_an_attribute_the_data_lacks_is_not_listed_and_no_claim_is_made(harness):
    # "waterproof" is a claim that needs evidence: the reply says it is not listed, without the word
    reply = run_loop(decide, harness, _three_questions([("u-1", "is this one waterproof?")])).reply or ""
    assert "not listed" in reply and "waterproof" not in reply.lower()
    reply = run_loop(decide, harness, _three_questions([("u-1", "how heavy is this one?")])).reply or ""
    assert "weight is not listed" in reply


def test_a_promotion_code_retrieves_the_campaign_rule_about_coupons(harness):
    case = _three_questions([("u-1", "can I use WINTER20 together with NEWBIE5?")])
    case["room"]["campaign"]["rules"] = ["Free shipping over 199", "Only one coupon per order"]
    reply = run_loop(decide, harness, case).reply or ""
    assert "one coupon per order" in reply


def test_a_comment_that_is_only_a_link_number_names_that_link(harness):
    reply = run_loop(decide, harness, _three_questions([("u-1", "6"), ("u-1", "6!!")])).reply or ""
    assert "link 6" in reply and "45" in reply
    reply = run_loop(decide, harness, _three_questions([("u-1", "42")])).reply or ""
    assert "link 42" not in reply  # no such link: not taken for one


def test_the_other_product_of_the_same_kind_is_not_the_one_on_screen(harness):
    case = _three_questions([("u-1", "how much is the other jacket?")])
    case["catalog"].append({"link_id": 7, "sku": "X-7", "title": "Rain jackets", "price": 159.0, "currency": "CNY",
                            "stock": 3, "attributes": {}, "faq": []})
    reply = run_loop(decide, harness, case).reply or ""
    assert "159" in reply and "299" not in reply
    assert "The Rain jackets on link 7 are 159" in reply  # a plural title is said with "are"
    reply = run_loop(decide, harness, _with_comment(case, "how much is the jacket?")).reply or ""
    assert "299" in reply  # without "other", the jacket on screen


def _order_case(text: str, owner: str = "u-1", status: str = "delivered") -> dict[str, Any]:
    case = _three_questions([("u-1", text)])
    case["orders"] = [{"room_id": "room-a", "items": [], "order_id": "Q90210", "user_id": owner, "status": status,
                       "carrier": "Parcel Co", "eta": None}]
    return case


def test_an_order_of_another_viewer_is_not_found_and_never_described(harness):
    reply = run_loop(decide, harness, _order_case("status of order Q90210?", owner="u-2")).reply or ""
    assert "couldn't find that order" in reply and "Parcel Co" not in reply and "delivered" not in reply


def test_a_return_request_and_a_missing_delivery_get_the_after_sales_step(harness):
    reply = run_loop(decide, harness, _order_case("order Q90210 is too big, can I exchange it?")).reply or ""
    assert "delivered" in reply and "an exchange" in reply and "after-sales" in reply
    reply = run_loop(decide, harness, _order_case("order Q90210 says delivered, but it never came")).reply or ""
    assert "delivered" in reply and "file a claim" in reply
    reply = run_loop(decide, harness, _order_case("where is order Q90210?", status="shipped")).reply or ""
    assert "shipped" in reply and "claim" not in reply and "after-sales" not in reply


def test_the_value_one_picks_by_value_over_a_title_word_and_asks_when_several_have_it(harness):
    case = _three_questions([("u-1", "how much is the green one?")])
    case["catalog"].append({"link_id": 8, "sku": "X-8", "title": "Green tea tin", "price": 66.0, "currency": "CNY",
                            "stock": 5, "attributes": {"weight_g": 100}, "faq": []})
    reply = run_loop(decide, harness, case).reply or ""
    assert "88" in reply and "66" not in reply  # the daypack comes in green; the tea only has it in its name
    # black: the jacket on screen and another product have it, so the host asks which
    case["catalog"][1]["attributes"]["colors"] = ["black"]
    reply = run_loop(decide, harness, _with_comment(case, "how much is the black one?")).reply or ""
    assert reply.startswith("Which one do you mean") and "link 3" in reply and "link 5" in reply


def test_a_sentence_with_a_subject_pronoun_names_no_product(harness):
    reply = run_loop(decide, harness, _three_questions([("u-1", "barely 12 left? I'm in for 2")])).reply or ""
    assert "don't have that product" not in reply and "12 left" in reply
