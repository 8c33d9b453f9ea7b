"""Settings of the hooks processor: the shared settings (livehost.config) plus what is its own."""

APP_ID = "livehost-hooks"
# Faust's exactly_once guarantee (README "Delivery guarantees"): the requests, tool calls and replies a
# batch of room events and actions produced, its table changes and its input offsets commit together,
# so a worker killed mid-batch does not write a reply twice. Measured cost on the demo: none visible.
EXACTLY_ONCE = True
FLUSH_INTERVAL_S = 0.05  # how often merge windows are checked
