"""`verifier check`: what eval.yaml will do, and everything wrong with it, without a case."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from verifier.config import EvalConfig, JudgeConfig
from verifier.console import warn_all
from verifier.dataset import DatasetSurvey, survey
from verifier.engine.parent import reward_margin_s
from verifier.errors import EXIT_CONFIG, EXIT_OK, ConfigError, UsageError
from verifier.grading import check_eval
from verifier.judges import describe_judge
from verifier.parsers import parse_seconds
from verifier.task.settings import harbor_margin_s

TASK_CONFIG = "task.toml"
TASK_EVAL = Path("tests") / "eval.yaml"  # where `verifier task init` puts eval.yaml
HARBOR_DEFAULT_TIMEOUT_S = 600.0  # [verifier] timeout_sec when task.toml sets none

ON_ERROR_MEANINGS = {
    "drop": "an errored judge is dropped; in weighted mode the reward can go up",
    "zero": "an errored judge counts as 0.0; an errored boolean judge fails the gate",
    "fail": "an errored judge means no reward (exit 5)",
}


@attrs.frozen
class CheckArgs:
    """What `verifier check` was given (verifier.cli.options)."""

    config: Path
    deadline: float | None
    strict: bool


def run(args: CheckArgs) -> int:
    given = args.config
    if given.name == TASK_CONFIG:  # a task's task.toml: the task
        given = given.parent
    task = read_task(given) if given.is_dir() else None
    path = given / TASK_EVAL if task is not None else given
    checked = check_eval(path)
    config = checked.config
    dataset = survey(checked.dataset) if checked.dataset else None
    problems = (*checked.problems, *(dataset.problems if dataset is not None else ()))
    if problems:
        return _invalid(path, problems, checked.warnings)
    assert config is not None
    budgets = task.budgets if task is not None else (TimeBudget(None, None, args.deadline),)
    timing = tuple(warning for budget in budgets for warning in time_warnings(config, budget))
    timing += task.warnings if task is not None else ()
    absent = (
        (config.dataset.missing_warning(),) if config.dataset and config.dataset.missing else ()
    )
    checked = attrs.evolve(checked, warnings=(*checked.warnings, *absent, *timing))
    count = len(checked.warnings)
    if args.strict and checked.warnings:
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
    return EXIT_CONFIG if args.strict and checked.warnings else EXIT_OK


@attrs.frozen
class TimeBudget:
    """What one verifier run of a task may take: Harbor's `timeout_sec` for it (None: not
    a task's) and the `--deadline` / VERIFIER_DEADLINE it grades with (None: none)."""

    step: str | None  # the execution step whose verifier this is (None: the whole eval)
    harbor_timeout_s: float | None
    deadline_s: float | None


@attrs.frozen
class HarborTask:
    budgets: tuple[TimeBudget, ...]  # one per verifier run: the task's, or each step's
    warnings: tuple[str, ...]  # about its [verifier] env


def read_task(directory: Path) -> HarborTask:
    """The verifier time budgets of a Harbor task dir (task.toml and tests/eval.yaml, as
    `verifier task init` writes them): [verifier] timeout_sec and its env's
    VERIFIER_DEADLINE, and each [[steps]]' own where it sets them. UsageError when the
    dir is no task or task.toml cannot be read."""
    import tomllib  # only for a task dir

    path = directory / TASK_CONFIG
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"{directory}: a directory, but no {TASK_CONFIG} in it: give eval.yaml, or a "
            "Harbor task dir (task.toml, tests/eval.yaml)"
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise UsageError(f"{path}: cannot be read as TOML ({error})") from None
    root = _verifier_table(document)
    steps = [step for step in document.get("steps") or () if isinstance(step, dict)]
    tables = [root, *(_verifier_table(step) for step in steps)]
    warnings = tuple(
        warning for table in tables for warning in scrubbed_env(table.get("env") or {}, path)
    )
    if not steps:
        return HarborTask((_budget(None, root, {}, path),), warnings)
    budgets = tuple(
        _budget(str(step.get("name")), root, _verifier_table(step), path) for step in steps
    )
    return HarborTask(budgets, warnings)


# Harbor 0.26 (utils/env.py: is_sensitive_env_key) takes an env name with one of these
# for a secret, and replaces its value in every file of the trial (trial.py:
# _scrub_trial_outputs), reward.json included.
HARBOR_SECRET_NAME = re.compile(r"(KEY|SECRET|TOKEN(?!S)|PASSWORD|CREDENTIAL|AUTH)", re.IGNORECASE)


def scrubbed_env(env: Mapping[str, Any], path: Path) -> list[str]:
    """A literal value under a name Harbor takes for a secret's is scrubbed from the
    trial's files: a short word ("reward", a judge's name, a number) corrupts them."""
    return [
        f"{path}: [verifier] env {name} = {value!r}: Harbor takes {name} for a secret's name "
        "and replaces its value in every file of the trial (reward.json included); give "
        "secrets as ${HOST_VAR}, and settings names without KEY, SECRET, TOKEN, PASSWORD, "
        "CREDENTIAL or AUTH"
        for name, value in env.items()
        if HARBOR_SECRET_NAME.search(str(name))
        and isinstance(value, str)
        and "${" not in value
        and value.strip().lower() not in ("", "true", "false", "1", "0", "yes", "no")
    ]


def _verifier_table(table: Mapping[str, Any]) -> Mapping[str, Any]:
    verifier = table.get("verifier")
    return verifier if isinstance(verifier, dict) else {}


def _budget(
    step: str | None, root: Mapping[str, Any], own: Mapping[str, Any], path: Path
) -> TimeBudget:
    timeout = own.get("timeout_sec", root.get("timeout_sec", HARBOR_DEFAULT_TIMEOUT_S))
    env = {**(root.get("env") or {}), **(own.get("env") or {})}
    where = f"{path}: [verifier]" if step is None else f"{path}: [steps.verifier] of {step!r}"
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise UsageError(f"{where} timeout_sec: {timeout!r} is not a positive number")
    deadline = env.get("VERIFIER_DEADLINE")
    try:
        seconds = parse_seconds(str(deadline)) if deadline is not None else None
    except ValueError as error:
        raise UsageError(f"{where} env VERIFIER_DEADLINE: {error}") from None
    return TimeBudget(step, float(timeout), seconds)


def time_warnings(config: EvalConfig, budget: TimeBudget) -> list[str]:
    """When the judges' timeouts can add up past the deadline or past Harbor's timeout.

    Judges may run one at a time (a batch, a container with one CPU), so their
    timeouts are added up: the worst case. Past the deadline, the judges still running
    become timeouts (on_error decides); past Harbor's timeout without a deadline below
    it, Harbor kills the verifier and the trial has no reward at all.
    """
    step = budget.step if budget.step in config.step_ids else None
    names = config.step_judges(step) if step is not None else [j.name for j in config.judges]
    timeouts = {judge.name: judge.timeout_s for judge in config.judges if judge.name in names}
    total = math.fsum(timeouts.values())
    longest = sorted(timeouts, key=timeouts.__getitem__, reverse=True)[:3]
    judges = (
        f"the judges' timeouts add up to {total:g}s (longest: "
        + ", ".join(f"{name} {timeouts[name]:g}s" for name in longest)
        + ")"
    )
    of = "" if budget.step is None else f" (step {budget.step})"
    warnings = []
    deadline, harbor = budget.deadline_s, budget.harbor_timeout_s
    if deadline is not None and total > deadline - reward_margin_s(deadline):
        warnings.append(
            f"{judges}{of}, more than the deadline of {deadline:g}s leaves them "
            f"({deadline - reward_margin_s(deadline):g}s): judges still running then are "
            "stopped as timeouts (on_error decides; a builtin fails)"
        )
    if harbor is None:
        return warnings
    margin = harbor_margin_s(harbor)
    lower = harbor - margin  # the latest deadline Harbor's timeout leaves room for
    if deadline is None and total > lower:
        warnings.append(
            f"{judges}{of}, more than Harbor's [verifier] timeout_sec = {harbor:g} leaves "
            "them, and no VERIFIER_DEADLINE: when they run long, Harbor kills the verifier "
            "and the trial has no reward; "
            + (
                f'set [verifier] env VERIFIER_DEADLINE = "{lower:g}" (or raise timeout_sec)'
                if lower > 0
                else f"raise timeout_sec above {margin:g} and set a VERIFIER_DEADLINE "
                f"{margin:g}s below it"
            )
        )
    elif deadline is not None and deadline > lower:
        warnings.append(
            f"VERIFIER_DEADLINE = {deadline:g}{of} is not at least {margin:g}s below "
            f"Harbor's [verifier] timeout_sec = {harbor:g} (what Harbor's own execs can "
            "take on a loaded node): Harbor may kill the verifier before it writes the "
            "reward; "
            + (f"set it to {lower:g} or less, or " if lower > 0 else "")
            + f"raise timeout_sec to {deadline + margin:g}"
        )
    return warnings


def _invalid(path: Path, problems: Sequence[ConfigError], warnings: Sequence[str]) -> int:
    print(f"{path}: invalid ({len(problems)} problem{'s' * (len(problems) > 1)})")
    for problem in problems:
        print(f"  error: {problem.message}")
    warn_all(warnings)
    return EXIT_CONFIG


def describe_dataset(config: EvalConfig, dataset: DatasetSurvey) -> str:
    """`dataset/: 4 cases; annotation keys: instruction, oracle (files: ...)`."""
    assert config.dataset is not None
    if config.dataset.missing:
        return f"{config.dataset.path}/: absent (no cases: judges get no annotations)"
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
