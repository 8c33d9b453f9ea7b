"""Fault injection for the sandbox tools (CASES.md ``faults``): per capability of an operation
(``product``, ``inventory``, ``coupon``, ``order``, ``faq``) one of ``timeout``, ``malformed``,
``permission_denied``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from livehost.commerce.operations import OPERATIONS

FAULT_KINDS: tuple[str, ...] = ("timeout", "malformed", "permission_denied")
CAPABILITIES: tuple[str, ...] = tuple(sorted({op.capability for op in OPERATIONS.values()}))

# What a broken backend sends back: valid JSON, wrong shape (fails every result schema).
MALFORMED_RESULT: dict[str, Any] = {"status": 502, "body": "<html>Bad Gateway</html>", "data": None}


class FaultInjector:
    """Which capability fails, and how. Unknown capabilities or kinds are rejected up front."""

    def __init__(self, faults: Mapping[str, str] | None = None):
        clean: dict[str, str] = {}
        for capability, kind in (faults or {}).items():
            if capability not in CAPABILITIES:
                raise ValueError(f"unknown fault capability {capability!r}; known: {', '.join(CAPABILITIES)}")
            if kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault {kind!r} for {capability!r}; known: {', '.join(FAULT_KINDS)}")
            clean[capability] = kind
        self._faults = clean

    @classmethod
    def from_case(cls, case: Mapping[str, Any]) -> FaultInjector:
        return cls(case.get("faults") or {})

    def fault_for(self, capability: str) -> str | None:
        return self._faults.get(capability)

    def as_dict(self) -> dict[str, str]:
        return dict(self._faults)

    def __bool__(self) -> bool:
        return bool(self._faults)

    def __repr__(self) -> str:
        return f"FaultInjector({self._faults!r})"
