"""Settings of the tools service: the shared settings (livehost.config) plus what is its own."""

from livehost.config import Settings

GROUP_ID = "livehost-tools"


def grpc_port(s: Settings) -> int:
    return s.tools_grpc_port
