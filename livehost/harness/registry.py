"""The harness registry (control plane) in PostgreSQL: versions, proposals, reviews, evaluation
results, activations per target with rollback history, load status, and an audit log.

One implementation serves the CLI (``livehost harness ...``) and the gRPC Harness API.

Workflow::

    push  -> propose -> review (approve | reject | request changes; never by the author)
          -> attach_evaluation (the evaluation runner) -> activate (target) -> rollback

Rules enforced here:

- a version is immutable and content-addressed (``Harness.version()``); pushing identical content
  returns the existing version; invalid bundles are refused with every problem and nothing stored;
- every transition that makes a version active (activate, rollback, rollback to a version) runs the
  same checks on it: an approved review and (when ``require_evaluation``) a passing evaluation;
  ``force`` with a recorded reason overrides them, recorded ``forced`` (livehost/harness/gates.py has
  the table, docs/harness-gates.md shows it);
- rollback returns a target to the activation before the current one (a stack), or to ``to``;
- changes of one target are serialised (transaction-scoped advisory lock + row lock): no lost update;
- every step writes an audit row in the same transaction; refused steps are audited too;
- activations and rollbacks are announced (HarnessEvent) after the commit, through ``publisher``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from livehost.config import Settings, stack_env_file
from livehost.harness import gates
from livehost.harness.diff import format_diff
from livehost.harness.loader import HarnessError, Problem
from livehost.harness.model import Harness
from livehost.harness.validate import Report, validate_bundle, validate_path
from livehost.security.ids import InvalidId, check_id

log = logging.getLogger(__name__)

GLOBAL = "global"
DECISIONS = {"approve": "approved", "reject": "rejected", "request_changes": "changes_requested"}
# Proposal statuses that mean "passed review".
APPROVED_STATUSES = ("approved", "evaluated", "active", "rolled_back")
# Proposal statuses that can still be reviewed.
REVIEWABLE = ("proposed", "changes_requested", "approved", "evaluated")

Publisher = Callable[[dict[str, Any]], Awaitable[None]]


class HarnessSettings(Settings):
    """Settings of the harness control plane (same env prefix and env file as every setting)."""

    # Activation needs a passing evaluation attached to the version (``force`` + reason overrides).
    harness_require_evaluation: bool = True
    # Hot-reload poll fallback of every replica, in case an announcement is missed.
    harness_poll_interval_s: float = 5.0
    # How long the CLI waits for the broker to announce an activation before giving up (replicas
    # then pick the change up by polling).
    harness_announce_timeout_s: float = 5.0
    # Pushes one identity may make per minute through the Harness API (bundle size: the Push
    # method's gRPC request limit, Settings.grpc_method_max_request_bytes).
    harness_pushes_per_minute: int = 10
    # Where the CLI reaches the Harness API (empty: <grpc_host>:<harness_grpc_port>).
    harness_api_url: str = ""


def load_harness_settings(**overrides: object) -> HarnessSettings:
    env_file = stack_env_file()
    if env_file.exists():
        return HarnessSettings(_env_file=env_file, **overrides)  # type: ignore[call-arg, arg-type]
    return HarnessSettings(**overrides)  # type: ignore[arg-type]


class RegistryError(Exception):
    """Base of the registry's refusals."""


class NotFound(RegistryError, KeyError):
    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0]) if self.args else "not found"


class BadRequest(RegistryError, ValueError):
    """Malformed input (bad target, missing reason, ambiguous version prefix)."""


class Refused(RegistryError):
    """The workflow does not allow this step now (missing approval, failed evaluation, ...)."""


class SelfReview(Refused):
    """An author may not review their own proposal."""


@dataclass(frozen=True)
class VersionInfo:
    version: str
    name: str
    parent: str | None
    author: str
    message: str
    created_at: datetime


@dataclass(frozen=True)
class PushResult:
    version: str
    created: bool
    warnings: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class Proposal:
    id: int
    version: str
    author: str
    message: str
    status: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Review:
    id: int
    proposal_id: int
    reviewer: str
    decision: str
    comment: str
    created_at: datetime


@dataclass(frozen=True)
class Evaluation:
    id: int
    version: str
    passed: bool
    result: dict[str, Any]
    actor: str
    created_at: datetime


@dataclass(frozen=True)
class Activation:
    id: int
    target: str
    version: str | None  # None: the target's override was cleared (falls back to global)
    action: str
    previous_version: str | None
    actor: str
    forced: bool
    reason: str
    created_at: datetime
    announced: bool = False


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: datetime
    actor: str
    action: str
    version: str | None
    target: str | None
    proposal_id: int | None
    details: dict[str, Any]


@dataclass(frozen=True)
class LoadStatus:
    service: str
    version: str
    ok: bool
    error: str
    replica: str
    updated_at: datetime


def normalize_target(target: str | None) -> str:
    """``global`` (also ``""``/``default``), ``room:<id>`` or ``arm:<experiment>/<arm>``.

    The room, experiment and arm are ids of the one id format (livehost.security.ids): a target names
    a row, a log line and an announcement, so ``room:../../etc`` is refused like a path-like room id
    at Ingest."""
    t = (target or "").strip()
    if t in ("", GLOBAL, "default"):
        return GLOBAL
    usage = "use 'global', 'room:<id>' or 'arm:<experiment>/<arm>'"
    try:
        if t.startswith("room:"):
            return room_target(check_id("room id", t[len("room:"):]))
        if t.startswith("arm:"):
            experiment, _, arm = t[len("arm:"):].partition("/")
            return arm_target(check_id("experiment", experiment), check_id("arm", arm))
    except InvalidId as exc:
        raise BadRequest(f"bad target {t[:80]!r}: {exc}; {usage}") from None
    raise BadRequest(f"bad target {t[:80]!r}: {usage}")


def room_target(room_id: str) -> str:
    return f"room:{room_id}"


def arm_target(experiment: str, arm: str) -> str:
    return f"arm:{experiment}/{arm}"


def _need(value: str, what: str) -> str:
    if not value or not value.strip():
        raise BadRequest(f"{what} is required")
    return value.strip()


def _version_info(row: asyncpg.Record) -> VersionInfo:
    return VersionInfo(row["version"], row["name"], row["parent"], row["author"], row["message"], row["created_at"])


def _proposal(row: asyncpg.Record) -> Proposal:
    return Proposal(row["id"], row["version"], row["author"], row["message"], row["status"],
                    row["created_at"], row["updated_at"])


def _activation(row: asyncpg.Record, announced: bool = False) -> Activation:
    return Activation(row["id"], row["target"], row["version"], row["action"], row["previous_version"],
                      row["actor"], row["forced"], row["reason"], row["created_at"], announced)


class Registry:
    """The harness registry over an asyncpg pool (see the module docstring for the rules)."""

    def __init__(self, pool: asyncpg.Pool, *, publisher: Publisher | None = None,
                 require_evaluation: bool = True, owns_pool: bool = False):
        self.pool = pool
        self.publisher = publisher
        self.require_evaluation = require_evaluation
        self._owns_pool = owns_pool

    @classmethod
    async def connect(cls, dsn: str, *, migrate: bool = True, attempts: int | None = 5,
                      publisher: Publisher | None = None, require_evaluation: bool = True,
                      max_size: int = 5) -> Registry:
        from livehost import db

        pool = await db.connect_pool(dsn, attempts=attempts, max_size=max_size)
        if migrate:
            await db.migrate(pool)
        return cls(pool, publisher=publisher, require_evaluation=require_evaluation, owns_pool=True)

    async def close(self) -> None:
        if self._owns_pool:
            await self.pool.close()

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[asyncpg.Connection]:
        async with self.pool.acquire() as conn, conn.transaction():
            yield conn

    @staticmethod
    async def _audit(conn: asyncpg.Connection, actor: str, action: str, *, version: str | None = None,
                     target: str | None = None, proposal_id: int | None = None, **details: Any) -> None:
        await conn.execute(
            "INSERT INTO harness_audit(actor, action, version, target, proposal_id, details) "
            "VALUES ($1, $2, $3, $4, $5, $6::jsonb)",
            actor, action, version, target, proposal_id, json.dumps(details, default=str))

    async def _refused(self, exc: Exception, actor: str, action: str, **kw: Any) -> None:
        """Record a refused step in the audit log (outside the rolled-back transaction)."""
        try:
            async with self.pool.acquire() as conn:
                await self._audit(conn, actor or "?", f"{action}.refused", error=str(exc), **kw)
        except Exception:  # never hide the refusal behind an audit failure
            log.exception("could not audit refused %s", action)

    # -- versions -------------------------------------------------------------------------------

    @staticmethod
    def validate(bundle: Harness | dict[str, Any] | Path | str) -> Report:
        """Validate a bundle (folder path, canonical dict or Harness) without storing anything."""
        if isinstance(bundle, Harness):
            return validate_bundle(bundle.canonical())
        if isinstance(bundle, Path | str):
            return validate_path(bundle)
        return validate_bundle(bundle)

    async def push(self, bundle: Harness | dict[str, Any] | Path | str, *, author: str, message: str = "",
                   parent: str | None = None) -> PushResult:
        """Store a bundle as a version. Raises HarnessError (every problem; nothing stored) when invalid.

        ``parent`` defaults to the globally active version (when there is one)."""
        author = _need(author, "author")
        report = self.validate(bundle)
        if report.errors or report.harness is None:
            raise HarnessError(report.errors or [Problem("bundle", "-", "could not load")])
        harness = report.harness
        version = harness.version()
        async with self._tx() as conn:
            if parent:
                parent = await self._resolve(conn, parent)
            else:
                parent = await conn.fetchval("SELECT version FROM harness_targets WHERE target = $1", GLOBAL)
            if parent == version:
                parent = None
            inserted = await conn.fetchval(
                "INSERT INTO harness_versions(version, name, bundle, parent, author, message) "
                "VALUES ($1, $2, $3::jsonb, $4, $5, $6) ON CONFLICT (version) DO NOTHING RETURNING version",
                version, harness.name, json.dumps(harness.canonical()), parent, author, message)
            created = inserted is not None
            await self._audit(conn, author, "push", version=version, created=created, parent=parent,
                              message=message, warnings=[str(w) for w in report.warnings])
        return PushResult(version, created, tuple(report.warnings))

    async def _resolve(self, conn: asyncpg.Connection, ref: str) -> str:
        ref = (ref or "").strip().lower()
        if len(ref) < 4:
            raise BadRequest(f"version {ref!r}: give at least 4 characters")
        rows = await conn.fetch(
            "SELECT version FROM harness_versions WHERE version LIKE $1 || '%' ORDER BY version LIMIT 2", ref)
        if not rows:
            raise NotFound(f"unknown harness version {ref!r}")
        if len(rows) > 1:
            raise BadRequest(f"version prefix {ref!r} is ambiguous")
        return str(rows[0]["version"])

    async def resolve(self, ref: str) -> str:
        """The full version for a version or a unique prefix of it (at least 4 characters)."""
        async with self.pool.acquire() as conn:
            return await self._resolve(conn, ref)

    async def info(self, ref: str) -> VersionInfo:
        async with self.pool.acquire() as conn:
            version = await self._resolve(conn, ref)
            row = await conn.fetchrow("SELECT * FROM harness_versions WHERE version = $1", version)
        return _version_info(row)

    async def bundle(self, ref: str) -> dict[str, Any]:
        """The stored canonical JSON bundle of a version (no validation)."""
        async with self.pool.acquire() as conn:
            version = await self._resolve(conn, ref)
            data = await conn.fetchval("SELECT bundle FROM harness_versions WHERE version = $1", version)
        return dict(json.loads(data))

    async def harness(self, ref: str) -> Harness:
        """A stored version as a Harness (validated; HarnessError when it no longer loads)."""
        from livehost.harness.loader import from_dict

        return from_dict(await self.bundle(ref))

    async def show(self, ref: str) -> tuple[VersionInfo, Harness]:
        info = await self.info(ref)
        return info, await self.harness(info.version)

    async def log(self, limit: int = 50) -> list[VersionInfo]:
        """Versions, newest first."""
        rows = await self.pool.fetch(
            "SELECT version, name, parent, author, message, created_at FROM harness_versions "
            "ORDER BY created_at DESC, version LIMIT $1", limit if limit > 0 else 50)
        return [_version_info(r) for r in rows]

    async def diff(self, a: str, b: str) -> str:
        ha, hb = await self.harness(a), await self.harness(b)
        return format_diff(ha, hb)

    # -- proposals and reviews ------------------------------------------------------------------

    async def propose(self, version: str, *, author: str, message: str = "") -> Proposal:
        author = _need(author, "author")
        async with self._tx() as conn:
            version = await self._resolve(conn, version)
            row = await conn.fetchrow(
                "INSERT INTO harness_proposals(version, author, message) VALUES ($1, $2, $3) RETURNING *",
                version, author, message)
            await self._audit(conn, author, "propose", version=version, proposal_id=row["id"], message=message)
        return _proposal(row)

    async def proposal(self, proposal_id: int) -> Proposal:
        row = await self.pool.fetchrow("SELECT * FROM harness_proposals WHERE id = $1", int(proposal_id))
        if row is None:
            raise NotFound(f"unknown proposal {proposal_id}")
        return _proposal(row)

    async def proposals(self, *, version: str | None = None, status: str | None = None,
                        limit: int = 100) -> list[Proposal]:
        if version:
            version = await self.resolve(version)
        rows = await self.pool.fetch(
            "SELECT * FROM harness_proposals WHERE ($1::text IS NULL OR version = $1) "
            "AND ($2::text IS NULL OR status = $2) ORDER BY id DESC LIMIT $3", version, status, limit)
        return [_proposal(r) for r in rows]

    async def reviews(self, proposal_id: int) -> list[Review]:
        rows = await self.pool.fetch("SELECT * FROM harness_reviews WHERE proposal_id = $1 ORDER BY id",
                                     int(proposal_id))
        return [Review(r["id"], r["proposal_id"], r["reviewer"], r["decision"], r["comment"], r["created_at"])
                for r in rows]

    async def review(self, proposal_id: int, *, reviewer: str, decision: str, comment: str = "") -> Proposal:
        """Approve, reject or request changes. The proposal's author may not review it."""
        reviewer = _need(reviewer, "reviewer")
        if decision not in DECISIONS:
            raise BadRequest(f"decision must be one of {', '.join(DECISIONS)}, got {decision!r}")
        try:
            async with self._tx() as conn:
                row = await conn.fetchrow("SELECT * FROM harness_proposals WHERE id = $1 FOR UPDATE",
                                          int(proposal_id))
                if row is None:
                    raise NotFound(f"unknown proposal {proposal_id}")
                if row["author"].strip().lower() == reviewer.lower():
                    raise SelfReview(f"{reviewer!r} authored proposal {proposal_id}: the reviewer must not be "
                                     "the author")
                if decision == "approve":
                    authors = await self._change_authors(conn, row["version"])
                    if reviewer.lower() in authors:
                        raise SelfReview(f"{reviewer!r} authored a change in version {row['version']}: the "
                                         "approver must not be the author of any change in the version")
                if row["status"] not in REVIEWABLE:
                    raise Refused(f"proposal {proposal_id} is {row['status']}: it can no longer be reviewed")
                status = DECISIONS[decision]
                if status == "approved" and row["status"] == "evaluated":
                    status = "evaluated"  # a second approval keeps the evaluation on record
                await conn.execute(
                    "INSERT INTO harness_reviews(proposal_id, reviewer, decision, comment) VALUES ($1, $2, $3, $4)",
                    row["id"], reviewer, decision, comment)
                updated = await conn.fetchrow(
                    "UPDATE harness_proposals SET status = $2, updated_at = now() WHERE id = $1 RETURNING *",
                    row["id"], status)
                await self._audit(conn, reviewer, "review", version=row["version"], proposal_id=row["id"],
                                  decision=decision, comment=comment, status=status)
        except Refused as exc:
            await self._refused(exc, reviewer, "review", proposal_id=int(proposal_id), decision=decision)
            raise
        return _proposal(updated)

    async def _change_authors(self, conn: asyncpg.Connection, version: str, limit: int = 1000) -> set[str]:
        """Authors of the version and of every ancestor back to the last one that was approved (the
        changes an approval of ``version`` accepts), lower-cased."""
        authors: set[str] = set()
        current: str | None = version
        for _ in range(limit):
            if current is None:
                break
            row = await conn.fetchrow("SELECT author, parent FROM harness_versions WHERE version = $1", current)
            if row is None:
                break
            authors.add(str(row["author"]).strip().lower())
            current = row["parent"]
            if current is not None and await self._approved(conn, current):
                break
        return authors

    # -- evaluation -----------------------------------------------------------------------------

    async def attach_evaluation(self, version: str, result: dict[str, Any], passed: bool, *,
                                actor: str = "evaluation") -> Evaluation:
        """Attach an evaluation result to a version (the evaluation runner calls this).

        Approved proposals of the version become ``evaluated``."""
        async with self._tx() as conn:
            version = await self._resolve(conn, version)
            row = await conn.fetchrow(
                "INSERT INTO harness_evaluations(version, passed, result, actor) VALUES ($1, $2, $3::jsonb, $4) "
                "RETURNING *", version, bool(passed), json.dumps(result, default=str), actor)
            await conn.execute(
                "UPDATE harness_proposals SET status = 'evaluated', updated_at = now() "
                "WHERE version = $1 AND status = 'approved'", version)
            await self._audit(conn, actor, "evaluate", version=version, passed=bool(passed),
                              evaluation_id=row["id"])
        return Evaluation(row["id"], row["version"], row["passed"], dict(json.loads(row["result"])),
                          row["actor"], row["created_at"])

    async def evaluations(self, version: str) -> list[Evaluation]:
        version = await self.resolve(version)
        rows = await self.pool.fetch("SELECT * FROM harness_evaluations WHERE version = $1 ORDER BY id DESC",
                                     version)
        return [Evaluation(r["id"], r["version"], r["passed"], dict(json.loads(r["result"])), r["actor"],
                           r["created_at"]) for r in rows]

    # -- activation and rollback ----------------------------------------------------------------

    @staticmethod
    async def _approved(conn: asyncpg.Connection, version: str) -> bool:
        return bool(await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM harness_proposals p JOIN harness_reviews r ON r.proposal_id = p.id "
            "WHERE p.version = $1 AND r.decision = 'approve' AND p.status = ANY($2::text[]))",
            version, list(APPROVED_STATUSES)))

    async def _failed_checks(self, conn: asyncpg.Connection, version: str,
                             transition: gates.Transition) -> list[str]:
        """The transition's checks (gates.TRANSITIONS) that ``version`` fails, in words."""
        failed: list[str] = []
        for check in transition.checks:
            if check == "review":
                if not await self._approved(conn, version):
                    failed.append("it has no approved review")
            elif check == "evaluation":
                if not self.require_evaluation:
                    continue
                passed = await conn.fetchval(
                    "SELECT passed FROM harness_evaluations WHERE version = $1 ORDER BY id DESC LIMIT 1", version)
                if passed is None:
                    failed.append("no evaluation result is attached")
                elif not passed:
                    failed.append("its latest evaluation failed")
            else:  # a check named in the table must be implemented here
                raise AssertionError(f"unknown gate check {check!r}")
        return failed

    async def _gate(self, conn: asyncpg.Connection, version: str, target: str, transition: gates.Transition,
                    force: bool) -> list[str]:
        """Run the transition's checks on the version it makes active; raise Refused when one fails and
        the transition is not forced. Returns the failed checks force overrides (empty: nothing forced)."""
        failed = await self._failed_checks(conn, version, transition)
        if failed and not (force and transition.forcible):
            verb = "activate" if transition is gates.ACTIVATE else "roll back to"
            raise Refused(f"cannot {verb} {version} on {target}: {'; '.join(failed)} "
                          "(use force with a reason to override)")
        return failed

    @staticmethod
    async def _lock_target(conn: asyncpg.Connection, target: str) -> asyncpg.Record | None:
        """Serialise changes of one target: advisory lock (also when no row exists yet) + row lock."""
        await conn.execute("SELECT pg_advisory_xact_lock(727010, hashtext($1))", target)
        return await conn.fetchrow("SELECT * FROM harness_targets WHERE target = $1 FOR UPDATE", target)

    @staticmethod
    async def _set_target(conn: asyncpg.Connection, target: str, version: str | None, action: str,
                          previous: str | None, back_to: int | None, actor: str, forced: bool,
                          reason: str) -> asyncpg.Record:
        row = await conn.fetchrow(
            "INSERT INTO harness_activations(target, version, action, previous_version, back_to, actor, forced, "
            "reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *",
            target, version, action, previous, back_to, actor, forced, reason)
        await conn.execute(
            "INSERT INTO harness_targets(target, version, activation_id) VALUES ($1, $2, $3) "
            "ON CONFLICT (target) DO UPDATE SET version = $2, activation_id = $3, updated_at = now()",
            target, version, row["id"])
        return row

    async def _announce(self, row: asyncpg.Record) -> bool:
        if self.publisher is None:
            return False
        event = {"event_id": uuid.uuid4().hex, "action": row["action"], "version": row["version"] or "",
                 "target": row["target"], "actor": row["actor"], "ts_ms": int(time.time() * 1000)}
        try:
            await self.publisher(event)
            return True
        except Exception as exc:  # the poll fallback of every replica still picks the change up
            log.warning("could not announce %s of %s on %s: %s", row["action"], row["version"], row["target"], exc)
            return False

    async def activate(self, version: str, *, target: str = GLOBAL, actor: str, force: bool = False,
                       reason: str = "") -> Activation:
        """Make ``version`` the active one for ``target``.

        Runs the checks of gates.ACTIVATE (an approved review and, when ``require_evaluation``, a passing
        latest evaluation); ``force`` with a ``reason`` overrides them and is recorded."""
        actor = _need(actor, "actor")
        target = normalize_target(target)
        if force:
            reason = _need(reason, "a reason for forcing")
        try:
            async with self._tx() as conn:
                version = await self._resolve(conn, version)
                gaps = await self._gate(conn, version, target, gates.ACTIVATE, force)
                current = await self._lock_target(conn, target)
                previous = current["version"] if current else None
                if current is not None and previous == version:  # already active: nothing changes, nothing to announce
                    same = await conn.fetchrow("SELECT * FROM harness_activations WHERE id = $1",
                                               current["activation_id"])
                    await self._audit(conn, actor, "activate", version=version, target=target, unchanged=True,
                                      activation_id=same["id"])
                    return _activation(same)
                row = await self._set_target(conn, target, version, "activate", previous,
                                             current["activation_id"] if current else None, actor, bool(gaps),
                                             reason)
                await conn.execute(
                    "UPDATE harness_proposals SET status = 'active', updated_at = now() "
                    "WHERE version = $1 AND status IN ('approved', 'evaluated')", version)
                await self._audit(conn, actor, "activate", version=version, target=target, activation_id=row["id"],
                                  previous_version=previous, forced=bool(gaps), overridden=gaps, reason=reason,
                                  break_glass=bool(force))
        except (Refused, NotFound) as exc:
            await self._refused(exc, actor, "activate", version=version, target=target)
            raise
        return _activation(row, await self._announce(row))

    async def rollback(self, *, target: str = GLOBAL, actor: str, to: str | None = None, force: bool = False,
                       reason: str = "") -> Activation:
        """Return ``target`` to the activation before the current one, or to version ``to``.

        The version returned to passes the same checks as an activation (gates.ROLLBACK,
        gates.ROLLBACK_TO): a version without an approved review or whose latest evaluation failed needs
        ``force`` and a ``reason``, recorded as forced. Rolling back a room or arm past its first
        activation clears its override (gates.CLEAR: it follows global again; nothing to check)."""
        actor = _need(actor, "actor")
        target = normalize_target(target)
        if force:
            reason = _need(reason, "a reason for forcing")
        try:
            async with self._tx() as conn:
                current = await self._lock_target(conn, target)
                if current is None:
                    raise Refused(f"nothing to roll back: {target} was never activated")
                cur = await conn.fetchrow("SELECT * FROM harness_activations WHERE id = $1", current["activation_id"])
                back_to: int | None
                transition = gates.ROLLBACK_TO if to else gates.ROLLBACK
                if to:
                    version: str | None = await self._resolve(conn, to)
                    earlier = await conn.fetchrow(
                        "SELECT back_to FROM harness_activations WHERE target = $1 AND version = $2 AND id < $3 "
                        "ORDER BY id DESC LIMIT 1", target, version, cur["id"])
                    back_to = earlier["back_to"] if earlier else cur["id"]
                elif cur["back_to"] is not None:
                    prev = await conn.fetchrow("SELECT * FROM harness_activations WHERE id = $1", cur["back_to"])
                    version, back_to = prev["version"], prev["back_to"]
                elif target != GLOBAL and cur["version"] is not None:
                    version, back_to = None, None  # clear the override: the target follows global again
                    transition = gates.CLEAR
                else:
                    raise Refused(f"nothing to roll back to: {target} has no earlier activation")
                if version is not None and version == cur["version"]:
                    raise Refused(f"{version} is already active on {target}")
                gaps = [] if version is None else await self._gate(conn, version, target, transition, force)
                forced = bool(gaps)
                row = await self._set_target(conn, target, version, "rollback", cur["version"], back_to, actor,
                                             forced, reason)
                left = cur["version"]
                if left is not None and not await conn.fetchval(
                        "SELECT EXISTS (SELECT 1 FROM harness_targets WHERE version = $1)", left):
                    await conn.execute(
                        "UPDATE harness_proposals SET status = 'rolled_back', updated_at = now() "
                        "WHERE version = $1 AND status = 'active'", left)
                await self._audit(conn, actor, "rollback", version=version, target=target, activation_id=row["id"],
                                  previous_version=left, forced=forced, overridden=gaps, reason=reason,
                                  break_glass=bool(force))
        except (Refused, NotFound) as exc:
            await self._refused(exc, actor, "rollback", version=to, target=target)
            raise
        return _activation(row, await self._announce(row))

    async def active(self, target: str = GLOBAL) -> Activation | None:
        """The current activation of a target (None when never activated; its version is None when
        a room/arm override was cleared)."""
        target = normalize_target(target)
        row = await self.pool.fetchrow(
            "SELECT a.* FROM harness_targets t JOIN harness_activations a ON a.id = t.activation_id "
            "WHERE t.target = $1", target)
        return _activation(row) if row else None

    async def active_all(self) -> dict[str, str]:
        """Every target with an active version: target -> version."""
        rows = await self.pool.fetch("SELECT target, version FROM harness_targets WHERE version IS NOT NULL")
        return {r["target"]: r["version"] for r in rows}

    async def history(self, target: str = GLOBAL, limit: int = 50) -> list[Activation]:
        target = normalize_target(target)
        rows = await self.pool.fetch(
            "SELECT * FROM harness_activations WHERE target = $1 ORDER BY id DESC LIMIT $2", target, limit)
        return [_activation(r) for r in rows]

    # -- audit and load status ------------------------------------------------------------------

    async def audit(self, *, limit: int = 100, version: str | None = None, target: str | None = None,
                    actor: str | None = None) -> list[AuditEntry]:
        """Audit rows, newest first."""
        rows = await self.pool.fetch(
            "SELECT * FROM harness_audit WHERE ($1::text IS NULL OR version LIKE $1 || '%') "
            "AND ($2::text IS NULL OR target = $2) AND ($3::text IS NULL OR actor = $3) "
            "ORDER BY id DESC LIMIT $4",
            version, normalize_target(target) if target else None, actor, limit)
        return [AuditEntry(r["id"], r["at"], r["actor"], r["action"], r["version"], r["target"], r["proposal_id"],
                           dict(json.loads(r["details"]))) for r in rows]

    async def record_load_status(self, service: str, version: str, ok: bool, error: str = "",
                                 replica: str = "") -> None:
        """What a service met loading a version (the last report per service and version wins)."""
        async with self._tx() as conn:
            await conn.execute(
                "INSERT INTO harness_load_status(service, version, ok, error, replica) VALUES ($1, $2, $3, $4, $5) "
                "ON CONFLICT (service, version) DO UPDATE SET ok = $3, error = $4, replica = $5, updated_at = now()",
                service, version, ok, error, replica)
            if not ok:
                await self._audit(conn, f"service:{service}", "load_failed", version=version, replica=replica,
                                  error=error)

    async def load_status(self, version: str | None = None) -> list[LoadStatus]:
        rows = await self.pool.fetch(
            "SELECT * FROM harness_load_status WHERE ($1::text IS NULL OR version = $1) ORDER BY service, version",
            version)
        return [LoadStatus(r["service"], r["version"], r["ok"], r["error"], r["replica"], r["updated_at"])
                for r in rows]
