"""``livehost sim ...``: generate case files, play them into a running system over Kafka."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from livehost.eval.cases import CATEGORIES, CaseFileError, load_cases, write_jsonl
from livehost.sim.generator import Generated, generate_cases
from livehost.sim.hard import hard_cases

app = typer.Typer(help="Live-room simulator: seeded rooms, catalogs and comment streams.", no_args_is_help=True)
console = Console(highlight=False)

DEVSET_SEED = 7
DEVSET_PER_CATEGORY = 34


def devset(seed: int = DEVSET_SEED, per_category: int = DEVSET_PER_CATEGORY, rooms: int = 12,
           hard: bool = True) -> list[Generated]:
    """The dev set: simulator cases (fixed seed) followed by the hand-written hard cases."""
    return generate_cases(seed, per_category, rooms) + (hard_cases() if hard else [])


@app.command()
def generate(out: Annotated[Path, typer.Option("--out", "-o", help="Case file to write (JSONL).")],
             seed: Annotated[int, typer.Option(help="Random seed (same seed → same file).")] = DEVSET_SEED,
             per_category: Annotated[int, typer.Option(help="Generated cases per category.")] = DEVSET_PER_CATEGORY,
             rooms: Annotated[int, typer.Option(help="Rooms (each with its own product lineup).")] = 12,
             hard: Annotated[bool, typer.Option("--hard/--no-hard", help="Append the hand-written hard cases.")]
             = False,
             gold: Annotated[Path | None, typer.Option(help="Also write the gold replies as result lines here.")]
             = None) -> None:
    """Write a case file in the CASES.md format (``--hard`` with the defaults rebuilds eval/devset.jsonl)."""
    items = devset(seed, per_category, rooms, hard)
    write_jsonl(out, (g.case for g in items))
    if gold is not None:
        write_jsonl(gold, ({"id": g.case["id"], "harness_version": "gold", "policy": "gold",
                            "responded": g.gold is not None, "reply": g.gold, "skills_loaded": [], "tool_calls": [],
                            "hook_events": [], "turns": 1, "latency_ms": 0.0, "scores": None} for g in items))
    load_cases(out)  # validates every case against schemas/eval/case.json
    counts = {c: sum(g.case["category"] == c for g in items) for c in CATEGORIES}
    console.print(f"wrote {len(items)} cases to {out}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


@app.command()
def play(cases: Annotated[Path, typer.Option("--cases", "-c", help="Case file to play.")],
         speed: Annotated[float, typer.Option(help="Time factor: 2 plays twice as fast, 0 as fast as possible.")]
         = 1.0,
         seed: Annotated[int, typer.Option(help="Seed of the arrival timeline.")] = 0,
         mean_gap_ms: Annotated[float, typer.Option(help="Mean gap between bursts of cases.")] = 1500.0,
         max_burst: Annotated[int, typer.Option(help="Most cases in one burst.")] = 4,
         limit: Annotated[int, typer.Option(help="Play only the first N cases (0: all).")] = 0,
         room_prefix: Annotated[str, typer.Option(help="Prefix of room ids (isolate a run).")] = "",
         shuffle: Annotated[bool, typer.Option("--shuffle/--in-order", help="Mix categories (seeded) or keep "
                                                                            "file order.")] = True,
         dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the timeline, publish nothing.")] = False
         ) -> None:
    """Publish the cases' room events (campaign changes, product switches, comments) to Kafka."""
    from livehost.sim.play import play_over_kafka, schedule

    try:
        rows = load_cases(cases)
    except CaseFileError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from None
    if shuffle:
        import random

        random.Random(f"shuffle:{seed}").shuffle(rows)
    if limit:
        rows = rows[:limit]
    timeline = schedule(rows, seed=seed, mean_gap_ms=mean_gap_ms, max_burst=max_burst, room_prefix=room_prefix)
    if dry_run:
        for s in timeline:
            r = s.record
            what = r["text"] if r["type"] == "comment" else (r["link_id"] or r["campaign_json"])
            console.print(f"{s.at_ms:>8} ms  {r['room_id']:<16} {r['type']:<15} {what}")
        return
    sent = asyncio.run(play_over_kafka(timeline, speed=speed))
    console.print(f"published {sent} room events from {len(rows)} cases")


@app.command()
def outcomes(experiment: Annotated[str, typer.Option("--experiment", "-e", help="Experiment (must exist).")],
             users: Annotated[int, typer.Option(help="Simulated viewers.")] = 5000,
             days: Annotated[int, typer.Option(help="Days of traffic, from the experiment start.")] = 7,
             gmv_lift: Annotated[float, typer.Option(help="Planted relative lift of orders (→ GMV) in every "
                                                          "non-control arm.")] = 0.0,
             views_lift: Annotated[float, typer.Option(help="Planted relative lift of item-page views.")] = 0.0,
             drop: Annotated[float, typer.Option(help="Share of the last arm's exposures lost (plants an SRM).")]
             = 0.0,
             seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
             direct: Annotated[bool, typer.Option("--direct", help="Write outcomes to PostgreSQL instead of "
                                                                   "publishing them on Kafka.")] = False) -> None:
    """Log simulated exposures and emit outcome events (item-page views, confirmed orders) for an experiment."""
    from datetime import UTC, datetime

    from livehost.config import load_settings
    from livehost.experiments.outcomes import OUTCOMES, publish_outcomes
    from livehost.experiments.store import ExperimentStore
    from livehost.experiments.synth import Plan, simulate_events

    async def main() -> tuple[int, int]:
        store = await ExperimentStore.connect(load_settings().postgres_dsn, attempts=3)
        try:
            exp = await store.get(experiment)
            treated = [a.name for a in exp.arms[1:]]
            plan = Plan(users=users, days=days, start=exp.start_at or datetime.now(UTC),
                        gmv_lift={a: gmv_lift for a in treated}, views_lift={a: views_lift for a in treated},
                        drop={exp.arms[-1].name: drop} if drop else {}, seed=seed)
            exposures, events = simulate_events(exp, plan)
            logged = await store.bulk_expose(experiment, exposures)
            if direct:
                await store.record_outcomes(events)
            else:
                await publish_outcomes(events)
            return logged, len(events)
        finally:
            await store.close()

    logged, sent = asyncio.run(main())
    where = "PostgreSQL" if direct else f"Kafka topic {OUTCOMES.name}"
    console.print(f"logged {logged} exposures; {sent} outcome events → {where}")
