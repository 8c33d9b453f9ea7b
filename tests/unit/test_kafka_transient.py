"""The consumer loops (prompt, policy, tools) wait out what the infrastructure causes and dead-letter
only what the record causes: one classification for every service (livehost.kafka.transient)."""

from __future__ import annotations

import asyncpg
import pytest
from aiokafka.errors import KafkaConnectionError

from livehost.kafka import transient


@pytest.mark.parametrize("exc", [
    KafkaConnectionError("broker gone"),
    ConnectionResetError("reset"),
    TimeoutError(),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
    asyncpg.exceptions.CrashShutdownError("terminating connection because of crash of another server process"),
    # what a pooled connection is left in when its server dies mid-query (the old list missed it)
    asyncpg.exceptions.InternalClientError("cannot switch to state 15; another operation (2) is in progress"),
])
def test_infrastructure_failures_are_retried(exc: BaseException) -> None:
    assert transient(exc)


@pytest.mark.parametrize("exc", [
    ValueError("bad arguments"),
    KeyError("tool"),
    asyncpg.exceptions.NotNullViolationError("null value in column"),
    asyncpg.exceptions.DataError("invalid input for query argument"),
])
def test_record_failures_are_not(exc: BaseException) -> None:
    assert not transient(exc)
