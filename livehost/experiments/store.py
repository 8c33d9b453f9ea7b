"""Experiments in PostgreSQL (``infra/sql/031_experiments.sql``): definitions, exposures, outcomes.

- ``create`` stores the arms (harness versions from the registry, or ``react``) and the split;
- ``expose`` computes the user's arm once (hash of salt and user id) and logs the exposure; a second
  call returns the stored assignment (idempotent, race-safe: ``ON CONFLICT DO NOTHING``);
- ``record_outcome`` stores an OutcomeEvent (``schemas/outcome_event.avsc``) once per event id;
- ``load`` reads participants and their post-exposure outcomes for :func:`analysis.analyze`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

import asyncpg
import numpy as np

from livehost.experiments.analysis import ExperimentData
from livehost.experiments.assign import REACT_BASELINE, Arm, Experiment, check_definition

EPOCH = date(1970, 1, 1)


class ExperimentError(ValueError):
    """A refused experiment operation (unknown name, bad definition, unknown harness version)."""


@dataclass(frozen=True)
class Exposure:
    experiment: str
    user_id: str
    arm: str
    harness_version: str
    bucket: int
    exposed_at: datetime
    new: bool


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=UTC)


class ExperimentStore:
    def __init__(self, pool: asyncpg.Pool, *, owns_pool: bool = False):
        self.pool = pool
        self._owns_pool = owns_pool

    @classmethod
    async def connect(cls, dsn: str, *, migrate: bool = True, attempts: int | None = 5) -> ExperimentStore:
        from livehost import db

        pool = await db.connect_pool(dsn, attempts=attempts)
        if migrate:
            await db.migrate(pool)
        return cls(pool, owns_pool=True)

    async def close(self) -> None:
        if self._owns_pool:
            await self.pool.close()

    # -- definitions ------------------------------------------------------------------------------

    async def _resolve_version(self, conn: asyncpg.Connection, ref: str) -> str:
        if ref == REACT_BASELINE:
            return ref
        rows = await conn.fetch("SELECT version FROM harness_versions WHERE version LIKE $1 || '%' LIMIT 2",
                                ref.lower())
        if len(rows) != 1:
            raise ExperimentError(f"harness version {ref!r}: " + ("ambiguous prefix" if rows else
                                                                   "not in the registry (push it first)"))
        return str(rows[0]["version"])

    async def create(self, name: str, arms: list[Arm], *, created_by: str, salt: str | None = None,
                     description: str = "", start_at: datetime | None = None, stop_at: datetime | None = None,
                     check_versions: bool = True) -> Experiment:
        check_definition(name, arms)
        if not created_by.strip():
            raise ExperimentError("created_by is required")
        salt = salt or secrets.token_hex(8)
        async with self.pool.acquire() as conn, conn.transaction():
            if await conn.fetchval("SELECT 1 FROM experiments WHERE name = $1", name):
                raise ExperimentError(f"experiment {name!r} already exists")
            resolved = []
            for arm in arms:
                version = await self._resolve_version(conn, arm.harness_version) if check_versions \
                    else arm.harness_version
                resolved.append(Arm(arm.name, version, arm.weight))
            await conn.execute(
                "INSERT INTO experiments(name, description, salt, start_at, stop_at, created_by) "
                "VALUES ($1, $2, $3, $4, $5, $6)", name, description, salt, start_at, stop_at, created_by)
            await conn.executemany(
                "INSERT INTO experiment_arms(experiment, arm, position, harness_version, weight) "
                "VALUES ($1, $2, $3, $4, $5)",
                [(name, a.name, i, a.harness_version, a.weight) for i, a in enumerate(resolved)])
        return await self.get(name)

    async def get(self, name: str) -> Experiment:
        row = await self.pool.fetchrow("SELECT * FROM experiments WHERE name = $1", name)
        if row is None:
            raise ExperimentError(f"no experiment {name!r}")
        arms = await self.pool.fetch("SELECT * FROM experiment_arms WHERE experiment = $1 ORDER BY position", name)
        return Experiment(row["name"], row["salt"], tuple(Arm(a["arm"], a["harness_version"], a["weight"])
                                                          for a in arms),
                          row["description"], row["status"], row["start_at"], row["stop_at"], row["created_by"])

    async def list(self) -> list[Experiment]:
        names = [r["name"] for r in await self.pool.fetch("SELECT name FROM experiments ORDER BY created_at DESC")]
        return [await self.get(n) for n in names]

    async def start(self, name: str, at: datetime | None = None) -> Experiment:
        status = await self.pool.fetchval(
            "UPDATE experiments SET status = 'running', start_at = coalesce(start_at, $2, now()) "
            "WHERE name = $1 AND status = 'draft' RETURNING status", name, at)
        if status is None:
            raise ExperimentError(f"experiment {name!r} is not a draft (or does not exist)")
        return await self.get(name)

    async def stop(self, name: str, at: datetime | None = None) -> Experiment:
        status = await self.pool.fetchval(
            "UPDATE experiments SET status = 'stopped', stop_at = coalesce($2, now()) "
            "WHERE name = $1 AND status = 'running' RETURNING status", name, at)
        if status is None:
            raise ExperimentError(f"experiment {name!r} is not running")
        return await self.get(name)

    # -- exposures --------------------------------------------------------------------------------

    async def expose(self, name: str, user_id: str, *, room_id: str | None = None, at: datetime | None = None,
                     experiment: Experiment | None = None) -> Exposure | None:
        """The user's arm (logged once as an exposure); None when the experiment is not running at ``at``.

        ``experiment`` (a caller's cached definition) saves reading the arms, but the status is always
        read live in the same query as the exposure: a stopped experiment stops routing viewers at once,
        also viewers it had already exposed, whatever the caller cached."""
        exp = experiment or await self.get(name)
        at = at or datetime.now(UTC)
        row = await self.pool.fetchrow(
            "SELECT x.status, x.start_at, x.stop_at, e.arm, e.bucket, e.exposed_at FROM experiments x "
            "LEFT JOIN experiment_exposures e ON e.experiment = x.name AND e.user_id = $2 WHERE x.name = $1",
            exp.name, user_id)
        if row is None:
            return None
        live = replace(exp, status=row["status"], start_at=row["start_at"], stop_at=row["stop_at"])
        if not live.running_at(at):
            return None
        if row["arm"] is not None:
            return self._existing(exp, user_id, row)
        arm, b = exp.assign(user_id)
        inserted = await self.pool.fetchrow(
            "INSERT INTO experiment_exposures(experiment, user_id, arm, bucket, room_id, exposed_at) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (experiment, user_id) DO NOTHING RETURNING exposed_at",
            exp.name, user_id, arm.name, b, room_id, at)
        if inserted is None:  # a concurrent caller logged it first
            return await self._exposure(exp, user_id)
        return Exposure(exp.name, user_id, arm.name, arm.harness_version, b, inserted["exposed_at"], True)

    async def _exposure(self, exp: Experiment, user_id: str) -> Exposure | None:
        row = await self.pool.fetchrow(
            "SELECT arm, bucket, exposed_at FROM experiment_exposures WHERE experiment = $1 AND user_id = $2",
            exp.name, user_id)
        return None if row is None else self._existing(exp, user_id, row)

    @staticmethod
    def _existing(exp: Experiment, user_id: str, row: Any) -> Exposure:
        version = next(a.harness_version for a in exp.arms if a.name == row["arm"])
        return Exposure(exp.name, user_id, row["arm"], version, row["bucket"], row["exposed_at"], False)

    async def bulk_expose(self, name: str, exposures: Iterable[tuple[str, datetime, str | None]]) -> int:
        """Log many exposures at given times (simulations and backfills); existing ones are kept."""
        exp = await self.get(name)
        rows = []
        for user_id, at, room_id in exposures:
            arm, b = exp.assign(user_id)
            rows.append((exp.name, user_id, arm.name, b, room_id, at))
        async with self.pool.acquire() as conn:
            before = await conn.fetchval("SELECT count(*) FROM experiment_exposures WHERE experiment = $1", name)
            await conn.executemany(
                "INSERT INTO experiment_exposures(experiment, user_id, arm, bucket, room_id, exposed_at) "
                "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (experiment, user_id) DO NOTHING", rows)
            after = await conn.fetchval("SELECT count(*) FROM experiment_exposures WHERE experiment = $1", name)
        return int(after - before)

    # -- outcomes ---------------------------------------------------------------------------------

    @staticmethod
    def _outcome_row(e: dict[str, Any]) -> tuple[Any, ...]:
        if e.get("type") not in ("item_page_view", "order_confirmed"):
            raise ExperimentError(f"outcome {e.get('event_id')}: unknown type {e.get('type')!r}")
        if e["type"] == "order_confirmed" and e.get("amount") is None:
            raise ExperimentError(f"outcome {e.get('event_id')}: a confirmed order needs an amount")
        return (str(e["event_id"]), e["type"], str(e["user_id"]), e.get("room_id"), e.get("link_id"),
                e.get("order_id"), e.get("amount"), e.get("currency"), _dt(int(e["ts_ms"])))

    async def record_outcome(self, event: dict[str, Any]) -> bool:
        """Store one OutcomeEvent; False when its event id was already stored."""
        status = await self.pool.execute(
            "INSERT INTO outcome_events(event_id, type, user_id, room_id, link_id, order_id, amount, currency, ts) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (event_id) DO NOTHING",
            *self._outcome_row(event))
        return status.endswith(" 1")

    async def record_outcomes(self, events: Iterable[dict[str, Any]]) -> None:
        rows = [self._outcome_row(e) for e in events]
        async with self.pool.acquire() as conn:
            await conn.executemany(
                "INSERT INTO outcome_events(event_id, type, user_id, room_id, link_id, order_id, amount, currency, ts) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (event_id) DO NOTHING", rows)

    # -- analysis input ---------------------------------------------------------------------------

    async def load(self, name: str) -> tuple[Experiment, ExperimentData]:
        exp = await self.get(name)
        arm_index = {a.name: i for i, a in enumerate(exp.arms)}
        users = await self.pool.fetch(
            "SELECT user_id, arm, (exposed_at AT TIME ZONE 'UTC')::date AS day FROM experiment_exposures "
            "WHERE experiment = $1 ORDER BY user_id", name)
        index = {r["user_id"]: i for i, r in enumerate(users)}
        outcomes = await self.pool.fetch(
            "SELECT e.user_id, (o.ts AT TIME ZONE 'UTC')::date AS day, "
            "count(*) FILTER (WHERE o.type = 'item_page_view') AS views, "
            "count(*) FILTER (WHERE o.type = 'order_confirmed') AS orders, "
            "coalesce(sum(o.amount) FILTER (WHERE o.type = 'order_confirmed'), 0)::float8 AS gmv "
            "FROM experiment_exposures e JOIN experiments x ON x.name = e.experiment "
            "JOIN outcome_events o ON o.user_id = e.user_id AND o.ts >= e.exposed_at "
            "AND (x.stop_at IS NULL OR o.ts < x.stop_at) "
            "WHERE e.experiment = $1 GROUP BY e.user_id, day", name)
        data = ExperimentData(
            arm_names=[a.name for a in exp.arms], weights=exp.weights,
            user_arm=np.array([arm_index[r["arm"]] for r in users], dtype=int),
            user_day=np.array([(r["day"] - EPOCH).days for r in users], dtype=int),
            out_user=np.array([index[r["user_id"]] for r in outcomes], dtype=int),
            out_day=np.array([(r["day"] - EPOCH).days for r in outcomes], dtype=int),
            out_views=np.array([float(r["views"]) for r in outcomes]),
            out_orders=np.array([float(r["orders"]) for r in outcomes]),
            out_gmv=np.array([float(r["gmv"]) for r in outcomes]))
        return exp, data
