"""Settings of the ingest service: the shared settings (livehost.config) plus what is its own."""

from livehost.config import Settings

# Ingest only produces: it is a member of no consumer group (the supervisor has nothing to remove).
CONSUMER_GROUPS: tuple[str, ...] = ()


def grpc_port(s: Settings) -> int:
    return s.ingest_grpc_port
