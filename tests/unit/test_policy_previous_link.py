""""The previous one" is the product shown before the one on screen (room state ``previous_link``)."""

from __future__ import annotations

from typing import Any

from livehost.config import REPO_ROOT
from livehost.harness.loader import load
from livehost.policy.reference import decide
from livehost.policy.testing import run_loop

HARNESS = load(REPO_ROOT / "harness" / "default")


def _case(text: str, previous: int | None) -> dict[str, Any]:
    room: dict[str, Any] = {"room_id": "room-p", "current_link": 2}
    if previous is not None:
        room["previous_link"] = previous
    item = {"currency": "CNY", "stock": 5, "attributes": {}, "faq": [], "coupons": []}
    return {"id": "p", "category": "product_switch", "room": room,
            "catalog": [{**item, "link_id": 1, "sku": "A-1", "title": "Walnut desk organiser", "price": 145.0},
                        {**item, "link_id": 2, "sku": "B-2", "title": "Brass floor lamp", "price": 388.0}],
            "comments": [{"user_id": "u-1", "text": text, "offset_ms": 0}],
            "expect": {"respond": True}}


def test_the_previous_one_is_the_link_shown_before() -> None:
    for text in ("wait go back, how much was the previous one?", "price of the one you showed earlier?"):
        reply = run_loop(decide, HARNESS, _case(text, previous=1)).reply or ""
        assert "145" in reply and "388" not in reply, reply


def test_the_one_shown_earlier_with_no_record_of_it_is_the_only_other_product_or_a_question() -> None:
    reply = run_loop(decide, HARNESS, _case("how much was the one you showed earlier?", previous=None)).reply or ""
    assert "145" in reply and "388" not in reply, reply  # two products: the other one
    case = _case("how much was the one you showed earlier?", previous=None)
    case["catalog"].append({**case["catalog"][0], "link_id": 3, "sku": "C-3", "title": "Linen throw", "price": 99.0})
    reply = run_loop(decide, HARNESS, case).reply or ""
    assert "which" in reply.lower() and "link 1" in reply and "link 3" in reply and "388" not in reply, reply


def test_nothing_on_screen_and_nothing_named_asks_which() -> None:
    case = _case("how much is it?", previous=None)
    case["room"]["current_link"] = None
    reply = run_loop(decide, HARNESS, case).reply or ""
    assert "which" in reply.lower() and "link 1" in reply and "link 2" in reply, reply
