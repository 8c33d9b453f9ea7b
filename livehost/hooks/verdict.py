from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

VerdictKind = Literal["pass", "correct", "reject", "drop"]


@dataclass(frozen=True)
class Verdict:
    hook: str
    kind: str
    verdict: VerdictKind
    reason: str = ""
    message: str = ""  # what the policy is told on a correction

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def failed(self) -> bool:
        return self.verdict != "pass"
