"""What grading produces: each judge's result, the composition, the graded case.

These records flow one way: the engine makes JudgeResults, the reward modes make
a Composition from them, and output writes a Grading to the out dir.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs


class Status(enum.StrEnum):
    """How a judge ended (judges.json `status`)."""

    OK = "ok"
    SKIPPED = "skipped"
    ERROR = "error"
    TIMEOUT = "timeout"


JudgeValue = bool | float
# The details key of a judge that read a test report: its tests, for ctrf.json (output.py);
# judges.json leaves them out (it has the counts and the failing names).
CTRF_DETAILS = "ctrf"
SCRIPT_BUILTIN = "tests/script"  # the builtin `--reward-keys native` takes the keys of
# The details keys of a `tests/script` judge that `--reward-keys native` reads (output.py):
# the numbers of the reward file the task's script wrote, and whether the judge's value is
# that file's own (false: the script timed out, or the file was not usable as a reward).
SCRIPT_REWARDS = "rewards"
SCRIPT_CREDITED = "credited"


@attrs.frozen
class JudgeResult:
    """value is set only when status is ok; error only when status is error or timeout.

    `kind` is the judge's kind (check, module, builtin, llm); judges.json calls it
    `judge_type`, as eval-yaml.md does.
    """

    name: str
    kind: str
    status: Status
    value: JudgeValue | None = None
    rationale: str | None = None
    error: str | None = None
    duration_s: float = 0.0
    details: Mapping[str, Any] = MappingProxyType({})

    @property
    def failed(self) -> bool:
        """Errored or timed out: the judge produced no value it should have."""
        return self.status in (Status.ERROR, Status.TIMEOUT)

    def to_json(self) -> dict[str, Any]:
        """The judges.json per_judge entry (eval-yaml.md, 'Per-judge records')."""
        entry = {
            "value": self.value,
            "rationale": self.rationale,
            "status": self.status.value,
            "error": self.error,
            "judge_type": self.kind,
            "duration_s": round(self.duration_s, 4),
        }
        entry.update((key, value) for key, value in self.details.items() if key != CTRF_DETAILS)
        return entry


@attrs.frozen
class Composition:
    """The reward and how it was reached, written to judges.json as `composition`."""

    reward: float
    mode: str
    gate_enabled: bool
    gate_failed: tuple[str, ...]
    contributions: Mapping[str, float]
    weights: Mapping[str, float] = MappingProxyType({})
    warnings: tuple[str, ...] = ()
    on_error: str = "drop"  # the reward block's judge-error policy
    errored: tuple[str, ...] = ()  # judges that errored or timed out

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "gate": {
                "enabled": self.gate_enabled,
                "passed": not self.gate_failed,
                "failed_judges": list(self.gate_failed),
            },
            "contributions": dict(self.contributions),
            "on_error": self.on_error,
            "errored_judges": list(self.errored),
            "warnings": list(self.warnings),
        }


@attrs.frozen
class Grading:
    """One graded case: everything the output files are written from."""

    config_name: str
    results: tuple[JudgeResult, ...]
    composition: Composition
    case_warnings: tuple[str, ...] = ()
    task_input_source: str | None = None  # where `inputs` came from (None: nowhere)
    task_input_trusted: bool = False
    case_id: str | None = None  # the id the dataset was asked for (None: eval.yaml has none)
    dataset_entry: str | None = None  # the dataset entry that id found (None: none)
    step: str | None = None  # the execution step graded (None: the whole eval)
    reward_rule: str = ""  # how the reward was composed, in words (the mode's describe())

    @property
    def reward(self) -> float:
        return self.composition.reward
