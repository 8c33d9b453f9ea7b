"""Policy layer: the action protocol, the deterministic reference policy and the Triton client."""

from livehost.policy.actions import ACTION_JSON_SCHEMA, ParsedAction, parse_action

__all__ = ["ACTION_JSON_SCHEMA", "ParsedAction", "parse_action"]
