"""Retention: how long recorded data is kept, and the purge job that enforces it (``livehost purge``;
a CronJob in the chart).

Kept for ``Settings.retention_*_days`` (0 = keep forever):

* audio — the voice service's WAV files (and the demo's session WAVs) under the audio folder;
* room memory — the host's remembered replies per room;
* idempotency keys — stored results of side-effecting tool calls, and the side-effect ledger the
  side-effect gate counts budgets on (a key older than this can no longer de-duplicate a redelivery,
  so keep it well above the broker's retention of ``agent.tool_calls``);
* trajectories — recorded requests (their rewards go with them).

Harness versions are not purged: they are the audit trail of what ran (small, and referenced by
activations, proposals and trajectories).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from livehost.config import Settings, state_dir

DAY_S = 86_400.0


@dataclass
class PurgeReport:
    dry_run: bool
    deleted: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        verb = "would delete" if self.dry_run else "deleted"
        return [f"{name}: {verb} {n}" for name, n in self.deleted.items()]


def audio_dir(settings: Settings) -> Path:
    return Path(settings.voice_audio_dir) if settings.voice_audio_dir else state_dir() / "audio"


def purge_audio(directory: Path, older_than_s: float, *, dry_run: bool = False, now: float | None = None) -> int:
    """Delete ``*.wav`` files under ``directory`` last modified more than ``older_than_s`` ago, and the
    room folders left empty. Never follows symlinks out of the folder."""
    if not directory.is_dir():
        return 0
    cutoff = (now if now is not None else time.time()) - older_than_s
    root = directory.resolve()
    count = 0
    for path in root.rglob("*.wav"):
        if path.is_symlink() or not path.is_file() or not path.resolve().is_relative_to(root):
            continue
        if path.stat().st_mtime < cutoff:
            count += 1
            if not dry_run:
                path.unlink(missing_ok=True)
    if not dry_run:
        for folder in sorted((p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()), reverse=True):
            try:
                folder.rmdir()  # only when empty
            except OSError:
                pass
    return count


# (name, days setting, count SQL, delete SQL); $1 is the cutoff as epoch milliseconds.
_TABLES: tuple[tuple[str, str, str, str], ...] = (
    ("room_memory", "retention_room_memory_days",
     "SELECT count(*) FROM room_memory WHERE ts_ms < $1",
     "DELETE FROM room_memory WHERE ts_ms < $1"),
    ("idempotency_keys", "retention_idempotency_days",
     "SELECT count(*) FROM tool_idempotency WHERE created_at < to_timestamp($1 / 1000.0)",
     "DELETE FROM tool_idempotency WHERE created_at < to_timestamp($1 / 1000.0)"),
    ("delivery_claims", "retention_idempotency_days",
     "SELECT count(*) FROM delivery_claims WHERE at < to_timestamp($1 / 1000.0)",
     "DELETE FROM delivery_claims WHERE at < to_timestamp($1 / 1000.0)"),
    ("side_effect_ledger", "retention_idempotency_days",
     "SELECT count(*) FROM side_effect_ledger WHERE at < to_timestamp($1 / 1000.0)",
     "DELETE FROM side_effect_ledger WHERE at < to_timestamp($1 / 1000.0)"),
    ("trajectories", "retention_trajectories_days",
     "SELECT count(*) FROM trajectories WHERE created_ms < $1",
     "DELETE FROM trajectories WHERE created_ms < $1"),
)


async def purge_database(pool: asyncpg.Pool, settings: Settings, *, dry_run: bool = False,
                         now: float | None = None) -> dict[str, int]:
    now = now if now is not None else time.time()
    out: dict[str, int] = {}
    async with pool.acquire() as conn:
        for name, setting, count_sql, delete_sql in _TABLES:
            days = float(getattr(settings, setting))
            if days <= 0:
                continue
            cutoff_ms = int((now - days * DAY_S) * 1000)
            if dry_run:
                out[name] = int(await conn.fetchval(count_sql, cutoff_ms))
            else:
                status = await conn.execute(delete_sql, cutoff_ms)
                out[name] = int(status.split()[-1])
    return out


async def purge(settings: Settings, *, dry_run: bool = False, database: bool = True,
                now: float | None = None) -> PurgeReport:
    report = PurgeReport(dry_run)
    if settings.retention_audio_days > 0:
        report.deleted["audio_files"] = purge_audio(audio_dir(settings), settings.retention_audio_days * DAY_S,
                                                    dry_run=dry_run, now=now)
    if database:
        from livehost.db import connect_pool

        pool = await connect_pool(settings.postgres_dsn, attempts=3)
        try:
            report.deleted.update(await purge_database(pool, settings, dry_run=dry_run, now=now))
        finally:
            await pool.close()
    return report
