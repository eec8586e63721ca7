"""What every judge kind turns into, and how a judge's return value is read.

A judge's return value is read strictly: anything that is not a bool or a finite
number inside the declared scale becomes an error record, because a value that
is guessed at (None as 0, "4" as 4, NaN clamped) would silently steer training.
"""

from __future__ import annotations

import builtins
import math
import numbers
from collections.abc import Callable
from types import CodeType
from typing import Any

import attrs

from verifier.config import JudgeConfig
from verifier.results import JudgeValue

MAX_RATIONALE_CHARS = 20_000
CONDITION_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "len", "any", "all", "min", "max", "sum", "abs", "round", "bool", "int", "float", "str",
    )
}  # fmt: skip


class JudgeReturnError(ValueError):
    """The judge returned something that is not a usable value."""


@attrs.frozen(slots=True)
class PreparedJudge:
    """A judge ready to run: `call(record)` returns the judge's raw return value."""

    config: JudgeConfig
    call: Callable[[dict[str, Any]], Any]
    condition: CodeType | None = None
    pool: str = "cpu"

    def should_run(self, record: dict[str, Any]) -> bool:
        """The judge's `if:` condition for this case (True when there is none)."""
        if self.condition is None:
            return True
        names = {
            "outputs": record,
            "annotations": record.get("annotations", {}),
            "arguments": dict(self.config.arguments),
        }
        return bool(eval(self.condition, {"__builtins__": CONDITION_BUILTINS}, names))


def interpret(returned: Any, config: JudgeConfig) -> tuple[JudgeValue, str | None]:
    """(value, rationale) from what a judge returned, or JudgeReturnError saying why not."""
    value, rationale = _unpack(returned)
    if rationale is not None and not isinstance(rationale, str):
        rationale = str(rationale)
    if rationale is not None and len(rationale) > MAX_RATIONALE_CHARS:
        rationale = rationale[:MAX_RATIONALE_CHARS] + " [cut]"
    return _check_value(value, config), rationale


def _unpack(returned: Any) -> tuple[Any, Any]:
    if isinstance(returned, tuple):
        if len(returned) != 2:
            raise JudgeReturnError(
                f"returned a {len(returned)}-tuple; return a value or (value, rationale)"
            )
        return returned[0], returned[1]
    if isinstance(returned, bool | numbers.Real) or returned is None:
        return returned, None
    if hasattr(returned, "value"):
        return returned.value, getattr(returned, "rationale", None)
    return returned, None


def _check_value(value: Any, config: JudgeConfig) -> JudgeValue:
    if isinstance(value, bool):
        if config.feedback_type in ("int", "float"):
            raise JudgeReturnError(f"returned {value} but feedback_type is {config.feedback_type}")
        return value
    if not isinstance(value, numbers.Real):
        shown = "None" if value is None else type(value).__name__
        raise JudgeReturnError(f"returned {shown}; a judge must return a bool or a finite number")
    number = float(value)
    if not math.isfinite(number):
        raise JudgeReturnError(f"returned {number}, not a finite number")
    if config.feedback_type == "bool":
        raise JudgeReturnError(f"returned {value!r} but feedback_type is bool")
    if config.feedback_type == "int" and not number.is_integer():
        raise JudgeReturnError(f"returned {value!r} but feedback_type is int")
    if config.score_range is not None:
        low, high = config.score_range
        if not low <= number <= high:
            raise JudgeReturnError(
                f"returned {value!r}, outside its score_range [{low:g}, {high:g}]"
            )
    return number
