"""``livehost eval run``: evaluation cases through the real request path (see livehost.runner.core).

Mounted in livehost/cli.py with ``app.add_typer(eval_app, name="eval")`` next to the evaluation
tools; ``run`` is this module's command.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

app = typer.Typer(help="Evaluation: run cases through the request path.", no_args_is_help=True)
console = Console()


@app.callback()
def main() -> None:
    """Evaluation: run cases through the request path."""  # a group, so it mounts as `livehost eval run`


@app.command("run")
def run(
    cases: Annotated[Path, typer.Option("--cases", exists=True, dir_okay=False,
                                        help="Cases file (CASES.md, JSONL).")],
    out: Annotated[Path, typer.Option("--out", dir_okay=False, help="Result file to write (one line per case).")],
    harness: Annotated[str, typer.Option("--harness", help="Harness folder or registry version (default: the "
                                                           "active version, else the shipped folder).")] = "",
    policy: Annotated[str, typer.Option("--policy", help="Triton policy model.")] = "policy_reference",
    agent: Annotated[str, typer.Option("--agent", help="harness (skills, hooks, prompt pipeline) or react "
                                                       "(the ReAct baseline).")] = "harness",
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Cases run at once.")] = 4,
    check: Annotated[bool, typer.Option("--check/--no-check", help="Check each case's own expect block.")] = True,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print one line per case (reply, latency, "
                                                                  "expect check) instead of a progress bar.")] = False,
) -> None:
    """Run every case in process through merge, input hooks, prompt assembly, the policy on Triton,
    tools in the case's sandbox (with its faults) and step hooks; write CASES.md result lines (scores
    are left null for the judge). Only the Kafka hops between the services are skipped. Shows a
    progress bar and a summary (--verbose: a line per case)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from livehost.config import load_settings
    from livehost.runner.core import read_cases, run_file
    from livehost.runner.expect import check as check_expect

    if agent not in ("harness", "react"):
        raise typer.BadParameter("--agent must be harness or react")
    try:
        by_id = {str(c.get("id")): c for c in read_cases(cases)}
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--cases") from None
    passed = 0
    failed_expect: list[str] = []
    progress = Progress(TextColumn("[bold]eval run[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("{task.fields[status]}"), console=console, disable=verbose, transient=True)
    task = progress.add_task("cases", total=len(by_id), status="")

    def show(result: dict[str, Any]) -> None:
        nonlocal passed
        verdict = ""
        if check and result["id"] in by_id:
            res = check_expect(by_id[result["id"]], result)
            passed += res["passed"]
            if not res["passed"]:
                failed_expect.append(str(result["id"]))
            verdict = "[green]expect ok[/]" if res["passed"] else f"[red]expect failed[/] {json.dumps(res)}"
        if result.get("error"):
            verdict = f"[red]error[/] {result['error']}"
        progress.update(task, advance=1, status=f"[dim]{len(failed_expect)} expect failed[/]" if check else "")
        if verbose:
            reply = result.get("reply") or "(no reply)"
            console.print(f"{result['id']}: {reply}  [dim]{result.get('latency_ms')} ms[/] {verdict}")

    with progress:
        results = asyncio.run(run_file(load_settings(), cases, out, harness=harness or None, policy=policy,
                                       agent=agent, concurrency=concurrency,  # type: ignore[arg-type]
                                       on_result=show))
    errors = [r for r in results if r.get("error")]
    latencies = sorted(float(r["latency_ms"]) for r in results if r.get("latency_ms") is not None)

    def pct(q: float) -> str:
        return f"{latencies[min(len(latencies) - 1, int(q * len(latencies)))]:.0f} ms" if latencies else "-"

    table = Table(title=f"eval run: {cases}", show_header=False)
    table.add_row("cases", str(len(results)))
    table.add_row("answered", str(sum(bool(r["responded"]) for r in results)))
    table.add_row("errors", str(len(errors)))
    if check:
        table.add_row("expect block passed", f"{passed} of {len(results)}")
    table.add_row("latency per case p50 / p95", f"{pct(0.5)} / {pct(0.95)}")
    table.add_row("results", str(out))
    console.print(table)
    if failed_expect and not verbose:
        shown = ", ".join(failed_expect[:10]) + (" …" if len(failed_expect) > 10 else "")
        console.print(f"expect failed: {shown} (--verbose for every case; `livehost eval judge` scores them)")
    for r in errors[:10]:
        console.print(f"[red]error[/] {r['id']}: {r['error']}")
    console.print("next: livehost eval judge --results " + str(out) + " --cases " + str(cases)
                  + " --out judged.jsonl", soft_wrap=True)
    if errors:
        raise typer.Exit(1)
