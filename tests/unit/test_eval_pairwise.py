"""Blind pairwise export and analysis; known answer 35 wins, 1 loss, 64 ties."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livehost.eval.cases import write_jsonl
from livehost.eval.cli import app
from livehost.eval.pairwise import analyze, counts, export, make_pairs

N = 100


def results(system: str) -> list[dict]:  # type: ignore[type-arg]
    return [{"id": f"case-{i:03d}", "harness_version": f"secret-{system}", "policy": f"policy-{system}",
             "responded": True, "reply": f"reply {i} from {system.upper()}SYS"} for i in range(N)]


def label_rows(key: dict, outcome: list[str]) -> list[dict]:  # type: ignore[type-arg]
    """outcome per case index: 'a' (prefer system a), 'b' or 'tie' → positional labels via the key."""
    by_case = {v["case_id"]: (pid, v) for pid, v in key["pairs"].items()}
    rows = []
    for i, want in enumerate(outcome):
        pid, v = by_case[f"case-{i:03d}"]
        choice = "tie" if want == "tie" else ("A" if v["A"] == want else "B")
        rows.append({"pair_id": pid, "choice": choice, "annotator": "ann-1"})
    return rows


def test_known_answer_35_wins_1_loss_64_ties(tmp_path: Path) -> None:
    paths = export(results("a"), results("b"), tmp_path / "out", seed=4, key_path=tmp_path / "secret" / "key.json")
    key = json.loads(paths["key"].read_text())
    outcome = ["a"] * 35 + ["b"] + ["tie"] * 64
    res = analyze(label_rows(key, outcome), key)
    assert (res.wins, res.losses, res.ties) == (35, 1, 64)
    assert res.win_rate == pytest.approx(35 / 36) and round(res.win_rate * 100, 1) == 97.2
    assert res.p_value == pytest.approx(2 * (1 + 36) / 2**36) and res.p_value < 0.001
    assert counts(35, 1, 64).p_value == res.p_value
    assert math.isclose(counts(0, 0, 5).p_value, 1.0) and counts(0, 0, 5).win_rate is None


def test_export_is_blind_shuffled_and_seeded(tmp_path: Path) -> None:
    paths = export(results("a"), results("b"), tmp_path / "o", seed=1)
    text = paths["csv"].read_text() + paths["html"].read_text()
    assert "secret-" not in text and "policy-" not in text
    rows = list(csv.DictReader(paths["csv"].open()))
    assert len(rows) == N and set(rows[0]) == {"pair_id", "input", "response_A", "response_B"}
    first_is_a = sum("ASYS" in r["response_A"] for r in rows)
    assert 30 < first_is_a < 70  # order shuffled within pairs
    assert [r["pair_id"] for r in rows] == sorted(r["pair_id"] for r in rows)
    assert [r["input"] for r in rows] != sorted(r["input"] for r in rows)  # pair order shuffled too
    assert make_pairs(results("a"), results("b"), seed=1) == make_pairs(results("a"), results("b"), seed=1)
    assert make_pairs(results("a"), results("b"), seed=1) != make_pairs(results("a"), results("b"), seed=2)
    assert "Download labels.jsonl" in paths["html"].read_text()


def test_html_escapes_script_breakouts(tmp_path: Path) -> None:
    a = [{"id": "x", "responded": True, "reply": "</script><script>alert(1)</script>"}]
    paths = export(a, a, tmp_path, seed=0)
    assert "</script><script>alert" not in paths["html"].read_text()


def test_cli_export_and_analyze(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", results("a"))
    write_jsonl(tmp_path / "b.jsonl", results("b"))
    runner = CliRunner()
    res = runner.invoke(app, ["pairwise", "export", "--a", str(tmp_path / "a.jsonl"), "--b", str(tmp_path / "b.jsonl"),
                              "--out", str(tmp_path / "pairs"), "--seed", "9"])
    assert res.exit_code == 0, res.output
    key = json.loads((tmp_path / "pairs" / "key.json").read_text())
    write_jsonl(tmp_path / "labels.jsonl", label_rows(key, ["a"] * 35 + ["b"] + ["tie"] * 64))
    res = runner.invoke(app, ["pairwise", "analyze", str(tmp_path / "labels.jsonl"), "--key",
                              str(tmp_path / "pairs" / "key.json")])
    assert res.exit_code == 0, res.output
    assert "35 wins, 1 losses, 64 ties" in res.output and "97.2%" in res.output and "1.08e-09" in res.output
