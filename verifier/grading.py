"""One case, start to finish: config + case -> judge results -> reward.

This is the data flow of the package in one place; `verifier grade` and every
batch worker call it, so a case grades the same whichever way it is run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from verifier.case import check_case_dir, read_case
from verifier.config import EvalConfig, TaskInput, load_config
from verifier.engine import Limits, run_judges
from verifier.errors import ConfigError, JudgesErrored, UsageError
from verifier.judges import KINDS, PreparedJudge, prepare_judges
from verifier.results import Composition, Grading
from verifier.reward import DefaultReward, RewardMode, compose


class LoadedEval(NamedTuple):
    """A validated config with its judges prepared: load once, grade many cases."""

    config: EvalConfig
    judges: tuple[PreparedJudge, ...]


def load_eval(config_path: Path) -> LoadedEval:
    """eval.yaml loaded and its judges prepared; ConfigErrors (exit 2) listing every problem."""
    config = load_config(config_path, KINDS)
    return LoadedEval(config=config, judges=prepare_judges(config))


class CaseSources(NamedTuple):
    """What the task author's side says about one case: its annotations, the text of
    its annotation files, its task input, and which dataset entry they came from."""

    annotations: Mapping[str, Any]
    annotation_contents: Mapping[str, Any]
    task_input: TaskInput
    dataset_entry: str | None  # e.g. dataset/task-0010; None: no dataset, or no entry
    warnings: tuple[str, ...]


def case_sources(config: EvalConfig, case_id: str) -> CaseSources:
    """eval.yaml's annotations and task input, with the dataset entry of case_id (when
    eval.yaml has a dataset) over them. ConfigError when the entry cannot be used."""
    if config.dataset is None:
        return CaseSources(config.annotations, {}, config.task_input, None, ())
    entry = config.dataset.case(case_id)
    if entry is None:
        warning = (
            f"case id {case_id!r} has no entry in the dataset {config.dataset.path}/: graded "
            "without its annotations and input (pass --case-id to name the entry)"
        )
        return CaseSources(config.annotations, {}, config.task_input, None, (warning,))
    task_input = config.task_input
    if entry.input_file is not None:
        task_input = TaskInput(entry.task_input, f"{entry.label}/{entry.input_file}", True)
    return CaseSources(
        annotations={**config.annotations, **entry.annotations},
        annotation_contents=entry.contents,
        task_input=task_input,
        dataset_entry=entry.label,
        warnings=(),
    )


class StepPlan(NamedTuple):
    """What one grading runs: the judges, and the reward mode that composes them."""

    judges: tuple[PreparedJudge, ...]
    reward: RewardMode


def step_plan(loaded: LoadedEval, step: str | None) -> StepPlan:
    """Every judge and the reward block; or, for one step of a multi-step eval (a Harbor
    task's per-step verifier), that step's judges (the final step: with those scoped to
    no step) and, on the final step only, the reward block; an earlier step's judges
    are composed the default way. UsageError for a step eval.yaml does not define."""
    config = loaded.config
    if step is None:
        return StepPlan(loaded.judges, config.reward)
    ids = config.step_ids
    if step not in ids:
        defined = f"its steps are {', '.join(ids)}" if ids else "it has no execution.steps"
        raise UsageError(f"--step {step!r}: not a step of {config.path} ({defined})")
    names = set(config.step_judges(step))
    judges = tuple(judge for judge in loaded.judges if judge.config.name in names)
    if step == config.final_step:
        return StepPlan(judges, config.reward)
    return StepPlan(judges, DefaultReward(on_error=config.reward.on_error))


def grade(
    loaded: LoadedEval,
    case_dir: Path,
    limits: Limits | None = None,
    *,
    case_id: str | None = None,
    step: str | None = None,
    agent_logs: Path | None = None,
) -> Grading:
    """Grade one case dir (CaseError when it is missing or unreadable; ConfigError when
    eval.yaml lies inside it or its dataset entry cannot be used; JudgesErrored when a
    judge errored under on_error: fail).

    `case_id` names the case's dataset entry (default: the case dir's name); `step`,
    the execution step whose judges are graded (default: every judge; see step_plan);
    `agent_logs`, Harbor's agent logs dir, whose trajectory.json is the agent's."""
    config = loaded.config
    plan = step_plan(loaded, step)
    refuse_config_inside_case(config.path, case_dir)
    resolved = check_case_dir(case_dir)
    case_id = case_id if case_id is not None else Path(os.path.abspath(case_dir)).name
    sources = case_sources(config, case_id)
    case = read_case(
        resolved, config.outputs, sources.annotations, sources.task_input,
        annotation_contents=sources.annotation_contents, agent_logs=agent_logs,
    )  # fmt: skip
    results = run_judges(plan.judges, case.record, limits)
    composition = compose(plan.reward, results, config.scales())
    if step is not None and not plan.judges:
        composition = Composition(
            reward=0.0, mode=plan.reward.mode, gate_enabled=False, gate_failed=(),
            contributions={},
            warnings=(f"no judge grades step {step!r}: the step is unjudged, its reward 0.0",),
        )  # fmt: skip
    if config.reward.on_error == "fail" and composition.errored:
        reasons = "; ".join(
            f"{result.name}: {result.status.value}: {result.error}"
            for result in results
            if result.failed
        )
        raise JudgesErrored(f"reward.on_error is fail and a judge errored, so no reward: {reasons}")
    return Grading(
        config_name=config.name,
        results=results,
        composition=composition,
        case_warnings=(*sources.warnings, *case.warnings),
        task_input_source=case.task_input.source,
        task_input_trusted=case.task_input.trusted,
        case_id=case_id if config.dataset is not None else None,
        dataset_entry=sources.dataset_entry,
        step=step,
        reward_rule=plan.reward.describe(),
    )


def refuse_config_inside_case(config_path: Path, case_dir: Path) -> None:
    """The agent writes the case; a config it could have written grades nothing."""
    if config_path.resolve().is_relative_to(case_dir.resolve()):
        raise ConfigError(
            str(config_path),
            "",
            f"lies inside the case dir {case_dir}, which the agent controls; "
            "keep eval.yaml outside it (e.g. /tests/eval.yaml)",
        )
