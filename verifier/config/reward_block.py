"""The `reward:` block -> a reward mode (verifier.reward), with the checks every mode shares.

The block's keys are checked here (unknown ones, gate/normalize, the deprecated
score_range); the mode the block selects parses its own keys. Names in the block
that match no judge are warnings, not errors (reward-api.md: such a name is
dropped, or unbound in a formula), so `verifier check` reports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verifier.config.fields import Choice, Flag, Key, Locator, ScoreRangeField, parse_keys
from verifier.config.records import JudgeConfig
from verifier.errors import did_you_mean
from verifier.reward import (
    ON_ERROR_POLICIES,
    REWARD_MODES,
    BlockContext,
    DefaultReward,
    RewardMode,
)

COMMON_KEYS: tuple[Key, ...] = (
    Key("gate", Flag(description="any boolean judge returning false zeros the reward")),
    Key("score_range", ScoreRangeField(description="deprecated fallback range")),
    Key(
        "on_error",
        Choice(ON_ERROR_POLICIES, description="an errored judge: drop it (the documented "
               "rules), count it as 0.0 (zero), or write no reward (fail)"),
        default="drop",
    ),
)  # fmt: skip
ALL_KEYS = frozenset({key.name for key in COMMON_KEYS}.union(*(mode.keys for mode in REWARD_MODES)))


def parse_reward(
    value: Any,
    judges: Sequence[JudgeConfig],
    failed_names: set[str],
    at: Locator,
    warnings: list[str],
) -> RewardMode:
    if value is None:
        return DefaultReward()
    if not isinstance(value, dict):
        raise at.error("must be a mapping (see the reward block reference)")
    for key in value:
        if key not in ALL_KEYS:
            raise at.child(str(key)).error(f"unknown reward key{did_you_mean(str(key), ALL_KEYS)}")
    common = parse_keys(value, COMMON_KEYS, at)
    if "normalize" in value:
        Flag().parse(value["normalize"], at.child("normalize"))
    names = frozenset({judge.name for judge in judges} | failed_names)
    context = BlockContext(
        at.source, names, common.get("score_range"), common.get("on_error", "drop"), warnings
    )
    mode_class = next(mode for mode in REWARD_MODES if mode.claims(value))
    mode = mode_class.from_block(value, context)
    if "normalize" in value and "normalize" not in mode.keys:
        warnings.append(f"{at.source}: reward.normalize: applies only with reward.judge; ignored")
    _warn_unknown_names(mode, names, at.source, warnings)
    _warn_shadowed_score_range(mode, judges, common.get("score_range"), at.source, warnings)
    return mode


def _warn_unknown_names(
    mode: RewardMode, names: frozenset[str], source: str, warnings: list[str]
) -> None:
    for key, used in mode.referenced_names().items():
        for unknown in sorted(used - names):
            consequence = (
                "it is unbound, so the reward is 0.0 with a warning"
                if key == "reward.formula"
                else "it never has a value and is dropped"
            )
            warnings.append(
                f"{source}: {key}: {unknown!r} matches no judge; {consequence}"
                f"{did_you_mean(unknown, names)}"
            )


def _warn_shadowed_score_range(
    mode: RewardMode,
    judges: Sequence[JudgeConfig],
    score_range: tuple[float, float] | None,
    source: str,
    warnings: list[str],
) -> None:
    if score_range is None:
        return
    normalized = mode.normalized_judges()
    for judge in judges:
        if judge.name in normalized and judge.score_range not in (None, score_range):
            warnings.append(
                f"{source}: reward.score_range: deprecated; judge {judge.name!r} declares its own "
                f"score_range {list(judge.score_range)}, which wins"
            )
