"""``livehost eval calibrate``: agreement and kappa per metric against human labels (known answers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livehost.eval.calibrate import calibrate
from livehost.eval.cases import write_jsonl
from livehost.eval.cli import app


def _results_and_labels() -> tuple[list[dict], list[dict]]:  # type: ignore[type-arg]
    # accuracy table (judge rows × human cols, labels 0,1): [[15, 10], [5, 20]] → po 0.7, pe 0.5, kappa 0.4
    pairs = [(0, 0)] * 15 + [(0, 1)] * 10 + [(1, 0)] * 5 + [(1, 1)] * 20
    eff = [1.0, 0.5, 0.0, 1.0, 0.5] * 10
    results, labels = [], []
    for i, ((j, h), e) in enumerate(zip(pairs, eff, strict=True)):
        results.append({"id": f"c{i}", "responded": True, "reply": "x",
                        "scores": {"accuracy": j, "effectiveness": e}})
        labels.append({"id": f"c{i}", "accuracy": h, "effectiveness": e if i % 10 else 0.0, "annotator": "ann"})
    return results, labels


def test_calibrate_known_answers() -> None:
    results, labels = _results_and_labels()
    out = calibrate(results, labels)
    acc = out["accuracy"]
    assert acc["n"] == 50 and acc["agreement"] == pytest.approx(0.7) and acc["kappa"] == pytest.approx(0.4)
    assert acc["confusion"] == [[15, 10], [5, 20]]
    eff = out["effectiveness"]
    # 5 of 50 labels (i % 10 == 0, where the judge said 1.0) were relabelled 0 → agreement 45/50
    assert eff["agreement"] == pytest.approx(0.9)
    assert eff["kappa_quadratic"] < eff["kappa"] or eff["kappa_linear"] < eff["kappa"]  # far-apart disagreements
    assert 0 < eff["kappa"] < 1


def test_calibrate_rejects_out_of_range_labels() -> None:
    results, labels = _results_and_labels()
    labels[0]["effectiveness"] = 0.7
    with pytest.raises(ValueError, match="out of range"):
        calibrate(results, labels)


def test_cli_calibrate(tmp_path: Path) -> None:
    results, labels = _results_and_labels()
    write_jsonl(tmp_path / "r.jsonl", results)
    write_jsonl(tmp_path / "l.jsonl", labels)
    res = CliRunner().invoke(app, ["calibrate", "--results", str(tmp_path / "r.jsonl"), "--labels",
                                   str(tmp_path / "l.jsonl"), "--json", str(tmp_path / "o.json")])
    assert res.exit_code == 0, res.output
    assert "0.400" in res.output and "0.700" in res.output
    assert json.loads((tmp_path / "o.json").read_text())["accuracy"]["kappa"] == pytest.approx(0.4)
