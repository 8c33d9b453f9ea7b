"""The release evaluation: the only command that scores the sealed holdout.

The sealed holdout (``eval/sealed/holdout.jsonl.gz``) was written apart from the code, the rules and
their data, and is stored compressed so that searching the tree does not show it. Development commands
refuse it (:func:`livehost.eval.cases.load_cases`); this one scores it, beside the test split, with the
reference policy in process (:mod:`livehost.understanding.splitbench`), and prints figures only: counts
per category, never a case or a reply. It first runs the leakage check: a release whose rules or data
hold evaluation text has no figure worth printing.

``make release-eval`` runs it and writes the output under ``benchmarks/results/``; the README's holdout
figures come from that file only.
"""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
import sys
from pathlib import Path

from livehost.config import REPO_ROOT

RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"


def _wilson(ok: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 0.0
    p = ok / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return 100 * max(0.0, centre - half), 100 * min(1.0, centre + half)


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=False, timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=False, timeout=10)
        return out.stdout.strip() + ("+uncommitted" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def evaluate(harness_dir: Path | None = None, *, leakage: bool = True) -> list[str]:
    """The release figures as lines of text (figures only)."""
    from livehost.eval.cases import SEALED_HOLDOUT_PATH, load_cases
    from livehost.harness.loader import load
    from livehost.sim.split import TESTSET_PATH
    from livehost.understanding.splitbench import measure

    lines = [f"release evaluation, commit {_commit()}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
             f"{platform.machine()} {platform.python_version()}",
             f"command: {' '.join(['python -m livehost.eval.release', *sys.argv[1:]])}"]
    if leakage:
        from livehost.eval.leakage import run

        report = run()
        lines += report.lines()
        if not report.ok:
            lines.append("not scored: the leakage check failed")
            return lines
    harness = load(harness_dir or REPO_ROOT / "harness" / "default")
    splits = {"test": measure(harness, load_cases(TESTSET_PATH)),
              "sealed holdout": measure(harness, load_cases(SEALED_HOLDOUT_PATH, release=True))}
    cats = sorted({c for f in splits.values() for c in f.by_category})
    lines.append(f"{'category':18} " + " ".join(f"{name:>16}" for name in splits))
    for c in cats:
        cells = []
        for f in splits.values():
            ok, total = f.by_category.get(c, [0, 0])
            cells.append(f"{ok:>3}/{total:<3} {100 * ok / max(total, 1):5.1f}")
        lines.append(f"{c:18} " + " ".join(f"{cell:>16}" for cell in cells))
    for name, f in splits.items():
        low, high = _wilson(f.passed, f.cases)
        lines.append(f"{name}: accuracy {f.accuracy:.1f}% ({f.passed}/{f.cases}, 95% CI {low:.1f}-{high:.1f}); "
                     f"harmful refused {f.refusal_rate:.1f}% ({f.refused_harmful}/{f.harmful}); "
                     f"false refusals {f.false_refusal_rate:.1f}% ({f.false_refusals}/{f.benign})")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    out_dir = RESULTS_DIR
    if "--out-dir" in args:
        out_dir = Path(args[args.index("--out-dir") + 1])
    harness_dir = Path(args[args.index("--harness") + 1]) if "--harness" in args else None
    lines = evaluate(harness_dir)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if "--no-write" not in args:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"release-eval-{dt.datetime.now(dt.UTC):%Y-%m-%d-%H%M}.txt"
        path.write_text(text, encoding="utf-8")
        print(f"written to {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}")
    return 0 if not any(line.startswith("not scored") for line in lines) else 1


if __name__ == "__main__":
    raise SystemExit(main())
