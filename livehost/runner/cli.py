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
    check: Annotated[bool, typer.Option("--check/--no-check", help="Print each case's own expect check.")] = True,
) -> None:
    """Run every case in process through merge, input hooks, prompt assembly, the policy on Triton,
    tools in the case's sandbox (with its faults) and step hooks; write CASES.md result lines (scores
    are left null for the judge). Only the Kafka hops between the services are skipped."""
    from livehost.config import load_settings
    from livehost.runner.core import read_cases, run_file
    from livehost.runner.expect import check as check_expect

    if agent not in ("harness", "react"):
        raise typer.BadParameter("--agent must be harness or react")
    by_id = {str(c.get("id")): c for c in read_cases(cases)}
    passed = 0

    def show(result: dict[str, Any]) -> None:
        nonlocal passed
        verdict = ""
        if check and result["id"] in by_id:
            res = check_expect(by_id[result["id"]], result)
            passed += res["passed"]
            verdict = "[green]expect ok[/]" if res["passed"] else f"[red]expect failed[/] {json.dumps(res)}"
        if result.get("error"):
            verdict = f"[red]error[/] {result['error']}"
        reply = result.get("reply") or "(no reply)"
        console.print(f"{result['id']}: {reply}  [dim]{result.get('latency_ms')} ms[/] {verdict}")

    results = asyncio.run(run_file(load_settings(), cases, out, harness=harness or None, policy=policy,
                                   agent=agent, concurrency=concurrency, on_result=show))  # type: ignore[arg-type]
    errors = sum(1 for r in results if r.get("error"))
    summary = f"{len(results)} cases, {sum(r['responded'] for r in results)} answered, {errors} errors"
    if check:
        summary += f", {passed} passed their expect block"
    console.print(f"{summary}; results in {out}")
    if errors:
        raise typer.Exit(1)
