"""The side-effect gate: a hook kind (``side_effect_gate``, stage ``tool_call``) that holds the policy
for tools with side effects (coupons, pinned products), configured in the harness's ``hooks.yaml``::

    - id: side_effects
      stage: tool_call
      kind: side_effect_gate
      params:
        allowed_tools: [...]          # side-effecting tools the agent may call (absent: every tool)
        coupon_allowlist: [...]       # coupon codes it may issue (absent: any; []: none)
        require_campaign_cap: true    # no coupon at all unless the room's campaign sets max_discount_pct
        max_per_viewer: 1             # side effects per viewer per room (absent: no budget)
        max_per_room: 50              # side effects per room
        max_per_minute: 10            # side effects per room per minute
        rooms:                        # per-room overrides of any parameter above
          room-a: {max_per_minute: 3}

It runs twice. The hooks service checks what the request alone shows (tool allowed, coupon in the
allowlist, campaign cap) as a step hook, so the model gets a correction. The tools service enforces
the whole policy, budgets included, where the side effect happens — in the same database transaction
as the side effect, against a ledger of side effects per room and viewer — so a tool call that
reaches it any other way (a forged Kafka record, a replayed request) is held to the same policy.

Nothing here names a tool of the shipped harness: tools are the harness's, operations
(``coupon.issue``) the backend's vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from livehost.harness.model import Harness

KIND = "side_effect_gate"
COUPON_OPERATION = "coupon.issue"
PARAMS = ("allowed_tools", "coupon_allowlist", "require_campaign_cap", "max_per_viewer", "max_per_room",
          "max_per_minute", "rooms")


@dataclass(frozen=True)
class SideEffectPolicy:
    hook_id: str
    allowed_tools: frozenset[str] | None = None
    coupon_allowlist: frozenset[str] | None = None
    require_campaign_cap: bool = True
    max_per_viewer: int | None = None
    max_per_room: int | None = None
    max_per_minute: int | None = None

    @property
    def has_budgets(self) -> bool:
        return any(x is not None for x in (self.max_per_viewer, self.max_per_room, self.max_per_minute))


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def policy_for(harness: Harness, room_id: str) -> SideEffectPolicy | None:
    """The side-effect policy of ``room_id`` (its overrides applied), or None when the harness has no
    enabled side_effect_gate hook (the first one counts)."""
    hook = next((h for h in harness.hooks if h.enabled and h.kind == KIND), None)
    if hook is None:
        return None
    params = dict(hook.params)
    rooms = params.pop("rooms", None) or {}
    if isinstance(rooms, dict) and isinstance(rooms.get(room_id), dict):
        params.update(rooms[room_id])
    allowed = params.get("allowed_tools")
    allowlist = params.get("coupon_allowlist")
    return SideEffectPolicy(
        hook_id=hook.id,
        allowed_tools=None if allowed is None else frozenset(map(str, allowed)),
        coupon_allowlist=None if allowlist is None else frozenset(str(c).upper() for c in allowlist),
        require_campaign_cap=bool(params.get("require_campaign_cap", True)),
        max_per_viewer=_opt_int(params.get("max_per_viewer")),
        max_per_room=_opt_int(params.get("max_per_room")),
        max_per_minute=_opt_int(params.get("max_per_minute")),
    )


def campaign_cap(campaign: Any) -> float | None:
    if not isinstance(campaign, dict):
        return None
    cap = campaign.get("max_discount_pct")
    return float(cap) if isinstance(cap, int | float) and not isinstance(cap, bool) else None


def static_reason(policy: SideEffectPolicy, tool: str, operation: str, params: dict[str, Any],
                  campaign: Any) -> str | None:
    """Why the policy refuses this side effect from what the call itself shows, or None."""
    if policy.allowed_tools is not None and tool not in policy.allowed_tools:
        allowed = ", ".join(sorted(policy.allowed_tools)) or "none"
        return f"tool {tool} may not cause side effects in this room (allowed: {allowed})"
    if operation == COUPON_OPERATION:
        if policy.require_campaign_cap and campaign_cap(campaign) is None:
            return "no coupon without a campaign cap: the room's campaign sets no max_discount_pct"
        code = str(params.get("code") or "").upper()
        if policy.coupon_allowlist is not None and code not in policy.coupon_allowlist:
            return f"coupon {code or '(none)'} is not on this room's coupon allowlist"
    return None


def budget_reason(policy: SideEffectPolicy, *, viewer: int, room: int, last_minute: int) -> str | None:
    """Why the budgets refuse one more side effect, given the counts so far, or None."""
    if policy.max_per_viewer is not None and viewer >= policy.max_per_viewer:
        return f"viewer budget spent: {viewer} side effects for this viewer (limit {policy.max_per_viewer})"
    if policy.max_per_room is not None and room >= policy.max_per_room:
        return f"room budget spent: {room} side effects in this room (limit {policy.max_per_room})"
    if policy.max_per_minute is not None and last_minute >= policy.max_per_minute:
        return f"rate budget spent: {last_minute} side effects in the last minute (limit {policy.max_per_minute})"
    return None
