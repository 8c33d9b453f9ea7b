"""The reference policy when a comment names a product that is not the current link (demo bug: in a
room showing a mug, "does the frying pan work on induction?" was answered about the mug): it finds
the link with a search-type tool (chosen by description) and then queries that link."""

from __future__ import annotations

import json
from typing import Any

import pytest

from livehost.config import REPO_ROOT
from livehost.harness.augment import rename_everything
from livehost.harness.loader import load
from livehost.harness.model import Harness
from livehost.policy.reference import decide
from livehost.policy.testing import run_loop

HARNESS = load(REPO_ROOT / "harness" / "default")
ROOMS = {r["room_id"]: r for r in json.loads((REPO_ROOT / "infra/seed/demo_catalog.json").read_text())["rooms"]}


def case(text: str, room_id: str = "room-b", current_link: int | None = None) -> dict[str, Any]:
    room = ROOMS[room_id]
    return {"id": "t", "room": {"room_id": room_id, "current_link": current_link or room["current_link"],
                                "viewer_count": 10, "campaign": room.get("campaign")},
            "catalog": room["catalog"], "comments": [{"user_id": "u-1", "text": text, "offset_ms": 0}]}


def operation(harness: Harness, tool: str) -> str:
    t = harness.tool(tool)
    assert t is not None
    return t.binding.operation


@pytest.fixture(params=[0, 1], ids=["shipped", "renamed"])
def harness(request: pytest.FixtureRequest) -> Harness:
    return HARNESS if request.param == 0 else rename_everything(HARNESS, seed=11)[0]


def calls(harness: Harness, result: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(operation(harness, c["name"]), list(c["arguments"].values())) for c in result.tool_calls]


def test_named_product_with_a_yes_no_attribute(harness: Harness) -> None:
    result = run_loop(decide, harness, case("does the frying pan work on induction?"))
    ops = calls(harness, result)
    assert ops[0][0] == "product.search" and "pan" in ops[0][1][0]
    assert ("product.by_link", [4]) in ops
    reply = (result.reply or "").lower()
    assert "frying pan" in reply and "induction" in reply and "yes" in reply
    assert "mug" not in reply


def test_named_product_stock(harness: Harness) -> None:
    result = run_loop(decide, harness, case("how many kettles are left?"))
    ops = calls(harness, result)
    assert ops[0][0] == "product.search"
    assert ("inventory.get", [2]) in ops and ("inventory.get", [1]) not in ops
    reply = result.reply or ""
    assert "58" in reply and "kettle" in reply.lower() and "sold out" not in reply.lower()


def test_named_product_coupon(harness: Harness) -> None:
    result = run_loop(decide, harness, case("any coupon for the kettle?"))
    assert ("coupon.list", [2]) in calls(harness, result)


def test_unknown_product_is_not_answered_with_the_current_one(harness: Harness) -> None:
    result = run_loop(decide, harness, case("does the toaster have a timer?"))
    ops = calls(harness, result)
    assert [o for o, _ in ops] == ["product.search"]
    assert "don't have that product" in (result.reply or "")


@pytest.mark.parametrize("text", ["is the mug still in stock?", "how much is the kettle on link 2?",
                                  "love this stream", "still in stock?", "hi everyone, first time here!"])
def test_no_search_when_the_comment_is_about_the_current_link_or_has_a_number(harness: Harness, text: str) -> None:
    result = run_loop(decide, harness, case(text))
    assert "product.search" not in [o for o, _ in calls(harness, result)]


def test_no_search_tool_in_the_harness_falls_back_to_the_current_link() -> None:
    data = HARNESS.canonical()
    data["tools"] = [t for t in data["tools"] if t["binding"]["operation"] != "product.search"]
    for skill in data["skills"]:
        skill["tools"] = [n for n in skill["tools"] if any(t["name"] == n for t in data["tools"])]
    harness = Harness.model_validate(data)
    result = run_loop(decide, harness, case("how many kettles are left?"))
    assert result.responded and all(operation(harness, c["name"]) != "product.search" for c in result.tool_calls)


def test_the_product_on_screen_named_by_its_title_needs_no_search(harness: Harness) -> None:
    """Demo regression: in a room showing link 2 (hiking boots), "how many pairs of boots are left?"
    searched for "pairs" and answered that the product could not be found."""
    result = run_loop(decide, harness, case("how many pairs of boots are left?", room_id="room-a", current_link=2))
    ops = calls(harness, result)
    assert all(op != "product.search" for op, _ in ops), ops
    assert ("inventory.get", [2]) in ops
    assert "7" in (result.reply or "") and "don't have that product" not in (result.reply or "")
