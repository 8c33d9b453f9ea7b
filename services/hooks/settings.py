"""Settings of the hooks processor: the shared settings (livehost.config) plus what is its own."""

import os

APP_ID = "livehost-hooks"
# Faust's exactly_once guarantee (README "Delivery guarantees"): the requests, tool calls and replies a
# batch of room events and actions produced, its table changes and its input offsets commit together,
# so a worker killed mid-batch does not write a reply twice. Measured cost on the demo: none visible.
EXACTLY_ONCE = True
FLUSH_INTERVAL_S = 0.05  # how often merge windows are checked
# Admission control: requests in flight over all rooms of a worker before new ones are shed at merge
# time (services/hooks/handlers.py). By Little's law it bounds a request's queueing: in flight / rate.
MAX_IN_FLIGHT = int(os.environ.get("LIVEHOST_HOOKS_MAX_IN_FLIGHT", "48"))
