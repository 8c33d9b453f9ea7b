"""The harness provider a running service uses.

With a registry (PostgreSQL) the service follows operators' activations and hot-reloads; the
shipped folder (``LIVEHOST_HARNESS_PATH``) is the fallback while nothing was activated yet.
"""

from __future__ import annotations

from livehost.config import Settings
from livehost.harness.provider import HarnessProvider, StaticHarnessProvider


async def provider_for(settings: Settings) -> HarnessProvider:
    return StaticHarnessProvider.from_path(settings.harness_path)
