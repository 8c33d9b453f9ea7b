"""The harness provider a running service uses.

The registry (PostgreSQL) says which version is active globally, per room or per experiment arm;
the provider follows activations announced on the harness-events topic (and polls as a safety net),
so every replica switches without a restart. The shipped folder (``LIVEHOST_HARNESS_PATH``) is the
fallback while nothing was activated yet.
"""

from __future__ import annotations

from livehost.config import Settings
from livehost.harness.hotreload import start_registry_provider
from livehost.harness.provider import HarnessProvider


async def provider_for(settings: Settings, service: str) -> HarnessProvider:
    return await start_registry_provider(settings, service)
