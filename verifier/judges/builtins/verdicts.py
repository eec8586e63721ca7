"""The verdict of the test builtins on a reading of the reports: passed of total, the
rationale and judges.json's details (with the tests for ctrf.json). Pure functions:
a report that is unusable, or on which too few tests ran, is a total of 0."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from verifier.judges.builtins.ctrf_output import ctrf_tests
from verifier.judges.builtins.rationales import (
    listed_details,
    report_details,
    summarize,
    summarize_listed,
)
from verifier.judges.builtins.reports import SKIPPED, Outcome, Reading
from verifier.judges.builtins.testlists import MISSING, Selection, TrustedTests, select
from verifier.results import CTRF_DETAILS

_MISSING_MESSAGE = "listed, and not in the report (not collected, renamed or deleted)"
_SKIPPED_MESSAGE = "listed, and skipped: a listed test must run, so it counts as failed"


@attrs.frozen
class Graded:
    """The shared verdict of both builtins: passed of total (total 0: the report was
    unusable, or too few tests ran), the rationale, and judges.json details."""

    passed: int
    total: int
    rationale: str
    details: dict[str, Any]


Judge = Callable[[Reading, dict[str, Any]], Graded]  # judge_reading, its limits bound


def judge_reading(
    reading: Reading, details: dict[str, Any], *, min_tests: int, listed: TrustedTests | None
) -> Graded:
    """The counts when they are usable (a report, at least min_tests run), and why."""
    if reading.report is None:
        return unusable(reading.problem or "", details)
    report = reading.report
    if listed is not None:
        return judge_listed(select(report, listed), reading, min_tests, details)
    counts = report.counts
    tests = ctrf_tests(reading.tool or report.format, report.outcomes)
    details = {**details, "tests": report_details(reading, report), CTRF_DETAILS: tests}
    summary = summarize(report, reading.files)
    if counts.ran == 0:
        return unusable(f"no tests ran: {summary}", details)
    if counts.ran < min_tests:
        fewer = f"only {counts.ran} tests ran, fewer than min_tests {min_tests}"
        return unusable(f"{fewer}: {summary}", details)
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
        "tests": listed_details(selection, reading),
        CTRF_DETAILS: ctrf_tests(reading.tool or report.format, outcomes),
    }
    summary = summarize_listed(selection, reading)
    if selection.found < min_tests:
        fewer = f"only {selection.found} listed tests ran, fewer than min_tests {min_tests}"
        if not selection.found:
            fewer = f"none of the {len(outcomes)} listed tests ran"
        return unusable(f"{fewer}: {summary}", details)
    return Graded(selection.passed, len(outcomes), summary, details)


def unusable(rationale: str, details: dict[str, Any]) -> Graded:
    """No verdict on the tests: a total of 0, and why."""
    return Graded(0, 0, rationale, details)
