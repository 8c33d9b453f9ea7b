"""The policy and tools services' Kafka steps poll slowly only while the prompt step does their work
(their topics then carry nothing); when a step is theirs, they fetch with the shared wait."""

from __future__ import annotations

import pytest

from livehost.config import Settings
from livehost.kafka import ConsumerLoop
from services.policy.server import build as build_policy
from services.tools.server import build as build_tools


def _loop(runtime: object) -> ConsumerLoop:
    loops = [c for c in runtime.consumers if isinstance(c, ConsumerLoop)]  # type: ignore[attr-defined]
    assert len(loops) == 1
    return loops[0]


@pytest.mark.parametrize(("runs_turns", "calls_policy", "policy_idle", "tools_idle"), [
    (True, False, True, True),  # the default: the prompt step runs every turn
    (False, True, True, False),  # the prompt step calls the model; tools over Kafka
    (False, False, False, False),  # every step its own service
])
def test_a_step_polls_slowly_only_while_its_topic_is_idle(runs_turns: bool, calls_policy: bool,
                                                          policy_idle: bool, tools_idle: bool) -> None:
    settings = Settings(prompt_runs_turns=runs_turns, prompt_calls_policy=calls_policy,
                        kafka_idle_fetch_max_wait_ms=1500)
    idle = settings.kafka_idle_fetch_max_wait_ms
    assert _loop(build_policy(settings)).fetch_max_wait_ms == (idle if policy_idle else None)
    assert _loop(build_tools(settings)).fetch_max_wait_ms == (idle if tools_idle else None)
