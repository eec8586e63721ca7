"""`samples: N`: N answers, each a Sample, reduced to one grade, with how far they agreed.

Numbers reduce to the median (the lower median for integer judges, so the
grade stays on the judge's integer scale), pass/fail to the majority (a tie is
not a majority, so it fails). `agreement` is the share of samples equal to the
grade; a grader that disagrees with itself is visible in judges.json.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import attrs

from verifier.judges.llm.answer_scale import AnswerScale
from verifier.judges.llm.parse import Grade


@attrs.frozen
class Sample:
    """One sample's outcome: a grade, or the problem that left it without one."""

    grade: Grade | None
    problem: str | None = None
    latency_s: float = 0.0
    attempts: int = 0
    usage: Mapping[str, int] = MappingProxyType({})
    cached: bool = False
    endpoint_failed: bool = False  # no response at all (vs. an answer that could not be read)
    answer: str | None = None  # an excerpt of an answer that could not be read
    overflowed: bool = False  # the endpoint refused the prompt for its length: a case fact


@attrs.frozen
class Reduced:
    value: bool | float
    agreement: float
    spread: float | None  # max - min, numbers only


def reduce_samples(values: Sequence[bool | float], scale: AnswerScale) -> Reduced:
    """One grade from at least one sample value."""
    if not values:
        raise ValueError("no samples to reduce")
    if scale.kind == "pass_fail":
        passed = sum(1 for value in values if value) * 2 > len(values)
        agreeing = sum(1 for value in values if value == passed)
        return Reduced(value=passed, agreement=agreeing / len(values), spread=None)
    numbers = [float(value) for value in values]
    median = statistics.median_low(numbers) if scale.integer else statistics.median(numbers)
    agreeing = sum(1 for number in numbers if number == median)
    return Reduced(
        value=median, agreement=agreeing / len(numbers), spread=max(numbers) - min(numbers)
    )
