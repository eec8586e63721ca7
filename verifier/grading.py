"""One case, start to finish: config + case -> judge records -> reward.

This is the data flow of the package in one place; the CLI and batch grading
both call it, so a case grades the same whichever way it is run.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from verifier.case import check_case_dir, read_case
from verifier.config import EvalConfig, load_config
from verifier.engine import Limits, run_judges
from verifier.errors import ConfigError
from verifier.judges import prepare_judges
from verifier.judges.base import PreparedJudge
from verifier.results import JudgeResult
from verifier.reward import Composition, compose


@attrs.frozen(slots=True)
class LoadedEval:
    """A validated config with its judges prepared: load once, grade many cases."""

    config: EvalConfig
    judges: tuple[PreparedJudge, ...]


@attrs.frozen(slots=True)
class Grading:
    config_name: str
    results: tuple[JudgeResult, ...]
    composition: Composition
    case_warnings: tuple[str, ...] = ()

    @property
    def reward(self) -> float:
        return self.composition.reward


def load_eval(config_path: Path) -> LoadedEval:
    config = load_config(config_path)
    return LoadedEval(config=config, judges=prepare_judges(config))


def refuse_config_inside_case(config_path: Path, case_dir: Path) -> None:
    """The agent writes the case; a config it could have written grades nothing."""
    if config_path.resolve().is_relative_to(case_dir.resolve()):
        raise ConfigError(
            str(config_path),
            "",
            f"lies inside the case dir {case_dir}, which the agent controls; "
            "keep eval.yaml outside it (e.g. /tests/eval.yaml)",
        )


def grade(loaded: LoadedEval, case_dir: Path, limits: Limits | None = None) -> Grading:
    """Grade one case dir (CaseError when it is missing, unreadable or empty)."""
    resolved = check_case_dir(case_dir)
    config = loaded.config
    case = read_case(resolved, config.outputs, config.annotations)
    results = run_judges(loaded.judges, case.record, limits)
    return Grading(
        config_name=config.name,
        results=results,
        composition=compose(results, config),
        case_warnings=case.warnings,
    )
