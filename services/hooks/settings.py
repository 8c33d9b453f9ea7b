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
# Admission control: the most requests in flight over all rooms of a worker (services/hooks/handlers.py);
# the limit in force adapts below it (LIMIT_LATENCY_MS). By Little's law it bounds a request's queueing:
# in flight / rate. It must be at least capacity x release-to-outcome time: the text voice served
# 100 requests/s on 2 cores with 80 (0-0.9% shed; 6-19% at 48), but with the default 4 s objective a
# cap of 80 let espeak at 2x its capacity answer with a p95 of 5.1 s, 1.8 s at 48 (README "Throughput
# and overload"). A text-voice deployment sets LIVEHOST_HOOKS_MAX_IN_FLIGHT=80; the 1 s objective held 2x
# nearer 2 s on a slow machine but also shed near capacity there (README "Cheaper shedding").
MAX_IN_FLIGHT = int(os.environ.get("LIVEHOST_HOOKS_MAX_IN_FLIGHT", "48"))
# Latency objective of admission control, ms from a request's first comment (0: off, the harness's time
# budget is the only limit). With it, a request that cannot finish by then is shed at merge time or
# when its room frees, and the in-flight limit's objective is at most the target less the merge window:
# under overload the requests served stay fast and the rest are refused early, instead of all
# answering late (README "Throughput and overload").
LATENCY_TARGET_MS = int(os.environ.get("LIVEHOST_HOOKS_LATENCY_TARGET_MS", "0"))
# Objective of the adaptive in-flight limit (livehost.agent.admission), ms from a request's admission to
# its outcome, tool calls not counted: the limit shrinks while more than 5% of a generation of requests
# take longer and its median shows queueing, and grows back while they are faster. The default, half
# the shipped harness's 8 s budget, is where the rule it replaced called a request slow. 1000 aims the
# requests served under overload at 2 s with the 800 ms merge window (measured: served p95 2.0-2.3 s at
# 2x capacity instead of 5.7-6.3 s), but on a machine that cannot serve its load within it the limit
# sheds at capacity too (20% at 25/s on a slow afternoon), and while every tool call times out it
# refused 29.5% of the requests (18.0% with 4000), so it is a deployment's choice (README "Graceful
# overload", "Every target in one configuration, in some runs"). Under a latency target, what the
# target leaves after the window is used when it is sooner.
LIMIT_LATENCY_MS = int(os.environ.get("LIVEHOST_HOOKS_LIMIT_LATENCY_MS", "4000"))
