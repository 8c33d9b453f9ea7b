"""Settings of the voice service: the shared settings (livehost.config) plus what is its own."""

from livehost.config import Settings

GROUP_ID = "livehost-voice"


def grpc_port(s: Settings) -> int:
    return s.voice_grpc_port
