"""``livehost eval ...``: judge, calibrate, report, pairwise export/analyze, distribution, leakage.

(``livehost eval run`` — running cases through the request path — belongs to the runner.)
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from livehost.eval.cases import CaseFileError, load_cases, load_results, read_jsonl, write_jsonl

app = typer.Typer(help="Evaluation: judge results, calibrate the judge, reports, pairwise tests.",
                  no_args_is_help=True)
pairwise_app = typer.Typer(help="Blind pairwise comparison of two systems.", no_args_is_help=True)
app.add_typer(pairwise_app, name="pairwise")
console = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def _fail(message: str) -> typer.Exit:
    err.print(f"[red]error:[/] {message}", markup=True)
    return typer.Exit(1)


def _load(fn: Any, path: Path) -> list[dict[str, Any]]:
    try:
        return list(fn(path))
    except (CaseFileError, OSError) as exc:
        raise _fail(str(exc)) from None


def _llm_judge(models: list[str], samples: int, url: str) -> Any:
    from livehost.config import load_settings
    from livehost.eval.judge import DeterministicJudge, LLMJudge
    from livehost.policy.client import PolicyClient

    triton = url or load_settings().triton_url
    clients = [PolicyClient(triton, m, timeout_s=30.0) for m in models]
    return LLMJudge(clients, samples=samples, fallback=DeterministicJudge())


@app.command()
def judge(results: Annotated[Path, typer.Option("--results", "-r", help="Result lines (CASES.md format).")],
          cases: Annotated[Path, typer.Option("--cases", "-c", help="The cases they answer.")],
          out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the scored result lines.")],
          llm: Annotated[list[str] | None, typer.Option("--llm", help="Judge with this Triton model instead "
                                                                       "(repeat for a multi-model vote).")] = None,
          samples: Annotated[int, typer.Option(help="LLM judge: samples per model (majority vote).")] = 3,
          triton_url: Annotated[str, typer.Option(help="LLM judge: Triton gRPC address (default: settings).")]
          = "") -> None:
    """Fill ``scores`` (accuracy, effectiveness, reasons) of every result line."""
    from livehost.eval.judge import DeterministicJudge, judge_results
    from livehost.eval.report import build_report

    rows = _load(load_results, results)
    case_rows = _load(load_cases, cases)
    j = _llm_judge(llm, samples, triton_url) if llm else DeterministicJudge()
    try:
        scored = asyncio.run(judge_results(rows, case_rows, j))
    except KeyError as exc:
        raise _fail(str(exc)) from None
    write_jsonl(out, scored)
    report = build_report(scored, case_rows, n_boot=500)
    o = report["overall"]
    console.print(f"judged {len(scored)} results with the {j.name} judge → {out}: accuracy "
                  f"{o['accuracy']['score']:.2f}, effectiveness {o['effectiveness']['score']:.2f}")


@app.command()
def calibrate(results: Annotated[Path, typer.Option("--results", "-r", help="Scored result lines.")],
              labels: Annotated[Path, typer.Option("--labels", "-l", help="Human labels (JSONL: id, accuracy, "
                                                                          "effectiveness).")],
              cases: Annotated[Path | None, typer.Option("--cases", "-c", help="Judge unscored results "
                                                                                "against these cases first.")]
              = None,
              json_out: Annotated[Path | None, typer.Option("--json", help="Also write the numbers here.")] = None
              ) -> None:
    """Agreement and Cohen's kappa between the judge and human labels, per metric."""
    from livehost.eval.calibrate import calibrate as run
    from livehost.eval.judge import judge_results_sync

    rows = _load(load_results, results)
    if cases is not None:
        rows = judge_results_sync(rows, _load(load_cases, cases))
    try:
        out = run(rows, _load(read_jsonl, labels))
    except ValueError as exc:
        raise _fail(str(exc)) from None
    table = Table("metric", "n", "agreement", "Cohen's kappa", "weighted kappa (linear / quadratic)")

    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    a, e = out["accuracy"], out["effectiveness"]
    table.add_row("accuracy", str(a["n"]), f(a["agreement"]), f(a["kappa"]), "-")
    table.add_row("effectiveness", str(e["n"]), f(e["agreement"]), f(e["kappa"]),
                  f"{f(e['kappa_linear'])} / {f(e['kappa_quadratic'])}")
    console.print(table)
    for name, m in (("accuracy", a), ("effectiveness", e)):
        console.print(f"{name} confusion (rows judge, columns human; labels {m['labels']}): {m['confusion']}")
    if out["unmatched_labels"]:
        console.print(f"[yellow]{len(out['unmatched_labels'])} label(s) have no scored result[/]")
    if json_out:
        json_out.write_text(json.dumps(out, indent=1))


@app.command()
def report(results: Annotated[list[Path], typer.Option("--results", "-r", help="Result lines (scored, or give "
                                                                           "--cases). Repeat with --cases for "
                                                                           "splits side by side.")],
           cases: Annotated[list[Path] | None, typer.Option("--cases", "-c", help="Cases: categories, comments, "
                                                                                  "judging of unscored lines; "
                                                                                  "one per --results.")] = None,
           label: Annotated[list[str] | None, typer.Option("--label", help="Name of each split (default: the "
                                                                           "cases file's name).")] = None,
           out: Annotated[Path | None, typer.Option("--out", "-o", help="HTML report to write.")] = None,
           seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
           n_boot: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 2000,
           json_out: Annotated[Path | None, typer.Option("--json", help="Also write the numbers here.")] = None
           ) -> None:
    """Metrics overall and per category with bootstrap CIs, failures with reasons, latency. Several
    --results/--cases pairs (the dev and the test split) are shown side by side, then one by one; the
    failures of every pair after the first (a measured-only split) are counted, not listed."""
    from livehost.eval.judge import judge_results_sync
    from livehost.eval.report import (
        build_report,
        measured_only,
        print_comparison,
        print_report,
        render_comparison_html,
        render_html,
    )

    case_files = list(cases or [])
    if case_files and len(case_files) != len(results):
        raise _fail(f"give one --cases per --results ({len(results)} results, {len(case_files)} cases)")
    labels = list(label or [])
    if labels and len(labels) != len(results):
        raise _fail(f"give one --label per --results ({len(results)} results, {len(labels)} labels)")
    reports: dict[str, dict[str, Any]] = {}
    for i, path in enumerate(results):
        rows = _load(load_results, path)
        case_rows = _load(load_cases, case_files[i]) if case_files else None
        if case_rows is not None and any(not r.get("scores") for r in rows):
            scored = {r["id"]: r for r in judge_results_sync([r for r in rows if not r.get("scores")], case_rows)}
            rows = [scored.get(r["id"], r) for r in rows]
        try:
            rep = build_report(rows, case_rows, n_boot=n_boot, seed=seed)
        except ValueError as exc:
            raise _fail(f"{path}: {exc}") from None
        name = labels[i] if labels else (case_files[i].stem if case_files else path.stem)
        while name in reports:
            name += "'"
        # the first split is the one read while writing rules; the others are only measured
        reports[name] = rep if i == 0 else measured_only(rep)
    if len(reports) == 1:
        rep = next(iter(reports.values()))
        print_report(rep, console)
        if out:
            out.write_text(render_html(rep), encoding="utf-8")
            console.print(f"HTML report: {out}")
        if json_out:
            json_out.write_text(json.dumps({k: v for k, v in rep.items() if k != "latency_samples"}, indent=1))
        return
    print_comparison(reports, console)
    for name, rep in reports.items():
        console.rule(name)
        print_report(rep, console, max_failures=5)
    if out:
        out.write_text(render_comparison_html(reports), encoding="utf-8")
        console.print(f"HTML report: {out}")
    if json_out:
        json_out.write_text(json.dumps({name: {k: v for k, v in rep.items() if k != "latency_samples"}
                                        for name, rep in reports.items()}, indent=1))


@pairwise_app.command("export")
def pairwise_export(a: Annotated[Path, typer.Option("--a", help="Result lines of system A.")],
                    b: Annotated[Path, typer.Option("--b", help="Result lines of system B.")],
                    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for pairs.csv and annotate.html.")],
                    seed: Annotated[int, typer.Option(help="Shuffle seed.")] = 0,
                    cases: Annotated[Path | None, typer.Option("--cases", "-c", help="Cases (to show the input).")]
                    = None,
                    key: Annotated[Path | None, typer.Option("--key", help="Where to keep the unblinding key "
                                                                            "(default OUT/key.json).")] = None) -> None:
    """Randomised, blinded pairs for annotators (CSV + a click-through HTML page)."""
    from livehost.eval.pairwise import export

    paths = export(_load(load_results, a), _load(load_results, b), out, seed=seed,
                   cases=_load(load_cases, cases) if cases else None, key_path=key)
    n = sum(1 for _ in paths["csv"].open(encoding="utf-8")) - 1
    console.print(f"{n} blinded pairs: {paths['csv']}, {paths['html']}; key (keep from annotators): {paths['key']}")


@pairwise_app.command("analyze")
def pairwise_analyze(labels: Annotated[Path, typer.Argument(help="labels.jsonl from the annotation page.")],
                     key: Annotated[Path, typer.Option("--key", help="key.json written by export.")]) -> None:
    """Unblind: wins/losses/ties of system A, win rate among preferences, exact sign-test p-value."""
    from livehost.eval.pairwise import analyze

    res = analyze(_load(read_jsonl, labels), json.loads(key.read_text()))
    rate = "n/a" if res.win_rate is None else f"{res.win_rate * 100:.1f}%"
    console.print(f"A (the --a system) vs B: {res.wins} wins, {res.losses} losses, {res.ties} ties; "
                  f"win rate among preferences {rate}; two-sided exact sign test p = {res.p_value:.3g}")
    if res.unknown_pairs:
        console.print(f"[yellow]{len(res.unknown_pairs)} label(s) ignored (unknown pair or choice)[/]")


@app.command()
def distribution(cases: Annotated[Path, typer.Option("--cases", "-c", help="Cases to sample.")],
                 samples: Annotated[int, typer.Option("--samples", "-k", help="Samples per case.")] = 10,
                 reference: Annotated[Path | None, typer.Option(help="Reference distributions (JSON) to compare.")]
                 = None,
                 results: Annotated[Path | None, typer.Option(help="Use already-sampled result lines (several per "
                                                                   "case id) instead of sampling.")] = None,
                 sampler: Annotated[str, typer.Option(help="module:function of the sampler (case, k → results).")]
                 = "",
                 save_reference: Annotated[Path | None, typer.Option(help="Save these distributions as a reference.")]
                 = None,
                 json_out: Annotated[Path | None, typer.Option("--json", help="Write the full report here.")] = None
                 ) -> None:
    """Per-case distribution of behaviours (skills, tools, responded) and TV distance to a reference."""
    from livehost.eval import distribution as dist
    from livehost.eval.gate import load_runner

    case_rows = _load(load_cases, cases)
    if results is not None:
        wanted = {str(c["id"]) for c in case_rows}
        grouped = {k: v for k, v in dist.by_case(_load(read_jsonl, results)).items() if k in wanted}
    else:
        try:
            fn = load_runner(sampler or dist.DEFAULT_SAMPLER)
        except (ImportError, AttributeError, ValueError, TypeError) as exc:
            raise _fail(f"no sampler ({exc}); pass --sampler module:function or --results") from None
        grouped = asyncio.run(dist.sample_all(case_rows, fn, samples))  # type: ignore[arg-type]
    ref = json.loads(reference.read_text()) if reference else None
    rep = dist.compare(grouped, ref)
    table = Table("case", "samples", "modes", "responded", "top behaviour", "TV to reference")
    for cid, row in rep["cases"].items():
        top = max(row["distribution"].items(), key=lambda kv: kv[1]) if row["distribution"] else ("-", 0)
        tv = row.get("tv_distance")
        table.add_row(cid, str(row["samples"]), str(row["modes"]), f"{row['marginals']['responded']:.2f}",
                      f"{top[0]} ({top[1]:.2f})", "-" if tv is None else f"{tv:.3f}")
    console.print(table)
    if ref is not None:
        mean = rep["tv_mean"]
        console.print(f"mean TV distance {'n/a' if mean is None else f'{mean:.3f}'} over {rep['compared']} case(s)")
    if save_reference:
        save_reference.write_text(json.dumps(dist.reference_of(rep), indent=1))
    if json_out:
        json_out.write_text(json.dumps(rep, indent=1))


@app.command()
def leakage(calibrate_threshold: Annotated[bool, typer.Option(
                "--calibrate", help="Print the paraphrase threshold chosen on the dev calibration pairs.")] = False,
            embeddings: Annotated[bool, typer.Option(
                help="Also compare the labelled data with every protected comment by embedding.")] = True) -> None:
    """Check that no labelled data, harness word list or rule holds evaluation text (exit 1 on any pair)."""
    from livehost.eval import leakage as check

    if calibrate_threshold:
        cal = check.calibrate()
        for line in cal.lines():
            console.print(line)
        console.print(f"in force: {check.PARAPHRASE_COSINE:.3f}")
        if abs(cal.threshold - check.PARAPHRASE_COSINE) > 1e-9:
            raise _fail("the threshold in force is not the calibrated one: set PARAPHRASE_COSINE in "
                        "livehost/eval/leakage.py")
        return
    report = check.run(embeddings=embeddings)
    for line in report.lines():
        console.print(line, markup=False)
    if not report.ok:
        raise typer.Exit(1)
