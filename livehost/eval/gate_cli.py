"""Commands mounted under ``livehost harness``: ``evaluate`` (the gate) and ``propose-fixes``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from livehost.eval.cases import CaseFileError, load_cases, load_results
from livehost.harness.loader import HarnessError, dump, load
from livehost.harness.model import Harness

app = typer.Typer(help="Evaluation gate and failure-driven harness proposals.", no_args_is_help=True)
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)


def _fail(message: str) -> typer.Exit:
    err.print(f"[red]error:[/] {escape(message)}")
    return typer.Exit(1)


async def _resolve(ref: str, registry: Any) -> Harness | str:
    """A folder → its Harness; otherwise a registry version (prefix) → its Harness."""
    path = Path(ref)
    if path.is_dir():
        return load(path)
    if registry is None:
        return ref
    return await registry.harness(ref)  # type: ignore[no-any-return]


@app.command()
def evaluate(candidate: Annotated[str, typer.Argument(help="Candidate: registry version (prefix) or folder.")],
             baseline: Annotated[str, typer.Option("--baseline", "-b", help="Baseline version (prefix) or folder.")],
             cases: Annotated[Path, typer.Option("--cases", "-c", help="Case file (e.g. eval/devset.jsonl).")],
             tolerance: Annotated[float, typer.Option(help="Allowed drop per metric, in percentage points.")] = 0.0,
             variants: Annotated[int, typer.Option(help="Also run N harness-state-augmented variants.")] = 0,
             policy: Annotated[str, typer.Option(help="Policy (Triton model) to run both with.")] = "",
             runner: Annotated[str, typer.Option(help="module:function of the case runner.")] = "",
             candidate_results: Annotated[Path | None, typer.Option(help="Use these result lines instead of "
                                                                         "running the candidate.")] = None,
             baseline_results: Annotated[Path | None, typer.Option(help="Use these result lines instead of "
                                                                        "running the baseline.")] = None,
             attach: Annotated[bool, typer.Option("--attach/--no-attach", help="Attach the result to the candidate "
                                                                               "in the registry.")] = True,
             actor: Annotated[str, typer.Option(help="Ignored: the evaluator's certificate identity is "
                                                     "recorded.")] = "evaluation",
             seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
             n_boot: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 2000,
             json_out: Annotated[Path | None, typer.Option("--json", help="Write the result here too.")] = None
             ) -> None:
    """Run candidate and baseline on the same cases, compare paired by case, decide, attach the result."""
    from livehost.eval.gate import DEFAULT_RUNNER, RunCases, load_runner, render_text
    from livehost.eval.gate import evaluate as run_gate

    try:
        case_rows = load_cases(cases)
    except (CaseFileError, OSError) as exc:
        raise _fail(str(exc)) from None
    pre: dict[str, list[dict[str, Any]]] = {}
    try:
        if candidate_results:
            pre["candidate"] = load_results(candidate_results)
        if baseline_results:
            pre["baseline"] = load_results(baseline_results)
    except (CaseFileError, OSError) as exc:
        raise _fail(str(exc)) from None
    real_runner: RunCases | None = None
    if len(pre) < 2 or variants:
        try:
            real_runner = load_runner(runner or DEFAULT_RUNNER)
        except (ImportError, AttributeError, ValueError, TypeError) as exc:
            raise _fail(f"cannot load the case runner ({exc}); pass --runner module:function, or "
                        "--candidate-results/--baseline-results") from None

    async def main() -> Any:
        registry = None
        needs_registry = attach or not (Path(candidate).is_dir() and Path(baseline).is_dir())
        if needs_registry:
            from livehost.harness.registry import load_harness_settings
            from livehost.harness.remote import RemoteRegistry

            registry = RemoteRegistry(load_harness_settings())  # the Harness API, as the evaluator identity
        try:
            cand = await _resolve(candidate, registry)
            base = await _resolve(baseline, registry)
            cand_v = cand.version() if isinstance(cand, Harness) else cand
            base_v = base.version() if isinstance(base, Harness) else base

            async def run(h: Harness | str, cs: list[dict[str, Any]], pol: str) -> list[dict[str, Any]]:
                v = h.version() if isinstance(h, Harness) else h
                if v == cand_v and "candidate" in pre:
                    return pre["candidate"]
                if v == base_v and "baseline" in pre:
                    return pre["baseline"]
                assert real_runner is not None
                return await real_runner(h, cs, pol)

            return await run_gate(cand, base, case_rows, run, policy=policy, tolerance=tolerance, variants=variants,
                                  n_boot=n_boot, seed=seed, registry=registry if attach else None, actor=actor,
                                  cases_label=str(cases))
        finally:
            if registry is not None:
                await registry.close()

    try:
        gate = asyncio.run(main())
    except (HarnessError, ValueError, KeyError) as exc:
        raise _fail(str(exc)) from None
    except Exception as exc:  # registry refusals (unknown version, ...) end the command cleanly
        if type(exc).__module__.startswith("livehost.harness"):
            raise _fail(str(exc)) from None
        raise
    colour = "green" if gate.passed else "red"
    for line in render_text(gate.result).splitlines():
        console.print(f"[{colour}]{escape(line)}[/]" if line.startswith(("PASS", "REFUSED")) else escape(line))
    if attach:
        console.print(f"attached to {gate.candidate} (passed={gate.passed})")
    if json_out:
        json_out.write_text(json.dumps(gate.result, indent=1))
    raise typer.Exit(0 if gate.passed else 2)


@app.command("propose-fixes")
def propose_fixes(results: Annotated[Path, typer.Option("--results", "-r", help="Result lines (scored, or with "
                                                                                "--cases).")],
                  cases: Annotated[Path | None, typer.Option("--cases", "-c", help="Cases (judging, comment "
                                                                                  "texts).")] = None,
                  harness: Annotated[Path | None, typer.Option("--harness", help="Harness folder to edit.")] = None,
                  out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the proposed bundle.")]
                  = Path("proposed-harness"),
                  top: Annotated[int, typer.Option(help="Propose edits for the N largest clusters.")] = 5,
                  threshold: Annotated[float, typer.Option(help="Text-similarity threshold of clustering.")] = 0.3,
                  include_partial: Annotated[bool, typer.Option(help="Also count effectiveness 0.5 as a failure.")]
                  = False,
                  push: Annotated[bool, typer.Option("--push", help="Push the bundle and open a proposal for "
                                                                    "review.")] = False,
                  author: Annotated[str, typer.Option(help="Author of the pushed proposal.")] = "propose-fixes",
                  examples: Annotated[int, typer.Option(help="Examples shown per cluster.")] = 3) -> None:
    """Cluster failures by cause and text, propose harness edits for the largest clusters (for review)."""
    from livehost.eval.judge import judge_results_sync
    from livehost.eval.propose import cluster_failures, proposal_diff, propose, summarize_clusters

    try:
        rows = load_results(results)
        case_rows = load_cases(cases) if cases else None
    except (CaseFileError, OSError) as exc:
        raise _fail(str(exc)) from None
    if case_rows is not None:
        unscored = [r for r in rows if not r.get("scores")]
        scored = {r["id"]: r for r in judge_results_sync(unscored, case_rows)}
        rows = [scored.get(r["id"], r) for r in rows]
    clusters = cluster_failures(rows, case_rows, threshold=threshold, include_partial=include_partial)
    if not clusters:
        console.print("no failures: nothing to propose")
        return
    for c in summarize_clusters(clusters, examples):
        console.print(f"[bold]cluster {c['cluster']}[/] {escape(c['cause'])}: {c['size']} case(s)")
        for ex in c["examples"]:
            reply = escape(str(ex["reply"]))[:100]
            console.print(f"   {escape(str(ex['id']))}: {reply}  — {escape(str(ex['reason']))}")
    if harness is None:
        console.print("(give --harness PATH to get proposed edits)")
        return
    try:
        current = load(harness)
    except HarnessError as exc:
        raise _fail(str(exc)) from None
    proposed, edits = propose(current, clusters, case_rows, top=top)
    if not edits:
        console.print("no rule matched the largest clusters: no edit proposed")
        return
    for e in edits:
        console.print(f" - {escape(e.cluster)}: {escape(e.description)} ({escape(e.rationale)})")
    dump(proposed, out)
    diff_text = proposal_diff(current, proposed)
    (out.parent / f"{out.name}.diff").write_text(diff_text, encoding="utf-8")
    (out.parent / f"{out.name}.edits.json").write_text(
        json.dumps([e.__dict__ for e in edits], indent=1), encoding="utf-8")
    console.print(escape(diff_text))
    console.print(f"proposed bundle: {out} (diff: {out.parent / (out.name + '.diff')}); nothing is applied without "
                  "review")
    if push:
        from livehost.harness.registry import load_harness_settings
        from livehost.harness.remote import RemoteRegistry

        async def main() -> tuple[str, int]:
            reg = RemoteRegistry(load_harness_settings())  # the Harness API, as the author identity
            try:
                pushed = await reg.push(proposed, author=author, message="propose-fixes: " +
                                        "; ".join(e.description for e in edits))
                proposal = await reg.propose(pushed.version, author=author, message="\n".join(
                    f"{e.cluster}: {e.description} — {e.rationale}" for e in edits))
                return pushed.version, proposal.id
            finally:
                await reg.close()

        version, pid = asyncio.run(main())
        console.print(f"pushed {version}; proposal {pid} awaits review "
                      f"(LIVEHOST_GRPC_IDENTITY=reviewer livehost harness review {pid} --approve)")
