"""One case, start to finish: config + case -> judge results -> reward.

This is the data flow of the package in one place; `verifier grade` and every
batch worker call it, so a case grades the same whichever way it is run.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from verifier.case import CaseReading, check_case_dir, read_case
from verifier.config import EvalConfig, TaskInput, load_config
from verifier.engine import Limits, run_judges
from verifier.errors import ConfigError, JudgesErrored, MissingModelError
from verifier.judges import KINDS, PreparedJudge, prepare_judges
from verifier.judges.base import Pool
from verifier.results import Grading, JudgeResult
from verifier.reward import compose


class LoadedEval(NamedTuple):
    """A validated config with its judges prepared: load once, grade many cases."""

    config: EvalConfig
    judges: tuple[PreparedJudge, ...]


def load_eval(config_path: Path) -> LoadedEval:
    """eval.yaml loaded and its judges prepared; ConfigErrors (exit 2) listing every problem."""
    config = load_config(config_path, KINDS)
    return LoadedEval(config=config, judges=prepare_judges(config))


class EvalCheck(NamedTuple):
    """eval.yaml as `verifier check` sees it: every problem, and every warning."""

    config: EvalConfig | None  # None when the file itself does not load
    problems: tuple[ConfigError, ...]
    warnings: tuple[str, ...]


def check_eval(config_path: Path) -> EvalCheck:
    """load_eval away from the grading environment, collecting instead of raising.

    A model that only the grading environment supplies ($EVAL_JUDGE_MODEL) is a
    warning here: a linter in CI or a task author's machine is not where grading runs.
    Every other problem, of every judge, is still reported.
    """
    try:
        config = load_config(config_path, KINDS)
    except ConfigError as error:
        return EvalCheck(None, _listed(error), ())
    try:
        prepare_judges(config)
        problems: tuple[ConfigError, ...] = ()
    except ConfigError as error:
        problems = _listed(error)
    missing = tuple(problem for problem in problems if isinstance(problem, MissingModelError))
    return EvalCheck(
        config=config,
        problems=tuple(problem for problem in problems if problem not in missing),
        warnings=(*config.warnings, *(problem.warning() for problem in missing)),
    )


def _listed(error: ConfigError) -> tuple[ConfigError, ...]:
    return tuple(getattr(error, "problems", (error,)))


def with_llm_cache(loaded: LoadedEval, directory: Path, max_mb: int) -> LoadedEval:
    """loaded with its LLM judges keeping their answers in directory (`grade --llm-cache`)."""
    if all(judge.pool is not Pool.LLM for judge in loaded.judges):
        return loaded
    from verifier.judges.llm.cache import ResponseCache  # jinja2: only for configs that use it
    from verifier.judges.llm.judge import LLMJudge

    cache = ResponseCache.create(directory, max_mb)
    judges = tuple(
        judge._replace(call=judge.call._replace(cache=cache))
        if isinstance(judge.call, LLMJudge)
        else judge
        for judge in loaded.judges
    )
    return loaded._replace(judges=judges)


def grade(loaded: LoadedEval, case_dir: Path, limits: Limits | None = None) -> Grading:
    """Grade one case dir (CaseError when it is missing or unreadable; ConfigError when
    eval.yaml lies inside it; JudgesErrored when a judge errored under on_error: fail)."""
    case = read(loaded, case_dir)
    results = run_judges(loaded.judges, case.record, limits)
    return conclude(loaded, results, case.warnings, case.task_input)


def read(loaded: LoadedEval, case_dir: Path) -> CaseReading:
    """The case's record, as grade reads it (a batch runs its judges in two stages)."""
    config = loaded.config
    refuse_config_inside_case(config.path, case_dir)
    resolved = check_case_dir(case_dir)
    return read_case(
        resolved, config.outputs, config.annotations, config.task_input,
        tool_outputs=config.tool_outputs,
    )  # fmt: skip


def conclude(
    loaded: LoadedEval,
    results: tuple[JudgeResult, ...],
    warnings: tuple[str, ...],
    task_input: TaskInput,
) -> Grading:
    """The graded case from every judge's result, in the config's order (JudgesErrored
    when a judge errored and the reward block says on_error: fail)."""
    config = loaded.config
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
        case_warnings=warnings,
        task_input_source=task_input.source,
        task_input_trusted=task_input.trusted,
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
