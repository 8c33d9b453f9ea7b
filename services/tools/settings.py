"""Settings of the tools service: the shared settings (livehost.config) plus what is its own."""

from livehost.config import Settings

GROUP_ID = "livehost-tools"
# The consumer groups a process of this service is a member of: the supervisor removes a crashed
# replica from them at once when a peer replica runs (livehost.kafka.remove_static_members).
CONSUMER_GROUPS = (GROUP_ID,)
# Kafka transactions for this step (README "Delivery guarantees"): side effects are already once per
# idempotency key in PostgreSQL; the transaction makes the tool result itself appear once.
TRANSACTIONAL = True


def grpc_port(s: Settings) -> int:
    return s.tools_grpc_port
