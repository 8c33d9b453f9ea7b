"""Triton clients, one per served policy model."""

from __future__ import annotations

import asyncio
import logging

import tritonclient.grpc.aio as triton_aio

from livehost.config import Settings
from livehost.policy.client import PolicyClient, PolicyError
from livehost.retry import backoff_delays

log = logging.getLogger(__name__)
# A failed call after retries (PolicyError) and an open breaker (PolicyUnavailable, a subclass) both
# mean no action this turn: the hooks give the room the harness fallback and record why.
UNAVAILABLE: tuple[type[BaseException], ...] = (PolicyError,)


def generators(settings: Settings) -> dict[str, PolicyClient]:
    return {name: PolicyClient(settings.triton_url, name, timeout_s=settings.policy_timeout_s,
                               retries=settings.policy_retries)
            for name in settings.policy_models}


async def wait_for_triton(settings: Settings) -> None:
    """Block until Triton is ready and the default model is loaded (backoff, never gives up)."""
    for delay in backoff_delays(settings.connect_backoff_initial_s, settings.connect_backoff_max_s):
        client = triton_aio.InferenceServerClient(settings.triton_url)
        try:
            if await client.is_server_ready() and await client.is_model_ready(settings.policy_model):
                return
            log.warning("Triton at %s not ready (model %s); retrying", settings.triton_url, settings.policy_model)
        except Exception as exc:  # tritonclient raises its own exception types for transport errors
            log.warning("Triton at %s unreachable (%s); retrying in %.1fs", settings.triton_url, exc, delay)
        finally:
            await client.close()
        await asyncio.sleep(delay)
