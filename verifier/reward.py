"""Judge results + the reward block -> one reward in [0, 1] and how it was reached.

One class per mode of the reward block (reward-api.md, which wins over
reward-block.md): the default composition, a single judge, a weighted sum, an
expression. Each parses its keys of the block, composes, describes itself for
`verifier check` and names the judges it normalizes. Composition is pure: the
rules here are the documented contract, so they are tested with plain values.
Adding a mode is one class here plus its place in REWARD_MODES.

Every mode also carries the block's judge-error policy, `on_error`: `drop` (the
documented rules: an errored judge has no value; in `weighted` it is dropped and
the other weights renormalize, so the reward can go up), `zero` (an errored judge
contributes 0.0, and an errored boolean judge fails the gate: what RL training
wants, since an error can then only lower a reward) or `fail` (no reward at all;
the pipeline refuses to write one, see verifier.grading).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from verifier.errors import ConfigError, did_you_mean
from verifier.formula import Formula, FormulaError, FormulaRuntimeError, parse_formula
from verifier.results import Composition, JudgeResult
from verifier.scale import DEFAULT_SCORE_RANGE, JudgeValue, Scale, ScoreRange
from verifier.values import finite_float

ON_ERROR_POLICIES = ("drop", "zero", "fail")


@attrs.frozen
class Judged:
    """The judges' outcomes as a mode sees them."""

    results: Sequence[JudgeResult]
    values: Mapping[str, JudgeValue]  # the judges that have a value
    errored: frozenset[str]  # the judges that errored or timed out
    scales: Mapping[str, Scale]  # each judge's declared scale

    @classmethod
    def of(cls, results: Sequence[JudgeResult], scales: Mapping[str, Scale]) -> Judged:
        values = {result.name: result.value for result in results if result.value is not None}
        errored = frozenset(result.name for result in results if result.failed)
        return cls(results, values, errored, scales)

    def declared_range(self, name: str) -> ScoreRange | None:
        scale = self.scales.get(name)
        return scale.score_range if scale is not None else None

    def is_boolean(self, name: str) -> bool:
        scale = self.scales.get(name)
        return scale is not None and scale.feedback_type == "bool"


@attrs.frozen
class BlockContext:
    """What a mode needs to parse its keys: where they are, which judges exist, and the
    block's common keys (already validated)."""

    source: str
    judge_names: frozenset[str]
    score_range: ScoreRange | None  # the deprecated fallback range
    on_error: str
    warnings: list[str]

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(self.source, f"reward.{key}", problem)


class RewardMode(Protocol):
    """A composition of the judges (read-only members: a mode is an immutable record)."""

    @property
    def mode(self) -> str:
        """The mode's name in judges.json (a class attribute)."""
        ...

    @property
    def keys(self) -> frozenset[str]:
        """The reward-block keys it reads (gate, score_range, on_error aside)."""
        ...

    @property
    def gate(self) -> bool: ...

    @property
    def score_range(self) -> ScoreRange | None:
        """The block's deprecated fallback range."""
        ...

    @property
    def on_error(self) -> str:
        """One of ON_ERROR_POLICIES."""
        ...

    def combine(self, judged: Judged) -> Composition:
        """The mode's own reward from the judges' outcomes, before any gate."""
        ...

    def describe(self) -> str: ...

    def normalized_judges(self) -> frozenset[str]:
        """The judges whose numbers are normalized over a score_range (not clamped)."""
        ...

    def referenced_names(self) -> Mapping[str, frozenset[str]]:
        """Judge names each key of the block refers to (checked against the judges at load)."""
        ...


class RewardModeClass(Protocol):
    """A mode's class, as REWARD_MODES holds it: whether a block is of the mode, and
    the mode parsed from it."""

    @property
    def keys(self) -> frozenset[str]: ...

    def claims(self, block: Mapping[str, Any], /) -> bool: ...

    def from_block(self, block: Mapping[str, Any], context: BlockContext, /) -> RewardMode: ...


def compose(
    mode: RewardMode, results: Sequence[JudgeResult], scales: Mapping[str, Scale]
) -> Composition:
    """The reward for one case: the mode's composition, zeroed by a failed gate."""
    judged = Judged.of(results, scales)
    composition = attrs.evolve(
        mode.combine(judged), on_error=mode.on_error, errored=tuple(sorted(judged.errored))
    )
    gate_failed = failed_gates(judged, mode.on_error) if mode.gate else ()
    if gate_failed:
        return attrs.evolve(composition, reward=0.0, gate_enabled=True, gate_failed=gate_failed)
    return attrs.evolve(composition, gate_enabled=mode.gate)


def clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def normalize(value: float, score_range: ScoreRange) -> float:
    """Map a value from its scale to [0, 1], clamped."""
    low, high = score_range
    return clamp((value - low) / (high - low))


def failed_gates(judged: Judged, on_error: str) -> tuple[str, ...]:
    """Boolean judges that returned false, and under on_error zero, those that errored."""
    failed = [name for name, value in judged.values.items() if value is False]
    if on_error == "zero":
        failed += sorted(name for name in judged.errored if judged.is_boolean(name))
    return tuple(failed)


def normalization_range(declared: ScoreRange | None, fallback: ScoreRange | None) -> ScoreRange:
    """A judge's own score_range, else the block's deprecated one, else [1, 5]."""
    return declared or fallback or DEFAULT_SCORE_RANGE


def _scaled(
    name: str,
    judged: Judged,
    fallback: ScoreRange | None,
    raw: frozenset[str] = frozenset(),
) -> float:
    """A value as the reward sees it: bools 1/0, raw names clamped, other numbers normalized."""
    value = judged.values[name]
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if name in raw:
        return clamp(value)
    return normalize(value, normalization_range(judged.declared_range(name), fallback))


def _zeroed(judged: Judged, on_error: str, names: frozenset[str]) -> dict[str, float]:
    """Under on_error zero, the errored judges among names, each contributing 0.0."""
    return dict.fromkeys(sorted(judged.errored & names), 0.0) if on_error == "zero" else {}


@attrs.frozen
class DefaultReward:
    """No reward block (or one with only `on_error`): boolean judges gate, numeric judges
    are normalized and averaged."""

    mode = "default"
    keys = frozenset[str]()
    gate: bool = True
    score_range: ScoreRange | None = None
    on_error: str = "drop"

    @classmethod
    def claims(cls, block: Mapping[str, Any]) -> bool:
        return bool(block) and set(block) <= {"on_error"}  # `{}` is weighted, without weights

    @classmethod
    def from_block(cls, block: Mapping[str, Any], context: BlockContext) -> DefaultReward:
        return cls(on_error=context.on_error)

    def combine(self, judged: Judged) -> Composition:
        numeric = {name for name, value in judged.values.items() if not isinstance(value, bool)}
        scores = {name: _scaled(name, judged, None) for name in sorted(numeric)}
        scores.update(
            _zeroed(
                judged,
                self.on_error,
                frozenset(name for name in judged.errored if not judged.is_boolean(name)),
            )
        )
        failed = [result.name for result in judged.results if result.failed]
        warnings: tuple[str, ...] = ()
        if failed_gates(judged, self.on_error):  # compose() zeroes it; nothing else to say
            reward = 0.0
        elif scores:
            reward = sum(scores.values()) / len(scores)
        elif failed:  # every scoring judge errored: unscored, not perfect
            reward = 0.0
            warnings = (f"nothing scored: {', '.join(failed)} errored, so the reward is 0.0",)
        else:  # gates only
            reward = 1.0
        return Composition(
            reward=reward,
            mode=self.mode,
            gate_enabled=True,
            gate_failed=(),
            contributions=scores,
            warnings=warnings,
        )

    def describe(self) -> str:
        return "default (boolean judges gate; numeric judges normalized and averaged)"

    def normalized_judges(self) -> frozenset[str]:
        return frozenset()

    def referenced_names(self) -> Mapping[str, frozenset[str]]:
        return {}


@attrs.frozen
class JudgeReward:
    """`reward.judge`: one judge's value is the reward (an errored judge scores 0.0 under
    every policy but `fail`)."""

    mode = "judge"
    keys = frozenset({"judge", "normalize"})
    judge: str
    normalize: bool = False
    gate: bool = False
    score_range: ScoreRange | None = None
    on_error: str = "drop"

    @classmethod
    def claims(cls, block: Mapping[str, Any]) -> bool:
        return "judge" in block

    @classmethod
    def from_block(cls, block: Mapping[str, Any], context: BlockContext) -> JudgeReward:
        judge = block["judge"]
        clashes = [key for key in ("formula", "weights", "raw") if key in block]
        if clashes:
            raise context.error(
                "judge", f"cannot be combined with {', '.join(clashes)}; pick one mode"
            )
        if not isinstance(judge, str) or judge not in context.judge_names:
            raise context.error(
                "judge",
                f"{judge!r} is not a defined judge{did_you_mean(str(judge), context.judge_names)}",
            )
        return cls(
            judge=judge,
            normalize=_setting(block, "normalize", False),
            gate=_setting(block, "gate", False),
            score_range=context.score_range,
            on_error=context.on_error,
        )

    def combine(self, judged: Judged) -> Composition:
        value = judged.values.get(self.judge)
        warnings: tuple[str, ...] = ()
        if value is None:
            score = 0.0
            warnings = (f"reward.judge {self.judge!r} has no value, so the reward is 0.0",)
        elif isinstance(value, bool) or not self.normalize:
            score = clamp(float(value))
        else:
            declared = judged.declared_range(self.judge)
            score = normalize(value, normalization_range(declared, self.score_range))
        return Composition(
            reward=score,
            mode=self.mode,
            gate_enabled=self.gate,
            gate_failed=(),
            contributions={self.judge: score} if value is not None else {},
            weights={self.judge: 1.0},
            warnings=warnings,
        )

    def describe(self) -> str:
        how = "normalized over its score_range" if self.normalize else "clamped to [0, 1]"
        return f"judge {self.judge} ({how}), gate {'on' if self.gate else 'off'}"

    def normalized_judges(self) -> frozenset[str]:
        return frozenset({self.judge}) if self.normalize else frozenset()

    def referenced_names(self) -> Mapping[str, frozenset[str]]:
        return {}


def _raw_names(block: Mapping[str, Any], context: BlockContext) -> frozenset[str]:
    raw = _setting(block, "raw", [])
    if not isinstance(raw, list) or not all(isinstance(name, str) for name in raw):
        raise context.error("raw", "must be a list of judge names")
    return frozenset(raw)


def _describe_formula_mode(
    head: str, gate: bool, normalized: frozenset[str], raw: frozenset[str]
) -> str:
    shown_raw = f", raw: {', '.join(sorted(raw))}" if raw else ""
    shown = ", ".join(sorted(normalized)) or "none"
    return f"{head}, gate {'on' if gate else 'off'}, normalized: {shown}{shown_raw}"


@attrs.frozen
class WeightedReward:
    """`formula: weighted`: the weight-normalized sum of the weighted judges."""

    mode = "weighted"
    keys = frozenset({"formula", "weights", "raw"})
    weights: tuple[tuple[str, float], ...]
    raw: frozenset[str] = frozenset()
    gate: bool = True
    score_range: ScoreRange | None = None
    on_error: str = "drop"

    @classmethod
    def claims(cls, block: Mapping[str, Any]) -> bool:
        formula = _setting(block, "formula", "weighted")
        return isinstance(formula, str) and formula.strip() == "weighted"

    @classmethod
    def from_block(cls, block: Mapping[str, Any], context: BlockContext) -> WeightedReward:
        raw = _raw_names(block, context)
        weights = _weights(block.get("weights"), context)
        if not weights or sum(weight for _, weight in weights) <= 0:
            raise context.error(
                "weights",
                "formula 'weighted' needs at least one positive weight; "
                "add weights or drop the reward block for the default composition",
            )
        return cls(
            weights=weights,
            raw=raw,
            gate=_setting(block, "gate", True),
            score_range=context.score_range,
            on_error=context.on_error,
        )

    def combine(self, judged: Judged) -> Composition:
        zeroed = _zeroed(judged, self.on_error, frozenset(name for name, _ in self.weights))
        contributions: dict[str, float] = {}
        total = weight_sum = 0.0
        dropped = []
        for name, weight in self.weights:
            if name in judged.values:
                contributions[name] = _scaled(name, judged, self.score_range, self.raw)
            elif name in zeroed:
                contributions[name] = 0.0
            else:
                dropped.append(name)
                continue
            total += weight * contributions[name]
            weight_sum += weight
        warnings = (
            [f"no value for {', '.join(dropped)}: dropped from the weighted sum"] if dropped else []
        )
        if weight_sum > 0:
            score = clamp(total / weight_sum)
        else:
            score = 0.0
            warnings.append(
                "no weighted judge has a value and a positive weight, so the reward is 0.0"
            )
        return Composition(
            reward=score,
            mode=self.mode,
            gate_enabled=self.gate,
            gate_failed=(),
            contributions=contributions,
            weights=dict(self.weights),
            warnings=tuple(warnings),
        )

    def describe(self) -> str:
        weights = ", ".join(f"{name}={weight:g}" for name, weight in self.weights)
        return _describe_formula_mode(
            f"weighted ({weights})", self.gate, self.normalized_judges(), self.raw
        )

    def normalized_judges(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.weights) - self.raw

    def referenced_names(self) -> Mapping[str, frozenset[str]]:
        return {"reward.raw": self.raw, "reward.weights": frozenset(n for n, _ in self.weights)}


def _weights(value: Any, context: BlockContext) -> tuple[tuple[str, float], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise context.error("weights", "must be a mapping of judge name to weight")
    weights = []
    for name, weight in value.items():
        number = finite_float(weight)
        if number is None or number < 0:
            raise context.error(f"weights.{name}", f"{weight!r} must be a non-negative number")
        weights.append((str(name), number))
    if sum(weight for _, weight in weights) == float("inf"):
        raise context.error("weights", "add up to more than a float holds; scale them down")
    return tuple(weights)


@attrs.frozen
class ExpressionReward:
    """Any other `formula`: an expression over the judges' normalized values."""

    mode = "expression"
    keys = frozenset({"formula", "raw"})
    formula: Formula
    raw: frozenset[str] = frozenset()
    gate: bool = True
    score_range: ScoreRange | None = None
    on_error: str = "drop"

    @classmethod
    def claims(cls, block: Mapping[str, Any]) -> bool:
        return True  # whatever else the formula says is an expression

    @classmethod
    def from_block(cls, block: Mapping[str, Any], context: BlockContext) -> ExpressionReward:
        text = block.get("formula")
        if not isinstance(text, str) or not text.strip():
            raise context.error("formula", "must be 'weighted' or a Python expression")
        raw = _raw_names(block, context)
        try:
            formula = parse_formula(text)
        except FormulaError as error:
            raise context.error("formula", str(error)) from None
        if block.get("weights"):
            context.warnings.append(
                f"{context.source}: reward.weights: used only by formula 'weighted'; ignored"
            )
        return cls(
            formula=formula,
            raw=raw,
            gate=_setting(block, "gate", True),
            score_range=context.score_range,
            on_error=context.on_error,
        )

    def combine(self, judged: Judged) -> Composition:
        bound = {name: _scaled(name, judged, self.score_range, self.raw) for name in judged.values}
        bound.update(_zeroed(judged, self.on_error, self.formula.free_names))
        warnings: tuple[str, ...] = ()
        try:
            score = clamp(self.formula.evaluate(bound))
        except FormulaRuntimeError as error:
            score = 0.0
            warnings = (f"reward.formula failed: {error}; the reward is 0.0",)
        return Composition(
            reward=score,
            mode=self.mode,
            gate_enabled=self.gate,
            gate_failed=(),
            contributions={n: v for n, v in bound.items() if n in self.formula.free_names},
            warnings=warnings,
        )

    def describe(self) -> str:
        return _describe_formula_mode(
            f"expression {self.formula.source.strip()!r}",
            self.gate,
            self.normalized_judges(),
            self.raw,
        )

    def normalized_judges(self) -> frozenset[str]:
        return self.formula.free_names - self.raw

    def referenced_names(self) -> Mapping[str, frozenset[str]]:
        return {"reward.raw": self.raw, "reward.formula": self.formula.free_names}


# The modes a reward block can select, in the order they are tried: the first that
# claims the block parses it. Without a block, the composition is DefaultReward().
REWARD_MODES: tuple[RewardModeClass, ...] = (
    DefaultReward,
    JudgeReward,
    WeightedReward,
    ExpressionReward,
)


def _setting(block: Mapping[str, Any], key: str, default: Any) -> Any:
    """A reward-block key's value; a key written without a value (null) is not set, as
    the loader reads every other key (`gate:` alone must not switch the gate off)."""
    value = block.get(key)
    return default if value is None else value
