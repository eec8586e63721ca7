"""Judges: the kinds (verifier.judges.kinds), the builtins, the LLM judges, and
`prepare_judges`, which turns a loaded config's judge entries into callables.

Preparing is load time: everything that can be checked without a case
(compiling, importing, argument types, prompt templates, the model) is checked
here, once per config.
"""

from __future__ import annotations

from verifier.config import EvalConfig, JudgeConfig, Problems
from verifier.judges.base import PreparedJudge
from verifier.judges.kinds import KINDS

__all__ = ["KINDS", "PreparedJudge", "describe_judge", "prepare_judges", "runs_case_code"]


def prepare_judges(config: EvalConfig) -> tuple[PreparedJudge, ...]:
    """Every judge of config, ready to run; ConfigErrors (exit 2) listing those that are not."""
    problems = Problems()
    prepared = tuple(problems.attempt(_prepare, judge, config) for judge in config.judges)
    problems.raise_if_any()
    return prepared


def runs_case_code(judge: JudgeConfig) -> bool:
    """Whether the judge executes something from the case (a command builtin)."""
    if judge.kind != "builtin":
        return False
    from verifier.judges.builtins import find_builtin

    found = find_builtin(judge.spec.name)
    return found is not None and found.runs_case_code


def describe_judge(judge: JudgeConfig, config: EvalConfig) -> str:
    return KINDS.named(judge.kind).describe(judge, config)


def _prepare(judge: JudgeConfig, config: EvalConfig) -> PreparedJudge:
    condition = None
    if judge.condition is not None:
        try:
            condition = compile(judge.condition, f"<{judge.key}.if>", "eval")
        except SyntaxError as error:
            raise config.locator(f"{judge.key}.if").error(
                f"is not a Python expression: {error.msg}"
            ) from None
    kind = KINDS.named(judge.kind)
    return PreparedJudge(
        config=judge,
        call=kind.prepare(judge, config),
        condition=condition,
        pool=kind.pool,
        case_bound=kind.case_bound,
    )
