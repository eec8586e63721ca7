"""The `reward:` block -> a reward mode (verifier.reward), with the checks every mode shares.

The block's keys are checked here (unknown ones, gate/normalize, the deprecated
score_range); the mode the block selects parses its own keys. Names in the block
that match no judge are warnings, not errors (reward-api.md: such a name is
dropped, or unbound in a formula), so `verifier check` reports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verifier.config.fields import (
    Choice,
    Flag,
    Key,
    Locator,
    ScoreRangeField,
    nullable,
    object_schema,
    parse_keys,
)
from verifier.config.judges import NAME_PATTERN
from verifier.config.records import JudgeConfig
from verifier.errors import did_you_mean
from verifier.reward import (
    ON_ERROR_POLICIES,
    REWARD_MODES,
    BlockContext,
    DefaultReward,
    JudgeReward,
    RewardMode,
)

COMMON_KEYS: tuple[Key, ...] = (
    Key("gate", Flag(description="any boolean judge returning false zeros the reward")),
    Key("score_range", ScoreRangeField(description="deprecated fallback range")),
    Key(
        "on_error",
        Choice(
            ON_ERROR_POLICIES,
            description="an errored judge: drop it (the documented "
            "rules), count it as 0.0 (zero), or write no reward (fail)",
        ),
        default="drop",
    ),
)
ALL_KEYS = frozenset({key.name for key in COMMON_KEYS}.union(*(mode.keys for mode in REWARD_MODES)))
# The JSON Schema of the keys the modes read in their from_block (verifier.reward):
# `verifier schema` describes them, and the tests hold both to the same blocks.
MODE_KEY_SCHEMAS: dict[str, dict[str, Any]] = {
    "judge": {
        "type": "string",
        "pattern": NAME_PATTERN,
        "description": "single-judge mode: this judge's value is the reward",
    },
    "normalize": {
        "type": "boolean",
        "default": False,
        "description": "judge mode: map the value from its score_range instead of clamping it",
    },
    "formula": {
        "type": "string",
        "pattern": r"\S",
        "default": "weighted",
        "description": "'weighted' or a Python expression over judge names",
    },
    "weights": nullable(
        {
            "type": "object",
            "additionalProperties": {"type": "number", "minimum": 0},
            "description": "judge name -> non-negative weight (formula 'weighted')",
        }
    ),
    "raw": {
        "type": "array",
        "items": {"type": "string"},
        "description": "judges already in [0, 1]: clamped, not normalized",
    },
}


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


def reward_schema() -> dict[str, Any]:
    """The reward block as JSON Schema: its keys, and the rules that pick and check a mode
    (judge wins and takes none of the other modes' keys; else `weighted`, the default
    formula, needs a positive weight; else the formula is an expression)."""
    block = object_schema(COMMON_KEYS, null_is_absent=True)
    block["properties"].update(MODE_KEY_SCHEMAS)
    other_modes = sorted(
        frozenset().union(*(mode.keys for mode in REWARD_MODES if mode is not JudgeReward))
        - JudgeReward.keys
    )
    weighted_formula = {
        "anyOf": [
            {"not": {"required": ["formula"]}},
            {"properties": {"formula": {"pattern": r"^\s*weighted\s*$"}}},
        ]
    }
    some_positive_weight = {
        "type": "object",
        "minProperties": 1,
        "not": {"additionalProperties": {"const": 0}},
    }
    block["if"] = {"required": ["judge"]}
    block["then"] = {"not": {"anyOf": [{"required": [key]} for key in other_modes]}}
    block["else"] = {
        "if": weighted_formula,
        "then": {"required": ["weights"], "properties": {"weights": some_positive_weight}},
    }
    return nullable({**block, "description": "the reward block; none: the default composition"})
