"""Property-based fuzzing (hypothesis). ``make test`` runs a small number of inputs per target;
``make fuzz`` sets ``LIVEHOST_FUZZ_EXAMPLES`` (and prints the counts of every target at the end).

Every target counts the inputs it ran and how they ended ("ok", or the rejection's exception type);
an exception of any other type fails the property (a crash), and a per-input deadline turns a hang
into a failure."""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("LIVEHOST_FUZZ_EXAMPLES", "40"))
COUNTS: defaultdict[str, Counter[str]] = defaultdict(Counter)

settings.register_profile(
    "livehost", max_examples=EXAMPLES, deadline=timedelta(seconds=5), derandomize=False, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.load_profile("livehost")


def count(target: str, outcome: str) -> None:
    COUNTS[target][outcome] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not COUNTS:
        return
    total = sum(sum(c.values()) for c in COUNTS.values())
    terminalreporter.section(f"fuzz: {total} generated inputs ({EXAMPLES} examples per property)")
    for target in sorted(COUNTS):
        c = COUNTS[target]
        detail = ", ".join(f"{k} {v}" for k, v in c.most_common())
        terminalreporter.write_line(f"{target:34} {sum(c.values()):6}  {detail}")
    terminalreporter.write_line(f"{'total':34} {total:6}  (0 crashes, 0 hangs: any would have failed a test)")
