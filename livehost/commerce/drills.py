"""Fault drills on the live tools: make every live tool call of a capability time out, return a
malformed result or be refused, for a bounded time (table ``tool_fault_drills``,
``infra/sql/060_tool_fault_drills.sql``). Evaluation cases inject the same faults into their own
sandbox scope (:mod:`livehost.agent.sandbox`); a drill is the same on the live scope, for an operator
(and the fault suite, ``benchmarks/chaos.py`` ``tool-timeout`` / ``tool-garbage``).

    python -m livehost.commerce.drills start timeout --seconds 30     # every capability
    python -m livehost.commerce.drills start malformed --capability product --seconds 30
    python -m livehost.commerce.drills show
    python -m livehost.commerce.drills stop

It writes with ``LIVEHOST_POSTGRES_DSN``: only the schema owner may (the service roles read).
The tools service reads the active drills at most every ``tool_drill_refresh_s`` (no query per call).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from collections.abc import Mapping

import asyncpg

from livehost.commerce.faults import CAPABILITIES, FaultInjector

log = logging.getLogger(__name__)
MAX_DRILL_S = 3600.0  # the table refuses longer drills: a forgotten one ends by itself


async def start_drill(pool: asyncpg.Pool, faults: Mapping[str, str], seconds: float) -> None:
    """Start (or replace) drills: capability -> fault kind, active for ``seconds``."""
    clean = FaultInjector(faults).as_dict()  # unknown capabilities or kinds are refused here
    if not 0 < seconds <= MAX_DRILL_S:
        raise ValueError(f"a drill lasts more than 0 and at most {MAX_DRILL_S:g} s, not {seconds:g}")
    async with pool.acquire() as conn, conn.transaction():
        await conn.executemany(
            "INSERT INTO tool_fault_drills (capability, fault, expires_at)"
            " VALUES ($1, $2, now() + make_interval(secs => $3))"
            " ON CONFLICT (capability) DO UPDATE SET fault = EXCLUDED.fault, started_at = now(),"
            " expires_at = EXCLUDED.expires_at, started_by = current_user",
            [(cap, kind, float(seconds)) for cap, kind in sorted(clean.items())])


async def stop_drills(pool: asyncpg.Pool) -> int:
    status = await pool.execute("DELETE FROM tool_fault_drills")
    return int(status.split()[-1])


async def active_drills(pool: asyncpg.Pool) -> dict[str, str]:
    rows = await pool.fetch("SELECT capability, fault FROM tool_fault_drills WHERE expires_at > now()")
    return {r["capability"]: r["fault"] for r in rows}


class LiveDrills:
    """The active drills as the tools service sees them, re-read at most every ``refresh_s``.

    A failed read (database restarting) keeps the last answer: tools then run as they did, and the
    database error surfaces where it matters, in the tool call itself."""

    def __init__(self, pool: asyncpg.Pool, refresh_s: float):
        self._pool = pool
        self._refresh_s = refresh_s
        self._faults: dict[str, str] = {}
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()

    async def faults(self) -> dict[str, str]:
        if time.monotonic() - self._read_at < self._refresh_s:
            return self._faults
        async with self._lock:
            if time.monotonic() - self._read_at >= self._refresh_s:
                try:
                    self._faults = await active_drills(self._pool)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    log.warning("cannot read tool fault drills (%s); keeping %s", exc, self._faults or "none")
                self._read_at = time.monotonic()
        return self._faults


def main(argv: list[str] | None = None) -> None:
    from livehost.config import load_settings
    from livehost.db import connect_pool

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start a drill")
    start.add_argument("fault", choices=("timeout", "malformed", "permission_denied"))
    start.add_argument("--capability", action="append", choices=CAPABILITIES,
                       help="repeatable; default: every capability")
    start.add_argument("--seconds", type=float, default=30.0)
    sub.add_parser("stop", help="end every drill now")
    sub.add_parser("show", help="the active drills")
    args = parser.parse_args(argv)

    async def run() -> str:
        pool = await connect_pool(load_settings().postgres_dsn, attempts=5)
        try:
            if args.command == "start":
                caps = args.capability or list(CAPABILITIES)
                await start_drill(pool, {c: args.fault for c in caps}, args.seconds)
                return f"drill: {args.fault} on {', '.join(caps)} for {args.seconds:g} s"
            if args.command == "stop":
                return f"stopped {await stop_drills(pool)} drill(s)"
            active = await active_drills(pool)
            return ", ".join(f"{c}={f}" for c, f in sorted(active.items())) or "no active drill"
        finally:
            await pool.close()

    print(asyncio.run(run()))


if __name__ == "__main__":
    main()
