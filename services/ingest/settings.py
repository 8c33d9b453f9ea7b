"""Settings of the ingest service: the shared settings (livehost.config) plus what is its own."""

from livehost.config import Settings

GROUP_ID = "livehost-ingest"


def grpc_port(s: Settings) -> int:
    return s.ingest_grpc_port
