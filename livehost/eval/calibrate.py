"""Judge calibration against human labels: agreement and Cohen's kappa per metric.

Labels file (JSONL): ``{"id": "...", "accuracy": 0|1, "effectiveness": 0|0.5|1}`` (either metric may
be missing on a line; extra fields such as ``annotator`` or ``note`` are ignored). Accuracy is
binary; effectiveness has three ordered classes, so its weighted kappas (linear and quadratic) are
reported too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from livehost.eval.stats import agreement, confusion_matrix, finite_or_none, kappa_from_table

ACCURACY_LABELS: tuple[int, ...] = (0, 1)
EFFECTIVENESS_LABELS: tuple[float, ...] = (0.0, 0.5, 1.0)


def _metric(judge: list[Any], human: list[Any], labels: Sequence[Any], weighted: bool) -> dict[str, Any]:
    _, table = confusion_matrix(judge, human, labels)
    out: dict[str, Any] = {
        "n": len(judge),
        "agreement": finite_or_none(agreement(judge, human)),
        "kappa": finite_or_none(kappa_from_table(table)),
        "labels": [float(x) if isinstance(x, float) else x for x in labels],
        "confusion": table.astype(int).tolist(),  # rows: judge, columns: human
    }
    if weighted:
        out["kappa_linear"] = finite_or_none(kappa_from_table(table, "linear"))
        out["kappa_quadratic"] = finite_or_none(kappa_from_table(table, "quadratic"))
    return out


def calibrate(results: Sequence[dict[str, Any]], labels: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Compare judged result lines (``scores`` filled) with human labels, matched by id."""
    scored = {str(r["id"]): r["scores"] for r in results if r.get("scores")}
    unscored = sorted(str(r["id"]) for r in results if not r.get("scores"))
    acc_j: list[int] = []
    acc_h: list[int] = []
    eff_j: list[float] = []
    eff_h: list[float] = []
    unmatched = []
    for label in labels:
        lid = str(label.get("id"))
        s = scored.get(lid)
        if s is None:
            unmatched.append(lid)
            continue
        if label.get("accuracy") is not None:
            acc_j.append(int(s["accuracy"]))
            acc_h.append(int(label["accuracy"]))
        if label.get("effectiveness") is not None:
            eff_j.append(float(s["effectiveness"]))
            eff_h.append(float(label["effectiveness"]))
    bad = sorted({v for v in acc_h if v not in ACCURACY_LABELS} | {v for v in eff_h if v not in EFFECTIVENESS_LABELS})
    if bad:
        raise ValueError(f"labels out of range: {bad}")
    return {
        "accuracy": _metric(acc_j, acc_h, ACCURACY_LABELS, weighted=False),
        "effectiveness": _metric(eff_j, eff_h, EFFECTIVENESS_LABELS, weighted=True),
        "unmatched_labels": unmatched,
        "unscored_results": unscored,
    }
