"""Records a fetch returned but Faust never handed on are fetched again (livehost.faustutil).

Faust drops a batch that arrives while its flow is stopped and seeks only stream partitions back to
their committed offsets; a table changelog's records were then consumed and gone, and the recovery of
the hooks worker that survived its peer's SIGKILL waited for them for ever. Real aiokafka subscription
state; only the client object around it is a stand-in (it has no broker to talk to)."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from aiokafka import TopicPartition
from aiokafka.consumer.subscription_state import SubscriptionState

from livehost.faustutil import put_back_unhanded

CHANGELOG = TopicPartition("app-table-changelog", 2)
STREAM = TopicPartition("live.room.events", 0)


class Record(NamedTuple):
    offset: int


class Client:
    def __init__(self, tps: list[TopicPartition]) -> None:
        self._subscription = SubscriptionState()
        self._subscription.assign_from_user(tps)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._subscription.seek(tp, offset)

    def position(self, tp: TopicPartition) -> int:
        return int(self._subscription.subscription.assignment.state_value(tp).position)


def fetched(client: Client, tp: TopicPartition, first: int, n: int) -> list[Any]:
    """What a fetch of n records from ``first`` leaves behind: the records, and the position after them."""
    client.seek(tp, first + n)
    return [Record(first + i) for i in range(n)]


@pytest.fixture
async def client() -> Client:
    return Client([CHANGELOG, STREAM])  # aiokafka's subscription state wants a running loop


async def test_a_batch_dropped_whole_is_read_again_from_its_first_record(client: Client) -> None:
    batch = {CHANGELOG: fetched(client, CHANGELOG, 0, 4)}
    assert put_back_unhanded(client, batch, handed={}) == [(CHANGELOG, 0)]
    assert client.position(CHANGELOG) == 0


async def test_only_the_records_not_handed_on_are_read_again(client: Client) -> None:
    batch = {CHANGELOG: fetched(client, CHANGELOG, 10, 5), STREAM: fetched(client, STREAM, 3, 2)}
    put_back_unhanded(client, batch, handed={CHANGELOG: 12, STREAM: 4})
    assert client.position(CHANGELOG) == 13  # 10..12 were handed on
    assert client.position(STREAM) == 5  # all handed on: nothing to put back


async def test_a_seek_made_since_the_fetch_wins(client: Client) -> None:
    batch = {CHANGELOG: fetched(client, CHANGELOG, 5, 3)}
    client.seek(CHANGELOG, 0)  # the table recovery sought to the changelog's start meanwhile
    assert put_back_unhanded(client, batch, handed={}) == []
    assert client.position(CHANGELOG) == 0


async def test_a_partition_no_longer_assigned_is_left_alone(client: Client) -> None:
    batch = {CHANGELOG: fetched(client, CHANGELOG, 0, 2)}
    client._subscription.assign_from_user([STREAM])  # a rebalance took the changelog partition away
    assert put_back_unhanded(client, batch, handed={}) == []
