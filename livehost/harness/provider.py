"""Where services get harnesses from.

A service asks for the harness to pin on a new request (``for_new_request``) and for the exact
version a request was pinned to (``get``). The file provider serves one folder (development, tests,
the evaluation runner); the registry provider (livehost.harness.registry) serves what operators
activated and hot-reloads on announcements.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from livehost.harness.loader import load
from livehost.harness.model import Harness


class HarnessProvider(Protocol):
    async def for_new_request(self, room_id: str) -> Harness:
        """The harness a request starting now in this room must be pinned to."""
        ...

    async def get(self, version: str) -> Harness:
        """The harness with this content version (KeyError when unknown)."""
        ...


class StaticHarnessProvider:
    """Serves a fixed set of harnesses; the first is the one new requests get."""

    def __init__(self, *harnesses: Harness):
        if not harnesses:
            raise ValueError("at least one harness")
        self._active = harnesses[0]
        self._by_version = {h.version(): h for h in harnesses}

    @classmethod
    def from_path(cls, path: Path | str) -> StaticHarnessProvider:
        return cls(load(path))

    def add(self, harness: Harness) -> str:
        self._by_version[harness.version()] = harness
        return harness.version()

    async def for_new_request(self, room_id: str) -> Harness:
        return self._active

    async def get(self, version: str) -> Harness:
        try:
            return self._by_version[version]
        except KeyError:
            raise KeyError(f"unknown harness version {version!r}") from None
