"""Behaviour distributions and total variation distance on known distributions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from livehost.eval import distribution as dist
from livehost.eval.cases import write_jsonl
from livehost.eval.cli import app
from livehost.sim.generator import generate_cases


def sample(skill: str, tools: list[str], responded: bool = True) -> dict[str, Any]:
    return {"id": "c1", "skills_loaded": [skill], "tool_calls": [{"name": t} for t in tools], "responded": responded}


def test_distribution_and_tv() -> None:
    samples = [sample("s1", ["t1"])] * 6 + [sample("s2", [])] * 3 + [sample("s1", ["t1"], False)]
    d = dist.distribution(samples)
    assert d == {"skills=s1|tools=t1|responded=1": 0.6, "skills=s2|tools=-|responded=1": 0.3,
                 "skills=s1|tools=t1|responded=0": pytest.approx(0.1)}
    m = dist.marginals(samples)
    assert m["responded"] == pytest.approx(0.9) and m["skills"]["s1"] == pytest.approx(0.7)
    ref = {"c1": {"skills=s1|tools=t1|responded=1": 0.9, "skills=s2|tools=-|responded=1": 0.1}}
    rep = dist.compare({"c1": samples}, ref)
    # |0.6-0.9| + |0.3-0.1| + |0.1-0| = 0.6 → TV 0.3
    assert rep["cases"]["c1"]["tv_distance"] == pytest.approx(0.3) and rep["tv_mean"] == pytest.approx(0.3)
    assert dist.compare({"c1": samples}, dist.reference_of(rep))["tv_mean"] == pytest.approx(0.0)


async def test_sampler_protocol() -> None:
    cases = [g.case for g in generate_cases(seed=1, per_category=1)][:3]

    async def sampler(case: dict[str, Any], k: int) -> list[dict[str, Any]]:
        return [sample("a" if i % 2 else "b", []) for i in range(k)]

    grouped = await dist.sample_all(cases, sampler, 4)
    assert set(grouped) == {c["id"] for c in cases} and all(len(v) == 4 for v in grouped.values())
    assert all(s["id"] == cid for cid, v in grouped.items() for s in v)
    rep = dist.compare(grouped)
    assert all(row["modes"] == 2 for row in rep["cases"].values())


def test_cli_distribution_from_results(tmp_path: Path) -> None:
    cases = [g.case for g in generate_cases(seed=1, per_category=1)][:2]
    write_jsonl(tmp_path / "c.jsonl", cases)
    rows = [{**sample("x", ["t"]), "id": cases[0]["id"]}] * 3 + [{**sample("y", []), "id": cases[0]["id"]}]
    rows += [{**sample("x", ["t"]), "id": cases[1]["id"]}] * 4
    write_jsonl(tmp_path / "s.jsonl", rows)
    ref = tmp_path / "ref.json"
    runner = CliRunner()
    res = runner.invoke(app, ["distribution", "--cases", str(tmp_path / "c.jsonl"), "--results",
                              str(tmp_path / "s.jsonl"), "--save-reference", str(ref)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["distribution", "--cases", str(tmp_path / "c.jsonl"), "--results",
                              str(tmp_path / "s.jsonl"), "--reference", str(ref), "--json", str(tmp_path / "o.json")])
    assert res.exit_code == 0 and "mean TV distance 0.000" in res.output
    assert json.loads((tmp_path / "o.json").read_text())["compared"] == 2
