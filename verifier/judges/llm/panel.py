"""`panel: [model, ...]`: several models grade the case, and one rule combines them.

One model's bias is the reward's bias; a panel of different models, as inspect_ai's
model-graded scorers take, averages it out. Each member asks its own `samples` and
reduces them as a single-model judge does; the members' values are then combined:

- `median` (the default for scores): the median; on an integer scale the lower
  median, so the value stays on the scale; an even panel of a fractional scale
  takes the mean of the two middle values. On pass/fail it is `majority`.
- `majority` (the default for pass/fail): pass/fail passes only when more than half
  the members pass (an even split fails); numbers take the most common value, a tie
  between values the lowest of them.
- `mean`: the arithmetic mean (numbers only).
- `min`: the lowest value; pass/fail passes only when every member passes.

A member without a value (its endpoint failed, its answers were unusable) is left
out when more than half the panel has one, and recorded; otherwise the judge is an
error. Under `min` every member must answer: a missing member might have been the
minimum. `agreement` is the share of members whose value equals the combined one.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence

from verifier.judges.llm.answer_scale import AnswerScale


def default_rule(scale: AnswerScale) -> str:
    return "majority" if scale.kind == "pass_fail" else "median"


def enough_members(rule: str, answered: int, members: int) -> bool:
    """Whether the members that answered can stand for the panel under rule."""
    if rule == "min":
        return answered == members
    return answered * 2 > members


def combine(values: Sequence[float], rule: str, *, discrete: bool) -> float:
    """Values (pass/fail as 1.0/0.0) combined by rule; `discrete`: keep a value that is
    one of the inputs' scale points (an integer scale, pass/fail, a discrete criterion)."""
    if not values:
        raise ValueError("no values to combine")
    if rule == "min":
        return min(values)
    if rule == "mean":
        return math.fsum(values) / len(values)
    if rule == "majority":
        counts = Counter(values)
        top = max(counts.values())
        return min(value for value, count in counts.items() if count == top)
    return statistics.median_low(values) if discrete else statistics.median(values)


def combine_pass_fail(passed: Sequence[bool], rule: str) -> bool:
    """Pass/fail members: min is all pass; every other rule a strict majority."""
    if rule == "min":
        return all(passed)
    return sum(passed) * 2 > len(passed)


def agreement(values: Sequence[float], combined: float) -> float:
    return sum(1 for value in values if value == combined) / len(values)
