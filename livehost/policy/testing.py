"""Test support for policies: build a policy context from an evaluation case (CASES.md) and a
harness, run a minimal agent loop against an in-memory sandbox of the case's catalog.

This is deliberately small: the real request path (merge, hooks, prompt assembly, tool service)
lives in the services. It lets the policy be tested on its own, against any harness.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from livehost.commerce.operations import OPERATIONS
from livehost.harness.model import Harness
from livehost.policy.actions import parse_action


def product_view(item: dict[str, Any]) -> dict[str, Any]:
    return {k: item.get(k) for k in ("link_id", "sku", "title", "price", "currency")} | {
        "attributes": dict(item.get("attributes") or {})
    }


def build_context(harness: Harness, case: dict[str, Any], request_id: str = "req-1") -> dict[str, Any]:
    room = dict(case.get("room") or {})
    catalog = case.get("catalog") or []
    current = next((i for i in catalog if i.get("link_id") == room.get("current_link")), None)
    comments = [{"user_id": c.get("user_id", ""), "text": c.get("text", "")} for c in case.get("comments") or []]
    return {
        "request_id": request_id,
        "room_id": room.get("room_id", ""),
        "turn": 1,
        "harness_version": harness.version(),
        "instructions": harness.instructions,
        "comments": comments,
        "merged_text": "\n".join(c["text"] for c in comments),
        "room": {
            "room_id": room.get("room_id", ""),
            "current_link": room.get("current_link"),
            "previous_link": room.get("previous_link"),
            "viewer_count": room.get("viewer_count"),
            "campaign": room.get("campaign"),
            "lineup": [{"link_id": i.get("link_id"), "title": i.get("title"), "available": (i.get("stock") or 0) > 0}
                       for i in sorted(catalog, key=lambda i: int(i.get("link_id") or 0))],
        },
        "product": product_view(current) if current else None,
        "faq": list((current or {}).get("faq") or []),
        "skills": [
            {"id": s.id, "kind": s.kind, "description": s.description, "tools": list(s.tools)}
            for s in harness.skills
        ],
        "loaded_skills": [],
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in harness.tools],
        "rules": harness.rules.model_dump(mode="json"),
        "memory": [],
        "transcript": [],
        "limits": harness.limits.model_dump(mode="json"),
    }


class Sandbox:
    """The case's catalog behind the backend operations, with the case's faults."""

    def __init__(self, case: dict[str, Any]):
        self.catalog = {i["link_id"]: i for i in case.get("catalog") or []}
        self.faults: dict[str, str] = dict(case.get("faults") or {})
        self.room = case.get("room") or {}
        self.issued: list[str] = []
        self.pinned: list[int] = []
        users = [c.get("user_id") for c in case.get("comments") or []]
        # like the store: a viewer sees only their own orders
        self.orders: list[dict[str, Any]] = [o for o in case.get("orders") or [] if o.get("user_id") in users]

    def run(self, operation: str, args: dict[str, Any]) -> tuple[bool, Any, str | None, str | None]:
        op = OPERATIONS[operation]
        fault = self.faults.get(op.capability)
        if fault == "timeout":
            return False, None, "timeout", f"{operation} timed out"
        if fault == "permission_denied":
            return False, None, "permission_denied", f"{operation}: permission denied"
        if fault == "malformed":
            return False, None, "malformed", f"{operation} returned a malformed result"
        item = self.catalog.get(args.get("link_id")) if "link_id" in args else None
        if operation == "product.by_link":
            return (True, product_view(item), None, None) if item else (False, None, "not_found", "no such link")
        if operation == "product.search":
            from livehost.policy.reference import stems  # keyword match on word stems, like PostgreSQL FTS

            q = stems(str(args.get("query", "")))
            def searchable(i: dict[str, Any]) -> str:  # like the store: title, SKU, attribute keys and values
                attrs = i.get("attributes") or {}
                values = " ".join(" ".join(map(str, v)) if isinstance(v, list) else str(v)
                                  for v in attrs.values() if isinstance(v, str | list))
                return f"{i.get('title', '')} {i.get('sku', '')} {' '.join(map(str, attrs))} {values}"

            hits = [product_view(i) for i in self.catalog.values() if q & stems(searchable(i))]
            return True, {"products": hits}, None, None
        if operation == "inventory.get":
            if not item:
                return False, None, "not_found", "no such link"
            return True, {"link_id": item["link_id"], "stock": item.get("stock", 0)}, None, None
        if operation == "coupon.list":
            if not item:
                return False, None, "not_found", "no such link"
            return True, {"link_id": item["link_id"], "coupons": list(item.get("coupons") or [])}, None, None
        if operation == "coupon.issue":
            self.issued.append(str(args.get("code")))
            return True, {"issued": True, "code": args.get("code")}, None, None
        if operation == "faq.search":
            items = [item] if item else list(self.catalog.values())
            return True, {"results": [f for i in items for f in i.get("faq") or []]}, None, None
        if operation == "room.pin_product":
            if not item:
                return False, None, "not_found", "no such link"
            self.pinned.append(item["link_id"])
            return True, {"pinned": True, "link_id": item["link_id"]}, None, None
        if operation == "order.status":
            wanted = str(next(iter(args.values()), "")).strip().lstrip("#").upper()
            order = next((o for o in self.orders if str(o.get("order_id", "")).upper() == wanted), None)
            if order is None:
                return False, None, "not_found", "no such order"
            return True, {k: order.get(k) for k in ("order_id", "status", "carrier", "eta")}, None, None
        return False, None, "unknown_operation", operation


@dataclass
class LoopResult:
    responded: bool
    reply: str | None
    actions: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    skills_loaded: list[str] = field(default_factory=list)
    corrections: list[str] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)


def run_loop(
    decide: Callable[[dict[str, Any]], dict[str, Any] | str],
    harness: Harness,
    case: dict[str, Any],
    max_corrections: int = 3,
) -> LoopResult:
    """Minimal agent loop: tool-argument check, skill-load requirement, turn limit, identical-call cap."""
    ctx = build_context(harness, case)
    sandbox = Sandbox(case)
    out = LoopResult(responded=False, reply=None, context=ctx)
    transcript: list[dict[str, Any]] = ctx["transcript"]
    reply_ids = {s.id for s in harness.skills if s.kind == "reply"}
    calls_seen: dict[str, int] = {}
    for turn in range(1, harness.limits.max_turns + 1):
        ctx["turn"] = turn
        raw = decide(copy.deepcopy(ctx))
        parsed = parse_action(raw if isinstance(raw, str) else json.dumps(raw))
        action = parsed.to_action()
        out.actions.append(action)

        def correct(hook: str, reason: str, turn: int = turn) -> None:
            out.corrections.append(reason)
            transcript.append({"turn": turn, "kind": "correction", "name": hook,
                               "data": {"hook": hook, "reason": reason, "message": reason}})

        if len(out.corrections) > max_corrections:
            break
        if parsed.kind == "invalid":
            correct("format", f"invalid action: {parsed.error}")
        elif parsed.kind == "load_skill":
            skill = harness.skill(parsed.skill or "")
            if skill is None:
                correct("skill", f"unknown skill {parsed.skill!r}")
                continue
            transcript.append({"turn": turn, "kind": "skill_load", "name": skill.id, "data": {"skill": skill.id}})
            ctx["loaded_skills"].append({"id": skill.id, "body": skill.body})
            out.skills_loaded.append(skill.id)
        elif parsed.kind == "call_tool":
            tool = harness.tool(parsed.tool or "")
            if tool is None:
                correct("tool_args", f"unknown tool {parsed.tool!r}")
                continue
            try:
                jsonschema.validate(parsed.arguments, tool.parameters)
            except jsonschema.ValidationError as exc:
                correct("tool_args", f"invalid arguments for {tool.name}: {exc.message}")
                continue
            key = tool.name + json.dumps(parsed.arguments, sort_keys=True)
            calls_seen[key] = calls_seen.get(key, 0) + 1
            if calls_seen[key] > 2:
                break
            transcript.append({"turn": turn, "kind": "tool_call", "name": tool.name,
                               "data": {"tool": tool.name, "arguments": parsed.arguments}})
            op_args = {p: parsed.arguments[a] for p, a in tool.binding.arguments.items() if a in parsed.arguments}
            ok, result, code, message = sandbox.run(tool.binding.operation, op_args)
            out.tool_calls.append({"name": tool.name, "arguments": parsed.arguments, "ok": ok})
            transcript.append({"turn": turn, "kind": "tool_result", "name": tool.name, "data": {
                "call_id": f"c{turn}", "tool": tool.name, "ok": ok, "result": result,
                "error_code": code, "error_message": message}})
        elif parsed.kind == "reply":
            if not any(s in reply_ids for s in out.skills_loaded):
                correct("skill_required", "Load the reply skill that fits this comment before replying")
                continue
            out.responded, out.reply = True, parsed.text
            break
        else:
            break
    return out


def render_prompt(context: dict[str, Any]) -> str:
    """A plain rendering of a policy context, for exercising prompt-input models in tests (the real
    rendering is the harness's prompt pipeline in prompt assembly)."""
    # stable sections first, so llama.cpp / vLLM prefix caching reuses them across requests
    lines = [str(context.get("instructions", "")).strip(), ""]
    lines.append("## Skills (load one with load_skill before replying)")
    lines += [f"- {s['id']} ({s['kind']}): {s['description']}" for s in context.get("skills") or []]
    lines += ["", "## Tools"]
    lines += [f"- {t['name']}: {t['description']} args={json.dumps(t['parameters'].get('properties', {}))}"
              for t in context.get("tools") or []]
    product = context.get("product")
    if product:
        lines += ["", "## Current product", json.dumps(product, ensure_ascii=False)]
    lines += ["", "## Viewer comments"]
    lines += [f"- {c.get('text', '')}" for c in context.get("comments") or []]
    transcript = context.get("transcript") or []
    if transcript:
        lines += ["", "## This request so far"]
        lines += [f"- {e.get('kind')}: {json.dumps(e.get('data'), ensure_ascii=False)}" for e in transcript]
    lines += ["", 'Next action, one JSON object ("action": load_skill | call_tool | reply | no_reply):']
    return "\n".join(lines)
