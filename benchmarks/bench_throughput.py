"""Throughput benchmark: the whole system under open-loop load, against the bare-Kafka floor.

    python benchmarks/bench_throughput.py [--rates 25,50,100,150] [--step-s 20] [--replicas 1]
                                          [--floor-rates 100,200,400] [--skip-floor] [--skip-tts]

Starts the embedded stack on free ports (Apache Kafka, PostgreSQL, Triton) and every service as its
own process (livehost.supervisor; reference policy, espeak voice unless LIVEHOST_VOICE_ENGINE says
otherwise). The demo catalog is copied into R rooms (``bench-000``, … alternating the demo's two
rooms). Load is open loop: at rate r, r rooms get one comment per second each (so every comment is
one merged request after the 800 ms merge window), sent straight to ``live.room.events``. A reader of
``agent.replies`` collects every terminal outcome.

Per rate it prints: completed requests/s (all outcomes), replies/s (goodput), cancelled % and shed %,
p50/p95/p99 end to end (first comment to terminal outcome, merge window included) for all and for
served requests, per stage p50/p95 (gap between a request's steps, the Kafka hop into the stage
included), CPU-seconds per request per process (``/proc/<pid>/stat``) and the broker's share.

The floor, in the same run: the same number of Kafka hops as a LiveHost request takes (measured),
each a pass-through process running livehost.kafka.ConsumerLoop (the same client settings,
transactions when LiveHost uses them, Avro decode + encode of a record the size of a real request
state), at stepped rates; LiveHost's capacity is printed as a ratio of the floor's.

Capacity = the highest offered rate with completed ≥ 95% of offered and ≤ 1% cancelled.
Then the TTS table (benchmarks/bench_voice.py): real-time factor and concurrent rooms per core.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg  # noqa: E402
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: E402
from aiokafka.codec import lz4_encode as lz4_compress  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from benchmarks.reasons import reason_kind  # noqa: E402
from livehost import codec, topics  # noqa: E402
from livehost.agent.state import new_state  # noqa: E402
from livehost.commerce.store import DEMO_CATALOG_PATH, CommerceStore  # noqa: E402
from livehost.config import REPO_ROOT, Settings  # noqa: E402
from livehost.db import connect_pool, migrate  # noqa: E402
from livehost.demo.runner import open_rooms  # noqa: E402
from livehost.kafka import (  # noqa: E402
    ConsumerLoop,
    Producer,
    client_options,
    consumer_options,
    ensure_topics,
    now_ms,
    producer_options,
)
from livehost.stack import kafka  # noqa: E402
from livehost.stack.testing import running_broker, running_postgres, running_triton  # noqa: E402
from livehost.supervisor import Supervisor  # noqa: E402
from livehost.topics import REPLIES, REQUESTS, ROOM_EVENTS, Topic  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
COMMENTS = [  # benign viewer questions of the demo session (answered, not screened out)
    "how much is link 3?", "is the jacket waterproof?", "what colors does it come in",
    "is the mug still in stock?", "how much is the kettle on link 2?", "any coupon for the jacket?",
    "does the frying pan work on induction?", "how many kettles are left?", "what sizes do the boots come in?",
    "what is the price of the chef knife, link 3", "is there a discount on the boots?", "love this stream",
]
STAGE_OF = {"input": "merge", "prompt": "prompt", "model_output": "policy", "action": "policy",
            "tool_result": "tools", "tool_call": "hooks", "hook_verdict": "hooks", "skill_load": "hooks",
            "correction": "hooks", "input_hook": "hooks"}
STAGES = ("merge", "prompt", "policy", "tools", "hooks")
FLOOR_GROUP = "bench-floor"
# How long after a step's drain its trajectory rows are awaited (the recorder runs at a lower CPU priority
# than the reply's path, so under saturation it catches up after the load): the step line says how many
# arrived and how late.
TRAJECTORY_WAIT_S = 60.0
LATE_WAIT_S = 30.0  # after a step closes, how long its unanswered comments are still awaited (late, not lost)
COLLECT_MIN_BYTES = 64 * 1024  # the outcome collector's fetches wait for this much (or the fetch wait)
FLOOR_BUDGET_S = 8.0  # a floor record counts when it arrives within a LiveHost request's time budget


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / TICK


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0  # gone


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            out.setdefault(_parent(int(p.name)), []).append(int(p.name))
    return out


def machine_cpu() -> dict[str, float]:
    """The machine's CPU seconds by kind (/proc/stat), to place what no process is billed for: the
    kernel's interrupt work (softirq: loopback TCP) and time the hypervisor took (steal)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:9]
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return {k: int(v) / TICK for k, v in zip(names, fields, strict=True)}


def tree_cpu_seconds(pids: list[int]) -> float:
    """CPU of the processes and all their live descendants. A process's own figure counts only the
    children it has reaped, so Triton's Python-backend stubs (where the reference policy runs) and
    PostgreSQL's backends were missing from the per-process table until 2026-12-02."""
    children = _children()
    total, todo, seen = 0.0, list(pids), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += cpu_seconds(pid)
        todo.extend(children.get(pid, []))
    return total


def pids_matching(text: str) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if text in (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(p.name))
            except OSError:
                pass
    return found


def log_sizes(log_dir: Path | None) -> dict[Path, int]:
    """The broker's log segment files and their sizes now (where a step's batches will start)."""
    if log_dir is None:
        return {}
    return {p: p.stat().st_size for p in log_dir.glob("*-*/*.log")}


def batches_since(before: dict[Path, int], log_dir: Path | None) -> dict[str, tuple[int, int]]:
    """Record batches and records per topic written to the broker's log since ``before``, read from the
    segment files themselves (Kafka's record batch v2 header: each produce request writes one batch
    per partition it carries, so records per batch is how well the producers batch; control batches,
    the transaction markers, are left out)."""
    out: dict[str, tuple[int, int]] = {}
    for path, size in log_sizes(log_dir).items():
        pos = before.get(path, 0)
        topic = path.parent.name.rsplit("-", 1)[0]
        batches = records = 0
        with path.open("rb") as fh:
            fh.seek(pos)
            data = fh.read(size - pos)
        at = 0
        while at + 61 <= len(data):
            length = int.from_bytes(data[at + 8:at + 12], "big")
            if at + 12 + length > len(data):
                break
            attributes = int.from_bytes(data[at + 21:at + 23], "big")
            if not attributes & 0x20:
                batches += 1
                records += int.from_bytes(data[at + 57:at + 61], "big")
            at += 12 + length
        b, r = out.get(topic, (0, 0))
        out[topic] = (b + batches, r + records)
    return {t: v for t, v in out.items() if v[0]}


def load_avg() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[0:3].__str__()


def _timed_loop(start_at: float = 0.0) -> tuple[float, float]:
    """CPU and wall seconds of a fixed pure-Python loop (10 million additions), begun at ``start_at`` (a
    Unix time; at once when past)."""
    time.sleep(max(0.0, start_at - time.time()))
    cpu, wall = time.process_time(), time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.process_time() - cpu, time.perf_counter() - wall


def speed_probe() -> float:
    """CPU seconds of the fixed loop: the machine's speed at this moment. On these shared 2-core machines
    it has ranged from 0.35 s to 1.8 s, between days and within one, and the capacity figures move with
    it, so every figure is printed next to it."""
    return _timed_loop()[0]


def cores_probe() -> float:
    """Cores the machine gives this run now: the speed probe's loop in one process per core at once, and
    the sum of each one's CPU time over its wall time (as many as it has cores when nothing else runs).
    The speed probe cannot see another process taking a core, as its CPU time does not count the wait:
    on 2026-12-04 a stray process took 0.75 of a core for 20 minutes while it read 0.35 s, as on a quiet
    machine; this probe read 1.3 of 2 cores."""
    n = os.cpu_count() or 1
    # forked, so the children start at once (nothing to import), and all begin the loop at one moment;
    # the pool ends its workers with SIGTERM, which the benchmark's own handler (inherited) would turn
    # into a KeyboardInterrupt traceback in the output
    with multiprocessing.get_context("fork").Pool(
            n, initializer=signal.signal, initargs=(signal.SIGTERM, signal.SIG_DFL)) as pool:
        timings = pool.map(_timed_loop, [time.time() + 0.2] * n, chunksize=1)
    return sum(cpu / max(wall, 1e-9) for cpu, wall in timings)


# ---------------------------------------------------------------------------------------------- load

@dataclass
class Step:
    rate: int
    started_ms: int = 0
    ended_ms: int = 0
    sent: int = 0
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)  # request id -> reply record
    merged: int = 0  # comments that reached an outcome inside another comment's request (merge window,
    # identical comments collapsed into one included)
    answered: set[str] = field(default_factory=set)  # ids of the comments an outcome names
    sent_to: dict[str, tuple[str, int]] = field(default_factory=dict)  # comment id -> (room, sent at ms)
    closed: bool = False  # the step's figures are taken: later outcomes are late (drain_s)
    late: int = 0  # outcomes that arrived after the step closed
    last_late_ms: int = 0  # when the last of them was completed
    cpu: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0


def comment_ids(state: dict[str, Any]) -> list[str]:
    """Every comment a request answers: its input step's event ids, which keep the comments that the
    merge window collapsed into an identical one (same text) and those screening dropped; the state's
    own comment list has neither."""
    for step in state["steps"]:
        if step["kind"] == "input":
            ids = json.loads(step["data_json"]).get("event_ids")
            if ids:
                return [str(i) for i in ids]
            break
    return [c["event_id"] for c in state.get("comments") or []]


def step_prefix(event_id: str) -> str:
    """The step a comment was sent in: ``offer`` names each comment ``<step prefix>-<n>``."""
    return event_id.split("-", 1)[0]


def credit_answers(by_prefix: dict[str, Step], answers: list[str]) -> None:
    """Counts each answered comment for the step it was sent in (its id's prefix), whichever request
    answered it: a step's first comments can merge into a request begun by the last comments of the
    unmeasured settling before it, which is filed under no step (one such comment a run was reported
    as never answered, 2026-12-04)."""
    for cid in answers:
        owner = by_prefix.get(step_prefix(cid))
        if owner is not None:
            owner.answered.add(cid)


class Collector:
    """Reads agent.replies; files each terminal outcome under the step its comment was sent in."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.by_prefix: dict[str, Step] = {}
        self.sizes: list[int] = []
        self.lz4_sizes: list[int] = []
        self.hops: list[int] = []
        self.hops_per_prompt = 1 if settings.prompt_calls_policy else 2
        self.turns_in_process = settings.prompt_runs_turns
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # Fetches in batches, as the trajectory recorder's: the instrument shares the broker and the cores
        # with what it measures (a request's latency is read from its record, not from when it arrives).
        self.consumer = AIOKafkaConsumer(REPLIES.name, **consumer_options(self.settings),
                                         fetch_min_bytes=COLLECT_MIN_BYTES, group_id=f"bench-{uuid.uuid4().hex[:8]}",
                                         auto_offset_reset="earliest")
        await self.consumer.start()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=200)
            for records in batches.values():
                for rec in records:
                    reply = codec.decode(REPLIES.schema, rec.value)
                    state = reply["state"]
                    comments = state.get("comments") or []
                    prefix = step_prefix(comments[0]["event_id"]) if comments else ""
                    answers = comment_ids(state)
                    credit_answers(self.by_prefix, answers)
                    step = self.by_prefix.get(prefix)
                    if step is None or state["request_id"] in step.outcomes:
                        continue
                    if step.closed:
                        step.late += 1
                        step.last_late_ms = max(step.last_late_ms, int(reply["completed_ms"]))
                    step.outcomes[state["request_id"]] = reply
                    step.merged += max(0, len(answers) - 1)
                    if reply["outcome"] != "reply":
                        continue  # the floor copies what a served request costs
                    kinds = [s["kind"] for s in state["steps"]]
                    self.sizes.append(len(rec.value))
                    if len(self.lz4_sizes) < 200:  # what the producers' lz4 batch compression makes of it
                        self.lz4_sizes.append(len(lz4_compress(rec.value)))
                    # Kafka records of this request: comment, requests, prompts (unless the prompt step
                    # calls the policy itself), actions, tool calls/results, reply
                    n_prompt, n_tool = kinds.count("prompt"), kinds.count("tool_call")
                    if self.turns_in_process:  # comment, request, the last action, reply
                        self.hops.append(4)
                    else:
                        self.hops.append(2 + self.hops_per_prompt * n_prompt + kinds.count("action") + n_tool)

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
        await self.consumer.stop()


async def offer(producer: AIOKafkaProducer, step: Step, prefix: str, rooms: list[str], seconds: float) -> None:
    """Open loop: ``step.rate`` comments/s, round robin over the first ``step.rate`` rooms."""
    active = rooms[:max(1, min(len(rooms), step.rate))]
    interval = 1.0 / step.rate
    t0 = time.monotonic()
    step.started_ms = now_ms()
    n = 0
    pending = []
    while (due := t0 + n * interval) < t0 + seconds:
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        room = active[n % len(active)]
        event_id, sent_ms = f"{prefix}-{n}", now_ms()
        record = {"room_id": room, "event_id": event_id, "type": "comment", "ts_ms": sent_ms,
                  "user_id": f"u-{n % 997}", "text": COMMENTS[n % len(COMMENTS)], "link_id": None,
                  "campaign_json": None, "viewer_count": None}
        step.sent_to[event_id] = (room, sent_ms)
        pending.append(await producer.send(ROOM_EVENTS.name, key=room.encode(),
                                           value=codec.encode(ROOM_EVENTS.schema, record),
                                           headers=[(codec.SCHEMA_HEADER, ROOM_EVENTS.schema.encode())]))
        n += 1
        if len(pending) > 200:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    step.sent = n
    step.ended_ms = now_ms()


def late_work(outs: list[dict[str, Any]]) -> str | None:
    """Where the requests cancelled after admission (not shed) lost their time: for each, the longest gap
    between its steps (or after its last one, to the outcome), named by the step that ended it, and when
    those gaps began. A stall of one process shows as one step kind and one short span of clock time."""
    lost = [r for r in outs if r["outcome"] == "cancelled" and not (r.get("reason") or "").startswith("shed")]
    if not lost:
        return None
    where: Counter[str] = Counter()
    gaps: list[float] = []
    began: list[int] = []
    for r in lost:
        prev, prev_kind = int(r["state"]["created_ms"]), "the first comment"
        longest = (-1, "", prev)
        for s in r["state"]["steps"]:
            gap = int(s["ts_ms"]) - prev
            if gap > longest[0]:
                longest = (gap, f"before {s['kind']}", prev)
            prev, prev_kind = int(s["ts_ms"]), s["kind"]
        if int(r["completed_ms"]) - prev > longest[0]:
            longest = (int(r["completed_ms"]) - prev, f"after {prev_kind}, to the outcome", prev)
        where[longest[1]] += 1
        gaps.append(longest[0] / 1000)
        began.append(longest[2])

    def clock(ms: int) -> str:
        return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000 // 100}"

    return (f"{len(lost)} cancelled after admission; each one's longest wait (median {statistics.median(gaps):.1f} s, "
            f"max {max(gaps):.1f} s): " + ", ".join(f"{k} {n}" for k, n in where.most_common(4))
            + f"; those waits began {clock(min(began))}–{clock(max(began))} UTC")


def summarise(step: Step, seconds: float) -> dict[str, Any]:
    outs = list(step.outcomes.values())
    lat = [(r["completed_ms"] - r["state"]["created_ms"]) / 1000 for r in outs]
    served = [(r["completed_ms"] - r["state"]["created_ms"]) / 1000 for r in outs if r["outcome"] == "reply"]
    by = {k: sum(1 for r in outs if r["outcome"] == k) for k in ("reply", "no_reply", "fallback", "rejected",
                                                                   "cancelled")}
    shed = sum(1 for r in outs if r["outcome"] == "cancelled" and (r.get("reason") or "").startswith("shed"))
    stages: dict[str, list[float]] = {s: [] for s in STAGES}
    for r in outs:
        state = r["state"]
        prev = state["created_ms"]
        per: dict[str, float] = {}
        for s in state["steps"]:
            stage = STAGE_OF.get(s["kind"], "hooks")
            per[stage] = per.get(stage, 0) + max(0, s["ts_ms"] - prev)
            prev = s["ts_ms"]
        for stage, v in per.items():
            stages[stage].append(v / 1000)
    n = max(1, len(outs))
    # What a served request holds: more comments merged into it (they queue behind their room's request
    # under overload) and more policy turns make it cost more, which CPU per reply alone cannot tell.
    served_states = [r["state"] for r in outs if r["outcome"] == "reply"]
    load = {"comments": statistics.fmean(len(comment_ids(s)) for s in served_states) if served_states else 0.0,
            "turns": statistics.fmean(sum(1 for x in s["steps"] if x["kind"] == "prompt") for s in served_states)
            if served_states else 0.0}
    return {"offered": step.rate, "served_load": load,
            "sent": step.sent, "done": len(outs), "completed_s": len(outs) / seconds,
            "replies_s": by["reply"] / seconds, "cancelled_pct": 100 * (by["cancelled"] - shed) / n,
            "shed_pct": 100 * shed / n, "outcomes": by, "p50": pct(lat, .5), "p95": pct(lat, .95),
            "p99": pct(lat, .99), "served_p95": pct(served, .95),
            "stages": {k: (pct(v, .5), pct(v, .95)) for k, v in stages.items()},
            "cpu_per_req": {k: v / n for k, v in step.cpu.items()},
            "broker_share": step.cpu.get("broker", 0) / max(1e-9, sum(step.cpu.values())),
            "cpu_util": sum(step.cpu.values()) / max(1e-9, step.wall_s), "wall_s": step.wall_s}


async def trajectories_recorded(pool: asyncpg.Pool, step: Step, wait_s: float) -> dict[str, float]:
    """The step's outcomes with a trajectory row (the recorder is off the reply's path and may lag under
    load): waits up to ``wait_s`` for all of them, then says how many and how late (row written less
    outcome time)."""
    ids = list(step.outcomes)
    deadline = time.monotonic() + wait_s
    while True:
        rows = await pool.fetch(
            "SELECT extract(epoch FROM recorded_at) * 1000 AS recorded_ms, completed_ms FROM trajectories "
            "WHERE request_id = ANY($1::text[])", ids)
        if len(rows) >= len(ids) or time.monotonic() >= deadline:
            break
        await asyncio.sleep(1.0)
    lags = [(float(r["recorded_ms"]) - r["completed_ms"]) / 1000 for r in rows]
    last = max((float(r["recorded_ms"]) for r in rows), default=float(step.ended_ms))
    return {"recorded": len(rows), "caught_up_s": (last - step.ended_ms) / 1000,
            "lag_p50": pct(lags, .5), "lag_p95": pct(lags, .95), "lag_max": max(lags, default=float("nan"))}


async def unanswered(step: Step, at_close: int, wait_s: float) -> dict[str, Any]:
    """The comments that had no outcome when the step's figures were taken (``drain_s`` after its load):
    waits up to ``wait_s`` more, then says how many were answered late (and how late, after the load
    stopped) and how many never were: late is slow, never is lost."""
    deadline = time.monotonic() + wait_s
    while len(step.answered) < step.sent and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.5)
    never = step.sent - len(step.answered)
    last_s = (step.last_late_ms - step.ended_ms) / 1000 if step.late else float("nan")
    lost = [step.sent_to[i] for i in step.sent_to.keys() - step.answered]
    # where the lost ones were: in a few rooms (a room stuck) or spread; sent when (seconds before the load stopped)
    return {"at_close": at_close, "late": at_close - never, "never": never, "late_requests": step.late,
            "last_late_s": last_s, "waited_s": wait_s, "never_rooms": len({room for room, _ in lost}),
            "never_sent_s_before_end": sorted((step.ended_ms - ts) / 1000 for _, ts in lost)}


def unanswered_line(u: dict[str, Any]) -> str:
    return (f"comments without an outcome when the step closed: {u['at_close']:.0f}; answered later "
            f"{u['late']:.0f} (the last {u['last_late_s']:.1f} s after the load stopped), "
            f"never within {u['waited_s']:.0f} s more: {u['never']:.0f}"
            + (f" (in {u['never_rooms']} rooms, sent {u['never_sent_s_before_end'][0]:.1f}–"
               f"{u['never_sent_s_before_end'][-1]:.1f} s before the load stopped)" if u["never"] else ""))


def trajectory_line(t: dict[str, float], outcomes: int) -> str:
    return (f"trajectories: {t['recorded']:.0f} of {outcomes} outcomes recorded, the last "
            f"{t['caught_up_s']:.1f} s after the load stopped; row written after the outcome "
            f"p50 {t['lag_p50']:.2f} s, p95 {t['lag_p95']:.2f} s, max {t['lag_max']:.2f} s")


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n## {title}\n")
    print("| offered/s | completed/s | replies/s | cancelled % | shed % | p50 s | p95 s | p99 s | p95 served s "
          "| speed probe s | cores free |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['offered']} | {r['completed_s']:.1f} | {r['replies_s']:.1f} | {r['cancelled_pct']:.1f} | "
              f"{r['shed_pct']:.1f} | {r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} | {r['served_p95']:.2f} "
              f"| {r.get('probe_s', float('nan')):.2f} | {r.get('cores_free', float('nan')):.2f} |")
    print("\nPer stage p50/p95 ms (step gaps; the Kafka hop into the stage included):\n")
    print("| offered/s | " + " | ".join(STAGES) + " |")
    print("|---|" + "---|" * len(STAGES))
    for r in rows:
        print(f"| {r['offered']} | " + " | ".join(f"{1000 * r['stages'][s][0]:.0f}/{1000 * r['stages'][s][1]:.0f}"
                                                for s in STAGES) + " |")
    procs = sorted({k for r in rows for k in r["cpu_per_req"]})
    print("\nCPU ms per request per process (and machine cores busy with the stack, broker share):\n")
    print("| offered/s | " + " | ".join(procs) + " | cores busy | broker share |")
    print("|---|" + "---|" * (len(procs) + 2))
    for r in rows:
        print(f"| {r['offered']} | " + " | ".join(f"{1000 * r['cpu_per_req'].get(p, 0):.1f}" for p in procs)
              + f" | {r['cpu_util']:.2f} | {100 * r['broker_share']:.0f}% |")
    print("\nThe machine's cores by kind of work while the load was offered (/proc/stat; user and system "
          "include every process; the CPU table above also counts the drain that follows):\n")
    print("| offered/s | user | system | softirq | irq | steal | iowait | idle |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        m = r["machine"]
        print(f"| {r['offered']} | {m['user'] + m['nice']:.2f} | {m['system']:.2f} | {m['softirq']:.2f} | "
              f"{m['irq']:.2f} | {m['steal']:.2f} | {m['iowait']:.2f} | {m['idle']:.2f} |")
    names = sorted({t for r in rows for t in r.get("batches", {})})
    if names:
        print("\nRecords per batch written to the broker's log, per topic (over the step and its drain; a "
              "produce request writes one batch per partition it carries), and batches per second:\n")
        print("| offered/s | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for r in rows:
            cells = []
            for t in names:
                b, n = r["batches"].get(t, (0, 0))
                cells.append(f"{n / b:.1f}, {b / r['wall_s']:.0f}/s" if b else "-")
            print(f"| {r['offered']} | " + " | ".join(cells) + " |")
    groups = sorted({g for r in rows for g in r.get("txn", {})})
    if groups:
        print("\nTransactional steps' cycle (livehost_kafka_transaction_*): handle ms + commit ms per "
              "transaction, input records per transaction, transactions/s:\n")
        print("| offered/s | " + " | ".join(groups) + " |")
        print("|---|" + "---|" * len(groups))
        for r in rows:
            cells = []
            for g in groups:
                c = r["txn"].get(g)
                cells.append(f"{c['handle_ms']:.0f} + {c['commit_ms']:.0f}, {c['records']:.1f} rec, "
                             f"{c['per_s']:.0f}/s" if c else "-")
            print(f"| {r['offered']} | " + " | ".join(cells) + " |")


def meets_capacity_rule(r: dict[str, Any]) -> bool:
    """Completed ≥ 95% of offered, ≤ 1% cancelled, ≤ 1% shed."""
    return r["completed_s"] >= 0.95 * r["offered"] and r["cancelled_pct"] <= 1.0 and r["shed_pct"] <= 1.0


def capacity(rows: list[dict[str, Any]]) -> float:
    return max((r["completed_s"] for r in rows if meets_capacity_rule(r)), default=0.0)


# The issue's targets (README "Targets of issue 13"), checked against each run's own figures.
TARGET_CAPACITY_S = 100.0  # merged requests/s with ≤ 1% cancelled or shed
TARGET_FLOOR_RATIO = 0.2
TARGET_P95_AT_50_S = 1.5
TARGET_GOODPUT_AT_2X = 0.9  # replies/s at 2× capacity, as a share of capacity
TARGET_SERVED_P95_AT_2X_S = 2.0
OVERLOAD_BAND = (1.8, 2.2)  # a step counts as "2× capacity" within this band of the measured capacity


def capacity_rate(rows: list[dict[str, Any]]) -> int:
    """The highest offered rate whose step meets the capacity rule (0: none did)."""
    return max((r["offered"] for r in rows if meets_capacity_rule(r)), default=0)


def overload_step(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The step closest to 2× this run's capacity rate, within OVERLOAD_BAND (None: no such step, or
    no capacity)."""
    cap = capacity_rate(rows)
    near = [r for r in rows if cap and OVERLOAD_BAND[0] * cap <= r["offered"] <= OVERLOAD_BAND[1] * cap]
    return min(near, key=lambda r: abs(r["offered"] - 2 * cap), default=None)


def overload_rate(rows: list[dict[str, Any]]) -> int | None:
    """The rate of the extra step that measures overload: 2× the capacity rate found, unless a step
    near it already ran (or no step met the capacity rule)."""
    cap = capacity_rate(rows)
    if not cap or overload_step(rows) is not None:
        return None
    return 2 * cap


def targets(rows: list[dict[str, Any]], floor_s: float) -> list[tuple[str, str, str]]:
    """(target, "met" / "not met" / "not measured", the figure) for each of the issue's targets that
    this run's steps measure. Capacity is the highest offered rate meeting the rule; goodput at 2× is
    a share of that rate."""
    def verdict(ok: bool) -> str:
        return "met" if ok else "not met"

    cap, done = capacity_rate(rows), capacity(rows)
    out = [(f"≥ {TARGET_CAPACITY_S:.0f} merged requests/s, ≤ 1% cancelled or shed", verdict(cap >= TARGET_CAPACITY_S),
            f"the {cap}/s step, {done:.1f} completed/s" if cap else "no step met the rule")]
    if floor_s == floor_s and floor_s > 0:  # not NaN: the floor was measured
        out.append((f"ratio to the floor ≥ {TARGET_FLOOR_RATIO}", verdict(done / floor_s >= TARGET_FLOOR_RATIO),
                    f"{done / floor_s:.2f} ({done:.1f} / {floor_s:.0f})"))
    else:
        out.append((f"ratio to the floor ≥ {TARGET_FLOOR_RATIO}", "not measured", "floor skipped"))
    at50 = next((r for r in rows if r["offered"] == 50), None)
    out.append((f"p95 ≤ {TARGET_P95_AT_50_S} s at 50/s",
                verdict(at50["p95"] <= TARGET_P95_AT_50_S) if at50 else "not measured",
                f"{at50['p95']:.2f} s" if at50 else "no 50/s step"))
    over = overload_step(rows)
    if over is None:
        why = "no capacity step" if not cap else f"no step near 2× {cap}/s"
        out += [(f"goodput at 2× capacity ≥ {TARGET_GOODPUT_AT_2X:.0%} of capacity", "not measured", why),
                (f"served p95 at 2× capacity ≤ {TARGET_SERVED_P95_AT_2X_S} s", "not measured", why)]
    else:
        share = over["replies_s"] / cap
        out += [(f"goodput at 2× capacity ≥ {TARGET_GOODPUT_AT_2X:.0%} of capacity",
                 verdict(share >= TARGET_GOODPUT_AT_2X),
                 f"{over['replies_s']:.1f} replies/s at {over['offered']}/s: {share:.0%} of {cap}/s"),
                (f"served p95 at 2× capacity ≤ {TARGET_SERVED_P95_AT_2X_S} s",
                 verdict(over["served_p95"] <= TARGET_SERVED_P95_AT_2X_S),
                 f"{over['served_p95']:.2f} s at {over['offered']}/s")]
    return out


def print_targets(label: str, rows: list[dict[str, Any]], floor_s: float) -> None:
    probes = [r["probe_s"] for r in rows if "probe_s" in r]
    probe = f", speed probe {min(probes):.2f}–{max(probes):.2f} s" if probes else ""
    free = [r["cores_free"] for r in rows if "cores_free" in r]
    probe += f", cores free {min(free):.2f}–{max(free):.2f} of {os.cpu_count()}" if free else ""
    print(f"\n## Targets ({label}{probe})\n")
    print("| target | status | this run |")
    print("|---|---|---|")
    for target, status, figure in targets(rows, floor_s):
        print(f"| {target} | {status} | {figure} |")


def txn_totals(urls: list[str]) -> dict[tuple[str, str], float]:
    """Sums of the transactional steps' cycle metrics (livehost.metrics.TXN_SECONDS, TXN_RECORDS) over
    the processes, keyed (group, series): handle and commit seconds, records, transactions."""
    totals: dict[tuple[str, str], float] = {}
    for url in urls:
        try:
            text = urllib.request.urlopen(url, timeout=5).read().decode()
        except OSError:
            continue  # a process restarting; its figures are missing from this step
        for family in text_string_to_metric_families(text):
            if family.name not in ("livehost_kafka_transaction_seconds", "livehost_kafka_transaction_records"):
                continue
            for sample in family.samples:
                group = sample.labels.get("group", "")
                if sample.name == "livehost_kafka_transaction_seconds_sum":
                    key = (group, sample.labels["phase"])
                elif sample.name == "livehost_kafka_transaction_records_sum":
                    key = (group, "records")
                elif sample.name == "livehost_kafka_transaction_records_count":
                    key = (group, "transactions")
                else:
                    continue
                totals[key] = totals.get(key, 0.0) + sample.value
    return totals


def txn_cycle(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float],
              wall_s: float) -> dict[str, Any]:
    """Per transactional group over one step (``wall_s`` long): mean handle and commit ms per
    transaction, records per transaction, transactions per second."""
    out: dict[str, Any] = {}
    for group in sorted({g for g, _ in after}):
        def delta(series: str, group: str = group) -> float:
            return after.get((group, series), 0.0) - before.get((group, series), 0.0)
        n = delta("transactions")
        if n > 0:
            out[group] = {"handle_ms": 1000 * delta("handle") / n, "commit_ms": 1000 * delta("commit") / n,
                          "records": delta("records") / n, "per_s": n / wall_s}
    return out


async def run_steps(settings: Settings, rooms: list[str], rates: list[int], seconds: float,
                    procs: dict[str, list[int]], drain_s: float,
                    metrics_urls: list[str] | None = None, log_dir: Path | None = None,
                    then: Callable[[list[dict[str, Any]]], int | None] | None = None,
                    settle_s: float = 0.0) -> list[dict[str, Any]]:
    """One step per rate; then, given the rows, ``then`` may name one more rate (the overload step).
    Each step first offers its rate for ``settle_s`` unmeasured, so that it measures the steady state
    at that rate rather than the way out of the step before (the admission limit adapts over seconds)."""
    collector = Collector(settings)
    await collector.start()
    producer = AIOKafkaProducer(**client_options(settings), **producer_options(settings), acks="all", linger_ms=5)
    await producer.start()
    pool = await connect_pool(settings.postgres_dsn, attempts=10, min_size=1, max_size=1)
    rows = []
    try:
        plan = list(rates)
        for i, rate in enumerate(plan):  # plan may grow by one step at its end (then)
            step = Step(rate)
            probe_s = speed_probe()  # between steps, while the stack idles
            cores_free = cores_probe()
            prefix = f"s{i}x{uuid.uuid4().hex[:6]}"
            collector.by_prefix[prefix] = step
            if settle_s > 0:  # its outcomes go to no step (their prefix is not registered)
                await offer(producer, Step(rate), f"settle{i}x{uuid.uuid4().hex[:6]}", rooms, settle_s)
            before = {k: tree_cpu_seconds(pids) for k, pids in procs.items()}
            txn_before = txn_totals(metrics_urls or [])
            machine_before = machine_cpu()
            logs_before = log_sizes(log_dir)
            own = os.times()  # this process: the load generator and the collector, on the same cores
            t0 = time.monotonic()
            await offer(producer, step, prefix, rooms, seconds)
            offered_s = time.monotonic() - t0
            machine_offered = machine_cpu()  # utilisation under load: the drain below dilutes it
            deadline = time.monotonic() + drain_s
            while time.monotonic() < deadline and len(step.outcomes) < step.sent:  # noqa: ASYNC110
                await asyncio.sleep(0.25)
            step.wall_s = time.monotonic() - t0
            step.cpu = {k: tree_cpu_seconds(pids) - before[k] for k, pids in procs.items()}
            now = os.times()
            bench_cores = (now.user + now.system - own.user - own.system) / step.wall_s
            row = summarise(step, seconds)
            step.closed = True
            unanswered_at_close = step.sent - len(step.answered)
            row["machine"] = {k: (machine_offered[k] - machine_before[k]) / offered_s for k in machine_offered}
            row["txn"] = txn_cycle(txn_before, txn_totals(metrics_urls or []), step.wall_s)
            row["batches"] = batches_since(logs_before, log_dir)
            row["probe_s"] = probe_s
            row["cores_free"] = cores_free
            rows.append(row)
            print(f"  {rate}/s: sent {step.sent}, outcomes {len(step.outcomes)} {row['outcomes']} "
                  f"(no outcome of their own within {drain_s:.0f} s of the step's end: "
                  f"{step.sent - len(step.outcomes)}, of which merged into another comment's request: {step.merged}), "
                  f"p95 {row['p95']:.2f}s, load {load_avg()}, benchmark process {bench_cores:.2f} cores, "
                  f"speed probe before the step {probe_s:.2f} s, cores free {cores_free:.2f}", flush=True)
            total_cpu = sum(step.cpu.values())  # a change's CPU effect, finer than the table's 0.1 ms cells
            print(f"    stack CPU {total_cpu:.1f} s over the step and its drain: "
                  f"{1000 * total_cpu / max(1, len(step.outcomes)):.2f} ms per outcome, "
                  f"{1000 * total_cpu / max(1, row['outcomes']['reply']):.2f} ms per reply; ms per outcome: "
                  + ", ".join(f"{k} {1000 * v / max(1, len(step.outcomes)):.2f}" for k, v in sorted(step.cpu.items())),
                  flush=True)
            print(f"    a served request: {row['served_load']['comments']:.2f} comments, "
                  f"{row['served_load']['turns']:.2f} policy turns (means)", flush=True)
            reasons = Counter(reason_kind(r.get("reason")) for r in step.outcomes.values()
                              if r["outcome"] == "cancelled")
            if reasons:
                print(f"    cancelled because (figures as N): {reasons.most_common(4)}", flush=True)
            if (late := late_work(list(step.outcomes.values()))) is not None:
                print(f"    {late}", flush=True)
            row["trajectories"] = await trajectories_recorded(pool, step, TRAJECTORY_WAIT_S)
            print(f"    {trajectory_line(row['trajectories'], len(step.outcomes))}", flush=True)
            if unanswered_at_close:
                row["unanswered"] = await unanswered(step, unanswered_at_close, LATE_WAIT_S)
                print(f"    {unanswered_line(row['unanswered'])}", flush=True)
            await asyncio.sleep(3)
            if then is not None and i == len(rates) - 1:
                extra = then(rows)
                if extra is not None:  # one room per comment per second, as in every step
                    plan.append(min(extra, len(rooms)))
                    print(f"  then {plan[-1]}/s: 2× the capacity these steps found", flush=True)
    finally:
        await producer.stop()
        await collector.stop()
        await pool.close()
    if collector.sizes:
        lz4 = f" ({statistics.fmean(collector.lz4_sizes):.0f} B lz4-compressed)" if collector.lz4_sizes else ""
        print(f"  served reply record size mean {statistics.fmean(collector.sizes):.0f} B{lz4}, "
              f"Kafka hops per request mean {statistics.fmean(collector.hops):.1f}")
    rows_meta = {"size": int(statistics.fmean(collector.sizes)) if collector.sizes else 1500,
                 "hops": round(statistics.fmean(collector.hops)) if collector.hops else 8}
    for r in rows:
        r.update(rows_meta)
    return rows


# ---------------------------------------------------------------------------------------------- floor

def floor_topics(hops: int, label: str) -> list[Topic]:
    return [Topic(f"bench.floor.{label}.{i}", key="room_id", partitions=4, schema=REQUESTS.schema, doc="floor hop")
            for i in range(hops)]


def floor_stage(bootstrap: str, index: int, hops: int, label: str) -> None:
    """One pass-through process: consume hop ``index``, decode, encode, produce to ``index + 1``."""
    hop_topics = floor_topics(hops, label)
    topics.ALL_TOPICS = (*topics.ALL_TOPICS, *hop_topics)  # type: ignore[assignment]
    settings = Settings(kafka_bootstrap=bootstrap)

    async def main() -> None:
        producer = Producer(settings)
        await producer.start()
        out = hop_topics[index + 1]

        async def handler(topic: Topic, record: dict[str, Any], rec: Any) -> None:
            await producer.send(out, rec.key.decode(), record)

        await ConsumerLoop(settings, f"{FLOOR_GROUP}-{label}-{index}", [hop_topics[index]], handler, producer,
                           transactional=True).run()

    asyncio.run(main())


def floor_run(settings: Settings, hops: int, size: int, rates: list[int], seconds: float,
              env: dict[str, str], log_dir: Path, label: str) -> list[dict[str, Any]]:
    hop_topics = floor_topics(hops + 1, label)
    asyncio.run(ensure_topics(settings, hop_topics))
    procs = []
    for i in range(hops):
        with open(log_dir / f"floor-{i}.log", "wb") as log:
            procs.append(subprocess.Popen([sys.executable, __file__, "--floor-stage", str(i), "--floor-hops",
                                           str(hops + 1), "--bootstrap", settings.kafka_bootstrap,
                                           "--floor-label", label],
                                          env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT))
    try:
        return asyncio.run(floor_drive(settings, hop_topics, size, rates, seconds, [p.pid for p in procs]))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


async def floor_drive(settings: Settings, hop_topics: list[Topic], size: int, rates: list[int], seconds: float,
                      pids: list[int]) -> list[dict[str, Any]]:
    base = new_state(room_id="r0", harness_version="v", comments=[{"event_id": "e", "user_id": "u",
                     "text": "how much is link 3?", "ts_ms": 0}], room={}, ttl_ms=10_000, time_budget_ms=10_000)
    pad = max(0, size - len(codec.encode(REQUESTS.schema, {"state": base})))
    template = {"state": {**base, "room_json": json.dumps({"pad": "x" * pad})}}
    schema = hop_topics[0].schema
    consumer = AIOKafkaConsumer(hop_topics[-1].name, **consumer_options(settings),
                                group_id=f"floor-sink-{uuid.uuid4().hex[:6]}", auto_offset_reset="earliest")
    await consumer.start()
    producer = AIOKafkaProducer(**client_options(settings), **producer_options(settings), acks="all", linger_ms=1)
    await producer.start()
    got: dict[str, float] = {}

    async def sink() -> None:
        while True:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for rec in records:
                    st = codec.decode(schema, rec.value)["state"]
                    got[st["request_id"]] = (now_ms() - st["created_ms"]) / 1000

    task = asyncio.create_task(sink())
    # warm up: every stage joined its group and passes records
    warm = 0
    while not any(k.startswith("warm") for k in got) and warm < 600:
        st = {**template["state"], "request_id": f"warm-{warm}", "room_id": "r0", "created_ms": now_ms()}
        await producer.send_and_wait(hop_topics[0].name, key=b"r0", value=codec.encode(schema, {"state": st}),
                                     headers=[(codec.SCHEMA_HEADER, schema.encode())])
        warm += 1
        await asyncio.sleep(0.5)
    await asyncio.sleep(10)  # every stage joined and the warm-up records drained before the first step
    rows = []
    cpu_pids = {"floor": pids}
    for rate in rates:
        prefix = uuid.uuid4().hex[:6]
        before = sum(cpu_seconds(p) for p in cpu_pids["floor"])
        t0 = time.monotonic()
        n = 0
        pending = []
        while (due := t0 + n / rate) < t0 + seconds:
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            room = f"r{n % 100}"
            st = {**template["state"], "request_id": f"{prefix}-{n}", "room_id": room, "created_ms": now_ms()}
            pending.append(await producer.send(hop_topics[0].name, key=room.encode(),
                                               value=codec.encode(schema, {"state": st}),
                                               headers=[(codec.SCHEMA_HEADER, schema.encode())]))
            n += 1
        await asyncio.gather(*pending)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and sum(1 for k in got if k.startswith(prefix)) < n:  # noqa: ASYNC110
            await asyncio.sleep(0.25)
        lat = [v for k, v in got.items() if k.startswith(prefix)]
        cpu = sum(cpu_seconds(p) for p in cpu_pids["floor"]) - before
        within = sum(1 for v in lat if v <= FLOOR_BUDGET_S)
        row = {"offered": rate, "delivered_s": within / seconds, "p50": pct(lat, .5), "p95": pct(lat, .95),
               "cpu_ms_per_req": 1000 * cpu / max(1, len(lat)), "lost": n - len(lat)}
        rows.append(row)
        print(f"  floor {rate}/s: {len(lat)}/{n} delivered, {within} within {FLOOR_BUDGET_S:.0f} s, "
              f"p95 {row['p95']:.2f}s, load {load_avg()}", flush=True)
        await asyncio.sleep(2)
    task.cancel()
    await consumer.stop()
    await producer.stop()
    return rows


# ---------------------------------------------------------------------------------------------- stack

async def prepare(settings: Settings, n_rooms: int) -> list[str]:
    demo = json.loads(DEMO_CATALOG_PATH.read_text())
    rooms = []
    for i in range(n_rooms):
        base = demo["rooms"][i % len(demo["rooms"])]
        rooms.append({**base, "room_id": f"bench-{i:03d}"})
    pool = await connect_pool(settings.postgres_dsn, attempts=10)
    try:
        await migrate(pool)
        await CommerceStore(pool).load_catalog({"rooms": rooms, "orders": []})
    finally:
        await pool.close()
    await ensure_topics(settings)
    producer = Producer(settings)
    await producer.start()
    try:
        await open_rooms(producer, rooms)
    finally:
        await producer.stop()
    return [r["room_id"] for r in rooms]


def run_livehost(root: Path, base_env: dict[str, str], bootstrap: str, broker_pid: int, args: argparse.Namespace,
                 label: str, txn: bool, log_dir: Path | None = None) -> list[dict[str, Any]]:
    env = {**base_env, "LIVEHOST_KAFKA_TRANSACTIONS": "true" if txn else "false",
           "LIVEHOST_PROMPT_CALLS_POLICY": "true" if args.turns == "prompt-policy" else "false",
           "LIVEHOST_PROMPT_RUNS_TURNS": "true" if args.turns == "prompt" else "false",
           "LIVEHOST_STATE_DIR": str(root / f"state-{label}")}
    old = dict(os.environ)
    os.environ.update(env)
    settings = Settings()  # from the environment: free gRPC ports (0), this run's broker and database
    from livehost.stack.testing import reset_topics
    reset_topics(bootstrap)
    # room for the overload step: at most 2× the highest listed rate (when that rate is the capacity)
    rooms = asyncio.run(prepare(settings, max(args.rates) * (2 if args.overload_step else 1)))
    sups = [Supervisor(settings, root / f"logs-{label}", env)]
    for r in range(1, args.replicas):
        sups.append(Supervisor(settings, root / f"logs-{label}-r{r}", {**env, "LIVEHOST_REPLICA_ID": f"r{r}"},
                               services=("hooks", "prompt", "policy", "tools")))
    try:
        for sup in sups:
            sup.start()
        for sup in sups:
            sup.wait_ready(timeout=180)
        procs: dict[str, list[int]] = {"broker": [broker_pid]}
        for sup in sups:
            for name, proc in sup.procs.items():
                procs.setdefault(name, []).append(proc.pid)
        triton = pids_matching("tritonserver")[:1]
        if triton:
            procs["triton"] = triton  # with its Python-backend stubs (tree_cpu_seconds)
        pg_dir = str(root / "postgres")
        pg_pids = pids_matching(pg_dir)
        postgres = [p for p in pg_pids if _parent(p) not in pg_pids]
        if postgres:
            procs["postgres"] = postgres[:1]  # the postmaster and its backends
        time.sleep(3)
        # Warm-up, not measured: every room's first request loads its caches, and the broker's JVM
        # compiles its hot paths. A 5 s warm-up left the first arm on a cold broker: the same code's
        # broker CPU at 50/s was 12.4 ms per request then and 7.0 in the arm after it (2026-12-03).
        asyncio.run(run_steps(settings, rooms, [min(25, max(args.rates))], args.warmup_s, procs, 20))
        urls = [proc.metrics_url for sup in sups for proc in sup.procs.values() if proc.metrics_url]
        return asyncio.run(run_steps(settings, rooms, args.rates, args.step_s, procs, args.drain_s, urls,
                                     log_dir, then=overload_rate if args.overload_step else None,
                                     settle_s=args.settle_s))
    finally:
        for sup in sups:
            sup.stop()
        os.environ.clear()
        os.environ.update(old)


def tts_table() -> None:
    import bench_voice  # type: ignore[import-not-found]

    print("\n## TTS (benchmarks/bench_voice.py): real-time factor and concurrent speaking rooms per core\n")
    print("| engine | RTF mean (wall) | CPU RTF | rooms per core (1/CPU RTF) | TTFA p50 ms |")
    print("|---|---|---|---|---|")
    for engine in ("piper", "espeak"):
        try:
            r = bench_voice.bench(engine, 1)
        except Exception as exc:  # an engine missing on this machine is reported, not fatal
            print(f"| {engine} | unavailable: {exc} | | | |")
            continue
        print(f"| {engine} | {r['rtf_mean']:.3f} | {r['cpu_rtf']:.3f} | {1 / r['cpu_rtf']:.1f} "
              f"| {r['ttfa_p50_ms']:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="25,50,100,200")
    ap.add_argument("--step-s", type=float, default=20.0)
    ap.add_argument("--settle-s", type=float, default=10.0,
                    help="unmeasured load at each step's rate before the step is measured")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--warmup-s", type=float, default=40.0, help="unmeasured load before the steps")
    ap.add_argument("--drain-s", type=float, default=12.0,
                    help="how long after a step's load its outcomes are still awaited (later ones count as missing)")
    ap.add_argument("--turns", choices=("prompt", "prompt-policy", "services"), default="prompt",
                    help="where a request's turns run: all in the prompt step (the default, "
                         "LIVEHOST_PROMPT_RUNS_TURNS), prompt and policy in one step and hooks and tools over "
                         "Kafka (LIVEHOST_PROMPT_CALLS_POLICY), or every step its own service")
    ap.add_argument("--transactions", default="true", help="true, false or both")
    ap.add_argument("--floor-rates", default="25,50,100")
    ap.add_argument("--skip-floor", action="store_true")
    ap.add_argument("--skip-tts", action="store_true")
    ap.add_argument("--keep-logs", type=Path, default=None, metavar="DIR",
                    help="copy every service's log there (logs-<arm>…/<service>.log) when the arm ends")
    ap.add_argument("--no-overload-step", dest="overload_step", action="store_false",
                    help="do not add a step at 2× the capacity found when no listed rate is near it")
    ap.add_argument("--floor-stage", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--floor-hops", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default="", help=argparse.SUPPRESS)
    ap.add_argument("--floor-label", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.floor_stage >= 0:
        floor_stage(args.bootstrap, args.floor_stage, args.floor_hops, args.floor_label)
        return
    def interrupted(*_: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM too stops every process this benchmark started

    signal.signal(signal.SIGTERM, interrupted)
    args.rates = [int(x) for x in args.rates.split(",")]
    print(f"# bench_throughput: {os.cpu_count()} cores, speed probe (CPU s of a fixed Python loop; lower is "
          f"faster) {speed_probe():.2f}, cores free (the loop in one process per core at once) "
          f"{cores_probe():.2f}, load average at start {load_avg()}, "
          f"rates {args.rates}, {args.step_s:.0f} s per rate after {args.settle_s:.0f} s unmeasured at it, "
          f"replicas {args.replicas}, "
          f"turns run in: {args.turns}", flush=True)
    arms = {"true": [True], "false": [False], "both": [True, False]}[args.transactions]
    with tempfile.TemporaryDirectory(prefix="bench-tp-") as tmp:
        root = Path(tmp)
        with running_broker(root) as broker, running_postgres(root) as dsn, \
                running_triton(root, REPO_ROOT / "infra" / "triton" / "models") as triton_url:
            bootstrap = kafka.bootstrap(broker)
            os.environ.update(kafka.client_security(broker))  # the broker as users run it (SASL_SSL)
            base_env = {"LIVEHOST_KAFKA_BOOTSTRAP": bootstrap, "LIVEHOST_POSTGRES_DSN": dsn,
                        "LIVEHOST_TRITON_URL": triton_url,
                        "LIVEHOST_VOICE_ENGINE": os.environ.get("LIVEHOST_VOICE_ENGINE", "espeak"),
                        **{f"LIVEHOST_{s}_GRPC_PORT": "0" for s in ("INGEST", "PROMPT", "POLICY", "TOOLS", "VOICE",
                                                                    "HARNESS")}}
            results = {}
            for txn in arms:
                label = "txn" if txn else "atleastonce"
                print(f"\n# LiveHost, transactions {'on' if txn else 'off'}", flush=True)
                results[label] = run_livehost(root, base_env, bootstrap, broker.pid, args, label, txn,
                                              Path(broker.workdir) / "data")
                if args.keep_logs is not None:  # the run's folder goes when it ends: what a stall left
                    for logs in sorted(root.glob(f"logs-{label}*")):
                        shutil.copytree(logs, args.keep_logs / logs.name, dirs_exist_ok=True)
                    print(f"# service logs of this arm kept in {args.keep_logs}", flush=True)
                print_table(f"LiveHost, transactions {'on' if txn else 'off'}, replicas {args.replicas}",
                            results[label])
            floors: dict[str, float] = {}
            for (label, rows), txn in zip(results.items(), arms, strict=True):
                if args.skip_floor:
                    break
                hops, size = rows[0]["hops"], rows[0]["size"]
                settings = Settings(kafka_bootstrap=bootstrap)
                print(f"\n# Floor ({label}): {hops} pass-through ConsumerLoop processes, {size} B records",
                      flush=True)
                floor = floor_run(settings, hops, size, [int(x) for x in args.floor_rates.split(",")], args.step_s,
                                  {"LIVEHOST_KAFKA_TRANSACTIONS": "true" if txn else "false"}, root, label)
                print(f"\n## Bare-Kafka floor ({hops} hops, transactions {'on' if txn else 'off'})\n")
                print(f"| offered/s | delivered ≤{FLOOR_BUDGET_S:.0f} s /s | p50 s | p95 s | "
                      "CPU ms/request (all hops) |")
                print("|---|---|---|---|---|")
                for r in floor:
                    print(f"| {r['offered']} | {r['delivered_s']:.1f} | {r['p50']:.3f} | {r['p95']:.3f} | "
                          f"{r['cpu_ms_per_req']:.1f} |")
                floors[label] = max((r["delivered_s"] for r in floor if r["delivered_s"] >= 0.95 * r["offered"]),
                                    default=max(r["delivered_s"] for r in floor))
            print("\n## Capacity (completed ≥ 95% of offered, ≤ 1% cancelled or shed)\n")
            print("| arm | LiveHost requests/s | floor requests/s | ratio | best goodput replies/s | ratio |")
            print("|---|---|---|---|---|---|")
            for label, rows in results.items():
                cap, fl = capacity(rows), floors.get(label, float("nan"))
                best = max(r["replies_s"] for r in rows)
                print(f"| {label} | {cap:.1f} | {fl:.0f} | {cap / fl if fl else float('nan'):.2f} | {best:.1f} | "
                      f"{best / fl if fl else float('nan'):.2f} |")
            for label, rows in results.items():
                print_targets(label, rows, floors.get(label, float("nan")))
    if not args.skip_tts:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        tts_table()
    print(f"\nload average at end {load_avg()}, speed probe {speed_probe():.2f}, cores free {cores_probe():.2f}")


if __name__ == "__main__":
    main()
