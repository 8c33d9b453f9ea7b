"""Stream trajectories out of PostgreSQL as validated JSONL (raw, sft or rl).

Rows come through a server-side cursor in a read-only transaction (``prefetch`` rows at a time) and
are written one line at a time, so memory stays constant however large the export. Every line is
validated against ``schemas/export/<format>.json`` before it is written; a violation stops the export
with the line number (the partial file is removed).

Harness versions: SFT lines carry the tool definitions of the version the request ran on, fetched
from the harness registry (``Registry.harness``) or, when the registry does not know it, from the
shipped folder if that folder *is* that version. Requests of an unknown version are skipped and counted.

Rewards: RL lines carry the stored components of ``trajectory_rewards`` (written by
``livehost trajectories score``; see docs/training.md); a request not scored yet is scored on the fly
with the same deterministic judge (``livehost.training.rewards.score_trajectory``), so ``reward`` is
never null. The stats count both.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from livehost.harness.loader import load
from livehost.harness.model import Harness
from livehost.training import formats

log = logging.getLogger(__name__)
REWARDS_TABLE = "trajectory_rewards"


@dataclass
class ExportFilter:
    since_ms: int | None = None  # created_ms >= since
    until_ms: int | None = None  # created_ms < until
    harness_version: str | None = None
    room: str | None = None
    only_passed: bool = False

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []

        def add(sql: str, value: Any) -> None:
            args.append(value)
            clauses.append(sql.replace("?", f"${len(args)}"))

        if self.since_ms is not None:
            add("t.created_ms >= ?", self.since_ms)
        if self.until_ms is not None:
            add("t.created_ms < ?", self.until_ms)
        if self.harness_version:
            add("t.harness_version = ?", self.harness_version)
        if self.room:
            add("t.room_id = ?", self.room)
        if self.only_passed:
            clauses.append(
                "t.outcome = 'reply' AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(t.steps) s"
                " WHERE s->>'kind' IN ('hook_verdict', 'input_hook')"
                " AND (s->>'data_json')::jsonb->>'verdict' IN ('reject', 'drop'))")
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


@dataclass
class ExportStats:
    format: str
    rows: int = 0
    written: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    trimmed: int = 0
    kept_whole: int = 0
    rewards_stored: int = 0  # rl: reward read from trajectory_rewards
    rewards_on_the_fly: int = 0  # rl: not scored yet, scored during the export
    out: str = ""

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def parse_time(value: str | None) -> int | None:
    """Milliseconds since the epoch from epoch ms/seconds or an ISO 8601 date/time (UTC if naive)."""
    if value is None or value == "":
        return None
    if value.lstrip("-").isdigit():
        n = int(value)
        return n if abs(n) >= 10**11 else n * 1000  # seconds if it looks like seconds
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        from datetime import UTC

        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


class HarnessCache:
    """Harness versions by content version: the registry first, else the shipped folder if it matches."""

    def __init__(self, pool: asyncpg.Pool | None, folder: Path | None):
        self._pool = pool
        self._folder = folder
        self._cache: dict[str, Harness | None] = {}
        self._folder_harness: Harness | None = None
        self._folder_loaded = False

    async def get(self, version: str) -> Harness | None:
        if version not in self._cache:
            self._cache[version] = await self._fetch(version)
        return self._cache[version]

    async def _fetch(self, version: str) -> Harness | None:
        if self._pool is not None:
            from livehost.harness.registry import Registry

            try:
                return await Registry(self._pool).harness(version)
            except Exception as exc:  # not in the registry, or no registry tables
                log.debug("harness %s not from the registry: %s", version, exc)
        if self._folder is not None and not self._folder_loaded:
            self._folder_loaded = True
            try:
                self._folder_harness = load(self._folder)
            except Exception as exc:
                log.warning("shipped harness folder %s does not load: %s", self._folder, exc)
        if self._folder_harness is not None and self._folder_harness.version() == version:
            return self._folder_harness
        return None


def _row(record: asyncpg.Record) -> dict[str, Any]:
    row = dict(record)
    for key in ("comments", "steps", "judged"):
        if isinstance(row.get(key), str):
            row[key] = json.loads(row[key])
    return row


Progress = Callable[[int], None]  # advance by n rows


class UnknownHarnessVersion(ValueError):
    """``--harness-version`` names no version any recorded trajectory ran on."""


async def resolve_harness_version(conn: asyncpg.Connection, ref: str) -> str:
    """The recorded harness version ``ref`` names (a full version or a unique prefix); raises
    UnknownHarnessVersion, listing the recorded versions, when no trajectory ran on it."""
    rows = await conn.fetch(
        "SELECT harness_version, count(*) AS n, max(created_ms) AS last FROM trajectories"
        " GROUP BY harness_version ORDER BY last DESC")
    exact = [r for r in rows if r["harness_version"] == ref]
    matches = exact or [r for r in rows if r["harness_version"].startswith(ref)]
    if len(matches) == 1:
        return str(matches[0]["harness_version"])
    known = ", ".join(f"{r['harness_version']} ({r['n']} trajectories)" for r in rows[:8]) or "none yet"
    if matches:
        raise UnknownHarnessVersion(f"harness version prefix {ref!r} is ambiguous: {known}")
    raise UnknownHarnessVersion(f"no trajectory was recorded on harness version {ref!r}; recorded versions: {known}")


async def count(conn: asyncpg.Connection, flt: ExportFilter) -> int:
    where, args = flt.where()
    return int(await conn.fetchval(f"SELECT count(*) FROM trajectories t{where}", *args))


async def export(dsn_or_pool: str | asyncpg.Pool, fmt: str, out: Path | str, flt: ExportFilter | None = None, *,
                 keep_retries: float = 0.1, harness_folder: Path | None = None, prefetch: int = 200,
                 on_total: Callable[[int], None] | None = None, on_progress: Progress | None = None,
                 ) -> ExportStats:
    """Write the export to ``out`` (JSONL). Returns what was written and what was skipped, and why."""
    if fmt not in formats.FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(formats.FORMATS)}")
    flt = flt or ExportFilter()
    out = Path(out)
    stats = ExportStats(fmt, out=str(out))
    own = isinstance(dsn_or_pool, str)
    pool: asyncpg.Pool = (await asyncpg.create_pool(dsn_or_pool, min_size=1, max_size=2)  # type: ignore[assignment]
                          if isinstance(dsn_or_pool, str) else dsn_or_pool)
    tmp = out.with_name(out.name + ".partial")
    try:
        harnesses = HarnessCache(pool, harness_folder)
        async with pool.acquire() as conn:
            if flt.harness_version:
                flt.harness_version = await resolve_harness_version(conn, flt.harness_version)
            has_rewards = fmt == "rl" and await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", REWARDS_TABLE)
            if on_total is not None:
                on_total(await count(conn, flt))
            where, args = flt.where()
            judged = (f", (SELECT to_jsonb(r) FROM {REWARDS_TABLE} r WHERE r.request_id = t.request_id LIMIT 1)"
                      " AS judged" if has_rewards else "")
            query = (f"SELECT t.*{judged} FROM trajectories t{where} ORDER BY t.created_ms, t.request_id")
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as fh:  # noqa: ASYNC230 (one local file, line-buffered writes)
                async with conn.transaction(readonly=True, isolation="repeatable_read"):
                    async for record in conn.cursor(query, *args, prefetch=prefetch):
                        row = _row(record)
                        stats.rows += 1
                        line = await _convert(row, fmt, harnesses, keep_retries, stats)
                        if on_progress is not None:
                            on_progress(1)
                        if line is None:
                            continue
                        formats.validate(fmt, line, stats.written + 1)
                        fh.write(json.dumps(line, ensure_ascii=False, sort_keys=True, default=str) + "\n")
                        stats.written += 1
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        if own:
            await pool.close()
    return stats


async def _convert(row: dict[str, Any], fmt: str, harnesses: HarnessCache, keep_retries: float,
                   stats: ExportStats) -> dict[str, Any] | None:
    if fmt == "raw":
        return formats.to_raw(row)
    harness = await harnesses.get(row["harness_version"])
    if fmt == "rl":
        judged = row.get("judged")
        if judged:
            stats.rewards_stored += 1
        else:
            from livehost.training.rewards import score_trajectory

            judged = score_trajectory(row, harness).as_dict()
            stats.rewards_on_the_fly += 1
        return formats.to_rl(row, harness, judged)
    if harness is None:
        stats.skip("harness version unknown")
        return None
    line = formats.to_sft(row, harness, keep_retries)
    if line is None:
        stats.skip(f"no accepted final action (outcome {row['outcome']})")
        return None
    if line["retries"]:
        if line["trimmed"]:
            stats.trimmed += 1
        else:
            stats.kept_whole += 1
    return line
