"""Live fault drills (livehost/commerce/drills.py) on a real PostgreSQL, through the tools service's
handler: off by default, a started drill makes live tool calls fail with the drill's error code and
says so in the outcome (``fault``), it ends when stopped or when it expires, and the table refuses a
drill that would never end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from livehost.commerce.drills import LiveDrills, active_drills, main, start_drill, stop_drills
from livehost.commerce.executor import ToolExecutor, ToolOutcome
from livehost.commerce.faults import CAPABILITIES
from livehost.commerce.store import CommerceStore
from livehost.db import connect_pool, migrate
from livehost.harness.loader import load
from livehost.harness.provider import StaticHarnessProvider
from livehost.stack.testing import running_postgres
from services.tools.handlers import ToolsHandler

pytestmark = pytest.mark.integration
HARNESS = load(Path(__file__).resolve().parents[2] / "harness" / "default")
LOOKUP = next(t for t in HARNESS.tools if t.binding.operation == "inventory.get")


@pytest.fixture(scope="module")
def dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_postgres(tmp_path_factory.mktemp("drills_pg")) as url:
        yield url


@pytest.fixture
async def pool(dsn: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await connect_pool(dsn, attempts=5)
    await migrate(pool)
    await CommerceStore(pool).load_demo_catalog()  # the live scope
    try:
        yield pool
    finally:
        await stop_drills(pool)
        await pool.close()


async def live_lookup(handler: ToolsHandler, link: int, n: int) -> ToolOutcome:
    return await handler.execute(HARNESS.version(), LOOKUP.name, {LOOKUP.binding.arguments.get("link_id", "link_id"):
                                                                  link}, "room-a", "u-1", f"req-{n}", None)


async def a_live_link(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT link_id FROM products WHERE scope = 'live' ORDER BY link_id LIMIT 1"))


async def test_a_drill_fails_live_tools_with_its_code_until_it_stops(pool: asyncpg.Pool) -> None:
    handler = ToolsHandler(StaticHarnessProvider(HARNESS), ToolExecutor(CommerceStore(pool)),
                           drills=LiveDrills(pool, refresh_s=0.0))
    link = await a_live_link(pool)
    before = await live_lookup(handler, link, 0)
    assert before.ok and before.fault is None, before  # off by default

    await start_drill(pool, {cap: "timeout" for cap in CAPABILITIES}, 30)
    timed_out = await live_lookup(handler, link, 1)
    assert (timed_out.ok, timed_out.error_code, timed_out.fault) == (False, "timeout", "timeout")
    assert "did not answer within" in (timed_out.error_message or "")
    assert timed_out.duration_ms >= LOOKUP.timeout_ms * 0.9  # it really waited for the tool's timeout

    await start_drill(pool, {"inventory": "malformed"}, 30)  # replaces the inventory drill
    garbage = await live_lookup(handler, link, 2)
    assert (garbage.ok, garbage.error_code, garbage.fault) == (False, "malformed", "malformed")
    assert "malformed result" in (garbage.error_message or "")

    assert await stop_drills(pool) == len(CAPABILITIES)
    after = await live_lookup(handler, link, 3)
    assert after.ok and after.result == before.result


async def test_a_drill_ends_by_itself(pool: asyncpg.Pool) -> None:
    await start_drill(pool, {"product": "permission_denied"}, 0.3)
    assert await active_drills(pool) == {"product": "permission_denied"}
    await asyncio.sleep(0.5)
    assert await active_drills(pool) == {}


async def test_the_refresh_bounds_the_queries(pool: asyncpg.Pool) -> None:
    drills = LiveDrills(pool, refresh_s=60.0)
    assert await drills.faults() == {}
    await start_drill(pool, {"faq": "timeout"}, 30)
    assert await drills.faults() == {}  # cached: a drill takes effect within refresh_s, not per call
    assert await LiveDrills(pool, refresh_s=0.0).faults() == {"faq": "timeout"}


async def test_no_endless_or_unknown_drill(pool: asyncpg.Pool) -> None:
    with pytest.raises(ValueError):
        await start_drill(pool, {"product": "timeout"}, 7200)
    with pytest.raises(ValueError):
        await start_drill(pool, {"product": "explode"}, 10)
    with pytest.raises(ValueError):
        await start_drill(pool, {"warehouse": "timeout"}, 10)
    with pytest.raises(asyncpg.CheckViolationError):  # the table itself, for a hand-written INSERT
        await pool.execute("INSERT INTO tool_fault_drills (capability, fault, expires_at)"
                           " VALUES ('product', 'timeout', now() + interval '2 hours')")


def test_the_operator_command(dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LIVEHOST_POSTGRES_DSN", dsn)
    main(["start", "malformed", "--capability", "product", "--seconds", "20"])
    main(["show"])
    main(["stop"])
    main(["show"])
    out = capsys.readouterr().out.splitlines()
    assert out == ["drill: malformed on product for 20 s", "product=malformed", "stopped 1 drill(s)",
                   "no active drill"]
