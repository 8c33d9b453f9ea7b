"""The trajectory recorder Faust app with ``agent.test_context()`` and a fake store (no broker, no DB)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from prometheus_client import REGISTRY
from yarl import URL

from livehost import codec
from livehost.agent import state as st
from livehost.config import Settings
from livehost.db import transient_db_error
from livehost.topics import DEAD_LETTER, REPLIES, TRAJECTORIES, Topic
from services.trajectories import settings as traj_settings
from services.trajectories.handlers import Saved
from services.trajectories.server import RecorderApp, Store, build


class FakeStore:
    """Keyed by request id like the table; can be told to fail the next N writes transiently."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.published: set[str] = set()
        self.attempts = 0
        self.fail_next = 0
        self.error: Exception = asyncpg.exceptions.AdminShutdownError(
            "terminating connection due to administrator command")
        self.refused: set[str] = set()  # request ids whose row the table refuses, every time
        self.marks: list[list[str]] = []

    async def save_many(self, ts: list[dict[str, Any]]) -> Saved:
        self.attempts += 1
        if self.fail_next:
            self.fail_next -= 1
            raise self.error
        if any(t["request_id"] in self.refused for t in ts):
            raise asyncpg.exceptions.StringDataRightTruncationError("value too long for type character varying")
        ids = {t["request_id"] for t in ts}
        new = ids - set(self.rows)
        for t in ts:
            self.rows.setdefault(t["request_id"], t)
        return Saved(new, ids - new - self.published)

    async def mark_published_many(self, request_ids: list[str]) -> None:
        self.marks.append(list(request_ids))
        self.published.update(request_ids)


class Sent(list[tuple[str, str, dict[str, Any]]]):
    """Records sent; ``most_waiting`` is the most sends awaiting their acknowledgement at once."""

    waiting = 0
    most_waiting = 0

    async def __call__(self, topic: Topic, key: str, record: dict[str, Any]) -> None:
        codec.validate(topic.schema, record)
        self.append((topic.name, key, record))
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        await asyncio.sleep(0.01)  # the broker's acknowledgement
        self.waiting -= 1


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def sent() -> Sent:
    return Sent()


@pytest.fixture
def factories() -> list[int]:
    return []


def unmarked(found: str) -> float:
    return REGISTRY.get_sample_value("livehost_trajectories_unmarked_total", {"found": found}) or 0.0


class OnTopic:
    """Stands in for reading agent.trajectories: the request ids whose record is "there", and each
    question asked (ids, since_ms)."""

    def __init__(self) -> None:
        self.there: set[str] = set()
        self.asked: list[tuple[set[str], int]] = []
        self.error: Exception | None = None

    async def __call__(self, request_ids: set[str], since_ms: int) -> set[str]:
        self.asked.append((set(request_ids), since_ms))
        if self.error is not None:
            raise self.error
        return request_ids & self.there


@pytest.fixture
def on_topic() -> OnTopic:
    return OnTopic()


@pytest.fixture
def recorder(store: FakeStore, sent: Sent, factories: list[int], on_topic: OnTopic) -> Iterator[RecorderApp]:
    async def factory(_: Settings) -> Store:
        factories.append(1)
        return store

    parts = build(Settings(connect_backoff_initial_s=0.001, connect_backoff_max_s=0.002),
                  store_factory=factory, sender=sent, published=on_topic)
    parts.app.finalize()
    parts.app.conf.store = URL("memory://")
    parts.app.flow_control.resume()
    yield parts


def reply(n: int, outcome: str = "reply") -> bytes:
    comment = {"event_id": f"e-{n}", "user_id": "u1", "text": f"question {n}?", "ts_ms": 1}
    state = st.new_state(room_id="room-1", harness_version="v-test", comments=[comment], room={},
                         ttl_ms=10_000, time_budget_ms=10_000, created_ms=1_000)
    st.add_step(state, "input", None, {"comments": [comment]})
    st.add_step(state, outcome, None, {"outcome": outcome, "text": "hi", "reason": None})
    return codec.encode(REPLIES.schema, {"state": state, "outcome": outcome, "text": "hi", "reason": None,
                                         "completed_ms": 2_000})


async def test_each_reply_is_stored_and_published(recorder: RecorderApp, store: FakeStore, sent: Sent,
                                                  on_topic: OnTopic) -> None:
    async with recorder.record.test_context() as agent:
        for n in range(3):
            await agent.put(reply(n), key=b"room-1")
        await agent.put(reply(1), key=b"room-1")  # redelivery
        results = dict(agent.results)
    assert len(store.rows) == 3
    assert [r["request_id"] for r in results.values()] == [*store.rows, list(store.rows)[1]]
    published = [r for name, _, r in sent if name == TRAJECTORIES.name]
    assert sorted(p["request_id"] for p in published) == sorted(store.rows)  # the redelivery published nothing
    assert store.published == set(store.rows)
    first = published[0]
    assert first["outcome"] == "reply" and [s["kind"] for s in first["steps"]] == ["input", "reply"]
    assert on_topic.asked == []  # no row was left unmarked: the topic is never read


async def test_transient_database_errors_are_retried_and_reconnect(recorder: RecorderApp, store: FakeStore,
                                                                   sent: Sent, factories: list[int]) -> None:
    store.fail_next = 4
    async with recorder.record.test_context() as agent:
        await agent.put(reply(7), key=b"room-1")
    assert store.attempts == 5 and len(store.rows) == 1
    assert len(factories) == 2  # the store was rebuilt after repeated failures
    assert [name for name, _, _ in sent] == [TRAJECTORIES.name]


async def test_a_row_whose_record_never_went_out_is_published_on_redelivery(recorder: RecorderApp,
                                                                         store: FakeStore, sent: Sent,
                                                                         on_topic: OnTopic) -> None:
    # the recorder died after storing the row and before publishing it; the reply comes again
    first = codec.decode(REPLIES.schema, reply(7))
    rid = first["state"]["request_id"]
    await store.save_many([{"request_id": rid}])
    async with recorder.record.test_context() as agent:
        await agent.put(reply(7), key=b"room-1")
    assert [(name, r["request_id"]) for name, _, r in sent] == [(TRAJECTORIES.name, rid)]
    # the topic was asked first, from the reply's completion less the clock allowance
    assert on_topic.asked == [({rid}, first["completed_ms"] - traj_settings.PUBLISHED_SCAN_SKEW_MS)]
    assert rid in store.published


async def test_a_record_published_before_the_crash_is_not_published_again(recorder: RecorderApp, store: FakeStore,
                                                                          sent: Sent, on_topic: OnTopic) -> None:
    """Killed between publishing and marking: the row says "not published", the topic has the record."""
    ids = [codec.decode(REPLIES.schema, reply(n))["state"]["request_id"] for n in (1, 2, 3)]
    await store.save_many([{"request_id": ids[0]}, {"request_id": ids[1]}])  # stored, never marked
    on_topic.there.add(ids[0])  # only the first one's record made it out
    found_before, missing_before = unmarked("yes"), unmarked("no")
    async with recorder.record.test_context() as agent:
        await put_together(agent, [reply(1), reply(2), reply(3)])
    assert sorted(r["request_id"] for name, _, r in sent if name == TRAJECTORIES.name) == sorted(ids[1:])
    assert [q for q, _ in on_topic.asked] == [{ids[0], ids[1]}]  # the new row is not looked for
    assert store.published == set(ids)
    assert [ids[0]] in store.marks  # marked without publishing
    assert unmarked("yes") - found_before == 1 and unmarked("no") - missing_before == 1


async def test_when_the_topic_cannot_be_read_unmarked_records_are_published_again(
        recorder: RecorderApp, store: FakeStore, sent: Sent, on_topic: OnTopic) -> None:
    rid = codec.decode(REPLIES.schema, reply(4))["state"]["request_id"]
    await store.save_many([{"request_id": rid}])
    on_topic.there.add(rid)
    on_topic.error = ConnectionError("broker away")
    async with recorder.record.test_context() as agent:
        await agent.put(reply(4), key=b"room-1")
    assert [r["request_id"] for name, _, r in sent if name == TRAJECTORIES.name] == [rid]  # at least once


async def test_garbage_is_dead_lettered(recorder: RecorderApp, store: FakeStore, sent: Sent) -> None:
    async with recorder.record.test_context() as agent:
        await agent.put(b"\x01\x02", key=b"room-1")
        await agent.put(reply(1), key=b"room-1")
    assert [name for name, _, _ in sent] == [DEAD_LETTER.name, TRAJECTORIES.name]
    assert len(store.rows) == 1


# What a crashing or restarting server raises (seen in the fault suite or in asyncpg's protocol code), and
# what a bad record raises. The first list is waited out; the second is dead-lettered with the reason.
SERVER_GONE = [
    asyncpg.exceptions._base.InternalClientError("cannot switch to state 15; another operation (2) is in progress"),
    asyncpg.exceptions.CrashShutdownError("terminating connection because of crash of another server process"),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.exceptions.CannotConnectNowError("the database system is in recovery mode"),
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.exceptions.TooManyConnectionsError("sorry, too many clients already"),
    asyncpg.exceptions.ReadOnlySQLTransactionError("cannot execute INSERT in a read-only transaction"),
    asyncpg.exceptions.SerializationError("could not serialize access"),
    asyncpg.InterfaceError("pool is closing"),
    ConnectionRefusedError(111, "Connect call failed"),
    ConnectionResetError(104, "Connection reset by peer"),
    TimeoutError(),
]
RECORD_AT_FAULT = [
    asyncpg.exceptions.NotNullViolationError('null value in column "room_id" violates not-null constraint'),
    asyncpg.exceptions.InvalidTextRepresentationError("invalid input syntax for type json"),
    asyncpg.exceptions.StringDataRightTruncationError("value too long for type character varying(64)"),
    asyncpg.exceptions._base.DataError("invalid input for query argument $11: 'x' (an integer is required)"),
    ValueError("bad"),
]


@pytest.mark.parametrize("exc", SERVER_GONE, ids=lambda e: type(e).__name__)
def test_server_errors_are_transient(exc: Exception) -> None:
    assert transient_db_error(exc)


@pytest.mark.parametrize("exc", RECORD_AT_FAULT, ids=lambda e: type(e).__name__)
def test_record_errors_are_not_transient(exc: Exception) -> None:
    assert not transient_db_error(exc)


async def test_lost_protocol_state_is_retried_on_a_new_pool(recorder: RecorderApp, store: FakeStore, sent: Sent,
                                                            factories: list[int]) -> None:
    """The fault suite's PostgreSQL crash: a pooled connection raised InternalClientError, and the recorder
    dead-lettered the reply instead of waiting, so its trajectory row never came."""
    store.error = SERVER_GONE[0]
    store.fail_next = 1
    async with recorder.record.test_context() as agent:
        await agent.put(reply(7), key=b"room-1")
    assert store.attempts == 2 and len(store.rows) == 1
    assert len(factories) == 2  # that connection is not trusted again: a fresh pool at once
    assert [name for name, _, _ in sent] == [TRAJECTORIES.name]


async def test_a_record_the_table_refuses_is_dead_lettered_with_the_reason(recorder: RecorderApp, store: FakeStore,
                                                                           sent: Sent) -> None:
    store.error = RECORD_AT_FAULT[0]
    store.fail_next = 1
    async with recorder.record.test_context() as agent:
        await agent.put(reply(1), key=b"room-1")
        await agent.put(reply(2), key=b"room-1")
    assert store.attempts == 2  # not retried
    assert [name for name, _, _ in sent] == [DEAD_LETTER.name, TRAJECTORIES.name]
    assert "NotNullViolationError" in sent[0][2]["error"] and sent[0][2]["error"].startswith("store: ")


async def put_together(agent: Any, payloads: list[bytes]) -> None:
    """Hand several replies to the recorder at once (one batch), then wait until each was handled."""
    for payload in payloads:
        await agent.put(payload, key=b"room-1", wait=False)
    for _ in range(200):
        if len(agent.results) >= len(payloads):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(agent.results)} of {len(payloads)} replies handled")


async def test_replies_arriving_together_are_stored_in_one_write(recorder: RecorderApp, store: FakeStore,
                                                                 sent: Sent) -> None:
    async with recorder.record.test_context() as agent:
        await put_together(agent, [reply(1), reply(2), reply(2), reply(3)])  # one delivered twice
    assert store.attempts == 1  # one transaction for the batch
    published = [r["request_id"] for name, _, r in sent if name == TRAJECTORIES.name]
    assert len(published) == 3 and set(published) == set(store.rows)
    assert store.marks == [published]  # marked published together, once each
    assert sent.most_waiting == 3  # sent together (one produce request), not one acknowledgement at a time


async def test_a_refused_row_in_a_batch_dead_letters_only_its_reply(recorder: RecorderApp, store: FakeStore,
                                                                   sent: Sent) -> None:
    refused = codec.decode(REPLIES.schema, reply(2))["state"]["request_id"]
    store.refused.add(refused)
    async with recorder.record.test_context() as agent:
        await put_together(agent, [reply(1), reply(2), reply(3)])
    assert set(store.rows) == {codec.decode(REPLIES.schema, reply(n))["state"]["request_id"] for n in (1, 3)}
    letters = [r for name, _, r in sent if name == DEAD_LETTER.name]
    assert len(letters) == 1 and "StringDataRightTruncationError" in letters[0]["error"]
    assert sorted(r["request_id"] for name, _, r in sent if name == TRAJECTORIES.name) == sorted(store.rows)
