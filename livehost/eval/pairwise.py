"""Blind pairwise comparison of two systems on the same inputs.

``export`` pairs the result lines of system A and system B by case id, shuffles the pairs and the
order within each pair (seeded), and writes, into one folder:

- ``pairs.csv`` — pair_id, input, response_A, response_B (no system identity anywhere);
- ``annotate.html`` — a self-contained page: the annotator clicks A, B or tie per pair and
  downloads ``labels.jsonl`` (``{"pair_id", "choice": "A"|"B"|"tie", "annotator"}``);
- ``key.json`` — which system sits behind A and B of each pair. Keep it away from annotators
  (``export`` can write it elsewhere with ``key_path``).

``analyze`` unblinds labels with the key and reports wins/losses/ties of system A (the ``--a``
file) against system B, the win rate among preferences and a two-sided exact binomial sign test.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from livehost.eval.stats import sign_test

CHOICES = ("A", "B", "tie")


def _input_text(case: dict[str, Any] | None, result: dict[str, Any]) -> str:
    if case:
        return "\n".join(str(c.get("text", "")) for c in case.get("comments") or [])
    return str(result.get("input") or result.get("id"))


def _reply(result: dict[str, Any]) -> str:
    return str(result.get("reply") or "") if result.get("responded") else "(no reply)"


def make_pairs(results_a: Sequence[dict[str, Any]], results_b: Sequence[dict[str, Any]], *, seed: int = 0,
               cases: Sequence[dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(blinded pairs, key). Only case ids present in both result sets are paired."""
    rng = random.Random(f"pairwise:{seed}")
    a = {str(r["id"]): r for r in results_a}
    b = {str(r["id"]): r for r in results_b}
    case_map = {str(c["id"]): c for c in cases or []}
    ids = sorted(set(a) & set(b))
    rng.shuffle(ids)
    pairs: list[dict[str, Any]] = []
    key: dict[str, Any] = {"systems": {"a": "the --a results", "b": "the --b results"}, "pairs": {}}
    for n, cid in enumerate(ids, 1):
        pair_id = f"p{n:04d}"
        flip = rng.random() < 0.5
        first, second = (b[cid], a[cid]) if flip else (a[cid], b[cid])
        pairs.append({"pair_id": pair_id, "input": _input_text(case_map.get(cid), a[cid]),
                      "response_A": _reply(first), "response_B": _reply(second)})
        key["pairs"][pair_id] = {"case_id": cid, "A": "b" if flip else "a", "B": "a" if flip else "b"}
    return pairs, key


HTML_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Blind pairwise comparison</title>
<style>
body{{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222}}
.pair{{border:1px solid #ccc;border-radius:8px;padding:1em;margin:1em 0}}
.input{{background:#f4f4f4;padding:.5em;white-space:pre-wrap}}
.resp{{display:flex;gap:1em}} .resp div{{flex:1;border:1px solid #ddd;padding:.5em;white-space:pre-wrap}}
button{{margin:.5em .5em 0 0;padding:.4em 1.2em}} button.sel{{background:#2a7;color:#fff}}
#bar{{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ddd}}
</style></head><body>
<div id="bar"><b>Blind pairwise comparison</b> — for each input pick the better response (A, B) or tie.
Annotator: <input id="annotator" value=""> <span id="count"></span>
<button onclick="download()">Download labels.jsonl</button></div>
<div id="pairs"></div>
<script>
const PAIRS = {pairs_json};
const labels = {{}};
function esc(s){{const d=document.createElement('div');d.textContent=s;return d.innerHTML;}}
function render(){{
  const root=document.getElementById('pairs');
  root.innerHTML=PAIRS.map(p=>`<div class="pair" id="${{p.pair_id}}"><div><b>${{p.pair_id}}</b></div>
  <div class="input">${{esc(p.input)}}</div><div class="resp"><div><b>A</b><br>${{esc(p.response_A)}}</div>
  <div><b>B</b><br>${{esc(p.response_B)}}</div></div>
  ${{['A','B','tie'].map(c=>
    `<button data-c="${{c}}" onclick="pick('${{p.pair_id}}','${{c}}')">${{c}}</button>`).join('')}}
  </div>`).join('');
  count();
}}
function pick(id,c){{labels[id]=c;document.querySelectorAll('#'+id+' button').forEach(
  b=>b.classList.toggle('sel',b.dataset.c===c));count();}}
function count(){{document.getElementById('count').textContent=
  Object.keys(labels).length+' / '+PAIRS.length+' labelled';}}
function download(){{
  const who=document.getElementById('annotator').value||'anonymous';
  const lines=Object.entries(labels).map(([k,v])=>
    JSON.stringify({{pair_id:k,choice:v,annotator:who}})).join('\\n')+'\\n';
  const a=document.createElement('a');a.href=URL.createObjectURL(new Blob([lines],{{type:'application/jsonl'}}));
  a.download='labels.jsonl';a.click();
}}
render();
</script></body></html>
"""


def export(results_a: Sequence[dict[str, Any]], results_b: Sequence[dict[str, Any]], out_dir: Path | str, *,
           seed: int = 0, cases: Sequence[dict[str, Any]] | None = None,
           key_path: Path | str | None = None) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pairs, key = make_pairs(results_a, results_b, seed=seed, cases=cases)
    csv_path = out / "pairs.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["pair_id", "input", "response_A", "response_B"])
        writer.writeheader()
        writer.writerows(pairs)
    page = out / "annotate.html"
    # </script> inside a response must not close the page's script block
    payload = json.dumps(pairs, ensure_ascii=False).replace("</", "<\\/")
    page.write_text(HTML_PAGE.format(pairs_json=payload), encoding="utf-8")
    kp = Path(key_path) if key_path else out / "key.json"
    kp.parent.mkdir(parents=True, exist_ok=True)
    kp.write_text(json.dumps(key, indent=1), encoding="utf-8")
    return {"csv": csv_path, "html": page, "key": kp}


@dataclass(frozen=True)
class PairwiseResult:
    wins: int  # system a preferred
    losses: int  # system b preferred
    ties: int
    win_rate: float | None  # wins / (wins + losses)
    p_value: float
    labels: int
    unknown_pairs: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"wins": self.wins, "losses": self.losses, "ties": self.ties, "win_rate": self.win_rate,
                "p_value": self.p_value, "labels": self.labels, "unknown_pairs": self.unknown_pairs,
                "test": "two-sided exact binomial sign test (ties excluded)"}


def counts(wins: int, losses: int, ties: int) -> PairwiseResult:
    n = wins + losses
    return PairwiseResult(wins, losses, ties, wins / n if n else None, sign_test(wins, losses), n + ties, [])


def analyze(labels: Sequence[dict[str, Any]], key: dict[str, Any]) -> PairwiseResult:
    """Unblind ``labels`` with ``key``: every label row counts (several annotators → several rows)."""
    pairs = key.get("pairs", {})
    wins = losses = ties = 0
    unknown: list[str] = []
    for row in labels:
        pid = str(row.get("pair_id"))
        choice = str(row.get("choice", "")).strip()
        choice = "tie" if choice.lower() == "tie" else choice.upper()
        if pid not in pairs or choice not in CHOICES:
            unknown.append(pid)
            continue
        if choice == "tie":
            ties += 1
        elif pairs[pid][choice] == "a":
            wins += 1
        else:
            losses += 1
    n = wins + losses
    return PairwiseResult(wins, losses, ties, wins / n if n else None, sign_test(wins, losses), n + ties, unknown)
