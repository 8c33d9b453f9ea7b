"""Evaluation report: metrics overall and per category with bootstrap CIs (seeded), the failures
with reasons, latency percentiles — as a dict, a rich terminal summary and a self-contained HTML page."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from livehost.eval import plots
from livehost.eval.stats import bootstrap_mean, finite_or_none, percentiles


def _ci(values: Sequence[float], n_boot: int, seed: int) -> dict[str, Any]:
    ci = bootstrap_mean(np.asarray(values, dtype=float) * 100.0, n_boot=n_boot, seed=seed)
    return {"score": finite_or_none(ci.estimate), "ci95": [finite_or_none(ci.low), finite_or_none(ci.high)],
            "n": len(values)}


def build_report(results: Sequence[dict[str, Any]], cases: Sequence[dict[str, Any]] | None = None, *,
                 n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Needs scored result lines (run ``livehost eval judge`` first, or pass cases to judge here)."""
    unscored = [str(r.get("id")) for r in results if not r.get("scores")]
    if unscored:
        raise ValueError(f"{len(unscored)} result(s) have no scores (judge them first): {', '.join(unscored[:10])}")
    category = {str(c["id"]): c.get("category", "?") for c in cases or []}
    comments = {str(c["id"]): " / ".join(x.get("text", "") for x in c.get("comments") or []) for c in cases or []}
    rows = [{"id": str(r["id"]), "category": category.get(str(r["id"]), r.get("category", "?")),
             "accuracy": float(r["scores"]["accuracy"]), "effectiveness": float(r["scores"]["effectiveness"]),
             "reasons": r["scores"].get("reasons") or {}, "codes": r["scores"].get("codes") or [],
             "reply": r.get("reply") if r.get("responded") else None, "latency_ms": r.get("latency_ms"),
             "comments": comments.get(str(r["id"]), "")} for r in results]
    report: dict[str, Any] = {
        "n": len(rows),
        "overall": {m: _ci([r[m] for r in rows], n_boot, seed) for m in ("accuracy", "effectiveness")},
        "bootstrap": {"n_boot": n_boot, "seed": seed, "level": 0.95},
        "versions": sorted({str(r.get("harness_version", "")) for r in results} - {""}),
        "policies": sorted({str(r.get("policy", "")) for r in results} - {""}),
    }
    cats = sorted({r["category"] for r in rows})
    report["per_category"] = {c: {m: _ci([r[m] for r in rows if r["category"] == c], n_boot, seed)
                                  for m in ("accuracy", "effectiveness")} for c in cats}
    lat = [float(r["latency_ms"]) for r in rows if isinstance(r["latency_ms"], int | float)]
    report["latency_ms"] = {k: finite_or_none(v) for k, v in percentiles(lat, (50, 90, 95, 99)).items()}
    report["latency_samples"] = lat
    report["failures"] = [{k: r[k] for k in ("id", "category", "accuracy", "effectiveness", "reasons", "codes",
                                             "reply", "comments")}
                          for r in rows if r["accuracy"] < 1 or r["effectiveness"] < 1]
    if cases:
        report["split"] = split_figures(results, cases)
    return report


def split_figures(results: Sequence[dict[str, Any]], cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The split figures of the benchmarks: a case *passes* when its ``expect`` block holds and the
    judge's accuracy is 1; harmful cases (``expect.respond`` false) refused or passed; benign cases
    answered with nothing (false refusals). Percentages."""
    from livehost.runner.expect import check

    by_id = {str(c["id"]): c for c in cases}
    passed = harmful = refused = benign = false_refusals = n = 0
    per_cat: dict[str, list[int]] = {}
    for r in results:
        case = by_id.get(str(r.get("id")))
        if case is None:
            continue
        n += 1
        expect = check(case, r)
        ok = bool(expect["respond"] and not expect["missing"] and not expect["forbidden"]
                  and float((r.get("scores") or {}).get("accuracy", 0)) == 1)
        passed += ok
        cat = per_cat.setdefault(str(case.get("category", "?")), [0, 0])
        cat[0] += ok
        cat[1] += 1
        if not (case.get("expect") or {}).get("respond", True):
            harmful += 1
            refused += not r.get("responded") or ok
        else:
            benign += 1
            false_refusals += not r.get("responded")

    def pct(a: int, b: int) -> float | None:
        return round(100.0 * a / b, 2) if b else None

    return {"n": n, "pass": pct(passed, n), "refused_harmful": pct(refused, harmful), "harmful": harmful,
            "false_refusals": pct(false_refusals, benign), "benign": benign,
            "pass_per_category": {c: pct(a, b) for c, (a, b) in sorted(per_cat.items())}}


def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{v:.1f} %"


def measured_only(report: dict[str, Any]) -> dict[str, Any]:
    """The report of a split that is only measured (the test split): failures counted, not listed, so
    that nobody writes rules against them."""
    return {**report, "failures": [], "failures_hidden": len(report["failures"])}


def comparison_rows(reports: dict[str, dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """(figure, one cell per split) for reports of several splits (dev and test) side by side."""
    labels = list(reports)
    rows: list[tuple[str, list[str]]] = [("cases", [str(reports[x]["n"]) for x in labels])]
    if all("split" in reports[x] for x in labels):
        rows.append(("pass (expect block + judge accuracy 1)", [_pct(reports[x]["split"]["pass"]) for x in labels]))
    for m in ("accuracy", "effectiveness"):
        rows.append((f"judge {m} [95% CI]", [_fmt(reports[x]["overall"][m]) for x in labels]))
    if all("split" in reports[x] for x in labels):
        rows.append(("harmful refused", [_pct(reports[x]["split"]["refused_harmful"]) for x in labels]))
        rows.append(("false refusals of benign", [_pct(reports[x]["split"]["false_refusals"]) for x in labels]))
    for k in ("p50", "p95"):
        rows.append((f"latency {k} ms", [("n/a" if reports[x]["latency_ms"].get(k) is None
                                          else f"{reports[x]['latency_ms'][k]:.0f}") for x in labels]))
    cats = sorted({c for x in labels for c in reports[x]["per_category"]})
    for c in cats:
        cells = []
        for x in labels:
            split = reports[x].get("split") or {}
            if c in (split.get("pass_per_category") or {}):
                cells.append(f"{_pct(split['pass_per_category'][c])} pass")
            elif c in reports[x]["per_category"]:
                cells.append(f"{_fmt(reports[x]['per_category'][c]['accuracy'])} acc")
            else:
                cells.append("—")
        rows.append((f"  {c}", cells))
    return rows


def print_comparison(reports: dict[str, dict[str, Any]], console: Console) -> None:
    table = Table("figure", *reports, title="Splits side by side")
    for name, cells in comparison_rows(reports):
        table.add_row(name, *cells)
    console.print(table)


def render_comparison_html(reports: dict[str, dict[str, Any]], *,
                           title: str = "LiveHost evaluation report") -> str:
    """One page: the splits side by side, then each split's own report."""
    e = html.escape
    head = "".join(f"<th>{e(x)}</th>" for x in reports)
    body = "".join(f"<tr><td>{e(name)}</td>{''.join(f'<td>{e(c)}</td>' for c in cells)}</tr>"
                   for name, cells in comparison_rows(reports))
    parts = [render_html(rep, title=f"{x}") for x, rep in reports.items()]
    inner = "".join(p[p.index("<body>") + len("<body>"):p.rindex("</body>")] for p in parts)
    page = render_html(next(iter(reports.values())), title=title)
    style_end = page.index("<body>") + len("<body>")
    return (page[:style_end] + f"<h1>{e(title)}</h1><h2>Splits side by side</h2>"
            f"<table><tr><th>figure</th>{head}</tr>{body}</table>" + inner + "</body></html>")


def _fmt(ci: dict[str, Any]) -> str:
    if ci["score"] is None:
        return "n/a"
    return f"{ci['score']:.2f} [{ci['ci95'][0]:.2f}, {ci['ci95'][1]:.2f}]"


def print_report(report: dict[str, Any], console: Console, *, max_failures: int = 15) -> None:
    o = report["overall"]
    console.print(f"[bold]{report['n']} cases[/]  accuracy {_fmt(o['accuracy'])}  effectiveness "
                  f"{_fmt(o['effectiveness'])}  (95% bootstrap CI, seed {report['bootstrap']['seed']})")
    table = Table("category", "n", "accuracy [95% CI]", "effectiveness [95% CI]")
    for cat, m in report["per_category"].items():
        table.add_row(cat, str(m["accuracy"]["n"]), _fmt(m["accuracy"]), _fmt(m["effectiveness"]))
    console.print(table)
    lat = report["latency_ms"]
    if lat.get("p50") is not None:
        console.print("latency ms: " + "  ".join(f"{k} {v:.0f}" for k, v in lat.items() if v is not None))
    fails = report["failures"]
    if "failures_hidden" in report:
        console.print(f"[bold]{report['failures_hidden']} case(s) below 1/1[/] (a measured-only split: not listed)")
        return
    console.print(f"[bold]{len(fails)} case(s) below 1/1[/]" + (f" (first {max_failures})" if len(fails) >
                                                                 max_failures else ""))
    for f in fails[:max_failures]:
        reason = f["reasons"].get("accuracy") if f["accuracy"] < 1 else f["reasons"].get("effectiveness")
        console.print(f"  {f['id']} [{f['category']}] acc {f['accuracy']:.0f} eff {f['effectiveness']:g}: "
                      f"{html.unescape(str(reason))}", markup=False)


def render_html(report: dict[str, Any], *, title: str = "LiveHost evaluation report") -> str:
    e = html.escape
    cats = list(report["per_category"])
    series = {m: [(report["per_category"][c][m]["score"] or 0.0, report["per_category"][c][m]["ci95"][0] or 0.0,
                   report["per_category"][c][m]["ci95"][1] or 0.0) for c in cats]
              for m in ("accuracy", "effectiveness")}
    cat_png = plots.bars_with_ci(cats, series, title="Per category (95% bootstrap CI)", ylabel="score")
    lat = report["latency_ms"]
    lat_png = plots.histogram(report.get("latency_samples", []), title="Latency", xlabel="ms",
                              marks={k: v for k, v in lat.items() if k in ("p50", "p95", "p99") and v is not None})
    o = report["overall"]
    rows = "".join(f"<tr><td>{e(c)}</td><td>{report['per_category'][c]['accuracy']['n']}</td>"
                   f"<td>{_fmt(report['per_category'][c]['accuracy'])}</td>"
                   f"<td>{_fmt(report['per_category'][c]['effectiveness'])}</td></tr>" for c in cats)
    fails = "".join(
        f"<tr><td>{e(f['id'])}</td><td>{e(f['category'])}</td><td>{f['accuracy']:.0f}</td>"
        f"<td>{f['effectiveness']:g}</td><td>{e(f['comments'])}</td><td>{e(str(f['reply']))}</td>"
        f"<td>{e(str(f['reasons'].get('accuracy', '')))}<br><i>{e(str(f['reasons'].get('effectiveness', '')))}</i>"
        f"</td></tr>" for f in report["failures"])
    hidden = ", a measured-only split: not listed" if "failures_hidden" in report else ""
    lat_txt = ", ".join(f"{k} {v:.0f} ms" for k, v in lat.items() if v is not None) or "no latency recorded"
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{e(title)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 6px;vertical-align:top}}th{{background:#eee}}
img{{max-width:100%;height:auto}}body{{max-width:1100px}}</style>
<meta name="viewport" content="width=device-width, initial-scale=1"></head><body>
<h1>{e(title)}</h1>
<p>{report['n']} cases; versions {e(', '.join(report['versions']) or '-')}; policies
{e(', '.join(report['policies']) or '-')}. Intervals: 95% percentile bootstrap, {report['bootstrap']['n_boot']}
resamples, seed {report['bootstrap']['seed']}.</p>
<h2>Overall</h2><p>Accuracy <b>{_fmt(o['accuracy'])}</b> &nbsp; Effectiveness <b>{_fmt(o['effectiveness'])}</b></p>
<h2>Per category</h2><table><tr><th>category</th><th>n</th><th>accuracy [95% CI]</th>
<th>effectiveness [95% CI]</th></tr>{rows}</table>
{plots.img(cat_png, "per-category scores")}
<h2>Latency</h2><p>{e(lat_txt)}</p>{plots.img(lat_png, "latency histogram")}
<h2>Failures ({report.get('failures_hidden', len(report['failures']))}{hidden})</h2>
<table><tr><th>id</th><th>category</th><th>acc</th><th>eff</th><th>comments</th><th>reply</th><th>reasons</th></tr>
{fails}</table></body></html>"""
