"""``make run``: the whole system on the embedded stack, one scripted live-room session, then clean up."""

from __future__ import annotations

import asyncio
import json
import os
import time

from rich.console import Console
from rich.table import Table

from livehost.commerce.store import CommerceStore
from livehost.config import Settings, load_settings, state_dir
from livehost.db import connect_pool, migrate
from livehost.demo.runner import SessionReport, latency_summary, play
from livehost.kafka import ensure_topics
from livehost.stack import StackError, down, up
from livehost.supervisor import Supervisor


async def prepare(settings: Settings) -> list[dict[str, object]]:
    """Migrations, topics and the demo catalog; returns the rooms of the catalog."""
    pool = await connect_pool(settings.postgres_dsn, attempts=20)
    try:
        await migrate(pool)
        store = CommerceStore(pool)
        await store.load_demo_catalog()
        from livehost.commerce.store import DEMO_CATALOG_PATH

        rooms = json.loads(DEMO_CATALOG_PATH.read_text())["rooms"]
    finally:
        await pool.close()
    await ensure_topics(settings)
    return rooms


def print_summary(console: Console, report: SessionReport, audio_dir: str, ready: dict[str, float]) -> None:
    table = Table("stage", "n", "p50 ms", "p95 ms", "mean ms", title="Latency")
    for stage, f in latency_summary(report).items():
        table.add_row(stage, str(f["n"]), f"{f['p50']:.0f}", f"{f['p95']:.0f}", f"{f['mean']:.0f}")
    console.print(table)
    outcomes: dict[str, int] = {}
    for o in report.outcomes.values():
        outcomes[o.reply["outcome"]] = outcomes.get(o.reply["outcome"], 0) + 1
    console.print(f"comments sent: {len(report.sent_comments)}, requests: {len(report.outcomes)}, "
                  f"outcomes: {outcomes}")
    console.print("services ready in: " + ", ".join(f"{k} {v:.1f}s" for k, v in ready.items()))
    spoken: dict[str, int] = {}
    for seg in report.segments:
        if not seg["cancel"]:
            spoken[seg["request_id"]] = spoken.get(seg["request_id"], 0) + 1
    for seg in report.segments:  # speeches of this session's requests that the voice stopped, and why
        if seg["cancel"] and seg["request_id"] in report.outcomes:
            console.print(f"✂  {seg['room_id']} {seg['request_id']}: speech cut after "
                          f"{spoken.get(seg['request_id'], 0)} segment(s) — {seg.get('reason') or 'cancelled'}")
    from livehost.voice import concat_sessions

    for room, path in sorted(concat_sessions(audio_dir, report.segments).items()):
        console.print(f"🔊 room {room}: the whole session's audio is {path}")
    console.print(f"   (and one WAV per segment under {audio_dir}/<room>/)")
    if report.missing:
        console.print(f"[red]{len(report.missing)} comments got no outcome: {report.missing}[/]")


def run_demo(console: Console, *, keep_stack: bool = False, engine: str | None = None,
             policy: str | None = None) -> int:
    try:
        info = up(echo=console.print)
    except StackError as exc:
        console.print(f"[red]the embedded stack did not start[/]\n{exc}")
        return 1
    env = dict(info.env)
    if engine:
        env["LIVEHOST_VOICE_ENGINE"] = engine
    if policy:
        env["LIVEHOST_POLICY_MODEL"] = policy
    os.environ.update(env)
    settings = load_settings()
    audio_dir = str(settings.voice_audio_dir or state_dir() / "audio")
    sup = Supervisor(settings, state_dir() / "logs", env)
    code = 0
    try:
        rooms = asyncio.run(prepare(settings))
        console.rule("starting services")
        started = time.monotonic()
        sup.start()
        ready = sup.wait_ready()
        console.print(f"all {len(ready)} services ready in {time.monotonic() - started:.1f}s "
                      f"(logs in {state_dir() / 'logs'})")
        console.rule("live session")
        ingest_target = sup.procs["ingest"].grpc_target
        assert ingest_target is not None
        report = asyncio.run(play(settings, ingest_target, rooms, console))  # type: ignore[arg-type]
        console.rule("summary")
        print_summary(console, report, audio_dir, ready)
        if report.missing or not any(o.reply["outcome"] == "reply" for o in report.outcomes.values()):
            code = 1
    except StackError as exc:
        console.print(f"[red]{exc}[/]")
        code = 1
    finally:
        sup.stop()
        if not keep_stack and info.started:  # a stack the user started beforehand stays up
            down(echo=console.print)
    return code
