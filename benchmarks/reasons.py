"""How the benchmarks count why requests were cancelled (shared by bench_throughput and chaos)."""

from __future__ import annotations

import re

_FIGURE = re.compile(r"\d+(\.\d+)?")


def reason_kind(reason: str | None) -> str:
    """A cancellation's reason without its figures, so that reasons of one kind count together."""
    return _FIGURE.sub("N", reason or "no reason given")[:90]
