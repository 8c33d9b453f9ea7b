"""Settings of the policy service: the shared settings (livehost.config) plus what is its own."""

from livehost.config import Settings

GROUP_ID = "livehost-policy"


def grpc_port(s: Settings) -> int:
    return s.policy_grpc_port
