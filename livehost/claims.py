"""Durable delivery claims (table ``delivery_claims``, infra/sql/050_delivery_claims.sql).

A service that must do something once per key — voice speaking a reply (key: request id), Ingest
accepting a client's event (key: room + client_event_id) — takes a claim before the effect. The claim is
one atomic INSERT shared by every replica and survives restarts, so a redelivered record, a second replica
during a rebalance, or a client's retry finds it. Why PostgreSQL rather than a compacted Kafka topic: the
claim must be atomic across replicas *before* the effect (a topic only tells what was written, and a
replica would have to read all of it to know); one indexed INSERT costs about a millisecond.

When the database cannot be reached the caller decides (voice speaks rather than stays silent; Ingest
accepts): availability wins, and the fallback is counted (``livehost_claims_unavailable_total``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import asyncpg
from prometheus_client import Counter

log = logging.getLogger(__name__)

UNAVAILABLE = Counter("livehost_claims_unavailable_total",
                      "Delivery claims that could not be checked (database unreachable)", ["scope"])
DUPLICATES = Counter("livehost_claims_duplicate_total", "Deliveries refused as duplicates by their claim",
                     ["scope"])

# New, or an old claim outside the window (then renewed): a row comes back. A live claim: no row.
# One statement, so one round trip: it commits on its own, and set_config(..., true) makes that commit
# synchronous whatever the server's setting (the effect follows the claim, so a claim a database crash
# takes back would let a redelivery repeat it). BEGIN, SET LOCAL, INSERT, COMMIT took four.
_CLAIM = """
WITH durable AS (SELECT set_config('synchronous_commit', 'on', true))
INSERT INTO delivery_claims (scope, key) SELECT $1, $2 FROM durable
ON CONFLICT (scope, key) DO UPDATE SET at = now()
  WHERE $3::float8 > 0 AND delivery_claims.at < now() - make_interval(secs => $3::float8)
RETURNING 1
"""


class ClaimsUnavailable(RuntimeError):
    """The claim could not be checked (database down); the caller chooses the fallback."""


class DeliveryClaims:
    def __init__(self, pool: Callable[[], asyncpg.Pool], scope: str, window_s: float = 0.0):
        self._pool = pool  # resolved per call: the service's pool opens after construction
        self.scope = scope
        self.window_s = window_s  # 0: a claim never expires (until the retention purge)

    async def claim(self, key: str) -> bool:
        """True when this caller now owns ``key`` (first time, or the previous claim is older than the
        window); False for a duplicate. Raises :class:`ClaimsUnavailable` when the database fails."""
        try:
            async with self._pool().acquire() as conn:
                row = await conn.fetchval(_CLAIM, self.scope, key, float(self.window_s))
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, RuntimeError) as exc:
            UNAVAILABLE.labels(self.scope).inc()
            raise ClaimsUnavailable(f"{self.scope} claim of {key}: {exc}") from exc
        if row is None:
            DUPLICATES.labels(self.scope).inc()
            return False
        return True

    async def settle(self, key: str, result: str) -> None:
        """Remember what the claimed delivery produced (best effort: a duplicate then repeats it)."""
        try:
            async with self._pool().acquire() as conn:
                await conn.execute("UPDATE delivery_claims SET result = $3 WHERE scope = $1 AND key = $2",
                                   self.scope, key, result)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, RuntimeError) as exc:
            log.warning("%s: could not record the result of claim %s: %s", self.scope, key, exc)

    async def result(self, key: str) -> str | None:
        """What the claim's delivery produced (None: not recorded yet, still in progress, or unknown)."""
        try:
            async with self._pool().acquire() as conn:
                value = await conn.fetchval("SELECT result FROM delivery_claims WHERE scope = $1 AND key = $2",
                                            self.scope, key)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, RuntimeError) as exc:
            log.warning("%s: could not read the result of claim %s: %s", self.scope, key, exc)
            return None
        return str(value) if value is not None else None

    async def release(self, key: str) -> None:
        """Give a claim back (the effect failed, so a retry must be accepted). Best effort."""
        try:
            async with self._pool().acquire() as conn:
                await conn.execute("DELETE FROM delivery_claims WHERE scope = $1 AND key = $2", self.scope, key)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, RuntimeError) as exc:
            log.warning("%s: could not release claim %s: %s", self.scope, key, exc)
