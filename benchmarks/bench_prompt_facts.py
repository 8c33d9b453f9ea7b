"""What a request's catalog facts cost the prompt step: four statements against one (PostgresFacts.gather).

    python benchmarks/bench_prompt_facts.py [--requests 2000] [--rounds 4]

Starts PostgreSQL, loads the demo catalog, and reads the facts of the same requests both ways in
alternating rounds (so a machine that slows during the run slows both): the four reads the prompt step
made per request before (product, FAQ, memory, lineup) and the one statement it makes now. Prints, per
way, CPU milliseconds per request of this process (the asyncpg client: what the prompt step spends)
and of PostgreSQL's processes, wall time per request, and the ratios. The requests are the catalog's
own rooms and links, asked its own FAQ questions and a few that find nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from livehost.agent.prompt import Sources  # noqa: E402
from livehost.commerce.store import DEMO_CATALOG_PATH, LIVE_SCOPE, CommerceStore  # noqa: E402
from livehost.db import connect_pool, migrate  # noqa: E402
from livehost.stack import postgres  # noqa: E402
from services.prompt.clients import PostgresFacts  # noqa: E402
from services.prompt.handlers import FAQ_LIMIT, MEMORY_LIMIT, FourReads  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root`` and every process below it (PostgreSQL's backends are the postmaster's)."""
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                parent = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(p.name))
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / TICK
        except (OSError, IndexError, ValueError):
            pass
    return total


def requests_of(catalog: dict[str, Any], n: int) -> list[tuple[str, int | None, str]]:
    """(room, link on screen, comment): the catalog's rooms, links and FAQ questions, round robin."""
    asks: list[tuple[str, int | None, str]] = []
    for room in catalog["rooms"]:
        links: list[int | None] = [p["link_id"] for p in room.get("catalog", [])] + [None]
        questions = [f["q"] for f in room.get("faq", [])]
        questions += [f["q"] for p in room.get("catalog", []) for f in p.get("faq", [])]
        questions += ["hello there", "zzzz"]
        asks += [(room["room_id"], links[i % len(links)], q) for i, q in enumerate(questions)]
    return [asks[i % len(asks)] for i in range(n)]


async def four_reads(facts: PostgresFacts, room: str, link: int | None, text: str) -> Sources:
    return await FourReads.gather(facts, room, link, text, FAQ_LIMIT, MEMORY_LIMIT, scope=LIVE_SCOPE)


async def one_statement(facts: PostgresFacts, room: str, link: int | None, text: str) -> Sources:
    return await facts.gather(room, link, text, FAQ_LIMIT, MEMORY_LIMIT, scope=LIVE_SCOPE)


async def run(n: int, rounds: int, concurrency: int) -> None:
    catalog = json.loads(DEMO_CATALOG_PATH.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="bench-facts-") as tmp:
        rec = postgres.start(Path(tmp) / "postgres")
        try:
            totals = await measure(postgres.dsn(rec), rec.pid, catalog, n, rounds, concurrency)
        finally:
            postgres.stop(rec)
    report(totals, n * rounds, n, rounds, concurrency)


async def measure(dsn: str, pg: int, catalog: dict[str, Any], n: int, rounds: int,
                  concurrency: int) -> dict[str, dict[str, float]]:
    pool = await connect_pool(dsn, attempts=5, min_size=concurrency, max_size=concurrency)
    try:
        await migrate(pool)
        await CommerceStore(pool).load_demo_catalog(scope=LIVE_SCOPE)
        for room in catalog["rooms"]:  # a room's memory: what the host said, as the recorder writes it
            await pool.executemany(
                "INSERT INTO room_memory (request_id, room_id, text, ts_ms) VALUES ($1, $2, $3, $4)",
                [(f"{room['room_id']}-{i}", room["room_id"], f"said {i}", 1000 + i) for i in range(20)])
        facts = PostgresFacts(pool)
        asks = requests_of(catalog, n)
        ways = {"four statements": four_reads, "one statement": one_statement}
        for a in asks[:200]:  # warms both (prepared statements, plans, caches); the same answers both ways
            if await four_reads(facts, *a) != await one_statement(facts, *a):
                raise SystemExit(f"the two ways disagree on {a}")
        totals = {w: {"client": 0.0, "postgres": 0.0, "wall": 0.0} for w in ways}
        sem = asyncio.Semaphore(concurrency)

        async def one(fn: Any, a: tuple[str, int | None, str]) -> None:
            async with sem:
                await fn(facts, *a)

        for r in range(rounds):
            order = list(ways.items()) if r % 2 == 0 else list(reversed(ways.items()))
            for way, fn in order:
                c0, p0, w0 = time.process_time(), tree_cpu_s(pg), time.perf_counter()
                await asyncio.gather(*(one(fn, a) for a in asks))
                t = totals[way]
                t["client"] += time.process_time() - c0
                t["postgres"] += tree_cpu_s(pg) - p0
                t["wall"] += time.perf_counter() - w0
        return totals
    finally:
        await pool.close()


def report(totals: dict[str, dict[str, float]], done: int, n: int, rounds: int, concurrency: int) -> None:
    print(f"\n# The prompt step's facts: {n} requests x {rounds} rounds per way, {concurrency} at a time\n")
    print("| way | client CPU ms/request | PostgreSQL CPU ms/request | both | wall ms/request |")
    print("|---|---|---|---|---|")
    for way, t in totals.items():
        print(f"| {way} | {1000 * t['client'] / done:.3f} | {1000 * t['postgres'] / done:.3f} | "
              f"{1000 * (t['client'] + t['postgres']) / done:.3f} | {1000 * t['wall'] / done:.3f} |")
    a, b = totals["four statements"], totals["one statement"]
    print(f"\none statement / four: client CPU {b['client'] / a['client']:.2f}, PostgreSQL CPU "
          f"{b['postgres'] / max(1e-9, a['postgres']):.2f}, both "
          f"{(b['client'] + b['postgres']) / (a['client'] + a['postgres']):.2f}, wall {b['wall'] / a['wall']:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    asyncio.run(run(args.requests, args.rounds, args.concurrency))


if __name__ == "__main__":
    main()
