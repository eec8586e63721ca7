"""Builtins over the case's files: existence, contents, regexes, equality, similarity.

Names and arguments follow Harbor's rewardkit where it has the criterion, so a
criterion moves across unchanged: the text comparisons read a file as rewardkit's
`Path.read_text()` does, with universal newlines (CRLF and CR become LF), and
files_equal, file_matches' `expected` and diff_ratio compare the texts stripped, as
rewardkit's do. Every read goes through
verifier.casefiles.read_case_file, so whatever the agent left at a path (nothing,
a loop, a FIFO, a directory, a huge file) makes the builtin fail with that fact as
its rationale, never error. Reference files (`reference:`) are the task author's,
beside eval.yaml, checked at load.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import attrs

from verifier.casefiles import existence_problem, read_case_file
from verifier.config.fields import Flag, Text
from verifier.judges.builtins.arguments import CasePath, Pattern, ReferencePath
from verifier.judges.builtins.registry import (
    PARTIAL_CREDIT,
    BuiltinContext,
    ValueWithRationale,
    argument,
    builtin,
)

REFERENCE = ReferencePath(description="a file beside eval.yaml to compare with")
MAX_FILE_BYTES = 16 * 1024 * 1024  # what a builtin reads of one file
# Character-level similarity is quadratic: texts longer than this are compared line by line.
CHARACTER_DIFF_LIMIT = 20_000
_SHOWN_CHARS = 200


def case_text(context: BuiltinContext, path: str) -> tuple[str | None, str]:
    """(the file's text, "") or (None, "<path> <the fact that stops it>")."""
    found = read_case_file(context.case_dir, path, MAX_FILE_BYTES)
    text = found.text()
    return (text, "") if text is not None else (None, f"{path} {found.problem}")


def reference_text(context: BuiltinContext, reference: PurePosixPath) -> str:
    """A reference file's text (the task author's: checked at load), with universal
    newlines."""
    text = (context.config_dir / reference).read_text(encoding="utf-8", errors="replace")
    return universal_newlines(text)


def universal_newlines(text: str) -> str:
    """CRLF and CR as LF: what Python's text mode (rewardkit's read_text, subprocess's
    text=True) makes of a file or a command's output."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def case_lines(context: BuiltinContext, path: str) -> tuple[str | None, str]:
    """case_text with universal newlines, for the text comparisons."""
    content, problem = case_text(context, path)
    return (None, problem) if content is None else (universal_newlines(content), "")


@attrs.frozen(kw_only=True)
class PathArguments:
    path: str = argument(CasePath(), required=True)


@attrs.frozen(kw_only=True)
class FileContainsArguments(PathArguments):
    text: str = argument(Text(), required=True)
    ignore_case: bool = argument(Flag(), default=False)


@attrs.frozen(kw_only=True)
class RegexArguments(PathArguments):
    pattern: str = argument(Pattern(), required=True)


@attrs.frozen(kw_only=True)
class FileMatchesArguments(PathArguments):
    pattern: str | None = argument(
        Pattern(description="a regex searched for (this verifier's meaning)")
    )
    expected: str | None = argument(
        Text(description="the whole text, whitespace-stripped (rewardkit's)")
    )


@attrs.frozen(kw_only=True)
class FilesEqualArguments:
    path1: str = argument(CasePath(), required=True)
    path2: str | None = argument(CasePath(description="a second file in the case"))
    reference: PurePosixPath | None = argument(REFERENCE)
    ignore_line_endings: bool = argument(
        Flag(description="accepted for older eval.yaml files: CRLF and CR always count as LF"),
        default=False,
    )
    ignore_whitespace: bool = argument(
        Flag(description="runs of whitespace count as one space; leading and trailing ignored"),
        default=False,
    )


@attrs.frozen(kw_only=True)
class DiffRatioArguments(PathArguments):
    expected: str | None = argument(Text(description="the text to compare with"))
    reference: PurePosixPath | None = argument(REFERENCE)


@builtin("files", PathArguments)
def file_exists(context: BuiltinContext, arguments: PathArguments) -> ValueWithRationale:
    path = arguments.path
    problem = existence_problem(context.case_dir, path)
    return problem is None, f"{path} {problem or 'exists'}"


@builtin("files", PathArguments)
def file_not_exists(context: BuiltinContext, arguments: PathArguments) -> ValueWithRationale:
    """True only when nothing is there: a dangling link, a link out of the case or an
    unreadable dir is something (or cannot be told apart from it), so false."""
    path = arguments.path
    problem = existence_problem(context.case_dir, path)
    if problem == "does not exist":
        return True, f"{path} does not exist"
    return False, f"{path} {problem or 'exists'}"


@builtin("files", FileContainsArguments)
def file_contains(context: BuiltinContext, arguments: FileContainsArguments) -> ValueWithRationale:
    path, text = arguments.path, arguments.text
    content, problem = case_lines(context, path)
    if content is None:
        return False, problem
    found = text.lower() in content.lower() if arguments.ignore_case else text in content
    return found, f"{path} {'contains' if found else 'does not contain'} {text!r}"


@builtin("files", RegexArguments)
def file_contains_regex(context: BuiltinContext, arguments: RegexArguments) -> ValueWithRationale:
    """`re.search(pattern, text)`, as rewardkit's: `^` and `$` anchor at the text's ends
    (`(?m)` makes them per line)."""
    return _search(context, arguments.path, arguments.pattern, 0)


def _search(context: BuiltinContext, path: str, pattern: str, flags: int) -> ValueWithRationale:
    content, problem = case_lines(context, path)
    if content is None:
        return False, problem
    match = re.search(pattern, content, flags)
    if match is None:
        return False, f"{path} has no match for /{pattern}/"
    return True, f"{path} matches /{pattern}/ at {match.group(0)[:_SHOWN_CHARS]!r}"


@builtin("files", FileMatchesArguments, one_of=(("pattern", "expected"),))
def file_matches(context: BuiltinContext, arguments: FileMatchesArguments) -> ValueWithRationale:
    """`pattern`: a regex search with `^` and `$` per line (re.MULTILINE), as this
    verifier always had it; `expected`: rewardkit's meaning, the stripped content
    equals the stripped text."""
    path, pattern, expected = arguments.path, arguments.pattern, arguments.expected
    if pattern is not None:
        return _search(context, path, pattern, re.MULTILINE)
    content, problem = case_lines(context, path)
    if content is None:
        return False, problem
    equal = content.strip() == (expected or "").strip()
    if equal:
        return True, f"{path} is the expected text"
    return False, f"{path} differs from the expected text: {_first_difference(content, expected)}"


@builtin("files", FilesEqualArguments, one_of=(("path2", "reference"),))
def files_equal(context: BuiltinContext, arguments: FilesEqualArguments) -> ValueWithRationale:
    path1, path2, reference = arguments.path1, arguments.path2, arguments.reference
    first, problem = case_lines(context, path1)
    if first is None:
        return False, problem
    second: str | None
    if reference is not None:
        second, other = reference_text(context, reference), f"the reference {reference}"
    else:
        second, problem = case_lines(context, path2 or "")
        if second is None:
            return False, problem
        other = str(path2)
    a, b = (_normalized(text, arguments.ignore_whitespace) for text in (first, second))
    if a == b:
        return True, f"{path1} equals {other}"
    return False, f"{path1} differs from {other}: {_first_difference(a, b)}"


@builtin(
    "files", DiffRatioArguments, one_of=(("expected", "reference"),), score_range=PARTIAL_CREDIT
)
def diff_ratio(context: BuiltinContext, arguments: DiffRatioArguments) -> ValueWithRationale:
    """Partial credit: difflib's similarity ratio in [0, 1] between the file and the text.

    Character by character while both are short; line by line beyond
    CHARACTER_DIFF_LIMIT characters, because the character ratio is quadratic and a
    case must not be able to make grading slow.
    """
    import difflib  # imported by the one builtin that needs it: start-up time

    path, expected, reference = arguments.path, arguments.expected, arguments.reference
    content, problem = case_lines(context, path)
    if content is None:
        return 0.0, problem
    target = reference_text(context, reference) if reference is not None else expected or ""
    content, target = content.strip(), target.strip()  # as rewardkit's diff_ratio
    if max(len(content), len(target)) <= CHARACTER_DIFF_LIMIT:
        ratio, unit = difflib.SequenceMatcher(None, content, target).ratio(), "characters"
    else:
        lines = (content.splitlines(), target.splitlines())
        ratio, unit = difflib.SequenceMatcher(None, *lines).ratio(), "lines"
    return ratio, f"{path} is {ratio:.3f} similar to the expected text (by {unit})"


def _normalized(text: str, ignore_whitespace: bool) -> str:
    """Stripped, as rewardkit's files_equal compares; runs of whitespace as one space."""
    return " ".join(text.split()) if ignore_whitespace else text.strip()


def _first_difference(actual: str, expected: str | None) -> str:
    """Where two texts first differ, as line and column with a little of each side."""
    expected = expected or ""
    index = next(
        (i for i, (a, b) in enumerate(zip(actual, expected, strict=False)) if a != b),
        min(len(actual), len(expected)),
    )
    line = actual.count("\n", 0, index) + 1
    column = index - (actual.rfind("\n", 0, index) + 1) + 1
    return (
        f"first at line {line}, column {column}: {actual[index : index + 40]!r} "
        f"instead of {expected[index : index + 40]!r}"
    )
