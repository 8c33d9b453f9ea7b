"""Settings of the prompt service: the shared settings (livehost.config) plus what is its own."""

from livehost.config import Settings

GROUP_ID = "livehost-prompt"
# Kafka transactions for this step (README "Delivery guarantees"): a redelivered request or tool result
# would emit a second prompt for the same turn, and every later step would run twice.
TRANSACTIONAL = True


def grpc_port(s: Settings) -> int:
    return s.prompt_grpc_port
