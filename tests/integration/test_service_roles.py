"""Least-privilege PostgreSQL roles (infra/sql/roles/service_roles.sql) against a real PostgreSQL: each
service's login role does what its service does — through the service's own code — and nothing else:
no DDL, no writes to another service's tables."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import asyncpg
import pytest

from livehost.commerce.executor import ToolContext, ToolExecutor
from livehost.commerce.store import CommerceStore
from livehost.config import REPO_ROOT
from livehost.db import apply_service_roles, connect_pool, migrate
from livehost.harness.loader import load
from livehost.harness.registry import Registry
from livehost.stack import postgres
from livehost.stack.testing import running_postgres
from services.trajectories.handlers import TrajectoryStore

pytestmark = pytest.mark.integration
HARNESS = load(REPO_ROOT / "harness" / "default")
SERVICES = ("prompt", "tools", "hooks", "trajectories", "harness")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    root = tmp_path_factory.mktemp("roles")
    with running_postgres(root) as dsn:
        url = urlsplit(dsn)
        superuser = (f"postgresql://postgres:{quote(postgres.password(Path(root) / 'postgres', 'postgres'))}"
                     f"@{url.hostname}:{url.port}/livehost")
        yield dsn, superuser


@pytest.fixture(scope="module")
async def dsns(server: tuple[str, str]) -> AsyncIterator[dict[str, str]]:
    owner_dsn, superuser = server
    owner = await connect_pool(owner_dsn, attempts=5)
    await migrate(owner, apply=True)
    await CommerceStore(owner).load_demo_catalog(scope="roles")
    await owner.close()
    su = await asyncpg.connect(superuser)
    try:
        await apply_service_roles(_Single(su))  # type: ignore[arg-type]
        await apply_service_roles(_Single(su))  # type: ignore[arg-type]  # idempotent
        url = urlsplit(owner_dsn)
        out = {}
        for name in SERVICES:
            await su.execute(f"DROP ROLE IF EXISTS svc_{name}")
            await su.execute(f"CREATE ROLE svc_{name} LOGIN PASSWORD 'pw-{name}' IN ROLE livehost_{name}")
            out[name] = f"postgresql://svc_{name}:pw-{name}@{url.hostname}:{url.port}/livehost"
    finally:
        await su.close()
    yield out


class _Single:
    """A pool-like wrapper around one connection (apply_service_roles acquires a connection)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    def acquire(self) -> _Single:
        return self

    async def __aenter__(self) -> asyncpg.Connection:
        return self._conn

    async def __aexit__(self, *exc: object) -> None:
        return None


async def refused(dsn: str, sql: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    except asyncpg.InsufficientPrivilegeError:
        return True
    finally:
        await conn.close()
    return False


async def test_each_service_role_does_its_work(dsns: dict[str, str]) -> None:
    # tools: a coupon and a pinned product through the executor, the side-effect gate's ledger included
    pool = await connect_pool(dsns["tools"], attempts=3)
    try:
        executor = ToolExecutor(CommerceStore(pool))
        coupon = next(t for t in HARNESS.tools if t.binding.operation == "coupon.issue")
        pin = next(t for t in HARNESS.tools if t.binding.operation == "room.pin_product")
        ctx = ToolContext(room_id="room-a", user_id="u-1", request_id="r-1", scope="roles")
        out = await executor.execute(HARNESS, coupon.name, {coupon.binding.arguments.get("code", "code"): "TRAIL10"},
                                     ctx)
        assert out.ok, out
        out = await executor.execute(HARNESS, pin.name, {pin.binding.arguments.get("link_id", "link_id"): 2}, ctx)
        assert out.ok, out
    finally:
        await pool.close()
    # trajectories: a trajectory and its room memory
    pool = await connect_pool(dsns["trajectories"], attempts=3)
    try:
        assert await TrajectoryStore(pool).save({
            "request_id": "req-roles", "room_id": "room-a", "harness_version": "v", "policy": "", "outcome": "reply",
            "reply_text": "hi", "reason": None, "merged_text": "hi", "comments": [], "steps": [], "created_ms": 1,
            "completed_ms": 2})
        await TrajectoryStore(pool).mark_published("req-roles")  # its one UPDATE grant
    finally:
        await pool.close()
    # harness: the registry workflow, without migrating
    registry = await Registry.connect(dsns["harness"], migrate=False, attempts=3, require_evaluation=False)
    try:
        version = (await registry.push(HARNESS, author="author")).version
        proposal = await registry.propose(version, author="author")
        await registry.review(proposal.id, reviewer="reviewer", decision="approve")
        assert (await registry.activate(version, actor="releaser")).version == version
    finally:
        await registry.close()
    # every service reports the harness it loaded
    for name in ("prompt", "tools", "hooks", "trajectories"):
        registry = await Registry.connect(dsns[name], migrate=False, attempts=3)
        try:
            await registry.record_load_status(name, version, True)
            assert (await registry.active()) is not None  # and reads the registry
        finally:
            await registry.close()


@pytest.mark.parametrize("name", SERVICES)
async def test_no_service_role_changes_the_schema_or_other_services_tables(dsns: dict[str, str], name: str) -> None:
    dsn = dsns[name]
    assert await refused(dsn, "CREATE TABLE intruder (i int)")
    assert await refused(dsn, "ALTER TABLE trajectories ADD COLUMN x int")
    assert await refused(dsn, "DROP TABLE room_memory")
    assert await refused(dsn, "DELETE FROM harness_audit")
    assert await refused(dsn, "TRUNCATE tool_idempotency")
    # a live fault drill is the schema owner's (an operator's) act, never a service's
    assert await refused(dsn, "INSERT INTO tool_fault_drills (capability, fault, expires_at)"
                              " VALUES ('product', 'timeout', now() + interval '1 minute')")
    others = {
        "prompt": "INSERT INTO room_memory (request_id, room_id, text, ts_ms) VALUES ('x', 'r', 't', 1)",
        "tools": "INSERT INTO trajectories (request_id, room_id, harness_version, outcome, merged_text, comments,"
                 " steps, created_ms, completed_ms) VALUES ('x', 'r', 'v', 'reply', '', '[]', '[]', 1, 1)",
        "hooks": "UPDATE harness_targets SET version = NULL",
        "trajectories": "INSERT INTO coupon_grants (room_id, user_id, code, grant_no) VALUES ('r', 'u', 'C', 1)",
        "harness": "INSERT INTO side_effect_ledger (idempotency_key, room_id, tool, operation) VALUES"
                   " ('k', 'r', 't', 'o')",
    }
    assert await refused(dsn, others[name]), others[name]
