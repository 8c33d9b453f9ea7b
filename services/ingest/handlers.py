"""Validation of incoming comments and room events (no transport code)."""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from typing import Any

from livehost.kafka import now_ms
from livehost.security.ids import InvalidId, check_id
from livehost.security.parsing import UntrustedDataError, loads_json


class InvalidEvent(ValueError):
    """The event is refused; the message says why."""


def _clean(text: str) -> str:
    # Control characters other than whitespace are never legitimate in a danmaku comment.
    return "".join(ch for ch in text if unicodedata.category(ch)[0] != "C" or ch in "\t\n ").strip()


def _require_id(name: str, value: str) -> str:
    """Room, user and event ids have one format (livehost.security.ids): a path-like or
    control-character id is refused here and by every Kafka consumer."""
    try:
        return check_id(name, value)
    except InvalidId as exc:
        raise InvalidEvent(str(exc)) from None


def _event_id(client_event_id: str | None) -> str:
    return _require_id("client_event_id", client_event_id) if client_event_id is not None \
        else f"ev-{uuid.uuid4().hex[:16]}"


def comment_event(room_id: str, user_id: str, text: str, max_chars: int,
                  client_event_id: str | None = None, max_bytes: int | None = None) -> dict[str, Any]:
    # Sizes first, before any per-character work: a string longer than the byte limit in characters
    # is refused in O(1); only then is it encoded to count its bytes.
    text = text or ""
    limit = max_bytes if max_bytes is not None else 4 * max_chars
    if len(text) > limit or len(text.encode("utf-8", "surrogatepass")) > limit:
        raise InvalidEvent(f"comment is larger than {limit} bytes")
    room_id = _require_id("room_id", room_id)
    user_id = _require_id("user_id", user_id)
    event_id = _event_id(client_event_id)
    cleaned = _clean(text)
    if not cleaned:
        raise InvalidEvent("comment text is empty")
    if len(cleaned) > max_chars:
        raise InvalidEvent(f"comment is {len(cleaned)} characters; the limit is {max_chars}")
    return {
        "event_id": event_id,
        "room_id": room_id, "type": "comment", "ts_ms": now_ms(),
        "user_id": user_id, "text": cleaned, "link_id": None, "campaign_json": None, "viewer_count": None,
    }


def product_switch_event(room_id: str, link_id: int, client_event_id: str | None = None) -> dict[str, Any]:
    room_id = _require_id("room_id", room_id)
    if link_id < 1:
        raise InvalidEvent("link_id must be a positive live link number")
    return {"event_id": _event_id(client_event_id), "room_id": room_id,
            "type": "product_switch", "ts_ms": now_ms(), "user_id": None, "text": None, "link_id": link_id,
            "campaign_json": None, "viewer_count": None}


def campaign_event(room_id: str, campaign_json: str, client_event_id: str | None = None,
                   max_bytes: int = 4096) -> dict[str, Any]:
    if len(campaign_json) > max_bytes or len(campaign_json.encode("utf-8", "surrogatepass")) > max_bytes:
        raise InvalidEvent(f"campaign_json is larger than {max_bytes} bytes")
    room_id = _require_id("room_id", room_id)
    event_id = _event_id(client_event_id)
    try:
        campaign = loads_json(campaign_json, "campaign_json")
    except UntrustedDataError as exc:
        raise InvalidEvent(str(exc)) from None
    if not isinstance(campaign, dict):
        raise InvalidEvent("campaign_json must be a JSON object")
    pct = campaign.get("max_discount_pct")
    if pct is not None and not (isinstance(pct, int | float) and 0 <= pct <= 100):
        raise InvalidEvent("campaign max_discount_pct must be a number between 0 and 100")
    internal = campaign.get("internal_rules")  # lines for the host that viewers must not hear
    if internal is not None and not (isinstance(internal, list) and all(isinstance(r, str) for r in internal)):
        raise InvalidEvent("campaign internal_rules must be a list of strings")
    return {"event_id": event_id, "room_id": room_id,
            "type": "campaign_change", "ts_ms": now_ms(), "user_id": None, "text": None, "link_id": None,
            "campaign_json": json.dumps(campaign, sort_keys=True), "viewer_count": None}


POLICY_PATTERN = re.compile(r"^(react:)?[A-Za-z0-9_.-]{0,64}$")


def room_config_event(room_id: str, policy: str, client_event_id: str | None = None) -> dict[str, Any]:
    room_id = _require_id("room_id", room_id)
    policy = (policy or "").strip()
    if not POLICY_PATTERN.match(policy):
        raise InvalidEvent("policy must be a model name, react:<model>, or empty for the default")
    return {"event_id": _event_id(client_event_id), "room_id": room_id,
            "type": "room_config", "ts_ms": now_ms(), "user_id": None, "text": None, "link_id": None,
            "campaign_json": None, "viewer_count": None, "policy": policy}
