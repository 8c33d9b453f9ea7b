"""Checks a result line against its case's own ``expect`` block (CASES.md): respond, must_include
groups, must_not_include, numbers_from_catalog_only. Not a judge: the evaluation judge scores."""

from __future__ import annotations

import json
import re
from typing import Any

from livehost.hooks.step import strip_control_tokens

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
REFUSAL = re.compile(r"\b(sorry|can't|cannot|can not|unable|not able|won't)\b", re.IGNORECASE)


def _norm(raw: str) -> str | None:
    try:
        return f"{float(raw.replace(',', '')):g}"
    except ValueError:
        return None


def numbers(text: str) -> set[str]:
    return {n for n in (_norm(m) for m in NUMBER.findall(text)) if n is not None}


def case_numbers(case: dict[str, Any]) -> set[str]:
    """Every number in the case's catalog, room and campaign data."""
    return numbers(json.dumps({"catalog": case.get("catalog"), "room": case.get("room")}, ensure_ascii=False))


def check(case: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """``{"passed", "respond", "missing", "forbidden", "invented_numbers"}`` for one case's result."""
    expect = case.get("expect") or {}
    reply = result.get("reply") or ""
    responded = bool(result.get("responded"))
    spoken = strip_control_tokens(reply)
    text = spoken.lower()
    if expect.get("respond", True):
        respond_ok = responded and bool(spoken.strip())
    else:  # no answer, or a refusal
        respond_ok = not responded or bool(REFUSAL.search(spoken))
    missing = [group for group in expect.get("must_include") or []
               if not any(str(alt).lower() in text for alt in group)]
    forbidden = [bad for bad in expect.get("must_not_include") or [] if str(bad).lower() in text]
    invented = sorted(numbers(spoken) - case_numbers(case)) if expect.get("numbers_from_catalog_only") else []
    return {
        "passed": respond_ok and not missing and not forbidden and not invented,
        "respond": respond_ok,
        "missing": missing,
        "forbidden": forbidden,
        "invented_numbers": invented,
    }
