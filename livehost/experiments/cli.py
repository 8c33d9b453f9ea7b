"""``livehost experiment ...``: define, start, stop, inspect and analyze online A/B experiments.

Talks to PostgreSQL at ``LIVEHOST_POSTGRES_DSN`` (the embedded stack's env file is read too).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from livehost.experiments.assign import parse_arm
from livehost.experiments.store import ExperimentError, ExperimentStore

app = typer.Typer(help="Online A/B experiments: arms, split, exposures, outcomes, analysis.", no_args_is_help=True)
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)
T = TypeVar("T")


def _run(fn: Callable[[ExperimentStore], Awaitable[T]]) -> T:
    from livehost.config import load_settings

    async def main() -> T:
        store = await ExperimentStore.connect(load_settings().postgres_dsn, attempts=3)
        try:
            return await fn(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except (ExperimentError, ValueError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None


@app.command()
def create(name: str,
           arm: Annotated[list[str], typer.Option("--arm", help="name=version:weight (first arm is the control; "
                                                                "version 'react' = the ReAct baseline).")],
           by: Annotated[str, typer.Option("--by", help="Who defines it.")],
           description: Annotated[str, typer.Option(help="What is tested.")] = "",
           salt: Annotated[str, typer.Option(help="Assignment salt (default: random).")] = "",
           start: Annotated[bool, typer.Option("--start", help="Start it right away.")] = False) -> None:
    """Define an experiment, e.g. ``--arm control=react:80 --arm treatment=3f2a9c1d:20``."""
    arms = [parse_arm(a) for a in arm]

    async def fn(s: ExperimentStore) -> None:
        exp = await s.create(name, arms, created_by=by, salt=salt or None, description=description)
        if start:
            exp = await s.start(name)
        console.print(f"experiment {exp.name} ({exp.status}): " +
                      ", ".join(f"{a.name}={a.harness_version} ({a.weight:g})" for a in exp.arms))

    _run(fn)


@app.command()
def start(name: str) -> None:
    """Start assigning and logging exposures."""
    _run(lambda s: s.start(name))
    console.print(f"experiment {name} running")


@app.command()
def stop(name: str) -> None:
    """Stop the experiment (outcomes after the stop are not counted)."""
    _run(lambda s: s.stop(name))
    console.print(f"experiment {name} stopped")


@app.command("list")
def list_() -> None:
    """Every experiment with its arms and status."""
    for exp in _run(lambda s: s.list()):
        console.print(f"{exp.name:<24} {exp.status:<8} " +
                      ", ".join(f"{a.name}={a.harness_version[:12]} ({a.weight:g})" for a in exp.arms))


@app.command()
def assign(name: str, user_id: str, room: Annotated[str, typer.Option(help="Room of the exposure.")] = "") -> None:
    """The user's arm (computed once and logged as an exposure)."""
    exposure = _run(lambda s: s.expose(name, user_id, room_id=room or None))
    if exposure is None:
        console.print(f"experiment {name} is not running: no assignment")
    else:
        console.print(f"{user_id} → {exposure.arm} (harness {exposure.harness_version}, bucket {exposure.bucket}, "
                      f"{'new exposure' if exposure.new else 'already exposed'})")


@app.command()
def analyze(experiment: Annotated[str, typer.Option("--experiment", "-e", help="Experiment name.")],
            out: Annotated[Path | None, typer.Option("--out", "-o", help="HTML report to write.")] = None,
            method: Annotated[str, typer.Option(help="Lift interval: delta, bootstrap or both.")] = "delta",
            n_boot: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 1000,
            seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
            srm_threshold: Annotated[float, typer.Option(help="p-value below which the split is flagged.")] = 0.001,
            json_out: Annotated[Path | None, typer.Option("--json", help="Write the numbers here too.")] = None
            ) -> None:
    """Participants, metrics per participant, lifts with CIs and p-values, SRM check, daily breakdown."""
    from livehost.experiments.analysis import analyze as run
    from livehost.experiments.report import print_report, render_html

    exp, data = _run(lambda s: s.load(experiment))
    if data.user_arm.size == 0:
        console.print(f"experiment {experiment}: no exposures yet")
        raise typer.Exit(0)
    try:
        result = run(data, method=method, n_boot=n_boot, seed=seed, srm_threshold=srm_threshold)
    except ValueError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
    print_report(exp, result, console)
    if out:
        out.write_text(render_html(exp, result), encoding="utf-8")
        console.print(f"HTML report: {out}")
    if json_out:
        json_out.write_text(json.dumps(result, indent=1, default=str))


@app.command()
def consume() -> None:
    """Store outcome events from the Kafka outcome topic until interrupted."""
    from livehost.experiments.outcomes import OUTCOMES, run_consumer

    console.print(f"consuming {OUTCOMES.name} … (Ctrl-C to stop)")
    try:
        _run(lambda s: run_consumer(s))
    except KeyboardInterrupt:
        pass
