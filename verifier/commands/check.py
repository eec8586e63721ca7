"""`verifier check`: what eval.yaml will do, and everything wrong with it, without a case."""

from __future__ import annotations

from verifier.config import EvalConfig, JudgeConfig
from verifier.console import warn_all
from verifier.errors import EXIT_CONFIG, EXIT_OK, ConfigError
from verifier.grading import load_eval
from verifier.judges import describe_judge
from verifier.options import Options

ON_ERROR_MEANINGS = {
    "drop": "an errored judge is dropped; in weighted mode the reward can go up",
    "zero": "an errored judge counts as 0.0; an errored boolean judge fails the gate",
    "fail": "an errored judge means no reward (exit 5)",
}


def run(options: Options) -> int:
    path = options.config
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
        print(f"  {judge.name}: {describe(judge, config)}")
    print(f"reward: {config.reward.describe()}")
    print(f"on_error: {config.reward.on_error} ({ON_ERROR_MEANINGS[config.reward.on_error]})")
    warn_all(config.warnings)
    return EXIT_OK


def describe(judge: JudgeConfig, config: EvalConfig) -> str:
    if judge.score_range:
        scale = f"score_range [{judge.score_range[0]:g}, {judge.score_range[1]:g}]"
    elif judge.feedback_type:
        scale = f"feedback_type {judge.feedback_type}"
    else:
        scale = "bool or number"
    condition = f", if: {judge.condition}" if judge.condition else ""
    return f"{describe_judge(judge, config)}, {scale}, timeout {judge.timeout_s:g}s{condition}"
