"""Trusted test lists: which tests of a report count, and how a listed id finds its test.

The task author lists the tests that decide the reward (`tests:`, or SWE-bench's pair
`fail_to_pass:` / `pass_to_pass:`); the report says what happened to each. Only the
listed tests count: one the report does not hold (not collected, renamed, deleted) is
*missing*, and a missing or skipped listed test counts as failed; tests the report
holds and the list does not (padding, the agent's own) are ignored and counted.

An id is written as its runner prints it: a pytest node id
(`tests/test_calc.py::TestX::test_y[1-2]`), go's `Package/TestName` (a subtest
`Package/TestX/sub`), a CTRF test's name, or a JUnit testcase's `classname.name`. It
finds its test in every format: a pytest node id also by the JUnit name pytest's
--junitxml gives it (classname `tests.test_calc.TestX`, name `test_y[1-2]`), and go's
id also by the names go test -json and go-junit-report give it (reports.py: `TestX
(Package)`, classname `Package` with name `TestX`). When several tests of a report
answer to one id (a JUnit name cannot tell `a/b.py` from `a.b.py`), the worst outcome
decides: a second test of the same name can only lower the count.

Pure functions over reports.py's records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

from verifier.judges.builtins.reports import ERRORED, FAILED, PASSED, SKIPPED, Outcome, Report

MISSING = "missing"
GROUPS = ("tests", "fail_to_pass", "pass_to_pass")
_RANK = {PASSED: 0, SKIPPED: 1, ERRORED: 2, FAILED: 3}


@attrs.frozen
class TrustedTests:
    """The listed ids in order, each once, and the group (`tests`, `fail_to_pass`,
    `pass_to_pass`) each came from."""

    ids: tuple[str, ...]
    groups: tuple[str, ...]

    @classmethod
    def of(cls, lists: Mapping[str, Sequence[str] | None]) -> TrustedTests | None:
        """The union of the groups given (an id in two of them is a load error: see
        overlap), None when none is."""
        ids: list[str] = []
        groups: list[str] = []
        for group in GROUPS:
            for test_id in lists.get(group) or ():
                ids.append(test_id)
                groups.append(group)
        return cls(tuple(ids), tuple(groups)) if ids else None


def overlap(lists: Mapping[str, Sequence[str] | None]) -> tuple[str, str, str] | None:
    """(id, group, other group) of the first id listed in two groups, else None."""
    seen: dict[str, str] = {}
    for group in GROUPS:
        for test_id in lists.get(group) or ():
            if test_id in seen:
                return test_id, seen[test_id], group
            seen[test_id] = group
    return None


@attrs.frozen
class Listed:
    test: str
    group: str
    result: str  # PASSED, FAILED, ERRORED, SKIPPED or MISSING
    message: str = ""  # the report's, of the test that decided


@attrs.frozen
class Selection:
    """Each listed test's outcome, and how many tests of the report the list left out."""

    listed: tuple[Listed, ...]
    unlisted: int

    def count(self, result: str, group: str | None = None) -> int:
        return sum(
            1 for entry in self.listed if entry.result == result and group in (None, entry.group)
        )

    @property
    def passed(self) -> int:
        return self.count(PASSED)

    @property
    def found(self) -> int:
        """Listed tests that ran: in the report, and not skipped."""
        return sum(1 for entry in self.listed if entry.result not in (MISSING, SKIPPED))


def select(report: Report, tests: TrustedTests) -> Selection:
    """Each listed test by the worst outcome of the report's tests that answer to its id
    (MISSING when none does); the report's tests that answer to no listed id, counted."""
    by_name: dict[str, list[int]] = {}
    for index, outcome in enumerate(report.outcomes):
        by_name.setdefault(outcome.test, []).append(index)
    matched: set[int] = set()
    listed = []
    for test_id, group in zip(tests.ids, tests.groups, strict=True):
        found = sorted({index for name in report_names(test_id) for index in by_name.get(name, ())})
        matched.update(found)
        if found:
            worst = _worst([report.outcomes[index] for index in found])
            listed.append(Listed(test_id, group, worst.result, worst.message))
        else:
            listed.append(Listed(test_id, group, MISSING))
    unlisted = len(report.outcomes) - len(matched)
    return Selection(tuple(listed), unlisted)


def _worst(outcomes: Sequence[Outcome]) -> Outcome:
    return max(outcomes, key=lambda outcome: _RANK[outcome.result])


def report_names(test_id: str) -> set[str]:
    """Every name the test of this id can have in a report (reports.py's Outcome.test)."""
    names = {test_id}
    if "::" in test_id:
        names.add(pytest_junit_name(test_id))
    elif "/" in test_id:  # go: Package/TestName, the package path itself holding '/'
        for match in re.finditer("/", test_id):
            package, test = test_id[: match.start()], test_id[match.end() :]
            names.add(f"{test} ({package})")  # go test -json, as reports.py names it
            names.add(f"{package}.{test}")  # go-junit-report: classname Package, name Test
    return names


def pytest_junit_name(node_id: str) -> str:
    """The name reports.py gives the testcase pytest --junitxml writes for a node id:
    classname (the file as a dotted module, then the classes) and name, joined by '.'
    (pytest's junitxml.mangle_test_address)."""
    path, bracket, parameters = node_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + parameters
    return ".".join(names)


def pytest_file(node_id: str) -> str:
    """The file a pytest node id names (`tests/test_calc.py` of `tests/test_calc.py::t`)."""
    return node_id.partition("[")[0].split("::", 1)[0]
