"""One case, start to finish: config + case -> judge results -> reward.

This is the data flow of the package in one place; `verifier grade` and every
batch worker call it, so a case grades the same whichever way it is run.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from verifier.case import CaseReading, check_case_dir, read_case
from verifier.config import EvalConfig, load_config
from verifier.engine import Limits, run_judges
from verifier.errors import ConfigError
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
    eval.yaml lies inside it)."""
    case = read(loaded, case_dir)
    results = run_judges(loaded.judges, case.record, limits)
    return conclude(loaded, results, case.warnings)


def read(loaded: LoadedEval, case_dir: Path) -> CaseReading:
    """The case's record, as grade reads it (a batch runs its judges in two stages)."""
    refuse_config_inside_case(loaded.config.path, case_dir)
    resolved = check_case_dir(case_dir)
    return read_case(resolved, loaded.config.outputs, loaded.config.annotations)


def conclude(
    loaded: LoadedEval, results: tuple[JudgeResult, ...], warnings: tuple[str, ...]
) -> Grading:
    """The graded case from every judge's result, in the config's order."""
    config = loaded.config
    return Grading(
        config_name=config.name,
        results=results,
        composition=compose(config.reward, results, config.declared_ranges()),
        case_warnings=warnings,
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
