"""Builtins over the case's files: existence, contents, regex matches.

Every read goes through verifier.case.read_case_file, so whatever the agent left
at a path (nothing, a loop, a FIFO, a directory, a huge file) makes the builtin
fail with that fact as its rationale, never error.
"""

from __future__ import annotations

import re

from verifier.casefiles import existence_problem, read_case_file
from verifier.config import Key
from verifier.config.fields import Flag, Text
from verifier.judges.builtins.fields import CasePath, Pattern
from verifier.judges.builtins.registry import BuiltinContext, ValueWithRationale, builtin

PATH = Key("path", CasePath(), required=True)
MAX_FILE_BYTES = 16 * 1024 * 1024  # what a builtin reads of one file


def case_text(context: BuiltinContext, path: str) -> tuple[str | None, str]:
    """(the file's text, "") or (None, "<path> <the fact that stops it>")."""
    found = read_case_file(context.case_dir, path, MAX_FILE_BYTES)
    text = found.text()
    return (text, "") if text is not None else (None, f"{path} {found.problem}")


@builtin("files", PATH)
def file_exists(context: BuiltinContext, path: str) -> ValueWithRationale:
    problem = existence_problem(context.case_dir, path)
    return problem is None, f"{path} {problem or 'exists'}"


@builtin(
    "files",
    PATH,
    Key("text", Text(), required=True),
    Key("ignore_case", Flag(), default=False),
)
def file_contains(
    context: BuiltinContext, path: str, text: str, ignore_case: bool
) -> ValueWithRationale:
    content, problem = case_text(context, path)
    if content is None:
        return False, problem
    found = text.lower() in content.lower() if ignore_case else text in content
    return found, f"{path} {'contains' if found else 'does not contain'} {text!r}"


@builtin("files", PATH, Key("pattern", Pattern(), required=True))
def file_matches(context: BuiltinContext, path: str, pattern: str) -> ValueWithRationale:
    content, problem = case_text(context, path)
    if content is None:
        return False, problem
    match = re.search(pattern, content, re.MULTILINE)
    if match is None:
        return False, f"{path} has no match for /{pattern}/"
    return True, f"{path} matches /{pattern}/ at {match.group(0)[:200]!r}"
