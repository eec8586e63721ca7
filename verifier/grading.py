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
from verifier.errors import ConfigError, JudgesErrored
from verifier.judges import KINDS, PreparedJudge, prepare_judges
from verifier.results import Grading
from verifier.reward import compose


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


def grade(
    loaded: LoadedEval,
    case_dir: Path,
    limits: Limits | None = None,
    *,
    case_id: str | None = None,
) -> Grading:
    """Grade one case dir (CaseError when it is missing or unreadable; ConfigError when
    eval.yaml lies inside it or its dataset entry cannot be used; JudgesErrored when a
    judge errored under on_error: fail).

    `case_id` names the case's dataset entry (default: the case dir's name)."""
    config = loaded.config
    refuse_config_inside_case(config.path, case_dir)
    resolved = check_case_dir(case_dir)
    case_id = case_id if case_id is not None else Path(os.path.abspath(case_dir)).name
    sources = case_sources(config, case_id)
    case = read_case(
        resolved, config.outputs, sources.annotations, sources.task_input,
        annotation_contents=sources.annotation_contents,
    )  # fmt: skip
    results = run_judges(loaded.judges, case.record, limits)
    composition = compose(config.reward, results, config.scales())
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
