"""Command line of the training team: ``livehost trajectories export|score`` and ``livehost augment``.

Mounted by livehost/cli.py::

    from livehost.training.cli import augment_app, trajectories_app
    app.add_typer(trajectories_app, name="trajectories", help="Export recorded trajectories for training.")
    app.add_typer(augment_app, name="augment")
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from livehost.agent.state import REACT_PREFIX

trajectories_app = typer.Typer(help="Export recorded trajectories for training (sft, rl, raw) and score rewards.",
                               no_args_is_help=True)
augment_app = typer.Typer(help="Harness-State Augmentation: harness variants and rewritten trajectories.",
                          invoke_without_command=True)
console = Console(stderr=True)


@trajectories_app.callback()
def trajectories_group() -> None:
    """Export recorded trajectories for training (sft, rl, raw) and score their rewards."""


@trajectories_app.command("export")
def export_cmd(
    fmt: Annotated[str, typer.Option("--format", "-f", help="sft | rl | raw")],
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL file to write.")],
    since: Annotated[str, typer.Option(help="Only requests created at/after this time (ISO 8601 or epoch ms/s).")] = "",
    until: Annotated[str, typer.Option(help="Only requests created before this time (ISO 8601 or epoch ms/s).")] = "",
    harness_version: Annotated[str, typer.Option(help="Only requests pinned to this harness version.")] = "",
    room: Annotated[str, typer.Option(help="Only this room.")] = "",
    only_passed: Annotated[bool, typer.Option(
        "--only-passed", help="Only outcome 'reply' with no hook rejection or drop (corrections ok).")] = False,
    keep_retries: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="sft: fraction of hook-retry trajectories kept whole (by request id).")] = 0.1,
    dsn: Annotated[str, typer.Option(help="PostgreSQL DSN (default: LIVEHOST_POSTGRES_DSN).")] = "",
    harness_folder: Annotated[Path | None, typer.Option(
        help="Shipped harness folder used when the registry lacks a version (default: LIVEHOST_HARNESS_PATH).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Stream trajectories from PostgreSQL to validated JSONL (schemas/export/<format>.json)."""
    from livehost.config import load_settings
    from livehost.training.export import ExportFilter, UnknownHarnessVersion, export, parse_time
    from livehost.training.formats import FORMATS, ExportValidationError

    if fmt not in FORMATS:
        raise typer.BadParameter(f"one of {', '.join(FORMATS)}", param_hint="--format")
    settings = load_settings()
    try:
        flt = ExportFilter(since_ms=parse_time(since), until_ms=parse_time(until),
                           harness_version=harness_version or None, room=room or None, only_passed=only_passed)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    progress = Progress(TextColumn(f"[bold]{fmt}[/] export"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TimeRemainingColumn(), console=console, disable=quiet, transient=False)
    with progress:
        task = progress.add_task("rows", total=None)
        try:
            stats = asyncio.run(export(
                dsn or settings.postgres_dsn, fmt, out, flt, keep_retries=keep_retries,
                harness_folder=harness_folder or settings.harness_path,
                on_total=lambda n: progress.update(task, total=n),
                on_progress=lambda n: progress.advance(task, n)))
        except ExportValidationError as exc:
            console.print(f"[red]export aborted[/]: {exc}")
            raise typer.Exit(3) from None
        except UnknownHarnessVersion as exc:
            progress.stop()
            console.print(f"[red]error:[/] {exc}", soft_wrap=True)
            raise typer.Exit(2) from None
    console.print(f"wrote {stats.written} of {stats.rows} trajectories to {stats.out}")
    if stats.rewards_on_the_fly:
        console.print(f"  rewards: {stats.rewards_stored} stored, {stats.rewards_on_the_fly} scored during the export "
                      "(`livehost trajectories score` stores them)")
    if stats.trimmed or stats.kept_whole:
        console.print(f"  retries: {stats.trimmed} trimmed to the final behaviour, {stats.kept_whole} kept whole")
    for why, n in sorted(stats.skipped.items()):
        console.print(f"  skipped {n}: {why}")


@trajectories_app.command("score")
def score_cmd(
    since: Annotated[str, typer.Option(help="Only requests created at/after this time (ISO 8601 or epoch ms/s).")] = "",
    until: Annotated[str, typer.Option(help="Only requests created before this time (ISO 8601 or epoch ms/s).")] = "",
    harness_version: Annotated[str, typer.Option(help="Only requests pinned to this harness version.")] = "",
    room: Annotated[str, typer.Option(help="Only this room.")] = "",
    rescore: Annotated[bool, typer.Option(
        "--rescore", help="Score again and overwrite existing rewards (default: only unscored requests).")] = False,
    dsn: Annotated[str, typer.Option(help="PostgreSQL DSN (default: LIVEHOST_POSTGRES_DSN).")] = "",
    harness_folder: Annotated[Path | None, typer.Option(
        help="Shipped harness folder used when the registry lacks a version (default: LIVEHOST_HARNESS_PATH).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Compute training rewards from stored trajectories into trajectory_rewards (read by the rl export)."""
    from rich.table import Table

    from livehost.config import load_settings
    from livehost.training.export import ExportFilter, parse_time
    from livehost.training.rewards import JUDGE, REWARD_COLUMNS, score_stored

    settings = load_settings()
    try:
        flt = ExportFilter(since_ms=parse_time(since), until_ms=parse_time(until),
                           harness_version=harness_version or None, room=room or None)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    progress = Progress(TextColumn("[bold]scoring[/]"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TimeRemainingColumn(), console=console, disable=quiet, transient=False)
    with progress:
        task = progress.add_task("rows", total=None)
        stats = asyncio.run(score_stored(
            dsn or settings.postgres_dsn, flt, rescore=rescore,
            harness_folder=harness_folder or settings.harness_path,
            on_total=lambda n: progress.update(task, total=n),
            on_progress=lambda n: progress.advance(task, n)))
    console.print(f"scored {stats.scored} of {stats.matched} trajectories with {JUDGE}"
                  + (f" ({stats.kept} already scored, kept; --rescore to overwrite)" if stats.kept else ""))
    table = Table(title=f"mean rewards over {stats.rewarded} scored trajectories")
    table.add_column("component")
    table.add_column("mean", justify="right")
    for key in REWARD_COLUMNS:
        value = stats.means.get(key)
        table.add_row(key, "-" if value is None else f"{value:.3f}")
    console.print(table)


async def _resolve_harness(ref: str, dsn: str, folder: Path) -> Any:
    from livehost.harness.loader import load
    from livehost.harness.registry import Registry

    path = Path(ref)
    if path.is_dir():
        return load(path)
    try:
        registry = await Registry.connect(dsn, migrate=False, attempts=2)
    except Exception as exc:
        registry_error: Exception | None = exc
    else:
        registry_error = None
        try:
            return await registry.harness(ref)
        except Exception as exc:
            registry_error = exc
        finally:
            await registry.close()
    shipped = load(folder)
    if shipped.version().startswith(ref):
        return shipped
    raise typer.BadParameter(f"{ref!r} is not a harness folder, not in the registry ({registry_error}) and not "
                             f"the shipped folder's version", param_hint="--harness")


def run_augment(harness: Any, n: int, seed: int, out: Path, trajectories: Path | None) -> dict[str, Any]:
    """Write ``out/variant-NNN/`` (harness folder + mapping.json [+ trajectories.jsonl]) and out/index.json."""
    from livehost.harness.augment import replay, rewrite_trajectory, variants
    from livehost.harness.loader import dump
    from livehost.training.formats import validate

    out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in trajectories.read_text().splitlines() if line.strip()] if trajectories else []
    for i, row in enumerate(rows, 1):
        validate("raw", row, i)
    base = harness.version()
    # ReAct-baseline requests (an experiment's react arm) use no skills or pipeline of the harness:
    # nothing of theirs can be renamed or reworded, and they would not replay against a variant
    react = [r for r in rows if str(r.get("policy") or "").startswith(REACT_PREFIX)]
    matching = [r for r in rows if r["harness_version"] == base and r not in react]
    index: dict[str, Any] = {"base_version": base, "seed": seed, "variants": [],
                             "trajectories": {"read": len(rows), "rewritten_per_variant": len(matching),
                                              "skipped_react_baseline": len(react),
                                              "skipped_other_version": len(rows) - len(matching) - len(react)}}
    for v in variants(harness, n, seed):
        folder = out / f"variant-{v.index:03d}"
        dump(v.harness, folder / "harness")
        (folder / "mapping.json").write_text(json.dumps(v.mapping(), indent=2, sort_keys=True) + "\n")
        entry = {"index": v.index, "version": v.harness.version(), "kinds": v.kinds, "path": folder.name}
        if trajectories is not None:
            with open(folder / "trajectories.jsonl", "w", encoding="utf-8") as fh:
                for row in matching:
                    new = rewrite_trajectory(row, v)
                    problems = replay(new, v.harness)
                    if problems:
                        raise RuntimeError(f"variant {v.index}: {new['request_id']} does not replay: {problems}")
                    fh.write(json.dumps(new, ensure_ascii=False, sort_keys=True) + "\n")
        index["variants"].append(entry)
    (out / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return index


@augment_app.callback()
def augment_cmd(
    ctx: typer.Context,
    harness: Annotated[str, typer.Option("--harness", help="Harness folder, or a version (prefix) in the registry.")],
    variants: Annotated[int, typer.Option("--variants", "-n", min=1, help="How many variants.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")],
    seed: Annotated[int, typer.Option("--seed", help="Same seed, same output.")] = 0,
    trajectories: Annotated[Path | None, typer.Option(
        "--trajectories", help="Raw export JSONL to rewrite into every variant.")] = None,
    dsn: Annotated[str, typer.Option(help="PostgreSQL DSN of the registry (default from settings).")] = "",
) -> None:
    """Write N validated harness variants (every kind of edit covered) and, given trajectories, each
    trajectory rewritten consistently into every variant (checked to replay against it)."""
    if ctx.invoked_subcommand is not None:
        return
    from livehost.config import load_settings

    settings = load_settings()
    base = asyncio.run(_resolve_harness(harness, dsn or settings.postgres_dsn, settings.harness_path))
    index = run_augment(base, variants, seed, out, trajectories)
    for v in index["variants"]:
        console.print(f"variant {v['index']:03d}  {v['version']}  {', '.join(v['kinds'])}")
    t = index["trajectories"]
    if trajectories is not None:
        console.print(f"trajectories: {t['rewritten_per_variant']} rewritten per variant"
                      f" ({t['skipped_other_version']} of another harness version skipped)")
    console.print(f"written to {out}")
