"""Settings of the policy service: the shared settings (livehost.config) plus what is its own."""

from livehost.config import Settings

GROUP_ID = "livehost-policy"
# The consumer groups a process of this service is a member of: the supervisor removes a crashed
# replica from them at once when a peer replica runs (livehost.kafka.remove_static_members).
CONSUMER_GROUPS = (GROUP_ID,)
# Kafka transactions for this step (README "Delivery guarantees"): a redelivered prompt would ask the
# model again and emit a second action for the same turn, which the hooks processor would route twice.
TRANSACTIONAL = True


def grpc_port(s: Settings) -> int:
    return s.policy_grpc_port
