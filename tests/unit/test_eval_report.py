"""``livehost eval report``: overall/per-category scores with seeded bootstrap CIs, failures, latency."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from livehost.eval.cases import write_jsonl
from livehost.eval.cli import app
from livehost.eval.judge import judge_results_sync
from livehost.eval.report import build_report, print_report, render_html
from livehost.sim.generator import generate_cases

GEN = generate_cases(seed=5, per_category=3)
CASES = [g.case for g in GEN]


def results() -> list[dict]:  # type: ignore[type-arg]
    rows = []
    for n, g in enumerate(GEN):
        reply = g.gold if n % 7 else "Only 9999999 yuan, tap link 1!"  # every 7th case: an invented number
        rows.append({"id": g.case["id"], "harness_version": "h1", "policy": "p1", "responded": reply is not None,
                     "reply": reply, "latency_ms": float(100 + 10 * n)})
    return rows


def test_report_numbers() -> None:
    scored = judge_results_sync(results(), CASES)
    rep = build_report(scored, CASES, n_boot=500, seed=1)
    assert rep == build_report(scored, CASES, n_boot=500, seed=1)  # seeded
    n_bad = len(range(0, len(GEN), 7))
    assert rep["overall"]["accuracy"]["score"] == pytest.approx(100 * (1 - n_bad / len(GEN)))
    lo, hi = rep["overall"]["accuracy"]["ci95"]
    assert lo < rep["overall"]["accuracy"]["score"] <= hi
    assert set(rep["per_category"]) == {c["category"] for c in CASES}
    assert len(rep["failures"]) == n_bad and all("not in the case" in f["reasons"]["accuracy"]
                                                  for f in rep["failures"])
    assert rep["latency_ms"]["p50"] == pytest.approx(100 + 10 * (len(GEN) - 1) / 2)
    console = Console(record=True, width=160)
    print_report(rep, console)
    assert "per" not in console.export_text() or "accuracy" in console.export_text()
    page = render_html(rep)
    assert "Failures (" in page and "9999999" in page
    with pytest.raises(ValueError, match="no scores"):
        build_report(results(), CASES)


def test_cli_report_judges_unscored_lines_and_writes_html(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "r.jsonl", results())
    write_jsonl(tmp_path / "c.jsonl", CASES)
    out = tmp_path / "report.html"
    res = CliRunner().invoke(app, ["report", "--results", str(tmp_path / "r.jsonl"), "--cases",
                                   str(tmp_path / "c.jsonl"), "--out", str(out), "--n-boot", "300"])
    assert res.exit_code == 0, res.output
    assert "accuracy" in res.output and "latency ms" in res.output
    text = out.read_text()
    assert "<table>" in text
    assert text.count("data:image/png;base64,") == 2


def test_cli_report_shows_two_splits_side_by_side(tmp_path: Path) -> None:
    """dev and test: one table with a column per split; the second split's failures are only counted."""
    half = len(CASES) // 2
    rows = results()
    write_jsonl(tmp_path / "r1.jsonl", rows[:half])
    write_jsonl(tmp_path / "c1.jsonl", CASES[:half])
    write_jsonl(tmp_path / "r2.jsonl", rows[half:])
    write_jsonl(tmp_path / "c2.jsonl", CASES[half:])
    out, js = tmp_path / "report.html", tmp_path / "report.json"
    res = CliRunner().invoke(app, ["report", "--results", str(tmp_path / "r1.jsonl"), "--cases",
                                   str(tmp_path / "c1.jsonl"), "--results", str(tmp_path / "r2.jsonl"),
                                   "--cases", str(tmp_path / "c2.jsonl"), "--label", "dev", "--label", "test",
                                   "--out", str(out), "--json", str(js), "--n-boot", "200"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "Splits side by side" in res.output and "dev" in res.output and "test" in res.output
    assert "pass (expect block" in res.output and "measured-only split" in res.output
    data = json.loads(js.read_text())
    assert set(data) == {"dev", "test"}
    assert data["test"]["failures"] == [] and data["test"]["failures_hidden"] >= 1
    assert data["dev"]["failures"] and data["dev"]["split"]["n"] == half
    assert 0 <= data["test"]["split"]["pass"] <= 100
    page = out.read_text()
    assert page.count("<h1>") == 3 and "Splits side by side" in page and "9999999" in page
    bad = CliRunner().invoke(app, ["report", "--results", str(tmp_path / "r1.jsonl"), "--results",
                                   str(tmp_path / "r2.jsonl"), "--cases", str(tmp_path / "c1.jsonl")])
    assert bad.exit_code != 0 and "one --cases per --results" in bad.output
