"""`verifier check`: what eval.yaml will do, and everything wrong with it, without a case."""

from __future__ import annotations

from verifier.config import EvalConfig, JudgeConfig
from verifier.console import warn_all
from verifier.errors import EXIT_CONFIG, EXIT_OK
from verifier.grading import check_eval
from verifier.judges import describe_judge
from verifier.options import Options

ON_ERROR_MEANINGS = {
    "drop": "an errored judge is dropped; in weighted mode the reward can go up",
    "zero": "an errored judge counts as 0.0; an errored boolean judge fails the gate",
    "fail": "an errored judge means no reward (exit 5)",
}


def run(options: Options) -> int:
    path = options.config
    checked = check_eval(path)
    if checked.problems:
        count = len(checked.problems)
        print(f"{path}: invalid ({count} problem{'s' * (count > 1)})")
        for problem in checked.problems:
            print(f"  error: {problem.message}")
        warn_all(checked.warnings)
        return EXIT_CONFIG
    config = checked.config
    assert config is not None
    count = len(checked.warnings)
    if options.strict and checked.warnings:
        print(f"{path}: invalid under --strict ({count} warning{'s' * (count > 1)})")
    else:
        print(f"{path}: valid" + (f" ({count} warning{'s' * (count > 1)})" if count else ""))
    print(f"name: {config.name}")
    print("judges:")
    for judge in config.judges:
        print(f"  {judge.name}: {describe(judge, config)}")
    print(f"reward: {config.reward.describe()}")
    print(f"on_error: {config.reward.on_error} ({ON_ERROR_MEANINGS[config.reward.on_error]})")
    warn_all(checked.warnings)
    return EXIT_CONFIG if options.strict and checked.warnings else EXIT_OK


def describe(judge: JudgeConfig, config: EvalConfig) -> str:
    if judge.score_range:
        scale = f"score_range [{judge.score_range[0]:g}, {judge.score_range[1]:g}]"
    elif judge.feedback_type:
        scale = f"feedback_type {judge.feedback_type}"
    else:
        scale = "bool or number"
    condition = f", if: {judge.condition}" if judge.condition else ""
    return f"{describe_judge(judge, config)}, {scale}, timeout {judge.timeout_s:g}s{condition}"
