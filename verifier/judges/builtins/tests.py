"""Builtins over test reports: partial credit (`tests/pass_rate`) and its gate
(`tests/all_passed`).

The report is whatever file (or files, by glob) the case holds, or, with `command`,
what the command wrote while it ran: a report left in the case by the agent proves
nothing, so with a command only reports it wrote or rewrote count, and one it left
as it was is stale. The command runs in the sandbox, and when the grader is root that
is a private copy of the case: the report then exists only there, so it is found and
read by a probe of the dir the command ran in (verifier.judges.sandbox.WorkdirProbe).

Every read goes through verifier.casefiles and every parse through reports.py, so a
missing, empty, malformed, huge, looping or out-of-case report is a failure with
that fact as its rationale, never an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verifier.casefiles import list_case, read_case_file, resolve_inside
from verifier.config import Key
from verifier.config.fields import Choice, Number
from verifier.globs import Glob
from verifier.judges.base import JudgeAnswer
from verifier.judges.builtins.fields import CommandLine, PathOrGlob
from verifier.judges.builtins.files import MAX_FILE_BYTES
from verifier.judges.builtins.process import ENV, PROVIDE, TIMEOUT, describe_run, provided_files
from verifier.judges.builtins.registry import PARTIAL_CREDIT, BuiltinContext, builtin
from verifier.judges.builtins.reports import (
    ERRORED,
    FAILED,
    FORMATS,
    PASSED,
    SKIPPED,
    Counts,
    Outcome,
    Report,
    ReportError,
    merge,
    parse_report,
)
from verifier.judges.sandbox import CommandRun, run_in_sandbox
from verifier.named import NamedTuple

MAX_REPORTS = 1000  # files one glob may match
MAX_TOTAL_BYTES = 64 * 1024 * 1024  # read across them
MAX_NAMED = 20  # tests named in a rationale
MAX_NAME_CHARS = 200
MAX_RATIONALE_CHARS = 2000
MAX_DETAIL_NAMES = 100  # failing tests listed in judges.json
_COUNT_RESERVE = 32  # characters kept on a line of names for "and 1234 more"
_COMMAND_TAIL_CHARS = 800  # of the command's output, when its report is unusable

REPORT = Key("report", PathOrGlob(), required=True)
FORMAT = Key("format", Choice(FORMATS, description="detected from the report when not given"))
COMMAND = Key("command", CommandLine(description="run first (sandboxed); writes the report"))
MIN_TESTS = Key(
    "min_tests",
    Number(minimum=1, integer=True, problem="must be a whole number of tests, 1 or more",
           description="fewer tests run (skipped ones aside) is a failure"),
    default=1,
)  # fmt: skip
ARGUMENTS = (REPORT, FORMAT, COMMAND, TIMEOUT, ENV, PROVIDE, MIN_TESTS)

Identity = tuple[int, int, int]  # a file's (inode, size, mtime_ns): changed when rewritten


class Reading(NamedTuple):
    """What the report files say, or the fact that makes them unusable."""

    report: Report | None
    files: tuple[str, ...]
    problem: str | None = None


class Graded(NamedTuple):
    """The shared verdict of both builtins: counts when a report was usable and enough
    tests ran (else None), the rationale, and judges.json details."""

    counts: Counts | None
    rationale: str
    details: dict[str, Any]


@builtin("tests", *ARGUMENTS, runs_case_code=True, score_range=PARTIAL_CREDIT)
def pass_rate(context: BuiltinContext, **arguments: Any) -> JudgeAnswer:
    """passed / (passed + failed + errored) of the report; 0.0 when it is unusable."""
    graded = grade_reports(context, **arguments)
    counts = graded.counts
    value = counts.passed / counts.ran if counts is not None else 0.0
    return JudgeAnswer(value, graded.rationale, graded.details)


@builtin("tests", *ARGUMENTS, runs_case_code=True)
def all_passed(context: BuiltinContext, **arguments: Any) -> JudgeAnswer:
    """True when the report is usable, enough tests ran, and none failed or errored."""
    graded = grade_reports(context, **arguments)
    counts = graded.counts
    passed = counts is not None and counts.passed == counts.ran
    return JudgeAnswer(passed, graded.rationale, graded.details)


def grade_reports(
    context: BuiltinContext,
    report: str | Glob,
    format: str | None,
    command: str | list[str] | None,
    timeout: float,
    env: dict[str, str] | None,
    min_tests: int,
    provide: dict[str, Any] | None = None,
) -> Graded:
    """Run the command (when there is one), read the reports, and judge their counts."""
    if command is None:
        return judge_reading(read_reports(context.case_dir, report, format), min_tests, {})
    probe = FreshReports(report, format)
    run = run_in_sandbox(command, context.case_dir, timeout=timeout, env=env, probe=probe,
                         provided=provided_files(context, provide))  # fmt: skip
    details: dict[str, Any] = {"sandbox": run.confinement, "command": _ending(run)}
    if run.timed_out:
        return Graded(None, f"the command timed out after {timeout:g}s; no report counts", details)
    if not isinstance(run.collected, Reading):  # it never started
        return Graded(None, f"the command did not run: {describe_run(run, timeout)}", details)
    graded = judge_reading(run.collected, min_tests, details)
    if run.collected.report is None:
        said = describe_run(run, timeout)[:_COMMAND_TAIL_CHARS]
        return graded._replace(rationale=f"{graded.rationale}\nthe command: {said}")
    return graded


def judge_reading(reading: Reading, min_tests: int, details: dict[str, Any]) -> Graded:
    """The counts when they are usable (a report, at least min_tests run), and why."""
    if reading.report is None:
        return Graded(None, reading.problem or "", details)
    report = reading.report
    counts = report.counts
    details = {**details, "tests": _details(reading, report)}
    summary = summarize(report, reading.files)
    if counts.ran == 0:
        return Graded(None, f"no tests ran: {summary}", details)
    if counts.ran < min_tests:
        fewer = f"only {counts.ran} tests ran, fewer than min_tests {min_tests}"
        return Graded(None, f"{fewer}: {summary}", details)
    return Graded(counts, summary, details)


class FreshReports:
    """The sandbox's probe: before the command runs, the identity of each report already
    there; after it, the reports it wrote or rewrote, read in the dir where it ran."""

    def __init__(self, location: str | Glob, format: str | None) -> None:
        self.location = location
        self.format = format
        self.existing: dict[str, Identity] = {}

    def before(self, workdir: Path) -> None:
        found, _ = matching_files(workdir, self.location)
        self.existing = {path: identity for path in found
                         if (identity := file_identity(workdir, path)) is not None}  # fmt: skip

    def after(self, workdir: Path) -> Reading:
        return read_reports(workdir, self.location, self.format, self.existing)


def read_reports(
    root: Path,
    location: str | Glob,
    format: str | None,
    existing: Mapping[str, Identity] | None = None,
) -> Reading:
    """The reports at location under root, merged, or the fact that stops them.

    `existing`: the identities of reports before a command ran; those unchanged since
    are stale (a lone path is then unusable; a glob leaves them out)."""
    found, problem = matching_files(root, location)
    if problem is not None:
        return Reading(None, (), problem)
    stale: list[str] = []
    if existing is not None:
        stale = [path for path in found if _unchanged(root, path, existing)]
        found = [path for path in found if path not in stale]
    if not found:
        return Reading(None, (), _nothing_found(location, stale))
    reports = []
    total = 0
    for path in found:
        read = read_case_file(root, path, MAX_FILE_BYTES)
        if read.data is None:
            return Reading(None, tuple(found), f"report {_cut(path)} {read.problem}")
        total += len(read.data)
        if total > MAX_TOTAL_BYTES:
            return Reading(None, tuple(found), f"the reports are over {MAX_TOTAL_BYTES} bytes")
        try:
            reports.append(parse_report(read.data, format))
        except ReportError as error:
            return Reading(None, tuple(found), f"report {_cut(path)} {error}")
    return Reading(merge(reports), tuple(found))


def matching_files(root: Path, location: str | Glob) -> tuple[list[str], str | None]:
    """The paths a location names under root (a path names itself, present or not), or
    the fact that stops a glob's listing: an incomplete listing could hide a report."""
    if isinstance(location, str):
        return [location], None
    listing = list_case(root, location.base)
    if listing.problem is not None:
        return [], f"the files matching {location.pattern} cannot all be listed: {listing.problem}"
    found = [path for path in listing.files() if location.matches(path)]
    if len(found) > MAX_REPORTS:
        return [], f"{len(found)} files match {location.pattern}, over the {MAX_REPORTS} cap"
    return found, None


def file_identity(root: Path, relative: str) -> Identity | None:
    """(inode, size, mtime_ns) of the file a case path names, None when there is none."""
    path, _ = resolve_inside(root, relative)
    if path is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def _unchanged(root: Path, path: str, existing: Mapping[str, Identity]) -> bool:
    identity = file_identity(root, path)
    return identity is not None and identity == existing.get(path)


def _nothing_found(location: str | Glob, stale: Sequence[str]) -> str:
    if isinstance(location, str):  # a lone path that is found and unusable is stale
        return f"report {_cut(location)} is stale: the command did not write it (it was there)"
    if stale:
        return (f"no file matching {location.pattern} was written by the command; "
                f"{len(stale)} stale: {_listed(stale)}")  # fmt: skip
    return f"no file matches {location.pattern}"


def summarize(report: Report, files: Sequence[str]) -> str:
    """The counts, the pass rate, then the tests by outcome (failed and errored first),
    at most MAX_NAMED of them, within MAX_RATIONALE_CHARS."""
    counts = report.counts
    rate = f"pass rate {counts.passed / counts.ran:.4g}" if counts.ran else "no pass rate"
    head = (
        f"{counts.passed} of {counts.ran} tests passed, {counts.failed} failed, "
        f"{counts.errored} errored ({counts.skipped} skipped): {rate}; "
        f"from {_listed(files)} ({report.format})"
    )
    names = named_outcomes(report.outcomes, MAX_NAMED, MAX_RATIONALE_CHARS - len(head))
    text = "\n".join([head, *names])
    return text if len(text) <= MAX_RATIONALE_CHARS else text[: MAX_RATIONALE_CHARS - 6] + " [cut]"


def named_outcomes(outcomes: Sequence[Outcome], names_left: int, chars_left: int) -> list[str]:
    """One line per outcome ('failed: a, b and 3 more'), in all at most names_left names
    and about chars_left characters: the names that do not fit are counted."""
    lines = []
    for result in (FAILED, ERRORED, SKIPPED, PASSED):
        names = [_cut(outcome.test) for outcome in outcomes if outcome.result == result]
        if not names:
            continue
        line = f"{result}:"
        shown = 0
        for name in names:
            if shown == names_left or len(line) + len(name) + _COUNT_RESERVE > chars_left:
                break
            line += (" " if shown == 0 else ", ") + name
            shown += 1
        rest = len(names) - shown
        if rest:
            line += f" and {rest} more" if shown else f" {rest} not named"
        lines.append(line)
        names_left -= shown
        chars_left -= len(line) + 1
    return lines


def _details(reading: Reading, report: Report) -> dict[str, Any]:
    failing = [_cut(outcome.test) for outcome in report.outcomes
               if outcome.result in (FAILED, ERRORED)]  # fmt: skip
    return {
        "reports": list(reading.files[:MAX_DETAIL_NAMES]),
        "format": report.format,
        **report.counts._asdict(),
        "failing": failing[:MAX_DETAIL_NAMES],
    }


def _ending(run: CommandRun) -> dict[str, Any]:
    return {"exit_code": run.exit_code, "signal": run.signal, "timed_out": run.timed_out}


def _listed(paths: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(_cut(path) for path in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _cut(name: str) -> str:
    return name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 3] + "..."
