"""Settings of the harness service: the shared settings plus the harness control plane's own
(``LIVEHOST_HARNESS_REQUIRE_EVALUATION``, ``LIVEHOST_HARNESS_POLL_INTERVAL_S``, ...)."""

from livehost.harness.registry import HarnessSettings, load_harness_settings

__all__ = ["CONSUMER_GROUPS", "HarnessSettings", "load_harness_settings", "grpc_port"]

# The harness service reads harness events without a group (every process all of them): it is a member
# of no consumer group, so the supervisor has nothing to remove when it crashes.
CONSUMER_GROUPS: tuple[str, ...] = ()

# Most versions Log returns when the request asks for 0.
DEFAULT_LOG_LIMIT = 50


def grpc_port(s: HarnessSettings) -> int:
    return s.harness_grpc_port
