"""Builtins over test reports: partial credit (`tests/pass_rate`) and its gate
(`tests/all_passed`).

Where the report comes from:
- `report` alone: whatever file (or files, by glob) the case holds; the agent could
  have written it.
- `report` with `command`: what the command wrote while it ran, in the sandbox. A
  report left in the case as it was proves nothing, so only reports the command wrote
  or rewrote count; one it left as it was is stale. As root the command runs in a
  private copy of the case, where the report is found by a probe of the dir it ran in
  (verifier.sandbox.WorkdirProbe).
- `runner` (`pytest`, `go`): the verifier builds a hardened command itself (runners.py)
  and its report comes back from outside the case copy ($VERIFIER_RESULTS).

Which tests count: every test of the report; or, with a trusted list (`tests`,
`fail_to_pass`, `pass_to_pass`: testlists.py), only the listed ones, a missing or
skipped listed test counting as failed.

Every read goes through verifier.casefiles and every parse through reports.py, so a
missing, empty, malformed, huge, looping or out-of-case report is a failure with
that fact as its rationale, never an error. A toolchain that cannot run the tests at
all, judged without the case, is an error (toolchain.py): reward.on_error decides.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from verifier.casefiles import CaseFile, list_case, read_case_file, resolve_inside
from verifier.config import Key, Locator
from verifier.config.fields import Choice, Number, Text
from verifier.globs import Glob
from verifier.judges.base import JudgeAnswer
from verifier.judges.builtins.arguments import (
    CommandLine,
    PathOrGlob,
    ReferencePath,
    TestIdList,
    Words,
)
from verifier.judges.builtins.files import MAX_FILE_BYTES
from verifier.judges.builtins.process import ENV, PROVIDE, TIMEOUT, describe_run, provided_files
from verifier.judges.builtins.registry import PARTIAL_CREDIT, BuiltinContext, builtin
from verifier.judges.builtins.reports import (
    ERRORED,
    FAILED,
    FORMATS,
    PASSED,
    SKIPPED,
    Outcome,
    Report,
    ReportError,
    merge,
    parse_report,
)
from verifier.judges.builtins.runners import (
    PYTEST_TAMPERED_MARK,
    RUNNERS,
    PytestOptions,
    RunnerPlan,
    ini_problem,
    plan_runner,
    program_problem,
)
from verifier.judges.builtins.testlists import (
    GROUPS,
    MISSING,
    Selection,
    TrustedTests,
    overlap,
    pytest_file,
    select,
)
from verifier.judges.builtins.toolchain import (
    PROBE_TIMEOUT_S,
    ToolchainFault,
    check_program,
    check_start,
    run_without_case,
)
from verifier.results import CTRF_DETAILS
from verifier.sandbox import Command, CommandRun, Sandbox

MAX_REPORTS = 1000  # files one glob may match
MAX_TOTAL_BYTES = 64 * 1024 * 1024  # read across them
MAX_NAMED = 20  # tests named in a rationale
MAX_NAME_CHARS = 200
MAX_RATIONALE_CHARS = 2000
MAX_DETAIL_NAMES = 100  # failing tests listed in judges.json
MAX_CTRF_TESTS = 10_000  # tests of one judge in ctrf.json (the summary counts them all)
MAX_CTRF_NAME_CHARS = 1000
_COUNT_RESERVE = 32  # characters kept on a line of names for "and 1234 more"
_COMMAND_CHARS = 800  # of the command's output, when its report is unusable
SIGNATURE_SUFFIX = ".sig"  # beside a signed report: its HMAC, in hex
_ORDER = (FAILED, ERRORED, SKIPPED, PASSED)  # how a rationale names the tests
_LISTED_ORDER = (MISSING, *_ORDER)
_CTRF_STATUS = {
    PASSED: "passed",
    FAILED: "failed",
    ERRORED: "failed",
    SKIPPED: "skipped",
    MISSING: "failed",
}
_CTRF_RAW = {ERRORED: "error", MISSING: "missing"}
_MISSING_MESSAGE = "listed, and not in the report (not collected, renamed or deleted)"
_SKIPPED_MESSAGE = "listed, and skipped: a listed test must run, so it counts as failed"

REPORT = Key("report", PathOrGlob())
FORMAT = Key("format", Choice(FORMATS, description="detected from the report when not given"))
COMMAND = Key("command", CommandLine(description="run first (sandboxed); writes the report"))
MIN_TESTS = Key(
    "min_tests",
    Number(
        minimum=1,
        integer=True,
        problem="must be a whole number of tests, 1 or more",
        description="fewer tests run (skipped ones aside) is a failure",
    ),
    default=1,
)
TESTS = Key(
    "tests",
    TestIdList(
        description="only these tests count (a missing or skipped one counts as failed): "
        "a list of ids, or a file beside eval.yaml"
    ),
)
FAIL_TO_PASS = Key(
    "fail_to_pass",
    TestIdList(description="SWE-bench's FAIL_TO_PASS: the tests the fix must make pass"),
)
PASS_TO_PASS = Key(
    "pass_to_pass",
    TestIdList(description="SWE-bench's PASS_TO_PASS: the tests that must keep passing"),
)
RUNNER = Key(
    "runner",
    Choice(
        RUNNERS,
        description="the verifier runs the tests itself, hardened against the case "
        "(instead of report and command)",
    ),
)
EXECUTABLE = Key(
    "executable",
    Text(
        non_empty=True,
        description="the runner's program in the toolchain: python3 (pytest) or go, a "
        "name found in PATH or an absolute path",
        check=program_problem,
    ),
)
RUN_PATHS = Key(
    "paths",
    Words(
        description="what the runner runs: pytest's files or dirs (default: the listed "
        "tests' files, else the ini's testpaths), go's packages (default ./...)"
    ),
)
ARGS = Key("args", Words(description="more arguments for pytest or go test, after the verifier's"))
INI = Key(
    "ini",
    ReferencePath(
        kind="file",
        check=ini_problem,
        description="runner pytest: the trusted pytest configuration beside eval.yaml "
        "(pytest.ini, tox.ini, setup.cfg, pyproject.toml); default: none",
    ),
)
PLUGINS = Key(
    "plugins",
    Words(
        description="runner pytest: plugin modules of the toolchain to load (autoload is "
        "off), e.g. pytest_timeout"
    ),
)
NATIVE_MODULES = Key(
    "native_modules",
    Words(
        description="runner pytest: the repo's files or dirs whose native extension "
        "modules may load (modules built in place); any other one the tests load voids "
        "the run"
    ),
)
ARGUMENTS = (
    REPORT,
    FORMAT,
    COMMAND,
    TIMEOUT,
    ENV,
    PROVIDE,
    MIN_TESTS,
    TESTS,
    FAIL_TO_PASS,
    PASS_TO_PASS,
    RUNNER,
    EXECUTABLE,
    RUN_PATHS,
    ARGS,
    INI,
    PLUGINS,
    NATIVE_MODULES,
)
ONE_SOURCE = (("report", "runner"),)
_RUNNER_ONLY = ("executable", "paths", "args", "ini", "plugins", "native_modules")
_PYTEST_ONLY = ("ini", "plugins", "native_modules")
_ID_SHAPES = {
    "pytest": ("::", "a pytest node id (path::name)"),
    "go": ("/", "a go test id (Package/TestName)"),
}

Identity = tuple[int, int, int]  # a file's (inode, size, mtime_ns): changed when rewritten


@attrs.frozen
class Reading:
    """What the report files say, or the fact that makes them unusable."""

    report: Report | None
    files: tuple[str, ...]
    problem: str | None = None
    tool: str = ""  # what ran the tests, for ctrf.json (the format when not known)


@attrs.frozen
class Graded:
    """The shared verdict of both builtins: passed of total (total 0: the report was
    unusable, or too few tests ran), the rationale, and judges.json details."""

    passed: int
    total: int
    rationale: str
    details: dict[str, Any]


Judge = Callable[[Reading, dict[str, Any]], Graded]  # judge_reading, its limits bound


def check_arguments(given: Mapping[str, Any], bound: dict[str, Any], at: Locator) -> None:
    """Load errors for arguments that do not go together."""
    runner = bound["runner"]
    if runner is None:
        extra = next((name for name in _RUNNER_ONLY if name in given), None)
        if extra is not None:
            raise at.child(extra).error("is an argument of `runner:` (pytest or go)")
    else:
        for name in ("format", "command", "provide", *(_PYTEST_ONLY if runner == "go" else ())):
            if name in given:
                raise at.child(name).error(f"does not go with runner: {runner}")
    for native in bound["native_modules"] or ():
        if native.startswith("/") or ".." in native.split("/"):
            raise at.child("native_modules").error(
                f"{native!r} must be a path inside the repo, relative to its root"
            )
    clash = overlap(bound)
    if clash is not None:
        test, first, second = clash
        raise at.child(second).error(f"{test!r} is also in {first}: list a test once")
    for group in GROUPS if runner is not None else ():
        for test in bound[group] or ():
            problem = _runner_id_problem(runner, test)
            if problem is not None:
                raise at.child(group).error(f"{test!r} {problem}")


def _runner_id_problem(runner: str, test: str) -> str | None:
    """What keeps a listed id from naming a test the runner runs, or None."""
    mark, shape = _ID_SHAPES[runner]
    if mark not in test:
        return f"is not {shape}"
    path = pytest_file(test) if runner == "pytest" else ""
    if path.startswith("/") or ".." in path.split("/"):
        return "names a file outside the repo"
    return None


_TESTS_BUILTIN = functools.partial(
    builtin, "tests", *ARGUMENTS, runs_case_code=True, one_of=ONE_SOURCE, check=check_arguments
)


@_TESTS_BUILTIN(score_range=PARTIAL_CREDIT)
def pass_rate(context: BuiltinContext, **arguments: Any) -> JudgeAnswer:
    """passed / (passed + failed + errored) of the report, or passed / listed with a
    test list; 0.0 when the report is unusable."""
    graded = grade_tests(context, **arguments)
    value = graded.passed / graded.total if graded.total else 0.0
    return JudgeAnswer(value, graded.rationale, graded.details)


@_TESTS_BUILTIN()
def all_passed(context: BuiltinContext, **arguments: Any) -> JudgeAnswer:
    """True when the report is usable, enough tests ran, and every one counted passed."""
    graded = grade_tests(context, **arguments)
    return JudgeAnswer(
        graded.total > 0 and graded.passed == graded.total, graded.rationale, graded.details
    )


def grade_tests(
    context: BuiltinContext,
    report: str | Glob | None,
    format: str | None,
    command: str | list[str] | None,
    timeout: float,
    env: dict[str, str] | None,
    min_tests: int,
    tests: tuple[str, ...] | None,
    fail_to_pass: tuple[str, ...] | None,
    pass_to_pass: tuple[str, ...] | None,
    runner: str | None,
    executable: str | None,
    paths: tuple[str, ...] | None,
    args: tuple[str, ...] | None,
    ini: PurePosixPath | None,
    plugins: tuple[str, ...] | None,
    native_modules: tuple[str, ...] | None,
    provide: dict[str, Any] | None,
) -> Graded:
    """Get the report (run the runner or the command when there is one), and judge it."""
    lists = {"tests": tests, "fail_to_pass": fail_to_pass, "pass_to_pass": pass_to_pass}
    listed = TrustedTests.of(lists)
    judge = functools.partial(judge_reading, min_tests=min_tests, listed=listed)
    if runner is not None:
        options = PytestOptions(
            ini=context.config_dir / ini if ini is not None else None,
            plugins=plugins or (),
            native_modules=native_modules or (),
        )
        plan = plan_runner(runner, executable, paths, args, options, listed)
        return run_tests(context.command_sandbox, context.case_dir, plan, timeout, env, judge)
    assert report is not None  # one of report and runner: Builtin.bind
    if command is None:
        return judge(read_reports(context.case_dir, report, format), {})
    provided = provided_files(context, provide)
    return run_report_command(
        context.command_sandbox,
        context.case_dir,
        command,
        report,
        format,
        timeout,
        env,
        provided,
        judge,
    )


def run_report_command(
    sandbox: Sandbox,
    case_dir: Path,
    command: str | list[str],
    report: str | Glob,
    format: str | None,
    timeout: float,
    env: dict[str, str] | None,
    provided: Mapping[str, Path],
    judge: Judge,
) -> Graded:
    """Run the author's command (with the trusted files it is handed), and judge the
    reports it wrote."""
    check_program(sandbox, command, env)
    request = Command(command, timeout, env=env or {}, provided=provided)
    run = sandbox.run(request, case_dir, FreshReports(report, format))
    details: dict[str, Any] = {"sandbox": run.confinement, "command": _ending(run)}
    if run.timed_out:
        return _unusable(f"the command timed out after {timeout:g}s; no report counts", details)
    reading = run.collected if isinstance(run.collected, Reading) else None
    if reading is None or reading.report is None:
        check_start(sandbox, run, command, env)
    if reading is None:  # it never started
        return _unusable(f"the command did not run: {describe_run(run, timeout)}", details)
    graded = judge(reading, details)
    if reading.report is None:
        said = describe_run(run, timeout, _COMMAND_CHARS)
        return attrs.evolve(graded, rationale=f"{graded.rationale}\nthe command: {said}")
    return graded


def run_tests(
    sandbox: Sandbox,
    case_dir: Path,
    plan: RunnerPlan,
    timeout: float,
    env: dict[str, str] | None,
    judge: Judge,
) -> Graded:
    """Run the hardened runner, and judge the report it handed back. Without a usable
    report (or after pytest's internal or usage error) the toolchain is probed without
    the case: a fault there is an error, else what the case did is a failure."""
    environment = {**plan.env, **(env or {})}
    for program in plan.programs:
        check_program(sandbox, [program], environment)
    key = secrets.token_bytes(32) if plan.signed else None
    returned = (plan.report, f"{plan.report}{SIGNATURE_SUFFIX}") if plan.report else ()
    request = Command(
        plan.command,
        timeout,
        env=environment,
        provided=plan.provided,
        returned=returned,
        stdin=key,
        separate_stdout=plan.report is None,
        stdout_bytes=MAX_FILE_BYTES,
    )
    run = sandbox.run(request, case_dir)
    details: dict[str, Any] = {
        "sandbox": run.confinement,
        "runner": plan.name,
        "command": _ending(run),
    }
    if run.timed_out:
        return _unusable(f"the tests timed out after {timeout:g}s; no report counts", details)
    if plan.tampered_code is not None and run.exit_code == plan.tampered_code:
        return _unusable(tampering(run, plan), details)
    reading = handed_back(run, plan, key)
    broken = run.exit_code in plan.probe_codes  # pytest's internal or usage error
    if reading.report is None or broken:
        probe_toolchain(sandbox, plan, environment, timeout)
    graded = judge(reading, details)
    if reading.report is None or broken:
        said = describe_run(run, timeout, _COMMAND_CHARS)
        return attrs.evolve(graded, rationale=f"{graded.rationale}\n{plan.name}: {said}")
    return graded


def handed_back(run: CommandRun, plan: RunnerPlan, key: bytes | None) -> Reading:
    """The report the runner handed back (its file, or its stdout), or why none counts:
    missing, unusable, not signed by the launcher, or from a runner that was killed."""
    files = (plan.label,)
    if plan.report is None:
        if run.signal is not None:
            killed = f"{plan.label} was killed by {signal.Signals(run.signal).name}"
            return Reading(None, files, f"{killed}: its events do not count", plan.name)
        if run.stdout_cut_bytes:
            problem = f"{plan.label} printed more than {MAX_FILE_BYTES} bytes of events"
            return Reading(None, files, problem, plan.name)
        found: CaseFile | None = CaseFile((run.stdout or "").encode(), None)
    else:
        found = run.returned.get(plan.report)
    if found is None or found.data is None:
        why = found.problem if found is not None else "it did not run"
        return Reading(None, files, f"{plan.label} left no report ({why})", plan.name)
    if key is not None and plan.report is not None:
        signature = run.returned.get(f"{plan.report}{SIGNATURE_SUFFIX}")
        if not _signed(key, found.data, signature):
            return Reading(
                None,
                files,
                f"the report of {plan.label} is not the launcher's: its signature does not verify",
                plan.name,
            )
    try:
        return Reading(parse_report(found.data, plan.format), files, tool=plan.name)
    except ReportError as error:
        return Reading(None, files, f"the report of {plan.label} {error}", plan.name)


def tampering(run: CommandRun, plan: RunnerPlan) -> str:
    """Why a run that ended with the runner's tampered code counts nothing: what its
    runner found, as the last line it printed says (the case may print such lines too:
    they can only fail it)."""
    found = [
        line.split(PYTEST_TAMPERED_MARK, 1)[1]
        for line in run.tail.splitlines()
        if PYTEST_TAMPERED_MARK in line
    ]
    said = f": {_cut_text(found[-1], _COMMAND_CHARS)}" if found else ""
    return (
        f"the code under test tampered with {plan.label}, so no test counts (exit "
        f"{run.exit_code}){said}"
    )


def _signed(key: bytes, data: bytes, signature: CaseFile | None) -> bool:
    """Whether signature holds the HMAC-SHA256 of data under key (the launcher's)."""
    if signature is None or signature.data is None:
        return False
    expected = hmac.new(key, data, hashlib.sha256).hexdigest().encode("ascii")
    return hmac.compare_digest(expected, signature.data.strip())


def probe_toolchain(
    sandbox: Sandbox, plan: RunnerPlan, env: Mapping[str, str], timeout: float
) -> None:
    """ToolchainFault unless the runner's probe succeeds in an empty dir."""
    limit = min(timeout, PROBE_TIMEOUT_S)
    probe = run_without_case(sandbox, plan.probe, env, plan.provided, limit)
    if probe.timed_out or probe.exit_code != 0:
        said = describe_run(probe, limit, _COMMAND_CHARS)
        raise ToolchainFault(
            f"the toolchain cannot run {plan.name} (probed in an empty dir, without the "
            f"case): {said}",
            {"sandbox": probe.confinement, "runner": plan.name},
        )


def judge_reading(
    reading: Reading, details: dict[str, Any], *, min_tests: int, listed: TrustedTests | None
) -> Graded:
    """The counts when they are usable (a report, at least min_tests run), and why."""
    if reading.report is None:
        return _unusable(reading.problem or "", details)
    report = reading.report
    if listed is not None:
        return judge_listed(select(report, listed), reading, min_tests, details)
    counts = report.counts
    tests = ctrf_tests(reading.tool or report.format, report.outcomes)
    details = {**details, "tests": _details(reading, report), CTRF_DETAILS: tests}
    summary = summarize(report, reading.files)
    if counts.ran == 0:
        return _unusable(f"no tests ran: {summary}", details)
    if counts.ran < min_tests:
        fewer = f"only {counts.ran} tests ran, fewer than min_tests {min_tests}"
        return _unusable(f"{fewer}: {summary}", details)
    return Graded(counts.passed, counts.ran, summary, details)


def judge_listed(
    selection: Selection, reading: Reading, min_tests: int, details: dict[str, Any]
) -> Graded:
    """passed of the listed tests; too few of them ran (in the report, not skipped) is
    a failure."""
    assert reading.report is not None
    report = reading.report
    notes = {MISSING: _MISSING_MESSAGE, SKIPPED: _SKIPPED_MESSAGE}
    outcomes = [
        Outcome(entry.test, entry.result, notes.get(entry.result, entry.message))
        for entry in selection.listed
    ]
    details = {
        **details,
        "tests": _listed_details(selection, reading),
        CTRF_DETAILS: ctrf_tests(reading.tool or report.format, outcomes),
    }
    summary = summarize_listed(selection, reading)
    if selection.found < min_tests:
        fewer = f"only {selection.found} listed tests ran, fewer than min_tests {min_tests}"
        if not selection.found:
            fewer = f"none of the {len(outcomes)} listed tests ran"
        return _unusable(f"{fewer}: {summary}", details)
    return Graded(selection.passed, len(outcomes), summary, details)


def _unusable(rationale: str, details: dict[str, Any]) -> Graded:
    return Graded(0, 0, rationale, details)


class FreshReports:
    """The sandbox's probe: before the command runs, the identity of each report already
    there; after it, the reports it wrote or rewrote, read in the dir where it ran."""

    def __init__(self, location: str | Glob, format: str | None) -> None:
        self.location = location
        self.format = format
        self.existing: dict[str, Identity] = {}

    def before(self, workdir: Path) -> None:
        found, _ = matching_files(workdir, self.location)
        self.existing = {
            path: identity
            for path in found
            if (identity := file_identity(workdir, path)) is not None
        }

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
        return (
            f"no file matching {location.pattern} was written by the command; "
            f"{len(stale)} stale: {_listed(stale)}"
        )
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
    return _with_names(head, report.outcomes, _ORDER)


def summarize_listed(selection: Selection, reading: Reading) -> str:
    """The listed tests' counts and pass rate, each group's, the tests left out, the
    report files; then the listed tests by outcome, missing and failed first."""
    assert reading.report is not None
    total = len(selection.listed)
    count = {result: selection.count(result) for result in _LISTED_ORDER}
    parts = [
        f"{count[PASSED]} of {total} listed tests passed, {count[FAILED]} failed, "
        f"{count[ERRORED]} errored, {count[SKIPPED]} skipped, {count[MISSING]} missing"
        + (" (skipped and missing ones count as failed)" if count[SKIPPED] + count[MISSING] else "")
        + f": pass rate {count[PASSED] / total:.4g}"
    ]
    for group, passed, listed in _group_counts(selection):
        parts.append(f"{group} {passed} of {listed} passed")
    if selection.unlisted:
        parts.append(f"{selection.unlisted} tests of the report not listed, ignored")
    parts.append(f"from {_listed(reading.files)} ({reading.report.format})")
    outcomes = [Outcome(entry.test, entry.result) for entry in selection.listed]
    return _with_names("; ".join(parts), outcomes, _LISTED_ORDER)


def _with_names(head: str, outcomes: Sequence[Outcome], order: Sequence[str]) -> str:
    names = named_outcomes(outcomes, MAX_NAMED, MAX_RATIONALE_CHARS - len(head), order)
    text = "\n".join([head, *names])
    return text if len(text) <= MAX_RATIONALE_CHARS else text[: MAX_RATIONALE_CHARS - 6] + " [cut]"


def _group_counts(selection: Selection) -> list[tuple[str, int, int]]:
    """(group, passed, listed) of fail_to_pass and pass_to_pass, those that were given."""
    return [
        (
            group,
            selection.count(PASSED, group),
            sum(1 for entry in selection.listed if entry.group == group),
        )
        for group in GROUPS[1:]
        if any(entry.group == group for entry in selection.listed)
    ]


def named_outcomes(
    outcomes: Sequence[Outcome], names_left: int, chars_left: int, order: Sequence[str] = _ORDER
) -> list[str]:
    """One line per outcome ('failed: a, b and 3 more'), in all at most names_left names
    and about chars_left characters: the names that do not fit are counted."""
    lines = []
    for result in order:
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
    failing = [
        _cut(outcome.test) for outcome in report.outcomes if outcome.result in (FAILED, ERRORED)
    ]
    return {
        "reports": list(reading.files[:MAX_DETAIL_NAMES]),
        "format": report.format,
        **attrs.asdict(report.counts, recurse=False),
        "failing": failing[:MAX_DETAIL_NAMES],
    }


def _listed_details(selection: Selection, reading: Reading) -> dict[str, Any]:
    assert reading.report is not None
    failing = [_cut(entry.test) for entry in selection.listed if entry.result != PASSED]
    return {
        "reports": list(reading.files[:MAX_DETAIL_NAMES]),
        "format": reading.report.format,
        "listed": len(selection.listed),
        **{
            result: selection.count(result)
            for result in (PASSED, FAILED, ERRORED, SKIPPED, MISSING)
        },
        "unlisted": selection.unlisted,
        "failing": failing[:MAX_DETAIL_NAMES],
        **{
            group: {"passed": passed, "listed": listed}
            for group, passed, listed in _group_counts(selection)
        },
    }


def ctrf_tests(tool: str, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The judge's tests as ctrf.json's results (output.py merges the judges'): each
    test's name and CTRF status, at most MAX_CTRF_TESTS of them (those that did not
    pass first), and the summary of all."""
    statuses = [_CTRF_STATUS[outcome.result] for outcome in outcomes]
    summary = {status: statuses.count(status) for status in ("passed", "failed", "skipped")}
    shown = sorted(range(len(outcomes)), key=lambda index: statuses[index] == "passed")
    tests = []
    for index in sorted(shown[:MAX_CTRF_TESTS]):
        outcome = outcomes[index]
        entry: dict[str, Any] = {
            "name": outcome.test[:MAX_CTRF_NAME_CHARS],
            "status": statuses[index],
            "duration": 0,
        }
        if outcome.result in _CTRF_RAW:
            entry["rawStatus"] = _CTRF_RAW[outcome.result]
        if outcome.message:
            entry["message"] = outcome.message
        tests.append(entry)
    return {"tool": tool, "summary": summary, "tests": tests}


def _ending(run: CommandRun) -> dict[str, Any]:
    return {"exit_code": run.exit_code, "signal": run.signal, "timed_out": run.timed_out}


def _listed(paths: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(_cut(path) for path in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _cut(name: str) -> str:
    return _cut_text(name, MAX_NAME_CHARS)


def _cut_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
