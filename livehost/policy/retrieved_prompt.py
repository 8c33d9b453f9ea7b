"""A small prompt for a small model: the policy context reduced by the reference policy's retrieval.

``policy_llm`` (a 135M-parameter model on CPU) cannot read the harness's whole prompt within the
default budgets. With ``input_format: retrieved_prompt`` in its Triton config, the policy client
renders this prompt from the context JSON instead of sending the assembled one:

- the instructions and the two rules that bound every reply (discount cap, reply length);
- the product on screen in one line, then the few facts that answer the comments best — attribute
  facts phrased as sentences, FAQ answers, campaign rules — ranked with the same BM25 + embedding
  ranking as the reference policy (:func:`livehost.understanding.facts.rank`);
- the skills and tools whose descriptions are closest in meaning to the comments (not all of them),
  with each tool's argument names;
- the loaded skill's body (shortened), the viewer comments as quoted data, and this request's steps
  with tool results shortened.

Nothing here names a shipped skill, tool or section: all of it comes from the context.
"""

from __future__ import annotations

import json
from typing import Any

from livehost.agent.prompt import data_block, quote
from livehost.policy.reference import _STOP, stem
from livehost.understanding import choice
from livehost.understanding.facts import Fact, attribute_facts, campaign_facts, faq_facts, rank

TOP_FACTS = 3
TOP_SKILLS = 2
TOP_TOOLS = 2
SKILL_BODY_CHARS = 400
RESULT_CHARS = 300


def _query(ctx: dict[str, Any]) -> str:
    comments = ctx.get("comments") or []
    text = " ".join(str(c.get("text", "")) for c in comments if isinstance(c, dict))
    return text or str(ctx.get("merged_text") or "")


def _top(query: str, texts: list[str], k: int) -> list[int]:
    if not texts:
        return []
    scores = choice.similarity(query, texts, stem, _STOP)
    return sorted(sorted(range(len(texts)), key=lambda i: -scores[i])[:k])


def _facts(ctx: dict[str, Any], query: str) -> list[str]:
    product = ctx.get("product") or {}
    pool: list[Fact] = []
    if product:
        pool += attribute_facts("It", product.get("attributes") or {})
    pool += faq_facts([(str(f.get("q", "")), str(f.get("a", ""))) for f in ctx.get("faq") or []
                       if isinstance(f, dict)])
    pool += campaign_facts((ctx.get("room") or {}).get("campaign"))
    return [f.sentence for _, f in rank(query, pool, stem, _STOP)[:TOP_FACTS]]


def _short(value: Any, limit: int) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + "…"


def render_retrieved(ctx: dict[str, Any]) -> str:
    query = _query(ctx)
    rules = ctx.get("rules") or {}
    room = ctx.get("room") or {}
    campaign = room.get("campaign") or {}
    cap = campaign.get("max_discount_pct", rules.get("max_discount_pct"))
    lines = [str(ctx.get("instructions", "")).strip(), "", "## Rules"]
    if cap is not None:
        lines.append(f"- Never offer more than {cap}% discount.")
    if rules.get("max_reply_chars"):
        lines.append(f"- Keep replies under {rules['max_reply_chars']} characters.")
    product = ctx.get("product") or {}
    lines += ["", "## Current product"]
    if product:
        lines.append(f"Link {product.get('link_id')}: {quote(product.get('title'))}, "
                     f"{product.get('price')} {product.get('currency') or ''}".rstrip())
    else:
        lines.append(f"(none on screen; current link {room.get('current_link')})")
    facts = _facts(ctx, query)
    if facts:
        lines += ["", "## Relevant facts", data_block("facts", [quote(f) for f in facts])]
    skills = [s for s in ctx.get("skills") or [] if isinstance(s, dict)]
    loaded = [s for s in ctx.get("loaded_skills") or [] if isinstance(s, dict)]
    lines += ["", "## Skills (load_skill with one of these ids before replying)"]
    for i in _top(query, [choice.skill_text(s) for s in skills], TOP_SKILLS):
        lines.append(f"- {skills[i]['id']}: {skills[i].get('description', '')}")
    tools = [t for t in ctx.get("tools") or [] if isinstance(t, dict)]
    lines += ["", "## Tools"]
    for i in _top(query, [choice.tool_text(t) for t in tools], TOP_TOOLS):
        t = tools[i]
        props = (t.get("parameters") or {}).get("properties") or {}
        args = ", ".join(f"{name}: {(schema or {}).get('type', 'any')}" for name, schema in props.items())
        lines.append(f"- {t['name']}({args}): {t.get('description', '')}")
    if loaded:
        lines += ["", "## Loaded skill"]
        for s in loaded[-1:]:
            body = str(s.get("body", "")).strip()
            lines += [f"### {s.get('id')}", body[:SKILL_BODY_CHARS] + ("…" if len(body) > SKILL_BODY_CHARS else "")]
    lines += ["", "## Viewer comments", data_block("viewer_comments", [
        f"{quote(c.get('user_id'))}: {quote(c.get('text'))}" for c in ctx.get("comments") or []
        if isinstance(c, dict)])]
    steps = [t for t in ctx.get("transcript") or [] if isinstance(t, dict)]
    if steps:
        lines += ["", "## This request so far", data_block("transcript", [
            f"{t.get('kind')} {quote(t.get('name') or '')}: {_short(t.get('data'), RESULT_CHARS)}"
            for t in steps[-6:]])]
    lines += ["", "Steps: call a tool for a fact you lack, load a skill, then reply with the facts shown.",
              'Next action, one JSON object ("action": load_skill | call_tool | reply | no_reply):']
    return "\n".join(lines)
