"""A judge's declared scale (feedback_type, score_range) and the one check of a value on it.

Every value a judge produces goes through `Scale.check`, whichever kind of judge
produced it (a Python function's return value, an LLM's answer): a value off the
declared scale is an error, never clamped or guessed at, because a guessed value
would silently steer training.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Literal

import attrs

FeedbackType = Literal["bool", "int", "float"]
ScoreRange = tuple[float, float]
JudgeValue = bool | float
DEFAULT_SCORE_RANGE: ScoreRange = (1.0, 5.0)


class ScaleError(ValueError):
    """The value is not on the judge's scale; str() completes 'returned ...' or 'answered ...'."""


@attrs.frozen
class Scale:
    feedback_type: FeedbackType | None = None
    score_range: ScoreRange | None = None

    def check(self, value: Any) -> JudgeValue:
        """value as a bool or a finite float, or ScaleError saying why it is not on the scale."""
        if isinstance(value, bool):
            if self.feedback_type in ("int", "float"):
                raise ScaleError(f"{value} but feedback_type is {self.feedback_type}")
            return value
        if not isinstance(value, numbers.Real):
            shown = "None" if value is None else type(value).__name__
            raise ScaleError(f"{shown}; a judge must return a bool or a finite number")
        number = float(value)
        if not math.isfinite(number):
            raise ScaleError(f"{number}, not a finite number")
        if self.feedback_type == "bool":
            raise ScaleError(f"{number:g} but feedback_type is bool")
        if self.feedback_type == "int" and not number.is_integer():
            raise ScaleError(f"{number:g} but feedback_type is int")
        if self.score_range is not None:
            low, high = self.score_range
            if not low <= number <= high:
                raise ScaleError(f"{number:g}, outside its score_range [{low:g}, {high:g}]")
        return number
