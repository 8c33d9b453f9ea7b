"""Settings of the hooks processor: the shared settings (livehost.config) plus what is its own."""

import os

APP_ID = "livehost-hooks"
# The consumer groups a process of this service is a member of: the supervisor removes a crashed
# replica from them at once when a peer replica runs (livehost.kafka.remove_static_members).
CONSUMER_GROUPS = (APP_ID,)
# At-least-once, not Faust's exactly_once (README "Delivery guarantees"). Under exactly_once Faust
# commits only the rooms table's changelog and the input offsets in its transactions: the requests,
# tool calls and replies go out through its plain producer (they are sent to topics it does not
# consume, which it cannot map to a transaction), so they are at-least-once either way, and each is
# acknowledged only once delivered. What exactly_once did add is a stall: a restarted worker's table
# recovery cannot see the changelog's final transaction marker and waits two 5 s polls before it
# assumes an aborted transaction (measured: 10.0 s of every hooks restart, so 38-70% of the requests
# of a kill phase expired). Room-table writes are idempotent sets, and re-read comments re-merge.
EXACTLY_ONCE = False
FLUSH_INTERVAL_S = 0.05  # how often merge windows are checked
# Admission control: requests in flight over all rooms of a worker before new ones are shed at merge
# time (services/hooks/handlers.py). By Little's law it bounds a request's queueing: in flight / rate.
# It must be at least capacity × release-to-outcome time: measured on 2 cores with the text voice
# (README "Throughput and overload"), 48 shed 6-16% at 100/s, 64 1.2-2.3%, 72 0.7-2.2%, 80 and 96
# none; at 2× that load a higher limit serves slower (served p95 1.85-1.96 s at 64, 2.03-2.06 at 72,
# 2.25 at 80, 2.92 at 96). 80 serves the machine's capacity without shedding.
MAX_IN_FLIGHT = int(os.environ.get("LIVEHOST_HOOKS_MAX_IN_FLIGHT", "80"))
# Latency objective of admission control, ms from a request's first comment (0: off, the harness's time
# budget is the only limit). With it, a request that cannot finish by then is shed at merge time or
# when its room frees, and the in-flight limit shrinks while requests take longer from release to
# outcome than the target less the merge window: under overload the requests served stay fast and the
# rest are refused early, instead of all answering late (README "Throughput and overload").
LATENCY_TARGET_MS = int(os.environ.get("LIVEHOST_HOOKS_LATENCY_TARGET_MS", "0"))
