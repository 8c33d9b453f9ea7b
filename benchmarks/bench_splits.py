"""Dev and test split side by side with the reference policy (in process): accuracy per category,
refusals of injection/abuse/compliance, false refusals of benign comments, and pass retention of the
test split across opaque, reworded harnesses (``--variants N``). ``--failures`` lists dev failures.
``LIVEHOST_EMBEDDINGS=off`` runs the lexical-only baseline."""

from __future__ import annotations

import sys

from livehost.config import REPO_ROOT
from livehost.eval.cases import DEVSET_PATH, load_cases
from livehost.harness.loader import load
from livehost.sim.split import TESTSET_PATH, reworded_variant
from livehost.understanding.splitbench import measure


def main() -> None:
    harness = load(REPO_ROOT / (sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-")
                                else "harness/default"))
    dev = measure(harness, load_cases(DEVSET_PATH))
    test = measure(harness, load_cases(TESTSET_PATH))
    cats = sorted(set(dev.by_category) | set(test.by_category))
    print(f"{'category':18} {'dev':>14} {'test':>14}")
    for c in cats:
        d, t = dev.by_category.get(c, [0, 0]), test.by_category.get(c, [0, 0])
        print(f"{c:18} {d[0]:>4}/{d[1]:<4} {100 * d[0] / max(d[1], 1):5.1f} {t[0]:>4}/{t[1]:<4} "
              f"{100 * t[0] / max(t[1], 1):5.1f}")
    for name, f in (("dev", dev), ("test", test)):
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
    if "--failures" in sys.argv:  # the dev split only: the test split is measured, not read
        for cid, reply in dev.failures:
            print(f"FAIL dev {cid}: {reply!r}")


if __name__ == "__main__":
    main()
