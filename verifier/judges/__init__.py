"""Turns each judge entry of eval.yaml into a PreparedJudge, by kind.

Preparing is load time: everything that can be checked without a case (compiling,
importing, argument names) is checked here, once per config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verifier.config import EvalConfig, JudgeConfig, Problems
from verifier.errors import ConfigError
from verifier.judges.base import PreparedJudge

Preparer = Callable[[JudgeConfig, EvalConfig], Callable[[dict[str, Any]], Any]]


def _preparer(kind: str) -> Preparer:
    if kind == "check":
        from verifier.judges.python import prepare_check

        return prepare_check
    if kind == "module":
        from verifier.judges.python import prepare_module

        return prepare_module
    if kind == "builtin":
        from verifier.judges.builtin import prepare_builtin

        return prepare_builtin
    from verifier.judges.llm import prepare_llm

    return prepare_llm


def prepare_judges(config: EvalConfig) -> tuple[PreparedJudge, ...]:
    """Every judge of config, ready to run; ConfigError (exit 2) listing those that are not."""
    problems = Problems()
    prepared = tuple(problems.attempt(_prepare, judge, config) for judge in config.judges)
    problems.raise_if_any()
    return prepared


def _prepare(judge: JudgeConfig, config: EvalConfig) -> PreparedJudge:
    condition = None
    if judge.condition is not None:
        try:
            condition = compile(judge.condition, f"<{judge.key}.if>", "eval")
        except SyntaxError as error:
            raise ConfigError(
                str(config.path), f"{judge.key}.if", f"is not a Python expression: {error.msg}"
            ) from None
    return PreparedJudge(
        config=judge,
        call=_preparer(judge.kind)(judge, config),
        condition=condition,
        pool="llm" if judge.kind == "llm" else "cpu",
    )
