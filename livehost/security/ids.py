"""Untrusted identifiers and paths: the one format every room, user, event and request id must have
at every entry point (Ingest gRPC and each Kafka consumer), and path joins that stay in their folder.

An id is 1-128 characters of ASCII letters, digits and ``_ . : @ -``, starting with a letter or
digit: no path separators, no ``..`` component, no whitespace or control characters, nothing that
needs quoting in a file name, a log line or a prompt.
"""

from __future__ import annotations

import re
from pathlib import Path

from livehost.security.parsing import UntrustedDataError, loads_json

ID_MAX_CHARS = 128
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}")


class InvalidId(ValueError):
    """An identifier does not have the id format; the message names which one and why."""


def check_id(kind: str, value: object) -> str:
    """``value`` when it is a well-formed id, else :class:`InvalidId` naming ``kind``."""
    if not isinstance(value, str) or not value:
        raise InvalidId(f"{kind} is required")
    if len(value) > ID_MAX_CHARS:
        raise InvalidId(f"{kind} is longer than {ID_MAX_CHARS} characters")
    if not ID_PATTERN.fullmatch(value):
        raise InvalidId(f"{kind} {value[:40]!r} must be letters, digits and _ . : @ - (starting with a letter "
                        "or digit)")
    return value


def inside(base: Path, *parts: str) -> Path:
    """``base / parts...`` resolved, refused (:class:`InvalidId`) unless it stays inside ``base``."""
    root = Path(base).resolve()
    path = root.joinpath(*parts).resolve()
    if path != root and not path.is_relative_to(root):
        raise InvalidId(f"path {'/'.join(parts)[:60]!r} leaves {root}")
    return path


def check_room_event(event: dict[str, object], *, max_text_bytes: int, max_campaign_bytes: int) -> None:
    """A room event read from Kafka meets what Ingest enforces (ids, sizes) — a producer that bypasses
    Ingest gets no further. Raises :class:`InvalidId` (a ValueError) saying what is wrong."""
    check_id("room_id", event.get("room_id"))
    check_id("event_id", event.get("event_id"))
    if event.get("user_id") is not None:
        check_id("user_id", event.get("user_id"))
    for field, limit in (("text", max_text_bytes), ("campaign_json", max_campaign_bytes)):
        value = event.get(field)
        if isinstance(value, str) and (len(value) > limit or len(value.encode("utf-8", "surrogatepass")) > limit):
            raise InvalidId(f"{field} is larger than {limit} bytes")
    campaign = event.get("campaign_json")
    if isinstance(campaign, str):  # 4 KB of "[" is within the size limit and too deep for every consumer
        try:
            loads_json(campaign, "campaign_json")
        except UntrustedDataError as exc:
            raise InvalidId(str(exc)) from None


def check_state_ids(state: dict[str, object]) -> None:
    """A request state read from Kafka: its room and request ids have the id format (InvalidId)."""
    check_id("room_id", state.get("room_id"))
    check_id("request_id", state.get("request_id"))
