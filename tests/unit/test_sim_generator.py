"""The live-room simulator: seeded and reproducible, every category, faults, bursty timelines, play."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from livehost import codec
from livehost.eval.cases import CATEGORIES, case_problems, load_cases
from livehost.sim.cli import app
from livehost.sim.generator import generate_cases
from livehost.sim.play import play, schedule
from livehost.topics import ROOM_EVENTS


def test_same_seed_same_cases_other_seed_other_cases() -> None:
    a = [g.case for g in generate_cases(seed=3, per_category=5)]
    b = [g.case for g in generate_cases(seed=3, per_category=5)]
    c = [g.case for g in generate_cases(seed=4, per_category=5)]
    assert json.dumps(a) == json.dumps(b) and json.dumps(a) != json.dumps(c)
    assert Counter(x["category"] for x in a) == {cat: 5 for cat in CATEGORIES}
    assert all(case_problems(x) == [] for x in a)


def test_data_derived_expectations_and_faults() -> None:
    cases = [g.case for g in generate_cases(seed=7, per_category=30)]
    faults = Counter(v for c in cases for v in (c.get("faults") or {}).values())
    assert set(faults) == {"timeout", "malformed", "permission_denied"}
    sold_out = [c for c in cases if c["category"] == "inventory" and not c.get("faults")
                and "sold out" in c["expect"]["must_include"][0]]
    assert sold_out
    for c in sold_out:
        assert any(i["stock"] == 0 for i in c["catalog"])
        assert "in stock now" in c["expect"]["must_not_include"]
    over = [c for c in cases for i in c["catalog"] for cp in i["coupons"]
            if cp["discount_pct"] > c["room"]["campaign"]["max_discount_pct"]]
    assert over  # some coupons above the campaign max exist
    inj = [c for c in cases if c["category"] == "injection"]
    assert all(not c["expect"]["respond"] and c["expect"]["must_not_include"] for c in inj)
    multi = [c for c in cases if c["category"] == "multi_intent"]
    assert all(len(c["comments"]) >= 2 and c["comments"][1]["offset_ms"] > 0 for c in multi)
    after = [c for c in cases if c["category"] == "after_sales" and c.get("orders")]
    assert after and all(c["orders"][0]["order_id"] in c["comments"][0]["text"] for c in after)


def test_schedule_is_bursty_ordered_and_reproducible() -> None:
    cases = [g.case for g in generate_cases(seed=1, per_category=3)]
    t1 = schedule(cases, seed=5, mean_gap_ms=2000)
    assert t1 == schedule(cases, seed=5, mean_gap_ms=2000)
    times = [s.at_ms for s in t1]
    assert times == sorted(times)
    comments = [s for s in t1 if s.record["type"] == "comment"]
    assert len(comments) == sum(len(c["comments"]) for c in cases)
    starts = sorted({min(s.at_ms for s in t1 if s.case_id == c["id"]) for c in cases})
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert min(gaps) < 400 and max(gaps) > 1500  # bursts: close arrivals and long pauses
    types = Counter(s.record["type"] for s in t1)
    assert types["campaign_change"] >= 1 and types["product_switch"] >= 1
    for s in t1:
        codec.validate(ROOM_EVENTS.schema, {**s.record, "ts_ms": 1})


async def test_play_publishes_with_timing() -> None:
    cases = [g.case for g in generate_cases(seed=1, per_category=1)]
    timeline = schedule(cases, seed=0, mean_gap_ms=1000)
    sent: list[tuple[str, str, dict[str, Any]]] = []
    now = [0.0]
    slept: list[float] = []

    async def send(topic: Any, key: str, record: dict[str, Any]) -> None:
        sent.append((topic.name, key, record))

    async def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    n = await play(timeline, send, speed=2.0, clock=lambda: now[0], sleep=sleep, now_ms=lambda: 1000)
    assert n == len(timeline) == len(sent)
    assert all(t == ROOM_EVENTS.name and k == r["room_id"] and r["ts_ms"] == 1000 for t, k, r in sent)
    assert now[0] == timeline[-1].at_ms / 1000 / 2.0  # half the timeline's duration at speed 2


def test_cli_generate_and_dry_run(tmp_path: Path) -> None:
    out = tmp_path / "cases.jsonl"
    res = CliRunner().invoke(app, ["generate", "--out", str(out), "--seed", "2", "--per-category", "2", "--hard",
                                   "--gold", str(tmp_path / "gold.jsonl")])
    assert res.exit_code == 0, res.output
    cases = load_cases(out)
    assert len(cases) == 2 * len(CATEGORIES) + 40
    assert len((tmp_path / "gold.jsonl").read_text().splitlines()) == len(cases)
    res = CliRunner().invoke(app, ["play", "--cases", str(out), "--limit", "3", "--dry-run"])
    assert res.exit_code == 0 and "comment" in res.output
