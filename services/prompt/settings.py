"""Settings of the prompt service: the shared settings (livehost.config) plus what is its own."""

from livehost.config import Settings

GROUP_ID = "livehost-prompt"


def grpc_port(s: Settings) -> int:
    return s.prompt_grpc_port
