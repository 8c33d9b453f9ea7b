"""Shared fixtures of the integration tests: one real PostgreSQL server per test session, and a fresh
database per test (or module) on it, so tests stay isolated without paying a server start each."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import asyncpg
import pytest

from livehost.stack.testing import running_postgres


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_postgres(tmp_path_factory.mktemp("pg")) as dsn:
        yield dsn


async def create_database(server_dsn: str) -> str:
    """A new, empty database on the server; returns its DSN."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(server_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return server_dsn.rsplit("/", 1)[0] + f"/{name}"
