"""What the hooks processor depends on besides the broker: the harness registry and experiments."""

from __future__ import annotations

import time

from livehost.experiments.assign import REACT_BASELINE, Experiment
from livehost.experiments.store import ExperimentStore
from services.hooks.handlers import REACT_ARM, Assignment

REFRESH_S = 5.0  # how often the list of running experiments is re-read


class ExperimentAssigner:
    """Stable per-user assignment for the running experiment(s), logged once as an exposure.

    When several experiments run, the first by name takes the viewer (one live experiment at a time
    is the supported practice: overlapping ones would share traffic)."""

    def __init__(self, store: ExperimentStore):
        self._store = store
        self._running: list[Experiment] = []
        self._read_at = 0.0

    async def _experiments(self) -> list[Experiment]:
        if time.monotonic() - self._read_at > REFRESH_S:
            self._running = sorted((e for e in await self._store.list() if e.status == "running"),
                                   key=lambda e: e.name)
            self._read_at = time.monotonic()
        return self._running

    async def assign(self, room_id: str, user_id: str) -> Assignment | None:
        for exp in await self._experiments():
            exposure = await self._store.expose(exp.name, user_id, room_id=room_id, experiment=exp)
            if exposure is not None:
                version = REACT_ARM if exposure.harness_version == REACT_BASELINE else exposure.harness_version
                return Assignment(exp.name, exposure.arm, version)
        return None
