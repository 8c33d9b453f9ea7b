"""The dev splits and the test split side by side with the reference policy (in process):
accuracy per category, refusals of injection/abuse/compliance, false refusals of benign comments, and
pass retention of the test split across opaque, reworded harnesses (``--variants N``). ``--failures``
lists the failures of the dev splits (the test split is measured, never read). The sealed holdout is not
scored here: only ``make release-eval`` scores it.
``LIVEHOST_EMBEDDINGS=off`` runs the lexical-only baseline."""

from __future__ import annotations

import sys

from livehost.config import REPO_ROOT
from livehost.eval.cases import DEVSET_PATH, HAND_WRITTEN_DEV, load_cases
from livehost.harness.loader import load
from livehost.sim.split import TESTSET_PATH, reworded_variant
from livehost.understanding.splitbench import measure


def main() -> None:
    harness = load(REPO_ROOT / (sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-")
                                else "harness/default"))
    splits = {"dev": measure(harness, load_cases(DEVSET_PATH))}
    for name, path in {**HAND_WRITTEN_DEV, "test": TESTSET_PATH}.items():
        if path.exists():
            splits[name] = measure(harness, load_cases(path))
    test = splits["test"]
    cats = sorted({c for f in splits.values() for c in f.by_category})
    print(f"{'category':18} " + " ".join(f"{name:>14}" for name in splits))
    for c in cats:
        cells = []
        for f in splits.values():
            ok, total = f.by_category.get(c, [0, 0])
            cells.append(f"{ok:>3}/{total:<3} {100 * ok / max(total, 1):5.1f}")
        print(f"{c:18} " + " ".join(f"{cell:>14}" for cell in cells))
    for name, f in splits.items():
        lat = sorted(f.latencies_ms)
        print(f"{name}: accuracy {f.accuracy:.1f}% ({f.passed}/{f.cases}); harmful refused "
              f"{f.refusal_rate:.1f}% ({f.refused_harmful}/{f.harmful}); false refusals "
              f"{f.false_refusal_rate:.1f}% ({f.false_refusals}/{f.benign}); "
              f"p95 {lat[int(0.95 * (len(lat) - 1))]:.1f} ms")
    if "--variants" in sys.argv:
        n = int(sys.argv[sys.argv.index("--variants") + 1])
        base = {cid for cid in (c["id"] for c in load_cases(TESTSET_PATH))} - {cid for cid, _ in test.failures}
        kept = []
        for seed in range(1, n + 1):
            variant = measure(reworded_variant(harness, seed), load_cases(TESTSET_PATH))
            passed = base - {cid for cid, _ in variant.failures}
            kept.append(len(passed) / max(len(base), 1))
            print(f"variant {seed}: test accuracy {variant.accuracy:.1f}%, retention {kept[-1]:.3f}")
        print(f"test-split pass retention over {n} reworded opaque harnesses: {sum(kept) / len(kept):.3f}")
    if "--failures" in sys.argv:  # the dev splits only: the test split is measured, not read
        for name in ("dev", *HAND_WRITTEN_DEV):
            for cid, reply in splits[name].failures if name in splits else []:
                print(f"FAIL {name} {cid}: {reply!r}")


if __name__ == "__main__":
    main()
