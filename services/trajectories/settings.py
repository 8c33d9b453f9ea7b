"""Settings of the trajectory recorder: the shared settings (livehost.config) plus what is its own."""

APP_ID = "livehost-trajectories"
# The consumer groups a process of this service is a member of: the supervisor removes a crashed
# replica from them at once when a peer replica runs (livehost.kafka.remove_static_members).
CONSUMER_GROUPS = (APP_ID,)
# At-least-once (README "Delivery guarantees"): the PostgreSQL row, keyed by request id, is the record of
# truth and is written once whatever the redelivery; agent.trajectories readers deduplicate by request
# id. Faust's exactly_once slowed this recorder's drain of 200 paced replies from ~3 s to ~30 s here.
EXACTLY_ONCE = False
# Replies are stored in batches: one PostgreSQL transaction (one durable commit) for the rows of a batch
# and one for marking their records published, instead of two per request. A batch closes when it holds
# BATCH_MAX replies or BATCH_WITHIN_S after the last one closed; trajectories are not on the reply's path.
BATCH_MAX = 100
BATCH_WITHIN_S = 0.05
# Fetches wait for this many bytes of replies (about ten lz4-compressed reply records) or FETCH_WAIT_MS,
# whichever comes first, instead of returning with each reply: the broker's cost is per request, and
# under load this consumer made a fetch per reply (measured in the README's "What each change did").
FETCH_MIN_BYTES = 64 * 1024
FETCH_WAIT_MS = 250
# After a crash, rows stored but never marked published are checked against agent.trajectories before
# their records go out again (clients.PublishedScan): the scan starts this long before the replies'
# completion time (the stream processor's clock and the record's timestamp may disagree), and gives up
# after this many records or seconds (the rest are published again: at-least-once).
PUBLISHED_SCAN_SKEW_MS = 60_000
PUBLISHED_SCAN_MAX_RECORDS = 200_000
PUBLISHED_SCAN_MAX_S = 30.0
