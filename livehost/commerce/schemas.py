"""JSON Schemas of operation *results*.

Tool outcomes are checked against these before the model sees them: an answer that does not fit
(a broken backend, an injected ``malformed`` fault) becomes a ``malformed`` tool error instead of
feeding the model garbage. Keyed by operation name (code, not harness data).
"""

from __future__ import annotations

from typing import Any

import jsonschema

_NUM = {"type": "number"}
_INT = {"type": "integer"}
_STR = {"type": "string"}
_LINK = {"type": "integer", "minimum": 1}
_NULLABLE_STR = {"type": ["string", "null"]}

_PRODUCT_PROPS: dict[str, Any] = {"link_id": _LINK, "sku": _STR, "title": _STR, "price": _NUM, "currency": _STR}
_PRODUCT_SUMMARY: dict[str, Any] = {
    "type": "object",
    "required": ["link_id", "sku", "title", "price", "currency"],
    "properties": _PRODUCT_PROPS,
}

_COUPON = {
    "type": "object",
    "required": ["code", "discount_pct", "min_spend", "per_user_limit"],
    "properties": {
        "code": _STR, "discount_pct": _NUM, "min_spend": _NUM, "per_user_limit": _INT,
        "link_id": {"type": ["integer", "null"]}, "issuable": {"type": "boolean"},
    },
}

RESULT_SCHEMAS: dict[str, dict[str, Any]] = {
    "product.by_link": {
        "type": "object",
        "required": ["link_id", "sku", "title", "price", "currency", "attributes"],
        "properties": {**_PRODUCT_PROPS, "attributes": {"type": "object"}},
        "not": {"required": ["stock"]},
    },
    "product.search": {
        "type": "object",
        "required": ["query", "results"],
        "properties": {"query": _STR, "results": {"type": "array", "items": _PRODUCT_SUMMARY}},
    },
    "inventory.get": {
        "type": "object",
        "required": ["link_id", "stock", "available"],
        "properties": {"link_id": _LINK, "stock": {"type": "integer", "minimum": 0},
                       "available": {"type": "boolean"}, "sku": _STR, "title": _STR},
    },
    "coupon.list": {
        "type": "object",
        "required": ["link_id", "coupons"],
        "properties": {"link_id": _LINK, "coupons": {"type": "array", "items": _COUPON},
                       "campaign_max_discount_pct": {"type": ["number", "null"]}},
    },
    "coupon.issue": {
        "type": "object",
        "required": ["code", "user_id", "discount_pct", "min_spend", "granted_at"],
        "properties": {"code": _STR, "user_id": _STR, "discount_pct": _NUM, "min_spend": _NUM,
                       "granted_at": _STR, "grants_used": _INT, "per_user_limit": _INT},
    },
    "faq.search": {
        "type": "object",
        "required": ["query", "results"],
        "properties": {
            "query": _STR,
            "results": {
                "type": "array",
                "items": {"type": "object", "required": ["q", "a"],
                          "properties": {"q": _STR, "a": _STR, "link_id": {"type": ["integer", "null"]},
                                         "score": _NUM}},
            },
        },
    },
    "room.pin_product": {
        "type": "object",
        "required": ["room_id", "pinned_link", "title"],
        "properties": {"room_id": _STR, "pinned_link": _LINK, "title": _STR,
                       "previous_pinned_link": {"type": ["integer", "null"]}},
    },
    "order.status": {
        "type": "object",
        "required": ["order_id", "status"],
        "properties": {"order_id": _STR, "status": _STR, "carrier": _NULLABLE_STR, "eta": _NULLABLE_STR,
                       "items": {"type": "array"}},
    },
}

_VALIDATORS = {name: jsonschema.Draft202012Validator(schema) for name, schema in RESULT_SCHEMAS.items()}


def result_problems(operation: str, result: Any) -> list[str]:
    """Every way ``result`` fails the operation's result schema (empty when it fits)."""
    validator = _VALIDATORS.get(operation)
    if validator is None:
        return [f"no result schema for operation {operation!r}"]
    return [
        f"{'/'.join(str(p) for p in err.absolute_path) or '(root)'}: {err.message}"
        for err in sorted(validator.iter_errors(result), key=lambda e: list(map(str, e.absolute_path)))
    ]
