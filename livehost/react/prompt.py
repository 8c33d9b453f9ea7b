"""The fixed ReAct prompt: the tools of the harness's tool registry (names, descriptions, argument
schemas — read from the harness, never named here), the live room, the question and the scratchpad.

Two renderings of the same turn, as for harness requests:

- ``text``: the prompt for text-input models, in ChatML (the chat template of the served
  ``policy_llm`` family; a ChatML prompt is passed through unwrapped by that model). The assistant
  turn holds the scratchpad and ends with ``Thought:`` so the model continues the ReAct format;
- ``context``: the same facts as JSON for structured-input models, with ``"mode": "react"``, no
  skills, no product configuration, no FAQ (the reference policy answers it in ReAct format).
"""

from __future__ import annotations

import json
from typing import Any

from livehost.agent import state as st
from livehost.agent.prompt import RenderedPrompt, SectionInfo, estimate_tokens
from livehost.harness.model import Harness

NO_REPLY = "NO_REPLY"
FORMAT_KINDS = ("model_output", "tool_result", "correction")

INSTRUCTIONS = """You are the host of a live-stream shopping room. Answer the viewers' comment as best \
you can, briefly and truthfully. You have access to the following tools:

{tools}

Use the following format:

Question: the viewers' comment
Thought: you should always think about what to do
Action: the action to take, exactly one of [{tool_names}]
Action Input: the arguments of the action, as a JSON object
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can repeat N times)
Thought: I now know the final answer
Final Answer: the reply to say to the viewers, or {no_reply} when the comment should not be answered

Begin!"""


def tool_lines(harness: Harness) -> str:
    return "\n".join(f"{t.name}: {t.description} Arguments (JSON Schema): {json.dumps(t.parameters)}"
                     for t in harness.tools)


def room_line(state: dict[str, Any]) -> str:
    room = st.room(state)
    parts = [f"room {state['room_id']}"]
    if room.get("current_link") is not None:
        parts.append(f"current link {room['current_link']}")
    campaign = room.get("campaign")
    if campaign:
        parts.append(f"campaign {json.dumps(campaign, ensure_ascii=False)}")
    return "Live room: " + ", ".join(parts) + "."


def observation(data: dict[str, Any]) -> str:
    if data.get("ok"):
        return json.dumps(data.get("result"), ensure_ascii=False, default=str)
    return json.dumps({"error": {"code": data.get("error_code"), "message": data.get("error_message")}},
                      ensure_ascii=False)


def scratchpad(state: dict[str, Any]) -> str:
    """Earlier turns of this request: what the model wrote, then what it observed."""
    lines: list[str] = []
    for step in st.steps(state, *FORMAT_KINDS):
        data = step["data"]
        if step["kind"] == "model_output":
            raw = str(data.get("raw") or "").split("Observation:")[0].strip()
            if raw:
                lines.append(raw if raw.startswith("Thought:") else f"Thought: {raw}")
        elif step["kind"] == "tool_result":
            lines.append(f"Observation: {observation(data)}")
        else:
            lines.append(f"Observation: {data.get('message') or data.get('reason')}")
    return "\n".join(lines)


def build_context(harness: Harness, state: dict[str, Any]) -> dict[str, Any]:
    room = st.room(state)
    transcript = [{"turn": s["turn"], "kind": s["kind"], "name": s["name"], "data": s["data"]}
                  for s in st.steps(state, "tool_call", "tool_result", "correction")]
    return {
        "mode": "react",
        "request_id": state["request_id"],
        "room_id": state["room_id"],
        "turn": state["turn"],
        "harness_version": state["harness_version"],
        "instructions": "",
        "comments": [{"user_id": c["user_id"], "text": c["text"]} for c in state["comments"]],
        "merged_text": state["merged_text"],
        "room": {"room_id": state["room_id"], "current_link": room.get("current_link"),
                 "previous_link": room.get("previous_link"),
                 "viewer_count": room.get("viewer_count"), "campaign": room.get("campaign")},
        "product": None,
        "faq": [],
        "skills": [],
        "loaded_skills": [],
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters}
                  for t in harness.tools],
        "rules": {},
        "memory": [],
        "transcript": transcript,
        "limits": harness.limits.model_dump(mode="json"),
    }


def render(harness: Harness, state: dict[str, Any]) -> RenderedPrompt:
    system = INSTRUCTIONS.format(tools=tool_lines(harness), tool_names=", ".join(t.name for t in harness.tools),
                                 no_reply=NO_REPLY)
    user = f"{room_line(state)}\nQuestion: {state['merged_text']}"
    pad = scratchpad(state)
    assistant = f"{pad}\nThought:" if pad else "Thought:"
    text = (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n{assistant}")
    sections = [SectionInfo("react_instructions", "react", estimate_tokens(system), False),
                SectionInfo("react_question", "react", estimate_tokens(user), False),
                SectionInfo("react_scratchpad", "react", estimate_tokens(assistant), False)]
    return RenderedPrompt(text, build_context(harness, state), sections, sum(s.tokens for s in sections))
