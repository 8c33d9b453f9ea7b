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


def test_without_a_previous_link_nothing_is_made_up() -> None:
    reply = run_loop(decide, HARNESS, _case("how much was the previous one?", previous=None)).reply or ""
    assert "145" not in reply, reply
