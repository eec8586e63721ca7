"""The judge's scale as the model sees it: what the prompt asks for, what an answer must be.

The scale comes from eval.yaml (score_range / feedback_type), never from the
model: the prompt states it, the answer schema has the matching field (`score`
or `passed`), and each answer is checked against it (verifier.scale, the one
check every judge's value goes through) before any sample is reduced, so one
wild sample cannot hide inside a median.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from verifier.config import EvalConfig, JudgeConfig
from verifier.scale import JudgeValue, Scale, ScaleError

OutputMode = Literal["tool", "json", "text"]
TOOL_NAME = "submit_grade"


class AnswerError(ValueError):
    """The model answered, but not with a usable grade; the message says what was wrong."""


@attrs.frozen
class AnswerScale:
    kind: Literal["pass_fail", "number"]
    low: float = 0.0
    high: float = 1.0
    integer: bool = False  # ask for whole numbers
    integer_required: bool = False  # feedback_type int: a fraction is an error

    @classmethod
    def of(cls, judge: JudgeConfig, config: EvalConfig) -> AnswerScale:
        """feedback_type bool is pass/fail; anything else is a number on the judge's range
        (its score_range, else the reward block's deprecated one, else [1, 5])."""
        if judge.feedback_type == "bool":
            return cls(kind="pass_fail")
        low, high = config.normalization_range(judge.name)
        whole = low.is_integer() and high.is_integer()
        integer = judge.feedback_type == "int" or (
            judge.feedback_type is None and whole and high - low >= 2
        )
        return cls(
            kind="number",
            low=low,
            high=high,
            integer=integer,
            integer_required=judge.feedback_type == "int",
        )

    @property
    def field(self) -> str:
        return "passed" if self.kind == "pass_fail" else "score"

    @property
    def judge_scale(self) -> AnswerScale:
        """The scale of the judge's value: this one (a criteria judge's form has its own)."""
        return self

    def example(self) -> str:
        """An answer as the prompt shows it."""
        value = (
            "<true or false>"
            if self.kind == "pass_fail"
            else f"<a number from {self.low:g} to {self.high:g}>"
        )
        return f'{{"rationale": "<why, in a few sentences>", "{self.field}": {value}}}'

    def answer_fields(self) -> str:
        """The fields the answer carries, as the prompt names them."""
        return f"`rationale` and `{self.field}`"

    def describe(self) -> str:
        """The scale in words, for the prompt."""
        if self.kind == "pass_fail":
            return (
                "pass or fail. Set `passed` to true when the work meets the rubric, "
                "false when it does not."
            )
        what = "an integer" if self.integer else "a number (fractions allowed)"
        return (
            f"{what} from {self.low:g} (worst) to {self.high:g} (best), inclusive. "
            f"Put it in `score`; a score outside [{self.low:g}, {self.high:g}] is invalid."
        )

    def schema(self) -> dict[str, Any]:
        """The JSON schema of an answer: rationale first, so the model reasons before it grades."""
        value: dict[str, Any]
        if self.kind == "pass_fail":
            value = {"type": "boolean", "description": "true when the work passes the rubric"}
        else:
            value = {
                "type": "integer" if self.integer_required else "number",
                "description": f"from {self.low:g} (worst) to {self.high:g} (best)",
            }
        return {
            "type": "object",
            "properties": {
                "rationale": {"type": "string", "description": "why, in a few sentences"},
                self.field: value,
            },
            "required": ["rationale", self.field],
        }

    def check(self, value: JudgeValue) -> JudgeValue:
        """value if it is on the scale, else AnswerError."""
        if self.kind == "pass_fail":
            scale = Scale(feedback_type="bool")
        else:
            scale = Scale(
                feedback_type="int" if self.integer_required else "float",
                score_range=(self.low, self.high),
            )
        try:
            return scale.check(value)
        except ScaleError as error:
            raise AnswerError(f"answered {error}") from None
