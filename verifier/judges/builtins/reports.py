"""Test reports as test runners write them, read into counts and each test's outcome.

Pure functions, bytes in and records out, no I/O: report_files.py reads the case's
report files, runner_reports.py what a hardened runner hands back. Four formats:

- `junit`: JUnit XML (pytest --junitxml, go-junit-report, jest-junit, Maven surefire's
  TEST-*.xml): every <testcase> under <testsuites>/<testsuite>, failed with a
  <failure>, errored with an <error>, skipped with a <skipped>, else passed.
- `pytest-json`: pytest-json-report's `tests[].outcome` (its `summary` when the
  report has no tests list); a module that failed to collect is one errored test.
- `go-json`: `go test -json` lines, each test's (and subtest's) final action; a
  package that failed with no failing test (its build failed) is one errored test.
- `ctrf`: CTRF JSON (https://ctrf.io; pytest-json-ctrf, jest-ctrf, and the trusted
  pytest launcher of `runner: pytest`): `results.tests[]` by `status`; `pending` is
  skipped, `other` errored, and a failure whose `rawStatus` says a fixture failed
  (`error`, pytest-json-ctrf's `setup_failed`/`teardown_failed`) errored.

The bytes come from the case, so nothing in them may cost more than reading them:
XML is read by expat handlers (no tree is built) and a DOCTYPE is refused before any
entity in it could be declared or expanded; JSON nesting too deep is a fact. Every
unusable report is a ReportError whose message completes "<the report's path> ...".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

FORMATS = ("junit", "pytest-json", "go-json", "ctrf")
PASSED, FAILED, ERRORED, SKIPPED = "passed", "failed", "errored", "skipped"

# pytest's outcomes: an expected failure that failed is skipped, one that passed passed.
_PYTEST_OUTCOMES = {
    "passed": PASSED,
    "xpassed": PASSED,
    "failed": FAILED,
    "error": ERRORED,
    "skipped": SKIPPED,
    "xfailed": SKIPPED,
}
_PYTEST_SUMMARY = {
    PASSED: ("passed", "xpassed"),
    FAILED: ("failed",),
    ERRORED: ("error",),
    SKIPPED: ("skipped", "xfailed"),
}
_GO_OUTCOMES = {"pass": PASSED, "fail": FAILED, "skip": SKIPPED}
# CTRF's statuses: `other` is neither a pass nor a skip, so it counts against the code.
_CTRF_OUTCOMES = {
    "passed": PASSED,
    "failed": FAILED,
    "skipped": SKIPPED,
    "pending": SKIPPED,
    "other": ERRORED,
}
# A failure's rawStatus that makes it an error: the launcher's, and pytest-json-ctrf's for a
# failed fixture (as pytest counts those).
_CTRF_ERROR_STATUSES = ("error", "errored", "setup_failed", "teardown_failed")
MESSAGE_CHARS = 1000  # a failure's rawStatus that makes it an error
# Before Go 1.24 a package that does not build is a plain line among the JSON events.
_GO_BUILD_FAILED = re.compile(rb"^FAIL\t(\S+) \[(?:build|setup) failed\]\s*$", re.MULTILINE)
_GO_PACKAGE_FAILURES = {
    "build failed": "[build failed]",
    "fail": "(package failed)",
    None: "(no result: the report ends before the package does)",
}
_GO_EVENT = re.compile(rb'^\{"(?:Time|Action|ImportPath)"', re.MULTILINE)
# The order in which a testcase's children decide its outcome: a failure outranks all.
_JUNIT_RANK = {PASSED: 0, SKIPPED: 1, ERRORED: 2, FAILED: 3}
_JUNIT_CHILDREN = {"skipped": SKIPPED, "error": ERRORED, "failure": FAILED}


class ReportError(ValueError):
    """The bytes are no usable report; str() completes '<path> ...' ('is empty')."""


@attrs.frozen
class Outcome:
    test: str
    result: str  # PASSED, FAILED, ERRORED or SKIPPED
    message: str = ""  # what the report says of a failure or skip (CTRF), cut short


@attrs.frozen
class Counts:
    passed: int = 0
    failed: int = 0
    errored: int = 0
    skipped: int = 0

    @property
    def ran(self) -> int:
        """The tests that count for a pass rate: skipped ones do not."""
        return self.passed + self.failed + self.errored

    def plus(self, other: Counts) -> Counts:
        return Counts(
            self.passed + other.passed,
            self.failed + other.failed,
            self.errored + other.errored,
            self.skipped + other.skipped,
        )

    @classmethod
    def of(cls, outcomes: Iterable[Outcome]) -> Counts:
        tally = dict.fromkeys((PASSED, FAILED, ERRORED, SKIPPED), 0)
        for outcome in outcomes:
            tally[outcome.result] += 1
        return cls(tally[PASSED], tally[FAILED], tally[ERRORED], tally[SKIPPED])


@attrs.frozen
class Report:
    """What one or more report files say."""

    format: str  # one of FORMATS, or several joined with "+" when files differ
    counts: Counts
    outcomes: tuple[Outcome, ...]  # empty when a report holds only totals


@attrs.frozen
class Reading:
    """What the report files say (merged), or the fact that makes them unusable."""

    report: Report | None
    files: tuple[str, ...]
    problem: str | None = None
    tool: str = ""  # what ran the tests, for ctrf.json (the format when not known)


def parse_report(data: bytes, report_format: str | None = None) -> Report:
    """The report in data, in `report_format` (detected when None), or ReportError saying
    why not."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    if not data.strip():
        raise ReportError("is empty")
    if report_format is not None:
        return _PARSERS[report_format](data)
    detected, document = _detect(data)
    if document is not None:  # a JSON document, already read to tell its format
        return _DOCUMENT_PARSERS[detected](document)
    return _PARSERS[detected](data)


def detect_format(data: bytes) -> str:
    """The format of a non-empty report, from its first bytes (a JSON document: its
    top-level keys); ReportError when none fits."""
    return _detect(data)[0]


def _detect(data: bytes) -> tuple[str, dict[str, Any] | None]:
    """(format, the JSON document when one had to be read to tell)."""
    text = data.lstrip()
    if text.startswith(b"<"):
        return "junit", None
    if text.startswith(b"{"):
        try:
            first = json.loads(text.split(b"\n", 1)[0])
        except (ValueError, RecursionError):  # a document spread over lines
            first = None
        if isinstance(first, dict) and "Action" in first:
            return "go-json", None
        document = _json_document(data)
        return ("ctrf" if isinstance(document.get("results"), dict) else "pytest-json"), document
    if _GO_EVENT.search(data) or _GO_BUILD_FAILED.search(data):  # go's own messages first
        return "go-json", None
    raise ReportError(
        "is not a test report (neither JUnit XML, pytest-json-report, go test -json nor CTRF)"
    )


def merge(reports: Sequence[Report]) -> Report:
    """Several files' reports as one: counts summed, outcomes in file order."""
    formats = sorted({report.format for report in reports})
    counts = Counts()
    for report in reports:
        counts = counts.plus(report.counts)
    outcomes = tuple(outcome for report in reports for outcome in report.outcomes)
    return Report("+".join(formats), counts, outcomes)


def parse_junit(data: bytes) -> Report:
    from xml.parsers import expat  # in the judge's process: batch workers stay small

    reader = _JUnitReader()
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = reader.refuse_doctype
    parser.EntityDeclHandler = reader.refuse_doctype
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as error:
        raise ReportError(f"is not well-formed XML ({error})") from None
    outcomes = tuple(reader.outcomes)
    return Report("junit", Counts.of(outcomes), outcomes)


class _JUnitReader:
    """expat handlers: each <testcase>, its outcome decided by the children it holds (a
    testcase inside another is part of it, not a test of its own)."""

    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []
        self.root: str | None = None
        self.depth = 0
        self.open_case: tuple[int, str] | None = None  # (depth, name) of the testcase read
        self.result = PASSED

    def refuse_doctype(self, *_: Any) -> None:
        raise ReportError("declares a DOCTYPE; refused (its entities are never expanded)")

    def start(self, tag: str, attributes: dict[str, str]) -> None:
        self.depth += 1
        if self.root is None:
            self.root = tag
            if tag not in ("testsuites", "testsuite"):
                raise ReportError(f"is XML but not a JUnit report (its root is <{tag[:100]}>)")
        if self.open_case is None:
            if tag == "testcase":
                self.open_case, self.result = (self.depth, _junit_name(attributes)), PASSED
        else:
            found = _JUNIT_CHILDREN.get(tag, PASSED)
            self.result = max(self.result, found, key=_JUNIT_RANK.__getitem__)

    def end(self, tag: str) -> None:
        if self.open_case is not None and self.open_case[0] == self.depth:
            self.outcomes.append(Outcome(self.open_case[1], self.result))
            self.open_case = None
        self.depth -= 1


def _junit_name(attributes: Mapping[str, str]) -> str:
    """classname.name, or name alone when it already starts with the class (jest-junit)."""
    classname, name = attributes.get("classname", ""), attributes.get("name", "")
    if not classname or name.startswith(classname):
        return name or classname or "(unnamed)"
    return f"{classname}.{name}"


def parse_pytest_json(data: bytes) -> Report:
    return _pytest_json_report(_json_document(data))


def _pytest_json_report(document: dict[str, Any]) -> Report:
    tests, summary = document.get("tests"), document.get("summary")
    if not isinstance(tests, list) and not isinstance(summary, dict):
        raise ReportError("is JSON but not a pytest-json-report (no tests and no summary)")
    uncollected = tuple(
        Outcome(collector["nodeid"] or "(collection)", ERRORED)
        for collector in _list(document.get("collectors"), "collectors")
        if collector.get("outcome") == "failed" and isinstance(collector.get("nodeid"), str)
    )
    if isinstance(tests, list):
        outcomes = uncollected + tuple(_pytest_outcome(test) for test in tests)
        return Report("pytest-json", Counts.of(outcomes), outcomes)
    assert isinstance(summary, dict)  # refused above when it is neither tests nor summary
    totals = {
        result: sum(_count(summary, key) for key in keys)
        for result, keys in _PYTEST_SUMMARY.items()
    }
    counts = Counts(**totals).plus(Counts.of(uncollected))
    return Report("pytest-json", counts, uncollected)


def _pytest_outcome(test: Any) -> Outcome:
    if not isinstance(test, dict) or not isinstance(test.get("nodeid"), str):
        raise ReportError("has a test without a nodeid")
    outcome = test.get("outcome")
    if not isinstance(outcome, str) or outcome not in _PYTEST_OUTCOMES:  # `[]` is unhashable
        shown = str(outcome)[:50]
        raise ReportError(f"has test {test['nodeid'][:200]!r} with unknown outcome {shown!r}")
    return Outcome(test["nodeid"], _PYTEST_OUTCOMES[outcome])


def _list(value: Any, key: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ReportError(f"has a {key} entry that is not a list of objects")
    return value


def _count(summary: Mapping[str, Any], key: str) -> int:
    value = summary.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ReportError(f"has summary.{key} {str(value)[:50]!r}, not a count")
    return value


def _json_document(data: bytes) -> dict[str, Any]:
    try:
        document = json.loads(data)
    except ValueError as error:
        raise ReportError(f"is not valid JSON ({error})") from None
    except RecursionError:
        raise ReportError("is JSON nested too deeply to read") from None
    if not isinstance(document, dict):
        raise ReportError("is JSON but not an object")
    return document


def parse_go_json(data: bytes) -> Report:
    """Each test's last final action (pass, fail, skip); one that started and never ended
    (the binary timed out or crashed) is errored. Lines that are not JSON (go's messages
    on stderr, redirected into the file) are skipped, except a package's build failure."""
    tests: dict[tuple[str, str], str | None] = {}
    packages: dict[str, str | None] = {}
    for package in _GO_BUILD_FAILED.findall(data):
        packages[package.decode("utf-8", "replace")] = "build failed"
    seen_event = bool(packages)
    for number, raw_line in enumerate(data.splitlines(), 1):
        line = raw_line.strip()
        if not line.startswith(b"{"):
            continue
        event = _go_event(line, number)
        seen_event = True
        package, test, action = event.get("Package"), event.get("Test"), event["Action"]
        if not isinstance(package, str):
            continue  # a build event of Go 1.24+ (ImportPath): its package's fail follows
        packages.setdefault(package, None)
        if isinstance(test, str) and test:
            if action == "run" or action in _GO_OUTCOMES:
                tests.setdefault((package, test), None)
            if action in _GO_OUTCOMES:
                tests[package, test] = action
        elif action in _GO_OUTCOMES:
            packages[package] = "build failed" if event.get("FailedBuild") else action
    if not seen_event:
        raise ReportError("has no go test -json events")
    outcomes = []
    failing = set()
    for (package, test), action in tests.items():
        result = _GO_OUTCOMES[action] if action else ERRORED
        outcomes.append(Outcome(f"{test} ({package})", result))
        if result in (FAILED, ERRORED):
            failing.add(package)
    for package, final in packages.items():
        if package not in failing and final not in ("pass", "skip"):
            outcomes.append(Outcome(f"{package} {_GO_PACKAGE_FAILURES[final]}", ERRORED))
    return Report("go-json", Counts.of(outcomes), tuple(outcomes))


def parse_ctrf(data: bytes) -> Report:
    return _ctrf_report(_json_document(data))


def _ctrf_report(document: dict[str, Any]) -> Report:
    """Each of results.tests by its status (names need not be unique: CTRF names a test
    within its suite, and two suites may hold the same name)."""
    results = document.get("results")
    tests = results.get("tests") if isinstance(results, dict) else None
    if not isinstance(tests, list):
        raise ReportError("is JSON but not a CTRF report (no results.tests list)")
    outcomes = tuple(_ctrf_outcome(test) for test in tests)
    return Report("ctrf", Counts.of(outcomes), outcomes)


def _ctrf_outcome(test: Any) -> Outcome:
    if not isinstance(test, dict) or not isinstance(test.get("name"), str) or not test["name"]:
        raise ReportError("has a test without a name")
    status = test.get("status")
    if status not in _CTRF_OUTCOMES:
        shown = str(status)[:50]
        raise ReportError(f"has test {test['name'][:200]!r} with unknown status {shown!r}")
    result = _CTRF_OUTCOMES[status]
    if result == FAILED and test.get("rawStatus") in _CTRF_ERROR_STATUSES:
        result = ERRORED
    message = test.get("message")
    return Outcome(
        test["name"], result, message[:MESSAGE_CHARS] if isinstance(message, str) else ""
    )


def _go_event(line: bytes, number: int) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        raise ReportError(f"line {number} is not a JSON event (cut short?)") from None
    if not isinstance(event, dict) or not isinstance(event.get("Action"), str):
        raise ReportError(f"line {number} is not a go test -json event (no Action)")
    return event


_PARSERS = {
    "junit": parse_junit,
    "pytest-json": parse_pytest_json,
    "go-json": parse_go_json,
    "ctrf": parse_ctrf,
}
_DOCUMENT_PARSERS = {"pytest-json": _pytest_json_report, "ctrf": _ctrf_report}
