"""Transport-free logic of the Harness API: request values in, plain values out.

Everything is the registry's (livehost.harness.registry), shared with the CLI; this module only
parses API inputs (bundle JSON, API target names, review decisions) and maps refusals to the
status the API reports.
"""

from __future__ import annotations

from typing import Any

from livehost.harness.loader import HarnessError
from livehost.harness.registry import GLOBAL, BadRequest, NotFound, Refused, RegistryError, SelfReview
from livehost.security.parsing import UntrustedDataError, loads_json

# Status (gRPC code name) for each refusal; the first matching class wins.
STATUS_OF: tuple[tuple[type[BaseException], str], ...] = (
    (HarnessError, "INVALID_ARGUMENT"),
    (BadRequest, "INVALID_ARGUMENT"),
    (NotFound, "NOT_FOUND"),
    (SelfReview, "PERMISSION_DENIED"),
    (Refused, "FAILED_PRECONDITION"),
    (RegistryError, "FAILED_PRECONDITION"),
)

DECISIONS = {1: "approve", 2: "reject", 3: "request_changes"}  # ReviewDecision enum values


def status_of(exc: BaseException) -> str | None:
    for cls, code in STATUS_OF:
        if isinstance(exc, cls):
            return code
    return None


def parse_bundle(text: str, field: str = "bundle_json") -> dict[str, Any]:
    """A JSON object from request field ``field``; malformed or too deeply nested JSON is a BadRequest
    (INVALID_ARGUMENT with a plain message)."""
    try:
        data = loads_json(text, field)
    except UntrustedDataError as exc:
        raise BadRequest(str(exc)) from None
    if not isinstance(data, dict):
        raise BadRequest(f"{field} must be a JSON object")
    return data


def api_target(target: str) -> str:
    """API targets: ``""``/``default``/``global``, ``room:<id>``, ``arm:<experiment>/<arm>``, or a bare
    room id (the API's shorthand for ``room:<id>``)."""
    t = (target or "").strip()
    if t in ("", "default", GLOBAL) or t.startswith(("room:", "arm:")):
        return t or GLOBAL
    return f"room:{t}"


def decision(value: int) -> str:
    try:
        return DECISIONS[int(value)]
    except (KeyError, ValueError):
        raise BadRequest("decision is required: APPROVE, REJECT or REQUEST_CHANGES") from None


def proposal_id(value: str) -> int:
    try:
        return int(str(value).lstrip("#"))
    except ValueError:
        raise BadRequest(f"proposal_id must be a number, got {value!r}") from None
