"""Parsing ReAct output (``Thought: … Action: … Action Input: …`` or ``Final Answer: …``) into the
same :class:`~livehost.policy.actions.ParsedAction` the rest of the request path understands."""

from __future__ import annotations

import re

from livehost.policy.actions import ParsedAction, loads_object, strip_reasoning
from livehost.react.prompt import NO_REPLY

_FINAL = re.compile(r"final\s*answer\s*:", re.IGNORECASE)
_ACTION = re.compile(r"^\s*action\s*\d*\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_INPUT = re.compile(r"action\s*\d*\s*input\s*\d*\s*:", re.IGNORECASE)
_NO_REPLY = re.compile(rf"^\W*{NO_REPLY}\W*$|^\W*(no[ _-]?reply|none)\W*$", re.IGNORECASE)

FORMAT_HELP = ("Invalid Format: write 'Action:' and 'Action Input:' (a JSON object) to use a tool, "
               "or 'Final Answer:' to answer.")


def parse_react(raw: str) -> ParsedAction:
    """Never raises; invalid output carries an ``error`` the agent sees as its next observation."""
    if not isinstance(raw, str):
        return ParsedAction("invalid", error=FORMAT_HELP)
    text = strip_reasoning(raw).split("\nObservation:")[0]
    action = _ACTION.search(text)
    final = _FINAL.search(text)
    if action is not None and (final is None or action.start() < final.start()):
        tool = action.group(1).strip().strip("`'\"[]() ")
        if not tool:
            return ParsedAction("invalid", error=FORMAT_HELP)
        rest = text[action.end():]
        inp = _INPUT.search(rest)
        arguments: dict[str, object] = {}
        repaired = False
        if inp is not None:
            body = rest[inp.end():].strip()
            if body and body.lower() not in ("{}", "none", "null", ""):
                obj = loads_object(body)
                if obj is None:
                    return ParsedAction("invalid", error=f"Invalid Format: Action Input for {tool} is not a JSON "
                                                         "object.")
                arguments = obj
        else:
            repaired = True
        return ParsedAction("call_tool", tool=tool, arguments=arguments, repaired=repaired)
    if final is not None:
        answer = text[final.end():].strip()
        if not answer:
            return ParsedAction("invalid", error="Invalid Format: the Final Answer is empty.")
        if _NO_REPLY.match(answer):
            return ParsedAction("no_reply", reason="the agent chose not to answer")
        return ParsedAction("reply", text=answer)
    return ParsedAction("invalid", error=FORMAT_HELP)
