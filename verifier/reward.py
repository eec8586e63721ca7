"""Judge results + the reward block -> one reward in [0, 1] and how it was reached.

Pure functions only: the rules here are the documented contract of reward-api.md
(which wins over reward-block.md), so they are kept free of I/O and tested
exhaustively with plain values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from verifier.config import EvalConfig, RewardConfig, ScoreRange, score_range_of
from verifier.formula import FormulaRuntimeError
from verifier.results import JudgeResult, Status


@attrs.frozen(slots=True)
class Composition:
    """The reward and its explanation, written to judges.json as `composition`."""

    reward: float
    mode: str
    gate_enabled: bool
    gate_failed: tuple[str, ...]
    contributions: Mapping[str, float]
    warnings: tuple[str, ...] = ()

    def as_record(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "gate": {
                "enabled": self.gate_enabled,
                "passed": not self.gate_failed,
                "failed_judges": list(self.gate_failed),
            },
            "contributions": dict(self.contributions),
            "warnings": list(self.warnings),
        }


def clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def normalize(value: float, score_range: ScoreRange) -> float:
    """Map a value from its scale to [0, 1], clamped."""
    low, high = score_range
    return clamp((value - low) / (high - low))


def compose(results: Sequence[JudgeResult], config: EvalConfig) -> Composition:
    """The reward for one case, by the reward block or, without one, the default rules."""
    reward = config.reward
    values = {result.name: result.value for result in results if result.value is not None}
    if reward is None:
        return _default(results, values, config)
    gate_failed = _failed_gates(values) if reward.gate else ()
    if reward.mode == "judge":
        composition = _single_judge(values, reward, config)
    elif reward.mode == "weighted":
        composition = _weighted(values, reward, config)
    else:
        composition = _expression(values, reward, config)
    if gate_failed:
        return attrs.evolve(composition, reward=0.0, gate_enabled=True, gate_failed=gate_failed)
    return attrs.evolve(composition, gate_enabled=reward.gate)


def _failed_gates(values: Mapping[str, bool | float]) -> tuple[str, ...]:
    return tuple(name for name, value in values.items() if value is False)


def _scaled(
    name: str, value: bool | float, reward: RewardConfig | None, config: EvalConfig
) -> float:
    """A value as the reward sees it: bools 1/0, raw names clamped, other numbers normalized."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if reward is not None and name in reward.raw:
        return clamp(value)
    return normalize(value, score_range_of(config.judge(name), reward))


def _default(
    results: Sequence[JudgeResult], values: Mapping[str, bool | float], config: EvalConfig
) -> Composition:
    gate_failed = _failed_gates(values)
    scores = {
        name: _scaled(name, value, None, config)
        for name, value in values.items()
        if not isinstance(value, bool)
    }
    failed = [r.name for r in results if r.status in (Status.ERROR, Status.TIMEOUT)]
    warnings: tuple[str, ...] = ()
    if gate_failed:
        reward = 0.0
    elif scores:
        reward = sum(scores.values()) / len(scores)
    elif failed:
        reward = 0.0
        warnings = (f"nothing scored: {', '.join(failed)} errored, so the reward is 0.0",)
    else:
        reward = 1.0
    return Composition(
        reward=reward,
        mode="default",
        gate_enabled=True,
        gate_failed=gate_failed,
        contributions=scores,
        warnings=warnings,
    )


def _single_judge(
    values: Mapping[str, bool | float], reward: RewardConfig, config: EvalConfig
) -> Composition:
    assert reward.judge is not None
    value = values.get(reward.judge)
    warnings: tuple[str, ...] = ()
    if value is None:
        score = 0.0
        warnings = (f"reward.judge {reward.judge!r} has no value, so the reward is 0.0",)
    elif isinstance(value, bool) or not reward.normalize:
        score = clamp(float(value))
    else:
        score = normalize(value, score_range_of(config.judge(reward.judge), reward))
    return Composition(
        reward=score,
        mode="judge",
        gate_enabled=reward.gate,
        gate_failed=(),
        contributions={reward.judge: score} if value is not None else {},
        warnings=warnings,
    )


def _weighted(
    values: Mapping[str, bool | float], reward: RewardConfig, config: EvalConfig
) -> Composition:
    contributions: dict[str, float] = {}
    total = weight_sum = 0.0
    dropped = []
    for name, weight in reward.weights:
        value = values.get(name)
        if value is None:
            dropped.append(name)
            continue
        contributions[name] = _scaled(name, value, reward, config)
        total += weight * contributions[name]
        weight_sum += weight
    warnings = (
        [f"no value for {', '.join(dropped)}: dropped from the weighted sum"] if dropped else []
    )
    if weight_sum > 0:
        score = clamp(total / weight_sum)
    else:
        score = 0.0
        warnings.append("no weighted judge has a value and a positive weight, so the reward is 0.0")
    return Composition(
        reward=score,
        mode="weighted",
        gate_enabled=reward.gate,
        gate_failed=(),
        contributions=contributions,
        warnings=tuple(warnings),
    )


def _expression(
    values: Mapping[str, bool | float], reward: RewardConfig, config: EvalConfig
) -> Composition:
    assert reward.formula is not None
    bound = {name: _scaled(name, value, reward, config) for name, value in values.items()}
    warnings: tuple[str, ...] = ()
    try:
        score = clamp(reward.formula.evaluate(bound))
    except FormulaRuntimeError as error:
        score = 0.0
        warnings = (f"reward.formula failed: {error}; the reward is 0.0",)
    return Composition(
        reward=score,
        mode="expression",
        gate_enabled=reward.gate,
        gate_failed=(),
        contributions={n: v for n, v in bound.items() if n in reward.formula.free_names},
        warnings=warnings,
    )
