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
# It must be at least capacity × release-to-outcome time, and the lower it is the faster the requests
# served under overload (README "Throughput and overload", measured on 2 cores): 48 keeps the default
# espeak voice's served p95 under 2 s at 2× its capacity; with the text voice, whose capacity is
# higher, 48 sheds 6-16% at 100/s and 80 sheds 0-0.9% (then 2× serves a p95 of 2.25 s), so a text-voice
# deployment sets LIVEHOST_HOOKS_MAX_IN_FLIGHT=80.
MAX_IN_FLIGHT = int(os.environ.get("LIVEHOST_HOOKS_MAX_IN_FLIGHT", "48"))
# Latency objective of admission control, ms from a request's first comment (0: off, the harness's time
# budget is the only limit). With it, a request that cannot finish by then is shed at merge time or
# when its room frees, and the in-flight limit shrinks while requests take longer from release to
# outcome than the target less the merge window: under overload the requests served stay fast and the
# rest are refused early, instead of all answering late (README "Throughput and overload").
LATENCY_TARGET_MS = int(os.environ.get("LIVEHOST_HOOKS_LATENCY_TARGET_MS", "0"))
# Objective of the adaptive in-flight limit (livehost.agent.admission): it shrinks while more than 10%
# of a generation of requests are answered later than this after their merge window's end (waits in
# this worker's input, the room queue and the pipeline included), and grows back while they are
# faster. One second past the shipped 800 ms window keeps the requests served under overload within
# the 2 s the throughput issue asks for; the limit never sheds what the machine serves in time, so a
# faster machine keeps its capacity. Under a latency target, what the target leaves after the window
# is used when it is sooner.
LIMIT_LATENCY_MS = int(os.environ.get("LIVEHOST_HOOKS_LIMIT_LATENCY_MS", "1200"))
