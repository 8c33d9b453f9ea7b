"""Settings of the prompt service: the shared settings (livehost.config) plus what is its own."""

from livehost.config import Settings

GROUP_ID = "livehost-prompt"
# The consumer groups a process of this service is a member of: the supervisor removes a crashed
# replica from them at once when a peer replica runs (livehost.kafka.remove_static_members).
CONSUMER_GROUPS = (GROUP_ID,)
# Kafka transactions for this step (README "Delivery guarantees"): a redelivered request or tool result
# would emit a second prompt for the same turn, and every later step would run twice.
TRANSACTIONAL = True


def grpc_port(s: Settings) -> int:
    return s.prompt_grpc_port
