"""The hooks processor's logic, free of Faust: room state, merging, input screening, per-room
scheduling, step routing.

Every method returns the records to emit as ``Emit`` values; the Faust app sends them and
acknowledges the source events only afterwards (at-least-once, idempotent downstream).

Per room, requests are answered one at a time and in order: a room has at most one request in
flight; newly merged requests wait in a bounded queue ordered by priority (questions and purchase
intent before chit-chat), then age. The handler emits every terminal outcome itself (``on_action``,
input rejections, cancellations), so it knows when a room frees up and releases the next request.
Overload is shed at admission, before input screening and any prompt, policy or tool work
(``_admit``): a merged request is cancelled with a reason starting ``shed:`` when the worker already
has its in-flight limit of requests in flight (adaptive, at most ``max_in_flight``: it shrinks, at
most once per generation of requests, while more than 5% of them take longer than its objective from
admission to outcome, tool calls not counted, and grows back while they are faster;
livehost.agent.admission), or when the work ahead of
it in its room — what is left of the request in flight and the queued ones, at the measured service
time (a moving average of release-to-outcome) — and its own service time (that average plus twice
its moving mean deviation) cannot finish within its time budget. A request released from a room
queue is shed the same way when its remaining budget is shorter than its own service time. An
optional latency target (``LIVEHOST_HOOKS_LATENCY_TARGET_MS``) takes the place of the budget in both
checks when it is sooner, and tightens the in-flight limit's objective to what the target leaves
after the merge window. So under overload requests are refused cheaply instead of expiring
mid-flight. Stale work is dropped, never queued forever: a queued request past its deadline is cancelled
(outcome ``cancelled`` with the reason), so is a queued request about the previous product after a
product switch, and on overflow the lowest-priority, oldest request is dropped. An in-flight
request that produced no outcome well past its deadline (a lost message, a crashed service) is
abandoned so the room does not stall; its late actions are ignored.

Scheduling state is in memory: the room's events and actions are keyed by room, so one hooks
worker owns a room; after a restart, and after a rebalance (``drop_held``), rooms simply start free
and the comments that were held are read again.

Requests whose ``policy`` is ``react:<model>`` run the ReAct baseline (livehost.react): no input
hooks, no step hooks, no skill-load requirement — only the turn limit and freshness rules.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections import OrderedDict
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from livehost.agent import state as st
from livehost.agent.admission import InFlightLimit
from livehost.agent.loop import Next, fallback, route_action, terminal
from livehost.agent.merge import Batch, Merger
from livehost.config import Settings
from livehost.harness.provider import HarnessProvider
from livehost.hooks.input import screen_comments
from livehost.security.attest import Signer
from livehost.security.ids import check_state_ids
from livehost.topics import REPLIES, REQUESTS, TOOL_CALLS, Topic
from services.hooks.settings import LATENCY_TARGET_MS, LIMIT_LATENCY_MS, MAX_IN_FLIGHT

log = logging.getLogger(__name__)

QUEUE_LIMIT = 8  # queued requests per room (besides the one in flight)
ABANDON_GRACE_MS = 5_000  # an in-flight request this long past its deadline with no outcome frees its room
_ABANDONED_MEMORY = 4096
SERVICE_EWMA_ALPHA = 0.2  # weight of the newest release-to-outcome time in the service-time estimate
SERVICE_MIN_SAMPLES = 3  # finished requests before the estimate is trusted
# A request's own service time is estimated as the moving average plus SERVICE_DEV_FACTOR moving mean
# deviations (Jacobson's estimate of a retransmission timeout, RFC 6298): admitting on the average
# alone let half the admitted requests finish past a latency target.
SERVICE_DEV_ALPHA = 0.25
SERVICE_DEV_FACTOR = 2.0
# The in-flight limit (livehost.agent.admission) adapts between MIN_IN_FLIGHT and max_in_flight, so that
# 90% of a generation's requests are answered within limit_latency_ms of their merge window's end
# (queueing before release and in the pipeline included), whatever the machine's speed.
MIN_IN_FLIGHT = 4
SHED = "shed: "  # the reason prefix of requests refused at admission (outcome ``cancelled``)

_URGENT = re.compile(r"\?|\b(how much|price|buy|order|cart|checkout|stock|left|size|coupon)\b", re.I)


REACT_ARM = "react"  # an experiment arm that runs the ReAct baseline instead of a harness version


@dataclass(frozen=True)
class Assignment:
    experiment: str
    arm: str
    harness_version: str  # a registry version, or REACT_ARM


class Assigner(Protocol):
    async def assign(self, room_id: str, user_id: str) -> Assignment | None:
        """The viewer's arm in the running experiment (None when no experiment runs)."""
        ...


@dataclass
class Emit:
    topic: Topic
    key: str
    record: dict[str, Any]


@dataclass
class Handled:
    emits: list[Emit] = field(default_factory=list)
    tokens: list[Any] = field(default_factory=list)  # source events now safe to acknowledge


def priority(comments: list[dict[str, Any]]) -> int:
    """Questions and purchase intent before chit-chat."""
    return 2 if any(_URGENT.search(c["text"]) for c in comments) else 1


def reply_record(nxt: Next, now_ms: int) -> dict[str, Any]:
    return {"state": nxt.state, "outcome": nxt.outcome, "text": nxt.text, "reason": nxt.reason,
            "completed_ms": now_ms}


def route(nxt: Next, now_ms: int) -> Emit:
    key = nxt.state["room_id"]
    if nxt.route == "turn":
        return Emit(REQUESTS, key, {"state": nxt.state})
    if nxt.route == "tool_call":
        assert nxt.tool_call is not None
        return Emit(TOOL_CALLS, key, {"state": nxt.state, **nxt.tool_call})
    return Emit(REPLIES, key, reply_record(nxt, now_ms))


@dataclass
class Queued:
    state: dict[str, Any]
    seq: int
    # The source comments' offsets: acknowledged only when the request is published (started or
    # cancelled), so a worker that dies with requests queued leaves their comments to be re-read.
    tokens: list[Any] = field(default_factory=list)
    admitted_ms: int = 0

    @property
    def priority(self) -> int:
        return int(self.state.get("priority") or 0)

    def order(self) -> tuple[int, int, int]:
        """Release order: highest priority first, then oldest."""
        return (-self.priority, int(self.state["created_ms"]), self.seq)


@dataclass
class RoomSchedule:
    in_flight: dict[str, Any] | None = None  # the state the request had when it was released
    released_ms: int = 0  # when the in-flight request was released
    admitted_ms: int = 0  # when it was admitted (merged and screened), before any wait in the room queue
    queue: list[Queued] = field(default_factory=list)


EVICT_SWEEP_MS = 60_000


class HooksHandler:
    def __init__(self, settings: Settings, harnesses: HarnessProvider, rooms: MutableMapping[str, Any],
                 queue_limit: int = QUEUE_LIMIT, abandon_grace_ms: int = ABANDON_GRACE_MS,
                 assigner: Assigner | None = None, signer: Signer | None = None,
                 max_in_flight: int = MAX_IN_FLIGHT, latency_target_ms: int = LATENCY_TARGET_MS,
                 limit_latency_ms: int = LIMIT_LATENCY_MS):
        self._settings = settings
        self._harnesses = harnesses
        self._assigner = assigner
        self._signer = signer  # attests who each request acts for (the tools service checks it)
        self.rooms = rooms  # room_id -> JSON string of the live-room state (a Faust table in production)
        self.merger = Merger(settings.merge_window_ms, settings.merge_max_batch)
        self.queue_limit = max(0, queue_limit)
        self.abandon_grace_ms = abandon_grace_ms
        self.max_in_flight = max(1, max_in_flight)
        self.latency_target_ms = max(0, latency_target_ms)  # 0: the time budget is the only limit
        # The limit's objective is counted from admission (see _finished); under a latency target it is
        # at most what the target leaves after the merge window.
        objective = limit_latency_ms
        if self.latency_target_ms:
            objective = min(objective, self.latency_target_ms - settings.merge_window_ms)
        self.limit = InFlightLimit(self.max_in_flight, max(1, objective), MIN_IN_FLIGHT)
        self.service_ms = 0.0  # moving average of release-to-outcome time (0: nothing measured yet)
        self.service_dev = 0.0  # moving mean deviation of it
        self.service_samples = 0
        self.in_flight_count = 0
        self.schedules: dict[str, RoomSchedule] = {}
        self._seq = itertools.count()
        self._abandoned: OrderedDict[str, None] = OrderedDict()
        # Bounded state: room -> last event time; rooms idle for settings.room_idle_evict_s are
        # dropped from the room table (swept at most once a minute).
        self._last_seen: dict[str, int] = {}
        self._last_sweep_ms = 0

    # ------------------------------------------------------------------ per-room scheduling

    def schedule(self, room_id: str) -> RoomSchedule:
        return self.schedules.setdefault(room_id, RoomSchedule())

    def in_flight(self, room_id: str) -> str | None:
        sched = self.schedules.get(room_id)
        return sched.in_flight["request_id"] if sched and sched.in_flight else None

    def queued(self, room_id: str) -> list[str]:
        """Request ids waiting in the room, in release order."""
        sched = self.schedules.get(room_id)
        return [q.state["request_id"] for q in sorted(sched.queue, key=Queued.order)] if sched else []

    def _cancel(self, state: dict[str, Any], reason: str, now_ms: int) -> Emit:
        return route(terminal(st.clone(state), "cancelled", None, reason), now_ms)

    def _submit(self, state: dict[str, Any], now_ms: int, done: Handled, tokens: list[Any] | None = None) -> None:
        """A request passed input screening: start it if its room is free, else queue it (its comments'
        ``tokens`` are acknowledged when it is published). It is signed here, with the viewers its
        screening kept: a refused or shed request runs no tool and needs no attestation."""
        if self._signer is not None:
            state["attestation"] = self._signer.sign(state)
        room_id = state["room_id"]
        sched = self.schedule(room_id)
        if sched.in_flight is None:
            self._start(sched, state, now_ms, done)
            done.tokens.extend(tokens or [])
            return
        sched.queue.append(Queued(state, next(self._seq), list(tokens or []), now_ms))
        if len(sched.queue) > self.queue_limit:
            victim = min(sched.queue, key=lambda q: (q.priority, int(q.state["created_ms"]), q.seq))
            sched.queue.remove(victim)
            done.tokens.extend(victim.tokens)
            done.emits.append(self._cancel(
                victim.state, f"room queue full ({self.queue_limit} waiting): dropped the lowest-priority, "
                              "oldest request", now_ms))

    def _start(self, sched: RoomSchedule, state: dict[str, Any], now_ms: int, done: Handled,
               admitted_ms: int | None = None) -> None:
        sched.in_flight = state
        sched.released_ms = now_ms
        sched.admitted_ms = now_ms if admitted_ms is None else admitted_ms
        self.in_flight_count += 1
        done.emits.append(Emit(REQUESTS, state["room_id"], {"state": state}))

    def _free(self, sched: RoomSchedule) -> None:
        if sched.in_flight is not None:
            sched.in_flight = None
            self.in_flight_count -= 1

    def _in_flight_left_ms(self, sched: RoomSchedule, now_ms: int) -> float:
        """What is left of the room's request in flight at the measured service time: it has been running
        for a while (counted whole, a room whose request was nearly done shed requests that had time)."""
        if sched.in_flight is None:
            return 0.0
        return max(0.0, self.service_ms - (now_ms - sched.released_ms))

    def _own_service_ms(self) -> float:
        """What a request about to start is expected to take, with a margin for the spread."""
        return self.service_ms + SERVICE_DEV_FACTOR * self.service_dev

    def _admission_deadline(self, state: dict[str, Any]) -> int:
        """When the request must be answered by to be worth starting: its deadline, or sooner under a
        latency target."""
        deadline = int(state["deadline_ms"])
        if self.latency_target_ms:
            return min(deadline, int(state["created_ms"]) + self.latency_target_ms)
        return deadline

    def _admit(self, state: dict[str, Any], now_ms: int) -> str | None:
        """Why a new request is shed before any work (None: admit it). Cheap: counters only."""
        sched = self.schedules.get(state["room_id"])
        busy = sched is not None and sched.in_flight is not None
        if not busy and self.in_flight_count >= int(self.limit):
            return f"{SHED}system overloaded ({self.in_flight_count} requests in flight)"
        queued = len(sched.queue) if sched is not None else 0
        ahead = (1 if busy else 0) + queued
        remaining = self._admission_deadline(state) - now_ms
        work = queued * self.service_ms + self._own_service_ms()
        if sched is not None:
            work += self._in_flight_left_ms(sched, now_ms)
        # Only with work ahead in the room: a request that would start at once is admitted whatever the
        # estimate says. The estimate is learnt from admitted requests only, so shedding those too could
        # never correct a stale one (measured: three slow first requests at start-up, 9.2 s each, then
        # every later request of an idle room shed "0 ahead" for the rest of the run).
        if ahead and self.service_samples >= SERVICE_MIN_SAMPLES and work > remaining:
            return (f"{SHED}room queue ({ahead} ahead at {self.service_ms:.0f} ms each) cannot finish "
                    f"within the remaining {remaining} ms")
        return None

    def _release(self, room_id: str, now_ms: int, done: Handled) -> None:
        """The room is free: start the next queued request (stale ones are cancelled on the way)."""
        sched = self.schedule(room_id)
        self._free(sched)
        for q in sorted(sched.queue, key=Queued.order):
            sched.queue.remove(q)
            done.tokens.extend(q.tokens)  # started or cancelled below: published either way
            remaining = int(q.state["deadline_ms"]) - now_ms
            if remaining < 0:
                done.emits.append(self._cancel(q.state, "stale: waited in the room queue past its deadline", now_ms))
                continue
            target_left = self._admission_deadline(q.state) - now_ms
            needed = self._own_service_ms()
            if self.service_samples >= SERVICE_MIN_SAMPLES and needed > target_left:
                done.emits.append(self._cancel(q.state, f"{SHED}{target_left} ms left in its budget, "
                                                        f"{needed:.0f} ms needed", now_ms))
                continue
            self._start(sched, q.state, now_ms, done, q.admitted_ms)
            return

    def _expire(self, now_ms: int, done: Handled) -> None:
        """Cancel stale queued requests, and shed queued requests that can no longer finish in time (the
        room's request in flight ran long, or the service time grew since they were admitted) — at
        once, instead of letting them wait out their budget; abandon in-flight requests long past
        their deadline."""
        trusted = self.service_samples >= SERVICE_MIN_SAMPLES
        for room_id, sched in list(self.schedules.items()):
            ahead_ms = self._in_flight_left_ms(sched, now_ms)
            for q in sorted(sched.queue, key=Queued.order):
                if now_ms > int(q.state["deadline_ms"]):
                    sched.queue.remove(q)
                    done.tokens.extend(q.tokens)
                    done.emits.append(self._cancel(q.state, "stale: waited in the room queue past its deadline",
                                                   now_ms))
                    continue
                left = self._admission_deadline(q.state) - now_ms
                if trusted and ahead_ms + self._own_service_ms() > left:
                    sched.queue.remove(q)
                    done.tokens.extend(q.tokens)
                    done.emits.append(self._cancel(q.state, f"{SHED}no longer fits while queued: {ahead_ms:.0f} ms of "
                                                            f"work ahead, {left} ms left", now_ms))
                    continue
                ahead_ms += self.service_ms
            flying = sched.in_flight
            if flying is not None and now_ms > int(flying["deadline_ms"]) + self.abandon_grace_ms:
                self._forget(flying["request_id"])
                done.emits.append(self._cancel(flying, "stale: no outcome within the time budget (abandoned)",
                                               now_ms))
                self._release(room_id, now_ms, done)
            if sched.in_flight is None and not sched.queue:
                del self.schedules[room_id]
        # Requests still running past the objective tell the limit now, not when they finish.
        if self.limit.wants_ages():
            self.limit.in_flight([(s.released_ms, now_ms - s.admitted_ms) for s in self.schedules.values()
                                  if s.in_flight is not None], now_ms)

    def _forget(self, request_id: str) -> None:
        self._abandoned[request_id] = None
        while len(self._abandoned) > _ABANDONED_MEMORY:
            self._abandoned.popitem(last=False)

    def _finished(self, nxt: Next, now_ms: int, done: Handled) -> None:
        """Emit a routed step; a terminal outcome of the room's in-flight request frees the room."""
        done.emits.append(route(nxt, now_ms))
        if nxt.route != "terminal":
            return
        room_id = nxt.state["room_id"]
        sched = self.schedules.get(room_id)
        if sched is not None and sched.in_flight is not None and \
                sched.in_flight["request_id"] == nxt.state["request_id"]:
            took = max(0, now_ms - sched.released_ms)
            if self.service_samples:
                self.service_dev = (1 - SERVICE_DEV_ALPHA) * self.service_dev + \
                    SERVICE_DEV_ALPHA * abs(took - self.service_ms)
                self.service_ms = (1 - SERVICE_EWMA_ALPHA) * self.service_ms + SERVICE_EWMA_ALPHA * took
            else:
                self.service_ms = float(took)  # the deviation starts at 0, not at RFC 6298's took / 2:
                # with fewer samples than that takes to decay, admission would refuse on a guess
            self.service_samples += 1
            # From admission: the wait in the room queue and in the pipeline count, which the limit
            # shortens. The merge window and the wait in this worker's input do not: under overload the
            # input waits behind the comments still to be shed, and shrinking the limit for that lowered
            # goodput (at 4x capacity, 13 replies/s counting that wait, 21 not, runs minutes apart).
            # Nor does the time in tool calls, which no admission limit shortens: a tool timing out
            # stepped the limit down and shed a third of a tool-timeout drill's requests (fault suite,
            # 2026-12-03).
            late = max(0.0, now_ms - sched.admitted_ms - st.tool_ms(nxt.state))
            self.limit.outcome(late, sched.released_ms, now_ms, self.in_flight_count)
            self._release(room_id, now_ms, done)

    def drop_held(self) -> list[Any]:
        """Forget what this worker holds for its rooms — open merge windows, queued requests, the
        in-flight marks — without acknowledging anything; returns the source events it held.

        Called when a rebalance revokes the worker's partitions: their comments were never
        acknowledged, so whoever gets each partition (often this worker again) re-reads them from the
        committed offset and merges them afresh. Keeping the old state as well would merge them twice
        (a comment in two requests); waiting for it to drain, as Faust does by default, cannot work —
        a queued request waits for an action that a rebalancing worker does not process, so the
        rebalance stalled until those requests went stale (measured: 44–56% of a 2-replica hooks-kill
        phase cancelled). Requests already in flight go on: their state travels in their records."""
        held: list[Any] = []
        for batch in self.merger.flush_all():
            held.extend(batch.tokens)
        for sched in self.schedules.values():
            for q in sched.queue:
                held.extend(q.tokens)
        self.schedules.clear()
        self.in_flight_count = 0
        return held

    def room_state(self, room_id: str) -> dict[str, Any]:
        raw = self.rooms.get(room_id)
        return json.loads(raw) if raw else {"room_id": room_id}

    async def on_room_event(self, event: dict[str, Any], now_ms: int, token: Any = None) -> Handled:
        room_id = event["room_id"]
        self._last_seen[room_id] = now_ms
        if event["type"] == "comment":
            comment = {"event_id": event["event_id"], "user_id": event.get("user_id") or "anonymous",
                       "text": event.get("text") or "", "ts_ms": event["ts_ms"]}
            done = Handled()
            for batch in self.merger.add(room_id, comment, now_ms, token):
                await self._close(batch, now_ms, done)
            return done
        room = self.room_state(room_id)
        done = Handled(tokens=[token] if token is not None else [])
        if event["type"] == "product_switch":
            if room.get("current_link") not in (None, event.get("link_id")):
                pending = self.merger.flush_room(room_id)
                reason = f"product switched from link {room.get('current_link')} to {event.get('link_id')}"
                if pending is not None:
                    await self._cancel_batch(pending, room, now_ms, done, reason)
                sched = self.schedules.get(room_id)
                for q in list(sched.queue if sched else []):
                    if st.room(q.state).get("current_link") not in (None, event.get("link_id")):
                        sched.queue.remove(q)  # type: ignore[union-attr]
                        done.tokens.extend(q.tokens)
                        done.emits.append(self._cancel(q.state, reason, now_ms))
            if room.get("current_link") not in (None, event.get("link_id")):
                room["previous_link"] = room["current_link"]  # "the previous one" in later comments
            room["current_link"] = event.get("link_id")
        elif event["type"] == "campaign_change":
            room["campaign"] = json.loads(event.get("campaign_json") or "null")
        elif event["type"] == "room_config":
            room["policy"] = event.get("policy") or ""  # the agent of this room's new requests
        if event.get("viewer_count") is not None:
            room["viewer_count"] = event["viewer_count"]
        self.rooms[room_id] = json.dumps(room, sort_keys=True)
        return done

    async def flush(self, now_ms: int) -> Handled:
        """Close due merge windows; cancel stale queued work (called on a timer)."""
        done = Handled()
        for batch in self.merger.due(now_ms):
            await self._close(batch, now_ms, done)
        self._expire(now_ms, done)
        if now_ms - self._last_sweep_ms >= EVICT_SWEEP_MS:
            self.evict_idle(now_ms)
        return done

    def evict_idle(self, now_ms: int) -> list[str]:
        """Drop the state of rooms without an event for ``room_idle_evict_s`` and with no request queued
        or in flight (a room that comes back starts from its next product switch / campaign event)."""
        self._last_sweep_ms = now_ms
        idle_ms = int(self._settings.room_idle_evict_s * 1000)
        gone = []
        for room_id in list(self.rooms.keys()):
            seen = self._last_seen.setdefault(room_id, now_ms)  # after a restart: idle from now on
            if now_ms - seen > idle_ms and room_id not in self.schedules and not self.merger.has_room(room_id):
                del self.rooms[room_id]
                gone.append(room_id)
        for room_id, seen in list(self._last_seen.items()):
            if now_ms - seen > idle_ms and room_id not in self.rooms:
                del self._last_seen[room_id]
        return gone

    async def _arm(self, batch: Batch, room: dict[str, Any]) -> tuple[Any, str, dict[str, Any]]:
        """Harness and policy for a new request: the viewer's experiment arm when an experiment runs
        (assigned once per user, logged as an exposure), else the room's / global activation."""
        policy = str(room.get("policy", ""))
        assignment = None
        if self._assigner is not None:
            user = batch.comments[-1]["user_id"]
            try:
                assignment = await self._assigner.assign(batch.room_id, user)
            except Exception:  # experiments must never stop a room
                log.exception("experiment assignment failed; serving the default arm")
        if assignment is not None:
            room = {**room, "experiment": {"name": assignment.experiment, "arm": assignment.arm}}
            if assignment.harness_version == REACT_ARM:
                return (await self._harnesses.for_new_request(batch.room_id),
                        f"{st.REACT_PREFIX}{self._settings.policy_model}", room)
            try:
                return await self._harnesses.get(assignment.harness_version), policy, room
            except KeyError:
                log.error("experiment %s arm %s: unknown harness version %s; serving the default",
                          assignment.experiment, assignment.arm, assignment.harness_version)
        return await self._harnesses.for_new_request(batch.room_id), policy, room

    async def _new_state(self, batch: Batch, room: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        harness, policy, room = await self._arm(batch, room)
        state = st.new_state(room_id=batch.room_id, harness_version=harness.version(), comments=batch.comments,
                             room=room, ttl_ms=self._settings.request_ttl_ms,
                             time_budget_ms=harness.limits.time_budget_ms, priority=priority(batch.comments),
                             policy=policy, created_ms=min(c["ts_ms"] for c in batch.comments))
        st.add_step(state, "input", None, {"comments": batch.comments, "event_ids": batch.event_ids,
                                           "collapsed": batch.collapsed, "room": room})
        return harness, state

    async def _cancel_batch(self, batch: Batch, room: dict[str, Any], now_ms: int, done: Handled,
                            reason: str) -> None:
        _, state = await self._new_state(batch, room)
        done.emits.append(route(terminal(state, "cancelled", None, reason), now_ms))
        done.tokens.extend(batch.tokens)

    async def _close(self, batch: Batch, now_ms: int, done: Handled) -> None:
        harness, state = await self._new_state(batch, self.room_state(batch.room_id))
        if st.is_react(state):  # the ReAct baseline has no input hooks
            self._submit(state, now_ms, done, batch.tokens)
            return
        # Admission before screening: under overload most merged requests are shed, and screening
        # (the classifier, 12.6% of this process's samples at 4x overload) is work a shed request does
        # not need.
        shed = self._admit(state, now_ms)
        if shed is not None:
            done.emits.append(route(terminal(state, "cancelled", None, shed), now_ms))
            done.tokens.extend(batch.tokens)
            return
        kept, failed = screen_comments(harness, batch.comments)
        for comment, verdict in failed:
            st.add_step(state, "input_hook", verdict.hook, {**verdict.as_dict(), "comment": comment})
        if not kept:
            reasons = "; ".join(v.reason for _, v in failed)
            if any(v.verdict == "reject" for _, v in failed):
                nxt = fallback(harness, state, f"input rejected: {reasons}")
            else:
                nxt = terminal(state, "rejected", None, f"input dropped: {reasons}")
            done.emits.append(route(nxt, now_ms))
        else:
            if failed:
                state["comments"] = kept
                state["merged_text"] = st.merged_text(kept)
            self._submit(state, now_ms, done, batch.tokens)
            return
        done.tokens.extend(batch.tokens)

    async def on_action(self, record: dict[str, Any], now_ms: int) -> Handled:
        state = record["state"]
        check_state_ids(state)  # a forged action record with a path-like id is dead-lettered
        done = Handled()
        if state["request_id"] in self._abandoned:
            return done  # its room moved on; the cancellation was recorded when it was abandoned
        harness = await self._harnesses.get(state["harness_version"])
        pinned_link = st.room(state).get("current_link")
        live_link = self.room_state(state["room_id"]).get("current_link")
        if pinned_link is not None and live_link is not None and pinned_link != live_link:
            nxt = terminal(st.clone(state), "cancelled", None,
                           f"product switched from link {pinned_link} to {live_link} while in flight")
        else:
            nxt = route_action(harness, record, now_ms)
        self._finished(nxt, now_ms, done)
        return done
