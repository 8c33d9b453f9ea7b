"""Experiment report: terminal summary (rich) and self-contained HTML with plots."""

from __future__ import annotations

import html
from typing import Any

from rich.console import Console
from rich.table import Table

from livehost.eval import plots
from livehost.experiments.analysis import METRICS, PRIMARY, fmt_pct, lift_text
from livehost.experiments.assign import Experiment


def _pp(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def print_report(exp: Experiment, result: dict[str, Any], console: Console) -> None:
    console.print(f"[bold]experiment {exp.name}[/] ({exp.status}); {result['participants']} participants; "
                  f"control arm {exp.control.name}")
    arms = Table("arm", "harness", "weight", "participants", *[f"{m}/participant" for m in METRICS])
    versions = {a.name: a for a in exp.arms}
    for row in result["arms"]:
        a = versions[row["arm"]]
        arms.add_row(row["arm"], a.harness_version[:12], f"{a.weight:g}", str(row["participants"]),
                     *[_pp(row[m]["per_participant"]) for m in METRICS])
    console.print(arms)
    lifts = Table("arm vs control", "metric", "relative lift (CI, p)")
    for row in result["lifts"]:
        lifts.add_row(f"{row['arm']} vs {row['vs']}", row["metric"], lift_text(row))
    console.print(lifts)
    srm = result.get("srm")
    if srm:
        flag = "[red]SAMPLE RATIO MISMATCH[/]" if srm["mismatch"] else "[green]no sample ratio mismatch[/]"
        console.print(f"{flag}: observed {srm['observed']} vs expected {srm['expected']} "
                      f"(chi2 {srm['chi2']:.2f}, df {srm['df']}, p {srm['p_value']:.3g}, threshold {srm['threshold']})")
        if srm["mismatch"]:
            console.print("[red]the split is off: fix assignment/logging before trusting any lift[/]")
    daily = result.get("daily") or []
    if daily:
        t = Table("day", "participants", *[f"{m} lift (cumulative)" for m in PRIMARY])
        for d in daily:
            t.add_row(d["day"], "/".join(map(str, d["participants"])),
                      *["; ".join(lift_text(x) for x in d[m]["lifts"]) for m in PRIMARY])
        console.print(t)


def render_html(exp: Experiment, result: dict[str, Any]) -> str:
    e = html.escape
    arm_rows = "".join(
        f"<tr><td>{e(r['arm'])}</td><td>{r['participants']}</td>"
        + "".join(f"<td>{_pp(r[m]['per_participant'])}</td>" for m in METRICS) + "</tr>" for r in result["arms"])
    lift_rows = "".join(f"<tr><td>{e(r['arm'])} vs {e(r['vs'])}</td><td>{e(r['metric'])}</td>"
                        f"<td>{e(lift_text(r))}</td><td>{e(str(r.get('bootstrap_ci', '')))}</td></tr>"
                        for r in result["lifts"])
    pngs = []
    lifts = [r for r in result["lifts"] if r.get("lift") is not None]
    if lifts:
        labels = [f"{r['arm']}:{r['metric']}" for r in lifts]
        pngs.append(plots.img(plots.bars_with_ci(
            labels, {"relative lift %": [(r["lift"] * 100, r["ci"][0] * 100, r["ci"][1] * 100) for r in lifts]},
            title="Relative lift vs control (95% CI)", ylabel="%"), "lifts"))
    daily = result.get("daily") or []
    if daily:
        days = [d["day"] for d in daily]
        for m in PRIMARY:
            lines = {}
            for k, arm in enumerate(exp.arms[1:]):
                vals = []
                for d in daily:
                    x = d[m]["lifts"][k]
                    vals.append((None, None, None) if x.get("lift") is None else
                                (x["lift"] * 100, x["ci"][0] * 100, x["ci"][1] * 100))
                lines[arm.name] = vals
            pngs.append(plots.img(plots.band(days, lines, title=f"Cumulative {m}/participant lift by day (95% CI)",
                                             ylabel="%"), f"daily {m}"))
    srm = result.get("srm") or {}
    srm_txt = ("no data" if not srm else
               f"{'SAMPLE RATIO MISMATCH' if srm['mismatch'] else 'no sample ratio mismatch'}: observed "
               f"{srm['observed']} vs expected {srm['expected']} (chi2 {srm['chi2']:.2f}, p {srm['p_value']:.3g})")
    daily_rows = "".join(
        f"<tr><td>{d['day']}</td><td>{'/'.join(map(str, d['participants']))}</td>"
        + "".join(f"<td>{e('; '.join(lift_text(x) for x in d[m]['lifts']))}</td>" for m in PRIMARY) + "</tr>"
        for d in daily)
    arms_desc = ", ".join(f"{a.name}={a.harness_version[:12]} ({a.weight:g})" for a in exp.arms)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Experiment {e(exp.name)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 6px}}th{{background:#eee}}</style></head><body>
<h1>Experiment {e(exp.name)}</h1><p>{e(exp.description)}</p>
<p>Status {e(exp.status)}; arms {e(arms_desc)}; control {e(exp.control.name)}. Metrics are divided by
participants (everyone exposed). Lift = treatment/control − 1 with {e(result['method'])} intervals
({int(result['level'] * 100)}%) and Welch z p-values.</p>
<h2>Arms</h2><table><tr><th>arm</th><th>participants</th>{''.join(f'<th>{m}/participant</th>' for m in METRICS)}</tr>
{arm_rows}</table>
<h2>Lifts</h2><table><tr><th>comparison</th><th>metric</th><th>lift (CI, p)</th><th>bootstrap CI</th></tr>{lift_rows}
</table>
<h2>Sample ratio</h2><p>{e(srm_txt)}</p>
<h2>Plots</h2>{''.join(pngs)}
<h2>Daily (cumulative)</h2><table><tr><th>day</th><th>participants</th>
{''.join(f'<th>{m} lift</th>' for m in PRIMARY)}</tr>{daily_rows}</table>
<p>{e(fmt_pct(None))} means the interval is undefined (too few participants or a zero control mean).</p>
</body></html>"""
