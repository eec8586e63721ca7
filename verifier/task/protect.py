"""`task init --protect GLOB,...`: the trusted copies a tamper guard compares the case with.

The agent starts from the environment's files in its work dir: with `--environment
DIR`, those DIR's Dockerfile COPYs there (verifier.task.environment.case_files);
without, those the author put in DEST/environment/ (the package's placeholder
Dockerfile copies them there). The ones the globs match (e.g. `tests/**`,
`conftest.py`) are copied into tests/protected/, laid out as in the case. A
`guard/files_unchanged` judge with `reference: protected` then holds the case's tests
to exactly what the agent was given: the package is guarded by construction, whatever
the tests become later.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from verifier.errors import UsageError
from verifier.globs import GlobError, compile_glob
from verifier.references import walk_files
from verifier.task.package import PROTECTED_DIR
from verifier.task.tests_dir import TestsFile

GUARDS = ("files_unchanged", "guard/files_unchanged")


def environment_files(dest: Path) -> tuple[TestsFile, ...]:
    """The files an author put in DEST/environment/ (its Dockerfile aside), which the
    package's Dockerfile copies into the agent's work dir."""
    environment = dest / "environment"
    if not environment.is_dir():
        return ()
    return tuple(
        TestsFile(PurePosixPath(path.relative_to(environment).as_posix()), path)
        for path in walk_files(environment)
        if path.relative_to(environment) != Path("Dockerfile")
    )


def protected_files(
    agent_files: Sequence[TestsFile], globs: Sequence[str], environment: Path | None = None
) -> tuple[TestsFile, ...]:
    """The agent's files that the globs match; UsageError when they match none (a typo
    would otherwise guard nothing). `environment`: the --environment dir they come from."""
    try:
        compiled = [compile_glob(glob) for glob in globs]
    except GlobError as error:
        raise UsageError(f"--protect: {error}") from None
    matched = tuple(
        file
        for file in agent_files
        if any(glob.matches(file.relative.as_posix()) for glob in compiled)
    )
    if not matched and environment is not None:
        listed = ", ".join(file.relative.as_posix() for file in agent_files[:5]) or "none"
        raise UsageError(
            f"--protect {','.join(globs)}: matches none of the files {environment}/Dockerfile "
            f"COPYs into the agent's work dir ({listed}{', ...' if len(agent_files) > 5 else ''})"
        )
    if not matched:
        raise UsageError(
            f"--protect {','.join(globs)}: matches no file of the agent's environment/ (pass "
            "--environment DIR, or put the files the agent starts with in DEST/environment/ "
            "and run task init again with --force)"
        )
    return matched


def guard_missing(document: Any) -> str | None:
    """A warning when eval.yaml has no guard/files_unchanged judge reading tests/protected/."""
    judges = document.get("judges") if isinstance(document, dict) else None
    for judge in judges if isinstance(judges, list) else ():
        arguments = judge.get("arguments") if isinstance(judge, dict) else None
        if (
            judge.get("builtin") in GUARDS
            and isinstance(arguments, dict)
            and str(arguments.get("reference", "")).rstrip("/") == PROTECTED_DIR
        ):
            return None
    return (
        "--protect filled tests/protected/, but no judge reads it: add to eval.yaml's judges\n"
        f"  - name: tests_intact\n    builtin: guard/files_unchanged\n"
        f"    arguments: {{paths: [...], reference: {PROTECTED_DIR}}}\n"
        "(a boolean judge: with a formula reward it gates; with `reward: {judge: ...}` set "
        "`gate: true`)"
    )
