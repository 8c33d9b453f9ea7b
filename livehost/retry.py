"""Backoff schedule shared by every start-up and reconnect loop."""

from __future__ import annotations

import random
from collections.abc import Iterator


def backoff_delays(initial_s: float = 0.2, max_s: float = 5.0, factor: float = 2.0) -> Iterator[float]:
    """Exponential backoff with full jitter, capped; infinite."""
    delay = initial_s
    while True:
        yield random.uniform(delay / 2, delay)
        delay = min(max_s, delay * factor)
