"""`verifier check`: what eval.yaml will do, and everything wrong with it, without a case."""

from __future__ import annotations

import sys
from pathlib import Path

from verifier.config import EvalConfig, JudgeConfig, RewardConfig, composed_judges
from verifier.errors import EXIT_CONFIG, EXIT_OK, ConfigError
from verifier.grading import load_eval


def run_check(path: Path) -> int:
    try:
        loaded = load_eval(path)
    except ConfigError as error:
        problems = getattr(error, "problems", (error,))
        print(f"{path}: invalid ({len(problems)} problem{'s' * (len(problems) > 1)})")
        for problem in problems:
            print(f"  error: {problem.message}")
        return EXIT_CONFIG
    config = loaded.config
    print(f"{path}: valid")
    print(f"name: {config.name}")
    print("judges:")
    for judge in config.judges:
        print(f"  {judge.name}: {describe_judge(judge, config)}")
    print(f"reward: {describe_reward(config)}")
    for warning in config.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK


def describe_judge(judge: JudgeConfig, config: EvalConfig) -> str:
    source = {
        "builtin": f"builtin {judge.builtin}",
        "check": "check",
        "module": f"module {judge.module}.{judge.function}",
        "llm": f"llm {judge.llm.get('model') or config.default_model or '$EVAL_JUDGE_MODEL'}",
    }[judge.kind]
    scale = (
        f"score_range [{judge.score_range[0]:g}, {judge.score_range[1]:g}]"
        if judge.score_range
        else f"feedback_type {judge.feedback_type}"
        if judge.feedback_type
        else "bool or number"
    )
    condition = f", if: {judge.condition}" if judge.condition else ""
    return f"{source}, {scale}, timeout {judge.timeout_s:g}s{condition}"


def describe_reward(config: EvalConfig) -> str:
    reward: RewardConfig | None = config.reward
    if reward is None:
        return "default (boolean judges gate; numeric judges normalized and averaged)"
    gate = f"gate {'on' if reward.gate else 'off'}"
    if reward.mode == "judge":
        how = "normalized over its score_range" if reward.normalize else "clamped to [0, 1]"
        return f"judge {reward.judge} ({how}), {gate}"
    raw = f", raw: {', '.join(sorted(reward.raw))}" if reward.raw else ""
    normalized = ", ".join(sorted(composed_judges(reward))) or "none"
    if reward.mode == "weighted":
        weights = ", ".join(f"{name}={weight:g}" for name, weight in reward.weights)
        return f"weighted ({weights}), {gate}, normalized: {normalized}{raw}"
    assert reward.formula is not None
    return f"expression {reward.formula.source.strip()!r}, {gate}, normalized: {normalized}{raw}"
