"""Fault suite (`make chaos`): steady simulated load on a real embedded stack (Apache Kafka with SASL_SSL,
PostgreSQL, Triton, every service a process under livehost.supervisor), one fault at a time, one table row
per fault: what was lost, duplicated or cancelled, and how long until the first new reply.

    python -m benchmarks.chaos                       # every fault below, 1 replica + supervisor restart
    python -m benchmarks.chaos --replicas 2          # the same with 2 replicas per service
    python -m benchmarks.chaos --faults kill:hooks,broker --phase-s 15   # a subset (the CI version)

Faults: ``kill:<service>`` (SIGKILL of replica 1's process group; the supervisor restarts it with backoff),
``broker`` (kill -9 of Apache Kafka, restarted 3 s later on the same ports and data), ``postgres``
(SIGKILL of the postmaster, started again 2 s later on the same data and port: crash recovery),
``triton`` (SIGKILL of Triton's process group, started again on the same ports), ``tool-timeout`` and
``tool-garbage`` (a live fault drill, livehost/commerce/drills.py, for ``TOOL_DRILL_S`` seconds: every
tool call of every capability times out past the tool's ``timeout_ms``, or gets a malformed backend
result), ``poison`` (poison records on every consumed topic), ``none`` (baseline).

Columns: sent = comments published in the phase; outcomes = comments with a terminal reply record (a
reply, refusal, drop or cancellation); lost = sent − outcomes after the drain; dup speech = requests whose
speech started more than once on avatar.segments; dup traj = requests with more than one trajectory record
on agent.trajectories (PostgreSQL has one row per request by its key); miss traj = replies with no
PostgreSQL trajectory row; dup fx = coupon grants sharing an idempotency key; cancelled % = requests
cancelled (stale, shed, switched) of all requests; recovery = fault to the first reply of a request created
after the fault; max s = the slowest request (reply time − first comment time); dead-lettered = records
the services sent to the dead-letter topic during the phase (``poison`` sends 18: two on each of 8 topics,
a 600 KB campaign_json and a path-like event id; 20 are dead-lettered, because the room-events topic has
two readers, the hooks processor and the voice, and each dead-letters its two undecodable records). For
the tool faults a line before the row counts the tool_result steps of the phase's requests that failed,
by error code ("(injected)": the drill's), and what those requests ended with (a ``tool_result`` step
with ``ok`` false and the code ``timeout`` or ``malformed`` is the trajectory's own statement of what
went wrong).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer

from benchmarks.reasons import reason_kind
from livehost import codec
from livehost.commerce.drills import start_drill, stop_drills
from livehost.commerce.faults import CAPABILITIES
from livehost.commerce.store import CommerceStore
from livehost.config import REPO_ROOT, Settings
from livehost.db import connect_pool, migrate
from livehost.kafka import Producer, ensure_topics
from livehost.sim.generator import generate_cases
from livehost.stack import kafka, postgres, triton
from livehost.stack.testing import kafka_client, running_broker
from livehost.supervisor import ALL_SERVICES, Supervisor
from livehost.topics import (
    ACTIONS,
    AVATAR_SEGMENTS,
    DEAD_LETTER,
    PROMPTS,
    REPLIES,
    REQUESTS,
    ROOM_EVENTS,
    TOOL_CALLS,
    TOOL_RESULTS,
    TRAJECTORIES,
)

ALL_FAULTS = ("none", *(f"kill:{s}" for s in ALL_SERVICES), "broker", "postgres", "triton", "tool-timeout",
              "tool-garbage", "poison")
TOOL_DRILLS = {"tool-timeout": "timeout", "tool-garbage": "malformed"}
TOOL_DRILL_S = 5.0  # how long a tool fault lasts (the rest of the phase shows the recovery)
POISONED = (ROOM_EVENTS, REQUESTS, PROMPTS, ACTIONS, TOOL_CALLS, TOOL_RESULTS, REPLIES, TRAJECTORIES)


@dataclass
class Seen:
    """What the observers saw on the output topics (shared by every phase)."""

    outcome_of_event: dict[str, str] = field(default_factory=dict)  # comment event id -> request id
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)  # request id -> first reply record
    reply_at: dict[str, float] = field(default_factory=dict)  # request id -> wall time seen
    reply_records: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    speech_starts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    trajectory_records: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    dead_letters: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # source topic -> records


def _event_ids(state: dict[str, Any]) -> set[str]:
    ids = {c["event_id"] for c in state.get("comments") or []}
    for step in state.get("steps") or []:
        if step.get("kind") == "input":
            ids |= set(json.loads(step.get("data_json") or "{}").get("event_ids", []))
    return ids


async def observe(settings: Settings, seen: Seen, stop: asyncio.Event) -> None:
    consumer = AIOKafkaConsumer(REPLIES.name, AVATAR_SEGMENTS.name, TRAJECTORIES.name, DEAD_LETTER.name,
                                **kafka_client(settings.kafka_bootstrap), group_id=f"chaos-{uuid.uuid4().hex[:8]}",
                                auto_offset_reset="earliest", isolation_level="read_committed",
                                fetch_max_wait_ms=50, enable_auto_commit=False)
    await consumer.start()
    try:
        while not stop.is_set():
            try:
                batch = await consumer.getmany(timeout_ms=200)
            except Exception:  # the broker restarts under us: keep polling
                await asyncio.sleep(0.5)
                continue
            now = time.time()
            for tp, msgs in batch.items():
                for m in msgs:
                    try:
                        _observe_one(seen, tp.topic, m.value, now)
                    except Exception:  # a poison record on an observed topic is not an observation
                        continue
    finally:
        await consumer.stop()


def _observe_one(seen: Seen, topic: str, value: bytes, now: float) -> None:
    if topic == DEAD_LETTER.name:
        seen.dead_letters[codec.decode(DEAD_LETTER.schema, value)["source_topic"]] += 1
    elif topic == REPLIES.name:
        rec = codec.decode(REPLIES.schema, value)
        rid = rec["state"]["request_id"]
        seen.reply_records[rid] += 1
        if rid not in seen.replies:
            seen.replies[rid] = rec
            seen.reply_at[rid] = now
        for eid in _event_ids(rec["state"]):
            seen.outcome_of_event.setdefault(eid, rid)
    elif topic == AVATAR_SEGMENTS.name:
        seg = codec.decode(AVATAR_SEGMENTS.schema, value)
        if seg["seq"] == 0 and not seg["cancel"]:
            seen.speech_starts[seg["request_id"]] += 1
    else:
        seen.trajectory_records[codec.decode(TRAJECTORIES.schema, value)["request_id"]] += 1


@dataclass
class Stack:
    settings: Settings
    env: dict[str, str]
    broker: Any
    supervisor: Supervisor
    postgres: Any
    triton: Any
    rooms: list[dict[str, Any]]
    comments: dict[str, list[dict[str, Any]]]


def make_rooms(n: int) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """``n`` rooms with the simulator's catalogs (cycled when it makes fewer), and comment texts per room."""
    by_room: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for g in generate_cases(seed=11, per_category=3, rooms=20):
        by_room[g.case["room"]["room_id"]].append(g.case)
    bases = sorted(by_room)
    rooms, comments = [], {}
    for i in range(n):
        cases = by_room[bases[i % len(bases)]]
        room_id = f"chaos-r{i:02d}"
        rooms.append({**cases[0]["room"], "room_id": room_id, "catalog": cases[0]["catalog"]})
        comments[room_id] = [c for case in cases for c in case["comments"]
                             if case["room"].get("current_link") == cases[0]["room"].get("current_link")]
    return rooms, comments


async def load(stack: Stack, producer: Producer, tag: str, rate: float, seconds: float,
               sent: list[tuple[str, float]]) -> None:
    """``rate`` comments/s round-robin over the rooms for ``seconds`` (sends retried across a broker
    restart: a comment counts as sent once the broker acknowledged it)."""
    n = int(rate * seconds)
    t0 = time.monotonic()
    for i in range(n):
        due = t0 + i / rate
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        room = stack.rooms[i % len(stack.rooms)]
        texts = stack.comments[room["room_id"]]
        c = texts[(i // len(stack.rooms)) % len(texts)]
        eid = f"{tag}-{i}"
        record = {"event_id": eid, "room_id": room["room_id"], "type": "comment", "ts_ms": int(time.time() * 1000),
                  "user_id": c.get("user_id") or f"u-{i}", "text": c["text"], "link_id": None,
                  "campaign_json": None, "viewer_count": room.get("viewer_count")}
        for attempt in range(60):
            try:
                await producer.send(ROOM_EVENTS, room["room_id"], record)
                sent.append((eid, time.time()))
                break
            except Exception:
                await asyncio.sleep(0.5 if attempt < 59 else 0)


async def poison(producer: Producer, room_id: str) -> int:
    """Poison records on every consumed topic, keyed by a live room: undecodable bytes and a record of
    another schema; on the room-events topic also a 600 KB campaign_json (under the broker's 1 MB limit,
    over the room's entry limit) and an event whose id is not an id."""
    sample = {"event_id": "poison-1", "room_id": room_id, "type": "comment", "ts_ms": int(time.time() * 1000),
              "user_id": "u-poison", "text": "hello", "link_id": None, "campaign_json": None, "viewer_count": None}
    other = codec.encode(ROOM_EVENTS.schema, sample)
    n = 0
    for topic in POISONED:
        await producer.send_raw(topic.name, room_id.encode(), b"\x00\xffnot avro at all")
        # a record of another schema (on room events: a truncated one)
        await producer.send_raw(topic.name, room_id.encode(), other if topic is not ROOM_EVENTS else other[:5])
        n += 2
    await producer.send(ROOM_EVENTS, room_id, {**sample, "event_id": "poison-big", "type": "campaign_change",
                                               "text": None, "campaign_json": json.dumps({"x": "y" * 600_000})})
    await producer.send(ROOM_EVENTS, room_id, {**sample, "event_id": "../../etc/passwd"})
    return n + 2


async def tool_drill(stack: Stack, kind: str) -> None:
    """A live fault drill on every capability for TOOL_DRILL_S, as an operator would run one (the table
    bounds it too, so a killed suite leaves no drill behind for long)."""
    pool = await connect_pool(stack.settings.postgres_dsn, attempts=10)
    try:
        await start_drill(pool, {cap: kind for cap in CAPABILITIES}, TOOL_DRILL_S + 5.0)
        await asyncio.sleep(TOOL_DRILL_S)
        await stop_drills(pool)
    finally:
        await pool.close()


def cancel_reasons(seen: Seen, requests: set[str]) -> dict[str, int]:
    """Why requests were cancelled, numbers masked so that equal reasons count together."""
    reasons: Counter[str] = Counter()
    for r in requests:
        if seen.replies[r]["outcome"] == "cancelled":
            reasons[reason_kind(seen.replies[r].get("reason"))] += 1
    return dict(reasons.most_common())


def tool_errors(seen: Seen, requests: set[str]) -> dict[str, Any]:
    """Failed tool results in these requests' final states, by error code, and their requests' outcomes."""
    codes: dict[str, int] = defaultdict(int)
    ended: dict[str, int] = defaultdict(int)
    for r in requests:
        failed = [json.loads(s.get("data_json") or "{}") for s in seen.replies[r]["state"].get("steps") or []
                  if s.get("kind") == "tool_result"]
        failed = [d for d in failed if not d.get("ok")]
        for d in failed:  # an injected fault says so in its step ("fault"); other failures are the tools' own
            codes[f"{d.get('error_code')}{' (injected)' if d.get('fault') else ''}"] += 1
        if failed:
            ended[seen.replies[r]["outcome"]] += 1
    return {"codes": dict(codes), "requests_by_outcome": dict(ended)}


def inject(stack: Stack, fault: str) -> None:
    if fault == "none":
        return
    if fault.startswith("kill:"):
        proc = stack.supervisor.procs[fault.split(":", 1)[1]]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return
    if fault == "postgres":  # a crash (SIGKILL of the postmaster), then a start on the same data and port
        stack.postgres = postgres.crash_restart(stack.postgres)
        return
    if fault == "triton":
        rec = stack.triton
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(rec.pid, signal.SIGKILL)
        time.sleep(2.0)
        stack.triton = triton.start(Path(rec.workdir), REPO_ROOT / "infra" / "triton" / "models",
                                    grpc_port=rec.ports["grpc"], http_port=rec.ports["http"],
                                    metrics_port=rec.ports["metrics"], timeout=120.0)
        return
    if fault == "broker":
        with contextlib.suppress(ProcessLookupError):
            os.kill(stack.broker.pid, signal.SIGKILL)
        time.sleep(3.0)
        stack.broker = kafka.restart(stack.broker)
        return
    raise ValueError(f"unknown fault {fault}")


async def phase(stack: Stack, seen: Seen, producer: Producer, fault: str, *, rate: float, phase_s: float,
                fault_at_s: float, drain_s: float) -> dict[str, Any]:
    tag = f"{fault.replace(':', '-')}-{uuid.uuid4().hex[:4]}"
    sent: list[tuple[str, float]] = []
    loader = asyncio.create_task(load(stack, producer, tag, rate, phase_s, sent))
    await asyncio.sleep(fault_at_s)
    fault_time = time.time()
    dead_before = sum(seen.dead_letters.values())
    dead_by_topic_before = dict(seen.dead_letters)
    if fault == "poison":
        await poison(producer, stack.rooms[0]["room_id"])
    elif fault in TOOL_DRILLS:
        await tool_drill(stack, TOOL_DRILLS[fault])
    else:
        await asyncio.to_thread(inject, stack, fault)
    await loader
    ids = [e for e, _ in sent]
    await until_answered(seen, ids, drain_s)
    await asyncio.sleep(2.0)  # late duplicates and trajectories
    requests = {seen.outcome_of_event[e] for e in ids if e in seen.outcome_of_event}
    outcomes = [seen.replies[r]["outcome"] for r in requests]
    created = {r: int(seen.replies[r]["state"]["created_ms"]) / 1000 for r in requests}
    after = [seen.reply_at[r] - fault_time for r in requests
             if created[r] >= fault_time and seen.replies[r]["outcome"] == "reply"]
    pool = await asyncpg.create_pool(stack.settings.postgres_dsn, min_size=1, max_size=2)
    try:
        stored = {r["request_id"] for r in await pool.fetch(
            "SELECT request_id FROM trajectories WHERE request_id = ANY($1::text[])", list(requests))}
        dup_fx = await pool.fetchval(
            "SELECT count(*) FROM (SELECT idempotency_key FROM coupon_grants WHERE idempotency_key IS NOT NULL "
            "AND room_id LIKE 'chaos-%' GROUP BY 1 HAVING count(*) > 1) d")
    finally:
        await pool.close()
    return {
        "fault": fault, "sent": len(ids), "outcomes": sum(e in seen.outcome_of_event for e in ids),
        "lost": sum(e not in seen.outcome_of_event for e in ids),
        "dup_speech": sum(seen.speech_starts.get(r, 0) > 1 for r in requests),
        "dup_traj": sum(seen.trajectory_records.get(r, 0) > 1 for r in requests),
        "miss_traj": len(requests - stored), "dup_fx": int(dup_fx or 0),
        "cancelled_pct": 100.0 * outcomes.count("cancelled") / max(1, len(outcomes)),
        "requests": len(requests),
        "recovery_s": min(after) if after else None,
        "max_s": max((seen.reply_at[r] - created[r] for r in requests), default=0.0),
        "dead_lettered": sum(seen.dead_letters.values()) - dead_before,
        "slowest": slowest(seen, requests, created, fault_time),
        "ids": ids, "late": 0, "tool_errors": tool_errors(seen, requests),
        "cancel_reasons": cancel_reasons(seen, requests),
        "dead_by_topic": {t: n - dead_by_topic_before.get(t, 0) for t, n in seen.dead_letters.items()
                          if n > dead_by_topic_before.get(t, 0)},
    }


async def until_answered(seen: Seen, ids: list[str], wait_s: float) -> None:
    """Wait until every comment of ``ids`` has an outcome, at most ``wait_s``."""
    deadline = time.monotonic() + wait_s
    for _ in range(int(wait_s * 2)):  # the observer task fills seen.outcome_of_event as replies arrive
        if time.monotonic() > deadline or all(e in seen.outcome_of_event for e in ids):
            return
        await asyncio.sleep(0.5)


async def warm_up(stack: Stack, seen: Seen, producer: Producer, *, rate: float, seconds: float,
                  drain_s: float) -> None:
    """The same load for ``seconds`` before the first phase, not counted: every later phase runs on a
    stack that has served traffic (connection pools, caches of the rooms' facts and of the comments'
    embeddings, Triton's first inferences), so the first phase should too, or its row measures the
    start-up instead of its fault."""
    sent: list[tuple[str, float]] = []
    started = time.monotonic()
    await load(stack, producer, f"warmup-{uuid.uuid4().hex[:4]}", rate, seconds, sent)
    await until_answered(seen, [e for e, _ in sent], drain_s)
    answered = sum(e in seen.outcome_of_event for e, _ in sent)
    print(f"warm-up (not counted): {len(sent)} comments, {answered} with an outcome, "
          f"{time.monotonic() - started:.0f} s", flush=True)


def slowest(seen: Seen, requests: set[str], created: dict[str, float], fault_time: float) -> str:
    """Where the phase's slowest request spent its time: when it was created against the fault, and
    each step's time after its creation (the gap before a step is the hop into it plus its queueing)."""
    if not requests:
        return ""
    rid = max(requests, key=lambda r: seen.reply_at[r] - created[r])
    state = seen.replies[rid]["state"]
    start = int(state["created_ms"])
    steps = ", ".join(f"{s['kind']} {int(s['ts_ms']) - start}" for s in state.get("steps") or [])
    return (f"{rid} ({seen.replies[rid]['outcome']}), created {created[rid] - fault_time:+.1f} s from the fault; "
            f"ms after creation: {steps}; reply seen {1000 * (seen.reply_at[rid] - created[rid]):.0f}")


async def settle(seen: Seen, rows: list[dict[str, Any]], wait_s: float) -> None:
    """Give comments without an outcome a last ``wait_s`` after the last phase; then count them as lost
    (no outcome ever) or late (an outcome after their phase's drain)."""
    await until_answered(seen, [e for row in rows for e in row["ids"]], wait_s)
    for row in rows:
        missing = sum(e not in seen.outcome_of_event for e in row["ids"])
        row["late"] = row["lost"] - missing
        row["lost"] = missing
        row["outcomes"] = row["sent"] - missing


def supervise(sup: Supervisor, stop: threading.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(Exception):
            sup.check_once()
        time.sleep(0.2)


def fmt(row: dict[str, Any]) -> str:
    rec = f"{row['recovery_s']:.1f}" if row["recovery_s"] is not None else "-"
    return (f"| {row['fault']} | {row['sent']} | {row['outcomes']} | {row['lost']} | {row['dup_speech']} | "
            f"{row['dup_traj']} | {row['miss_traj']} | {row['dup_fx']} | {row['cancelled_pct']:.1f} | {rec} | "
            f"{row['max_s']:.1f} | {row['dead_lettered']} |")


HEADER = ("| fault | sent | outcomes | lost | dup speech | dup traj | miss traj | dup fx | cancelled % | "
          "recovery s | max s | dead-lettered |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


async def run(faults: list[str], *, replicas: int, rooms: int, rate: float, phase_s: float, fault_at_s: float,
              drain_s: float, voice: str, root: Path, warmup_s: float = 0.0) -> list[dict[str, Any]]:
    os.environ["LIVEHOST_STATE_DIR"] = str(root / "state")
    os.environ.setdefault("LIVEHOST_GRPC_PKI_DIR", str(root / "state" / "pki"))
    holder: dict[str, Any] = {"postgres": postgres.start(root / "postgres")}
    try:
        holder["triton"] = triton.start(root / "triton", REPO_ROOT / "infra" / "triton" / "models", timeout=120.0)
        return await _run_on(faults, replicas=replicas, rooms=rooms, rate=rate, phase_s=phase_s,
                             fault_at_s=fault_at_s, drain_s=drain_s, voice=voice, root=root, holder=holder,
                             warmup_s=warmup_s)
    finally:
        if "triton" in holder:
            triton.stop(holder["triton"])
        postgres.stop(holder["postgres"])


async def _run_on(faults: list[str], *, replicas: int, rooms: int, rate: float, phase_s: float, fault_at_s: float,
                  drain_s: float, voice: str, root: Path, holder: dict[str, Any],
                  warmup_s: float) -> list[dict[str, Any]]:
    dsn, triton_url = postgres.dsn(holder["postgres"]), triton.grpc_url(holder["triton"])
    with running_broker(root) as broker:
        os.environ.update(kafka.client_security(broker))
        env = {**kafka.client_security(broker), "LIVEHOST_KAFKA_BOOTSTRAP": kafka.bootstrap(broker),
               "LIVEHOST_POSTGRES_DSN": dsn, "LIVEHOST_TRITON_URL": triton_url,
               "LIVEHOST_STATE_DIR": str(root / "state"), "LIVEHOST_VOICE_ENGINE": voice,
               "LIVEHOST_GRPC_PKI_DIR": os.environ["LIVEHOST_GRPC_PKI_DIR"],
               **{f"LIVEHOST_{s.upper()}_GRPC_PORT": "0" for s in ALL_SERVICES}}
        os.environ.update(env)
        settings = Settings(kafka_bootstrap=env["LIVEHOST_KAFKA_BOOTSTRAP"], postgres_dsn=dsn, triton_url=triton_url)
        room_list, comments = make_rooms(rooms)
        pool = await connect_pool(dsn, attempts=10)
        try:
            await migrate(pool)
            await CommerceStore(pool).load_catalog({"rooms": room_list})
        finally:
            await pool.close()
        await ensure_topics(settings)
        sup = Supervisor(settings, root / "logs", env, replicas=replicas)
        sup.start()
        stop_sup = threading.Event()
        try:
            await asyncio.to_thread(sup.wait_ready, 240.0)
            watcher = threading.Thread(target=supervise, args=(sup, stop_sup), daemon=True)
            watcher.start()
            stack = Stack(settings, env, broker, sup, holder["postgres"], holder["triton"], room_list, comments)
            seen = Seen()
            stop = asyncio.Event()
            observer = asyncio.create_task(observe(settings, seen, stop))
            producer = Producer(settings)
            await producer.start()
            for room in room_list:  # each room on its product before the load starts
                await producer.send(ROOM_EVENTS, room["room_id"], {
                    "event_id": f"switch-{room['room_id']}", "room_id": room["room_id"], "type": "product_switch",
                    "ts_ms": int(time.time() * 1000), "user_id": None, "text": None,
                    "link_id": room.get("current_link"), "campaign_json": None, "viewer_count": None})
            if warmup_s > 0:
                await warm_up(stack, seen, producer, rate=rate, seconds=warmup_s, drain_s=drain_s)
            rows = []
            print(HEADER, flush=True)
            try:
                for fault in faults:
                    try:
                        row = await phase(stack, seen, producer, fault, rate=rate, phase_s=phase_s,
                                          fault_at_s=fault_at_s, drain_s=drain_s)
                    finally:
                        holder.update(postgres=stack.postgres, triton=stack.triton)  # restarted ones get stopped
                    rows.append(row)
                    if row["dead_by_topic"]:
                        print(f"  dead-lettered by source topic: {row['dead_by_topic']}", flush=True)
                    if row["cancel_reasons"]:
                        print(f"  cancelled: {row['cancel_reasons']}", flush=True)
                    if row["tool_errors"]["codes"]:
                        print(f"  failed tool results: {row['tool_errors']['codes']}; their requests ended "
                              f"{row['tool_errors']['requests_by_outcome']}", flush=True)
                    if row["slowest"]:
                        print(f"  slowest: {row['slowest']}", flush=True)
                    print(fmt(row), flush=True)
                    await asyncio.to_thread(sup.wait_ready, 120.0)  # every process back before the next fault
                await settle(seen, rows, drain_s)
                print("\nfinal (lost = no outcome by the end of the run; late = got it after its phase's drain):",
                      flush=True)
                print(HEADER, flush=True)
                for row in rows:
                    print(fmt(row) + (f" late {row['late']}" if row["late"] else ""), flush=True)
            finally:
                stop.set()
                await producer.stop()
                await observer
            return rows
        finally:
            stop_sup.set()
            sup.stop()
            with contextlib.suppress(Exception):
                kafka.stop(stack.broker if "stack" in locals() else broker)


def main() -> None:
    import logging

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # the broker fault floods it with retries
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--faults", default=",".join(ALL_FAULTS))
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--rooms", type=int, default=20)
    parser.add_argument("--rate", type=float, default=10.0, help="comments per second")
    parser.add_argument("--phase-s", type=float, default=20.0)
    parser.add_argument("--fault-at-s", type=float, default=6.0)
    parser.add_argument("--drain-s", type=float, default=45.0)
    parser.add_argument("--warmup-s", type=float, default=20.0,
                        help="seconds of the same load before the first phase, not counted (0: none)")
    parser.add_argument("--voice", default="espeak", help="espeak or text")
    args = parser.parse_args()

    def interrupted(*_: object) -> None:
        # as bench_throughput: SIGTERM unwinds like Ctrl-C, so every finally stops what it started (killed
        # with SIGTERM, the suite left its broker, PostgreSQL, Triton and services running, 2026-12-04)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    root = Path(tempfile.mkdtemp(prefix="livehost-chaos-"))
    print(f"chaos: {args.rooms} rooms, {args.rate:g} comments/s, {args.replicas} replica(s), voice {args.voice}; "
          f"work dir {root}", flush=True)
    asyncio.run(run([f for f in args.faults.split(",") if f], replicas=args.replicas, rooms=args.rooms,
                    rate=args.rate, phase_s=args.phase_s, fault_at_s=args.fault_at_s, drain_s=args.drain_s,
                    voice=args.voice, root=root, warmup_s=args.warmup_s))


if __name__ == "__main__":
    main()
