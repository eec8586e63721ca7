"""Judges shipped with the verifier: a registry of builtins, each declared with its arguments.

A builtin is a function `run(context, arguments) -> (value, rationale)` registered
with `@builtin(category, Arguments)` in one of the category modules below, where
`Arguments` is the frozen attrs record of its arguments, each field an eval.yaml key
declared with `argument(Field(...))` (verifier.config.fields), so a missing, misspelt
or mistyped argument is a load error, and the same declaration documents it. Paths in
arguments are relative to the case dir and never resolve outside it. Adding a builtin
is one record and one decorated function in a category module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from verifier.config import EvalConfig, JudgeConfig
from verifier.errors import did_you_mean
from verifier.judges.base import JudgeContext
from verifier.judges.builtins import (
    agent_trail,
    data_files,
    files,
    guards,
    model_graded,
    pass_rate,
    process,
    script,
    xlsx,
)
from verifier.judges.builtins.registry import (
    BUILTINS,
    Builtin,
    BuiltinContext,
    BuiltinReturn,
    ValueWithRationale,
    builtin,
)
from verifier.judges.builtins.runners import run_by_hand

__all__ = [
    "BUILTINS",
    "Builtin",
    "BuiltinContext",
    "ValueWithRationale",
    "agent_trail",
    "all_builtins",
    "bind_builtin",
    "builtin",
    "builtin_reference_files",
    "data_files",
    "files",
    "find_builtin",
    "guards",
    "hand_run_warnings",
    "model_graded",
    "pass_rate",
    "process",
    "script",
    "xlsx",
]


def find_builtin(written: str) -> Builtin | None:
    """A builtin by `name` or `category/name`."""
    category, _, name = written.rpartition("/")
    found = BUILTINS.get(name)
    return found if found is not None and category in ("", found.category) else None


def bind_builtin(judge: JudgeConfig, config: EvalConfig) -> Callable[[JudgeContext], Any]:
    """Look the builtin up and bind its arguments; the result runs it on a record."""
    found = find_builtin(judge.spec.name)
    if found is None:
        known = [b.qualified_name for b in BUILTINS.values()]
        hint = did_you_mean(judge.spec.name, [*BUILTINS, *known]) or f"; known: {', '.join(known)}"
        raise config.locator(f"{judge.key}.builtin").error(
            f"unknown builtin {judge.spec.name!r}{hint}"
        )
    arguments = found.bind(judge.arguments, config.locator(f"{judge.key}.arguments"))
    config_dir = config.base_dir

    def run(judged: JudgeContext) -> BuiltinReturn:
        record = judged.record
        context = BuiltinContext(Path(record["case_dir"]), config_dir, record, judged.sandbox)
        return found.run(context, arguments)

    return run


def builtin_reference_files(name: str, arguments: Mapping[str, Any]) -> list[str]:
    """The arguments of builtin `name` that name files beside eval.yaml (references.py)."""
    found = find_builtin(name)
    return found.reference_paths(arguments) if found is not None else []


def all_builtins() -> Sequence[Builtin]:
    return tuple(BUILTINS.values())


# What a hand-written test command leaves open, per runner: the fix is `runner:`.
_OPEN_BY_HAND = {
    "pytest": "the repo's pytest.ini, tox.ini, setup.cfg or pyproject.toml (addopts), a "
    "`pytest/` package or a plugin's `*.dist-info` in it change what runs and what is reported",
    "go": "a report file the test binaries can overwrite, a go.work or a go.mod toolchain "
    "line in the repo change what runs and what is reported",
}


def hand_run_warnings(config: EvalConfig) -> list[str]:
    """A warning for each command builtin whose `command` runs pytest or go test by hand:
    the natural thing to write, and not hardened; `runner:` is."""
    warnings = []
    for judge in config.judges:
        found = find_builtin(judge.spec.name) if judge.kind == "builtin" else None
        key = next((key for key in ("command", "cmd") if key in judge.arguments), None)
        if found is None or key is None or found.category not in ("tests", "process"):
            continue
        runner = run_by_hand(judge.arguments[key])
        if runner is None:
            continue
        builtin = found.qualified_name if found.category == "tests" else "tests/all_passed"
        program = "go test" if runner == "go" else runner
        warnings.append(
            f"{config.path}: {judge.key}.arguments.{key} runs {program} "
            f"by hand: {_OPEN_BY_HAND[runner]}; let the verifier run the tests hardened: "
            f"`builtin: {builtin}` with `runner: {runner}` and `tests:` (docs/builtins.md, "
            "the hardened runners)"
        )
    return warnings
