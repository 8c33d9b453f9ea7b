"""The prompt step's facts in one round trip give what the four separate reads give (real PostgreSQL).

``PostgresFacts.gather`` replaces four statements per request with one; these tests hold it to the
answers of ``product``, ``faq``, ``memory`` and ``lineup``, whose queries are the commerce store's.
The rooms, links and questions come from the demo catalog file, whatever they are.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest

from livehost.agent.prompt import Sources
from livehost.commerce.store import DEMO_CATALOG_PATH, LIVE_SCOPE, CommerceStore
from livehost.db import connect_pool, migrate
from livehost.stack.testing import running_postgres
from services.prompt.clients import GATHER_SQL, PostgresFacts
from services.prompt.handlers import FourReads

pytestmark = pytest.mark.integration

CATALOG = json.loads(DEMO_CATALOG_PATH.read_text(encoding="utf-8"))
SANDBOX = "test:prompt-facts"


@pytest.fixture(scope="module")
def dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_postgres(tmp_path_factory.mktemp("prompt_facts_pg")) as url:
        yield url


@pytest.fixture(scope="module")
async def pool(dsn: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await connect_pool(dsn, attempts=5, max_size=4)
    await migrate(pool)
    store = CommerceStore(pool)
    await store.load_demo_catalog(scope=LIVE_SCOPE)
    await store.load_demo_catalog(scope=SANDBOX)
    room = CATALOG["rooms"][0]["room_id"]
    # what the host said: more rows than the prompt shows, two at the same instant
    await pool.executemany("INSERT INTO room_memory (request_id, room_id, text, ts_ms) VALUES ($1, $2, $3, $4)",
                           [(f"r-{i}", room, f"said {i}", 1000 + 10 * min(i, 6)) for i in range(8)])
    try:
        yield pool
    finally:
        await pool.close()


async def separately(facts: PostgresFacts, room: str, link: Any, query: str, scope: str, faq_limit: int,
                     memory_limit: int) -> Sources:
    """What the four statements give (FourReads.gather: the prompt step's reads before gather)."""
    return await FourReads.gather(facts, room, link, query, faq_limit, memory_limit, scope=scope)


def questions(room: dict[str, Any]) -> list[str]:
    """Questions with answers in the room (its FAQ, room-wide and per product), and some without."""
    asked = [f["q"] for f in room.get("faq", [])]
    asked += [f["q"] for p in room.get("catalog", []) for f in p.get("faq", [])]
    return [*asked[:6], "  ", "the and of", "?", "zzzz qqqq"]


async def test_gather_gives_what_the_four_reads_give(pool: asyncpg.Pool) -> None:
    facts = PostgresFacts(pool)
    compared = nonempty_faq = cut_faq = products = memories = 0
    for room in CATALOG["rooms"]:
        links: list[Any] = [p["link_id"] for p in room.get("catalog", [])]
        links += [None, 0, 999, str(links[0]) if links else "1"]  # none on screen, refused, missing, a string
        for scope in (LIVE_SCOPE, SANDBOX, "test:no-such-scope"):
            for link in links:
                for query in questions(room):
                    # the prompt's limits, and 1 and 2, where the ranking decides which entries are shown
                    for faq_limit, memory_limit in ((3, 5), (1, 2)):
                        want = await separately(facts, room["room_id"], link, query, scope, faq_limit, memory_limit)
                        got = await facts.gather(room["room_id"], link, query, faq_limit, memory_limit, scope=scope)
                        assert got == want, (room["room_id"], link, query, scope, faq_limit)
                        compared += 1
                        nonempty_faq += bool(want.faq)
                        cut_faq += len(await facts.faq(room["room_id"], query, link, 50, scope=scope)) > faq_limit
                        products += want.product is not None
                        memories += bool(want.memory)
    # the comparison covered answers, not only empty ones, and FAQ lists the limit cut
    assert nonempty_faq and cut_faq and products and memories, (compared, nonempty_faq, cut_faq, products, memories)


async def test_gather_memory_is_the_latest_in_order_and_live_only(pool: asyncpg.Pool) -> None:
    facts = PostgresFacts(pool)
    room = CATALOG["rooms"][0]["room_id"]
    live = await facts.gather(room, None, "hello", 3, 5, scope=LIVE_SCOPE)
    # the newest 5, oldest first; the last three share one instant and go by request id
    assert live.memory == ["said 3", "said 4", "said 5", "said 6", "said 7"]
    assert (await facts.gather(room, None, "hello", 3, 5, scope=SANDBOX)).memory == []


async def test_gather_follows_a_stock_change(pool: asyncpg.Pool) -> None:
    """Nothing is cached: a sold-out product shows as unavailable in the next request's lineup."""
    facts = PostgresFacts(pool)
    room = next(r for r in CATALOG["rooms"] if r.get("catalog"))
    link = room["catalog"][0]["link_id"]
    await pool.execute("UPDATE inventory SET stock = 0 WHERE scope = $1 AND room_id = $2 AND link_id = $3",
                       SANDBOX, room["room_id"], link)
    lineup = (await facts.gather(room["room_id"], link, "x", 3, 5, scope=SANDBOX)).lineup
    assert next(p for p in lineup if p["link_id"] == link)["available"] is False
    assert lineup == await facts.lineup(room["room_id"], scope=SANDBOX)


def _rows_read(plan: Any, table: str) -> int:
    """Rows the plan's scans of ``table`` returned (EXPLAIN ANALYZE, JSON), summed over loops."""
    node = plan if isinstance(plan, dict) else plan[0]["Plan"]
    own = int(node["Actual Rows"] * node["Actual Loops"]) if node.get("Relation Name") == table else 0
    return own + sum(_rows_read(child, table) for child in node.get("Plans", []))


async def test_memory_reads_only_what_the_prompt_shows_whatever_the_room_kept(pool: asyncpg.Pool) -> None:
    """A room keeps its memory for weeks (retention_room_memory_days); each request reads its latest few.
    Migration 100 put the request-id tie-break in the index, so that read stops after ``limit`` rows
    instead of sorting every row the room kept (and both ways still give the same answer)."""
    room = CATALOG["rooms"][1]["room_id"]
    await pool.executemany("INSERT INTO room_memory (request_id, room_id, text, ts_ms) VALUES ($1, $2, $3, $4)",
                           [(f"long-{i:05d}", room, f"long {i}", 5000 + i // 3) for i in range(3000)])
    await pool.execute("ANALYZE room_memory")
    facts = PostgresFacts(pool)
    got = await facts.gather(room, None, "hello", 3, 5, scope=LIVE_SCOPE)
    assert got.memory == [f"long {i}" for i in range(2995, 3000)]
    assert got.memory == await facts.memory(room, 5)
    async with pool.acquire() as conn:
        for sql, args in (
            ("SELECT text FROM room_memory WHERE room_id = $1 ORDER BY ts_ms DESC, request_id DESC LIMIT $2",
             (room, 5)),
            (GATHER_SQL, (LIVE_SCOPE, room, None, None, 3, 5, LIVE_SCOPE)),
        ):
            plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args))
            assert _rows_read(plan, "room_memory") <= 5, json.dumps(plan)[:2000]
