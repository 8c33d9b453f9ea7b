"""livehost.kafka.patch_sync_group_load_in_progress: a SyncGroup refused with COORDINATOR_LOAD_IN_PROGRESS
(what a restarted broker answers while it reloads the group) makes aiokafka's consumer join again instead
of ending its group coordination for good. aiokafka's own rebalance code runs; only the coordinator
connection under it is a stand-in that answers SyncGroup with the broker's error code."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.consumer.group_coordinator import CoordinatorGroupRebalance
from aiokafka.errors import GroupLoadInProgressError, KafkaError, NotEnoughReplicasError

from livehost.kafka import patch_sync_group_load_in_progress


class Coordinator:
    def __init__(self, error_code: int) -> None:
        self.error_code = error_code
        self.generation = 3
        self.member_id = "m-1"
        self.rejoins = 0
        self._rejoin_needed_fut: Any = None

    async def _send_req(self, request: Any) -> Any:
        return SimpleNamespace(error_code=self.error_code, member_assignment=b"")

    def request_rejoin(self) -> None:
        self.rejoins += 1


def rebalance(coordinator: Coordinator) -> Any:
    obj = object.__new__(CoordinatorGroupRebalance)  # only the state _send_sync_group_request reads
    obj.group_id = "g"
    obj._retry_backoff_ms = 1
    obj._coordinator = coordinator
    return obj


async def test_stock_aiokafka_gives_up_on_a_sync_group_refused_while_the_group_loads() -> None:
    patch_sync_group_load_in_progress()
    original = CoordinatorGroupRebalance._livehost_sync_original  # type: ignore[attr-defined]
    coordinator = Coordinator(GroupLoadInProgressError.errno)
    with pytest.raises(KafkaError):  # what ended the trajectory recorder's group membership
        await original(rebalance(coordinator), None)


async def test_a_sync_group_refused_while_the_group_loads_is_joined_again() -> None:
    patch_sync_group_load_in_progress()
    patch_sync_group_load_in_progress()  # idempotent: not wrapped twice
    coordinator = Coordinator(GroupLoadInProgressError.errno)
    assert await rebalance(coordinator)._send_sync_group_request(None) is None
    assert coordinator.rejoins == 1


async def test_other_sync_group_errors_still_raise() -> None:
    patch_sync_group_load_in_progress()
    coordinator = Coordinator(NotEnoughReplicasError.errno)
    with pytest.raises(KafkaError, match="NotEnoughReplicasError"):
        await rebalance(coordinator)._send_sync_group_request(None)
