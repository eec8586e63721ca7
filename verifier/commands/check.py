"""`verifier check`: what eval.yaml will do, and everything wrong with it, without a case."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from verifier.config import EvalConfig, JudgeConfig
from verifier.console import warn_all
from verifier.dataset import DatasetSurvey, survey
from verifier.errors import EXIT_CONFIG, EXIT_OK, ConfigError
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
    config = checked.config
    dataset = survey(config.dataset) if config is not None and config.dataset else None
    problems = (*checked.problems, *(dataset.problems if dataset is not None else ()))
    if problems:
        return _invalid(path, problems, checked.warnings)
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
    for step in config.step_ids:
        final = " (final: composes the reward)" if step == config.final_step else ""
        print(f"step {step}{final}: {', '.join(config.step_judges(step)) or 'no judges'}")
    if dataset is not None:
        print(f"dataset: {describe_dataset(config, dataset)}")
    warn_all(checked.warnings)
    return EXIT_CONFIG if options.strict and checked.warnings else EXIT_OK


def _invalid(path: Path, problems: Sequence[ConfigError], warnings: Sequence[str]) -> int:
    print(f"{path}: invalid ({len(problems)} problem{'s' * (len(problems) > 1)})")
    for problem in problems:
        print(f"  error: {problem.message}")
    warn_all(warnings)
    return EXIT_CONFIG


def describe_dataset(config: EvalConfig, dataset: DatasetSurvey) -> str:
    """`dataset/: 4 cases; annotation keys: instruction, oracle (files: ...)`."""
    assert config.dataset is not None
    count = len(dataset.case_ids)
    text = f"{config.dataset.path}/: {count} case{'s' * (count != 1)}"
    keys = ", ".join(dataset.annotation_keys) or "none"
    text += f"; annotation keys: {keys}"
    if dataset.file_keys:
        text += f" (files, as annotation_<key>_content: {', '.join(dataset.file_keys)})"
    if dataset.without_input:
        text += f"; without an input file: {', '.join(dataset.without_input)}"
    return text


def describe(judge: JudgeConfig, config: EvalConfig) -> str:
    if judge.score_range:
        scale = f"score_range [{judge.score_range[0]:g}, {judge.score_range[1]:g}]"
    elif judge.feedback_type:
        scale = f"feedback_type {judge.feedback_type}"
    else:
        scale = "bool or number"
    condition = f", if: {judge.condition}" if judge.condition else ""
    return f"{describe_judge(judge, config)}, {scale}, timeout {judge.timeout_s:g}s{condition}"
