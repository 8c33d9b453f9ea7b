"""Runs the scripted session against a running LiveHost and prints the live transcript.

Room A's events go through the gRPC Ingest API, room B's straight to the room-events topic (as a
live-room producer would), so both entry points are exercised.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer
from rich.console import Console

from livehost import codec
from livehost.config import Settings
from livehost.demo.script import SESSION, Line
from livehost.gen.livehost.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from livehost.grpcutil import make_channel
from livehost.kafka import Producer, consumer_options, now_ms
from livehost.topics import AVATAR_SEGMENTS, REPLIES, ROOM_EVENTS

GRPC_ROOMS = {"room-a"}


@dataclass
class Outcome:
    reply: dict[str, Any]
    first_audio_ms: float | None = None
    segments: int = 0
    cut: str | None = None  # why the voice stopped it mid-speech (product switch, a higher-priority reply)


@dataclass
class SessionReport:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    sent_comments: dict[str, float] = field(default_factory=dict)  # event id -> sent at (ms)
    missing: list[str] = field(default_factory=list)
    segments: list[dict[str, Any]] = field(default_factory=list)  # every avatar segment, cancels included


def _steps(reply: dict[str, Any], *kinds: str) -> list[dict[str, Any]]:
    return [{**s, "data": json.loads(s["data_json"])} for s in reply["state"]["steps"] if s["kind"] in kinds]


def event_ids(reply: dict[str, Any]) -> list[str]:
    inputs = _steps(reply, "input")
    return inputs[0]["data"].get("event_ids", []) if inputs else []


def describe(outcome: Outcome, console: Console) -> None:
    reply = outcome.reply
    state = reply["state"]
    comments = " | ".join(f"{c['user_id']}: {c['text']}" for c in state["comments"])
    console.print(f"[bold cyan]{state['room_id']}[/] [dim]{state['request_id']}[/]  💬 {comments}")
    for s in _steps(reply, "input_hook"):
        console.print(f"    [red]input hook {s['name']}[/]: {s['data']['reason']} — {s['data']['comment']['text']!r}")
    for s in _steps(reply, "skill_load", "tool_call", "tool_result", "hook_verdict", "correction"):
        d = s["data"]
        if s["kind"] == "skill_load":
            console.print(f"    📘 load_skill [green]{s['name']}[/]")
        elif s["kind"] == "tool_call":
            console.print(f"    🔧 {s['name']}({json.dumps(d['arguments'])})")
        elif s["kind"] == "tool_result":
            res = "ok" if d["ok"] else f"[red]{d['error_code']}: {d['error_message']}[/]"
            console.print(f"       → {res}")
        elif s["kind"] == "hook_verdict" and d["verdict"] != "pass":
            console.print(f"    🛑 hook {s['name']} ({d['kind']}): [yellow]{d['verdict']}[/] — {d['reason']}")
        elif s["kind"] == "correction":
            console.print(f"    ↺ correction from {d['hook']}: {d['reason']}")
    latency = reply["completed_ms"] - state["created_ms"]
    audio = f", first audio {outcome.first_audio_ms:.0f} ms" if outcome.first_audio_ms is not None else ""
    if reply["outcome"] in ("reply", "fallback"):
        n = outcome.segments
        console.print(f"    🗣  [bold]{reply['text']}[/]  [dim]({reply['outcome']}, {latency} ms{audio}, "
                      f"{n} segment{'' if n == 1 else 's'})[/]")
        if outcome.cut:
            console.print(f"    ✂  [yellow]cut after {n} segment{'' if n == 1 else 's'}[/]: {outcome.cut}")
    else:
        console.print(f"    🤐 {reply['outcome']}: {reply['reason']}  [dim]({latency} ms)[/]")


async def _send(line: Line, producer: Producer, ingest: Any) -> str:
    _, room, kind, payload = line
    event_id = f"demo-{uuid.uuid4().hex[:12]}"
    if room in GRPC_ROOMS:
        if kind == "comment":
            await ingest.SubmitComment(ingest_pb2.SubmitCommentRequest(
                room_id=room, user_id=payload["user_id"], text=payload["text"], client_event_id=event_id))
        else:
            await ingest.SubmitRoomEvent(ingest_pb2.SubmitRoomEventRequest(
                room_id=room, client_event_id=event_id,
                product_switch=ingest_pb2.ProductSwitch(link_id=payload["link_id"])))
        return event_id
    record = {"event_id": event_id, "room_id": room, "type": kind, "ts_ms": now_ms(),
              "user_id": payload.get("user_id"), "text": payload.get("text"), "link_id": payload.get("link_id"),
              "campaign_json": payload.get("campaign_json"), "viewer_count": payload.get("viewer_count")}
    await producer.send(ROOM_EVENTS, room, record)
    return event_id


async def open_rooms(producer: Producer, rooms: list[dict[str, Any]]) -> None:
    """Announce each room's starting state (current link, campaign) the way a producer would."""
    for room in rooms:
        base = {"room_id": room["room_id"], "ts_ms": now_ms(), "user_id": None, "text": None}
        await producer.send(ROOM_EVENTS, room["room_id"], {
            **base, "event_id": f"open-{uuid.uuid4().hex[:8]}", "type": "campaign_change", "link_id": None,
            "campaign_json": json.dumps(room.get("campaign")), "viewer_count": room.get("viewer_count")})
        await producer.send(ROOM_EVENTS, room["room_id"], {
            **base, "event_id": f"open-{uuid.uuid4().hex[:8]}", "type": "product_switch",
            "link_id": room.get("current_link"), "campaign_json": None, "viewer_count": room.get("viewer_count")})


async def play(settings: Settings, ingest_target: str, rooms: list[dict[str, Any]], console: Console,
               session: list[Line] = SESSION, settle_s: float = 45.0) -> SessionReport:
    report = SessionReport()
    started_ms = now_ms()
    consumer = AIOKafkaConsumer(REPLIES.name, AVATAR_SEGMENTS.name, **consumer_options(settings),
                                group_id=f"demo-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest")
    await consumer.start()
    producer = Producer(settings)
    await producer.start()
    first_audio: dict[str, float] = {}
    seg_count: dict[str, int] = {}
    spoken: set[str] = set()  # requests whose last segment (final or cancel) arrived
    cut: dict[str, str] = {}
    printed: set[str] = set()

    async def collect(until: float) -> None:
        while time.monotonic() < until:
            batches = await consumer.getmany(timeout_ms=100)
            for records in batches.values():
                for rec in records:
                    if rec.topic == AVATAR_SEGMENTS.name:
                        seg = codec.decode(AVATAR_SEGMENTS.schema, rec.value)
                        if seg["ts_ms"] < started_ms:
                            continue
                        report.segments.append(seg)
                        rid = seg["request_id"]
                        if seg["final"] or seg["cancel"]:
                            spoken.add(rid)
                        if seg["cancel"]:
                            cut[rid] = seg.get("reason") or "cancelled"
                            continue
                        seg_count[rid] = seg_count.get(rid, 0) + 1
                        out = report.outcomes.get(rid)
                        if rid not in first_audio:
                            first_audio[rid] = seg["ts_ms"]
                        if out is not None:
                            out.segments = seg_count[rid]
                            out.first_audio_ms = first_audio[rid] - out.reply["completed_ms"]
                        continue
                    reply = codec.decode(REPLIES.schema, rec.value)
                    if reply["state"]["created_ms"] < started_ms:
                        continue
                    rid = reply["state"]["request_id"]
                    report.outcomes[rid] = Outcome(reply)
            for rid, out in report.outcomes.items():
                if rid in printed:
                    continue
                speaks = out.reply["outcome"] in ("reply", "fallback")
                # printed once its speech is complete (final or cancel segment), so the counts are whole
                if not speaks or rid in spoken or now_ms() - out.reply["completed_ms"] > 15000:
                    if rid in first_audio:
                        out.first_audio_ms = first_audio[rid] - out.reply["completed_ms"]
                        out.segments = seg_count.get(rid, 0)
                    out.cut = cut.get(rid)
                    describe(out, console)
                    printed.add(rid)

    try:
        async with make_channel(ingest_target, identity="producer") as channel:
            ingest = ingest_pb2_grpc.IngestServiceStub(channel)
            await open_rooms(producer, rooms)
            t0 = time.monotonic()
            for line in session:
                wait = t0 + line[0] - time.monotonic()
                if wait > 0:
                    await collect(time.monotonic() + wait)
                event_id = await _send(line, producer, ingest)
                if line[2] == "comment":
                    report.sent_comments[event_id] = now_ms()
            deadline = time.monotonic() + settle_s
            while time.monotonic() < deadline:
                await collect(time.monotonic() + 0.5)
                seen = {e for o in report.outcomes.values() for e in event_ids(o.reply)}
                if set(report.sent_comments) <= seen and len(printed) == len(report.outcomes):
                    break
            seen = {e for o in report.outcomes.values() for e in event_ids(o.reply)}
            report.missing = sorted(set(report.sent_comments) - seen)
    finally:
        await consumer.stop()
        await producer.stop()
    return report


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def latency_summary(report: SessionReport) -> dict[str, dict[str, float]]:
    """Per-stage latency figures (ms) over the session's requests."""
    stages: dict[str, list[float]] = {"end_to_end": [], "merge_wait": [], "prompt": [], "policy": [],
                                      "tools": [], "first_audio_after_reply": []}
    for out in report.outcomes.values():
        reply, state = out.reply, out.reply["state"]
        stages["end_to_end"].append(reply["completed_ms"] - state["created_ms"])
        inputs = [s for s in state["steps"] if s["kind"] == "input"]
        if inputs:
            stages["merge_wait"].append(inputs[0]["ts_ms"] - state["created_ms"])
        for s in state["steps"]:
            if s["duration_ms"] is None:
                continue
            key = {"prompt": "prompt", "model_output": "policy", "tool_result": "tools"}.get(s["kind"])
            if key:
                stages[key].append(s["duration_ms"])
        if out.first_audio_ms is not None:
            stages["first_audio_after_reply"].append(out.first_audio_ms)
    return {k: {"n": len(v), "p50": _pct(v, 0.5), "p95": _pct(v, 0.95),
                "mean": statistics.fmean(v) if v else float("nan")} for k, v in stages.items()}
