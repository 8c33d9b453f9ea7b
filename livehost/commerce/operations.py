"""Backend operations a harness tool can bind to.

Operations are code (the commerce API); tool names, descriptions and argument names are harness
data. ``context`` parameters are filled from the request (room, viewer), never by the model.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Operation:
    name: str
    params: tuple[str, ...]
    context: tuple[str, ...] = ()
    side_effect: bool = False
    capability: str = "product"  # the fault-injection capability of CASES.md


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation("product.by_link", ("link_id",), ("room_id",), capability="product"),
        Operation("product.search", ("query",), ("room_id",), capability="product"),
        Operation("inventory.get", ("link_id",), ("room_id",), capability="inventory"),
        Operation("coupon.list", ("link_id",), ("room_id",), capability="coupon"),
        Operation("coupon.issue", ("code",), ("room_id", "user_id"), side_effect=True, capability="coupon"),
        Operation("faq.search", ("query", "link_id"), ("room_id",), capability="faq"),
        Operation("room.pin_product", ("link_id",), ("room_id",), side_effect=True, capability="product"),
        Operation("order.status", ("order_id",), ("room_id", "user_id"), capability="order"),
    )
}
