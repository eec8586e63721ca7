"""An LLM judge entry's own keys, as read by verifier.judges.kinds.llm.

Only records here: the kind module imports this one on every load, so what acts on
these keys (verifier.judges.llm.criteria, panel, guard, pricing) is imported by
prepare() alone, for a config that has an LLM judge.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from types import MappingProxyType

import attrs


@attrs.frozen
class CriterionSpec:
    """One `criteria:` entry, in rewardkit's shape (its `[[criterion]]` tables)."""

    name: str
    description: str
    type: str = "binary"  # binary, likert, numeric or rubric
    points: int = 5  # likert: answers 1..points
    low: float = 0.0  # numeric: `min`
    high: float = 1.0  # numeric: `max`
    levels: tuple[str, ...] = ()  # rubric: answers 0..len(levels)-1, each level described
    weight: float = 1.0
    negate: bool = False  # the criterion describes a fault: its value is 1 - what was answered
    required: bool = False  # the judge's value is its lowest unless this criterion passes
    optional: bool = False  # rewardkit's: not counted by `aggregate: required-pass`
    id: str | None = None


@attrs.frozen
class MemberSpec:
    """One `panel:` member: a model as `model:` takes it, and optionally its provider."""

    model: str
    provider: str | None = None


@attrs.frozen
class GuardSpec:
    """`guard:` what to do when the case material holds text aimed at the grader."""

    on_detect: str = "flag"  # flag: record the finding; zero: the judge's lowest value
    ask_model: bool = False  # also ask the judge's model, in the same request


@attrs.frozen
class PriceSpec:
    """USD per million tokens."""

    input: float
    output: float


@attrs.frozen
class LLMSpec:
    prompt_key: str  # which of PROMPT_KEYS the prompt came from ("criteria": none given)
    prompt: str  # the template text (prompt_file: the file's text)
    model: str | None = None
    samples: int = 1
    context: tuple[PurePosixPath, ...] = ()
    provider: str | None = None
    builtin: str | None = (
        None  # an LLM builtin's name: its arguments are declared, its scale pass/fail
    )
    context_tokens: int | None = None  # what the model takes; None: by the models' names
    criteria: tuple[CriterionSpec, ...] = ()
    aggregate: str | None = None  # the criteria's rule (with criteria), else the panel's
    threshold: float | None = None  # aggregate: threshold
    panel: tuple[MemberSpec, ...] = ()
    panel_aggregate: str | None = None  # `panel: {models, aggregate}`, or `aggregate`
    guard: GuardSpec | None = None
    prices: Mapping[str, PriceSpec] = MappingProxyType({})  # model -> price (`prices:`)
    prices_source: str | None = None  # where `prices` came from: eval.yaml or its file
    # rewardkit's judge keys (verifier.judges.llm.judge_file reads its TOML files too):
    mode: str = "batched"  # individual: one request per criterion
    reasoning_effort: str | None = None  # None: not sent
    reference: PurePosixPath | None = None  # a reference solution (file or dir) beside eval.yaml
    files: tuple[PurePosixPath, ...] | None = None  # the case files it grades; None: every one
    timeout_s: float | None = None  # a judge file's timeout: the judge's, unless eval.yaml's
    judge_file: PurePosixPath | None = None  # the rewardkit TOML the keys above came from


CRITERION_TYPES = ("binary", "likert", "numeric", "rubric")
CRITERIA_RULES = ("weighted-mean", "all-pass", "any-pass", "threshold", "required-pass")
PASS_RULES = frozenset(CRITERIA_RULES) - {"weighted-mean"}  # give pass or fail
PANEL_RULES = ("median", "mean", "majority", "min")
# rewardkit's spellings of its rules (`weighted_mean`, ...), and `weighted`.
RULE_ALIASES = {
    **{rule.replace("-", "_"): rule for rule in CRITERIA_RULES},
    "weighted": "weighted-mean",
}
MODES = ("batched", "individual")
# What rewardkit (through LiteLLM) accepts as reasoning_effort.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
GUARD_ACTIONS = ("flag", "zero")
GUARD_ALIASES = {"penalize": "zero"}  # rewardkit's `guard = "penalize"`
