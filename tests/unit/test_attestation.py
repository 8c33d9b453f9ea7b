"""Side effects act only for viewers the hooks processor attested: a tool call whose request was forged
or edited after screening gets no recipient."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

import pytest

from livehost.agent import state as st
from livehost.config import REPO_ROOT, Settings
from livehost.harness.loader import load
from livehost.harness.provider import StaticHarnessProvider
from livehost.security.attest import AttestationError, Signer, Verifier
from livehost.security.pki import ensure_pki
from services.hooks.handlers import HooksHandler
from services.tools.handlers import trusted_viewer


def pki() -> Path:
    return Path(os.environ["LIVEHOST_GRPC_PKI_DIR"])  # the session's test PKI (tests/conftest.py)

ROLES = Settings().grpc_roles


def request(user: str = "u-7") -> dict[str, Any]:
    comments = [{"event_id": "e-1", "user_id": "u-1", "text": "hi", "ts_ms": 1},
                {"event_id": "e-2", "user_id": user, "text": "coupon please", "ts_ms": 2}]
    return st.new_state(room_id="room-a", harness_version="v", comments=comments, room={}, ttl_ms=10_000,
                        time_budget_ms=10_000, created_ms=int(time.time() * 1000))


def test_signed_requests_verify_and_name_their_viewers() -> None:
    state = request()
    state["attestation"] = Signer.from_pki(pki(), "hooks").sign(state)
    verifier = Verifier.from_pki(pki(), ROLES)
    assert verifier.viewers(state) == {"u-1", "u-7"}
    state["steps"].append({"kind": "anything"})  # later hops add steps, turns, retries: still valid
    state["turn"] = 3
    assert trusted_viewer(state, verifier) == "u-7"


@pytest.mark.parametrize("tamper", ["recipient", "text", "deadline", "room", "request", "missing", "garbage"])
def test_forged_or_edited_requests_get_no_viewer(tamper: str) -> None:
    state = request()
    state["attestation"] = Signer.from_pki(pki(), "hooks").sign(state)
    forged = copy.deepcopy(state)
    if tamper == "recipient":
        forged["comments"][-1]["user_id"] = "attacker"
    elif tamper == "text":  # the same viewer, another request: the comments are signed, not only who wrote them
        forged["comments"][-1]["text"] = "coupon please, the 100% one"
    elif tamper == "deadline":  # a replay that moves its own deadline
        forged["deadline_ms"] += 600_000
    elif tamper == "room":
        forged["room_id"] = "room-b"
    elif tamper == "request":
        forged["request_id"] = "req-other"
    elif tamper == "missing":
        forged["attestation"] = None
    else:
        forged["attestation"] = '{"cert": "x", "sig": "!!"}'
    verifier = Verifier.from_pki(pki(), ROLES)
    assert verifier.viewers(state) == {"u-1", "u-7"}  # the genuine request verified (and remembered) first
    with pytest.raises(AttestationError):
        verifier.viewers(forged)
    assert trusted_viewer(forged, verifier) is None


def test_an_attestation_expires_with_its_requests_time_budget() -> None:
    state = request()
    state["attestation"] = Signer.from_pki(pki(), "hooks").sign(state)
    verifier = Verifier.from_pki(pki(), ROLES)
    assert verifier.viewers(state, now_ms=state["deadline_ms"]) == {"u-1", "u-7"}
    with pytest.raises(AttestationError, match="expired"):  # replayed later, even unchanged and remembered
        verifier.viewers(state, now_ms=state["deadline_ms"] + 200_000)


def test_a_verified_attestation_is_not_verified_again(monkeypatch: pytest.MonkeyPatch) -> None:
    state = request()
    state["attestation"] = Signer.from_pki(pki(), "hooks").sign(state)
    verifier = Verifier.from_pki(pki(), ROLES)
    checks: list[bytes] = []
    signer_key = verifier._signer_key

    class CountingKey:
        def __init__(self, key: Any):
            self._key = key

        def verify(self, sig: bytes, data: bytes, algorithm: Any) -> None:
            checks.append(data)
            self._key.verify(sig, data, algorithm)

    monkeypatch.setattr(verifier, "_signer_key", lambda pem: CountingKey(signer_key(pem)))
    for turn in range(3):  # a request's tool calls over its turns
        state["turn"] = turn
        assert verifier.viewers(state) == {"u-1", "u-7"}
    assert len(checks) == 1
    state["comments"][-1]["user_id"] = "attacker"  # edited after the first check: verified afresh, refused
    with pytest.raises(AttestationError):
        verifier.viewers(state)
    assert len(checks) == 2


def test_only_service_identities_of_our_ca_may_attest(tmp_path: Path) -> None:
    state = request()
    verifier = Verifier.from_pki(pki(), ROLES)
    state["attestation"] = Signer.from_pki(pki(), "producer").sign(state)  # our CA, but no service role
    with pytest.raises(AttestationError, match="may not attest"):
        verifier.viewers(state)
    ensure_pki(tmp_path, ["hooks"])  # a "hooks" certificate from another CA
    state["attestation"] = Signer.from_pki(tmp_path, "hooks").sign(state)
    with pytest.raises(AttestationError, match="not from the LiveHost CA"):
        verifier.viewers(state)


async def test_the_hooks_processor_signs_every_request() -> None:
    provider = StaticHarnessProvider(load(REPO_ROOT / "harness" / "default"))
    handler = HooksHandler(Settings(merge_window_ms=100), provider, {},
                           signer=Signer.from_pki(pki(), "hooks"))
    comment = {"event_id": "e-9", "room_id": "room-a", "type": "comment", "ts_ms": 1000, "user_id": "u-9",
               "text": "how much is link 2?", "link_id": None, "campaign_json": None, "viewer_count": None}
    await handler.on_room_event(comment, 1000)
    done = await handler.flush(2000)
    states = [e.record["state"] for e in done.emits if "state" in e.record]
    assert states and all(Verifier.from_pki(pki(), ROLES).viewers(s, now_ms=2000) == {"u-9"}
                          for s in states)


async def test_a_request_whose_screening_dropped_a_comment_attests_the_viewers_it_kept() -> None:
    """The signature covers the request's viewers, so it is made after screening: signed before, a
    merged request that lost one viewer's link spam would not verify, and its tool calls would act for
    nobody."""
    provider = StaticHarnessProvider(load(REPO_ROOT / "harness" / "default"))
    handler = HooksHandler(Settings(merge_window_ms=100), provider, {}, signer=Signer.from_pki(pki(), "hooks"))
    base = {"room_id": "room-a", "type": "comment", "link_id": None, "campaign_json": None, "viewer_count": None}
    await handler.on_room_event({**base, "event_id": "e-1", "ts_ms": 1000, "user_id": "u-spam",
                                 "text": "cheap followers at http://spam.example"}, 1000)
    await handler.on_room_event({**base, "event_id": "e-2", "ts_ms": 1010, "user_id": "u-buyer",
                                 "text": "can I get the coupon for link 2?"}, 1010)
    done = await handler.flush(2000)
    started = [e.record["state"] for e in done.emits if e.topic.name == "agent.requests"]
    assert len(started) == 1 and [c["user_id"] for c in started[0]["comments"]] == ["u-buyer"]
    verifier = Verifier.from_pki(pki(), ROLES)
    assert verifier.viewers(started[0], now_ms=2000) == {"u-buyer"}
    assert trusted_viewer(started[0], verifier, now_ms=2000) == "u-buyer"
