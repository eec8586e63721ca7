"""The record of one judge's run: what the engine produces and everything downstream reads."""

from __future__ import annotations

import enum
from typing import Any

import attrs


class Status(enum.StrEnum):
    OK = "ok"
    SKIPPED = "skipped"
    ERROR = "error"
    TIMEOUT = "timeout"


JudgeValue = bool | float


@attrs.frozen(slots=True)
class JudgeResult:
    """value is set only when status is ok; error only when status is error or timeout."""

    name: str
    judge_type: str
    status: Status
    value: JudgeValue | None = None
    rationale: str | None = None
    error: str | None = None
    duration_s: float = 0.0
    details: dict[str, Any] = attrs.field(factory=dict)

    def as_record(self) -> dict[str, Any]:
        """The judges.json per_judge entry (eval-yaml.md, 'Per-judge records')."""
        record = {
            "value": self.value,
            "rationale": self.rationale,
            "status": self.status.value,
            "error": self.error,
            "judge_type": self.judge_type,
            "duration_s": round(self.duration_s, 4),
        }
        record.update(self.details)
        return record
