from __future__ import annotations

from livehost.config import Settings
from livehost.kafka import Producer


def producer(settings: Settings) -> Producer:
    return Producer(settings)
