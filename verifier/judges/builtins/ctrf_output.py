"""A test judge's tests as ctrf.json's results: each test's name and CTRF status, at
most MAX_CTRF_TESTS of them (those that did not pass first), and the summary of all.
A pure function of the outcomes; output.py merges the judges' into ctrf.json."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verifier.judges.builtins.reports import ERRORED, FAILED, PASSED, SKIPPED, Outcome
from verifier.judges.builtins.testlists import MISSING

MAX_CTRF_TESTS = 10_000  # tests of one judge in ctrf.json (the summary counts them all)
MAX_CTRF_NAME_CHARS = 1000
_CTRF_STATUS = {
    PASSED: "passed",
    FAILED: "failed",
    ERRORED: "failed",
    SKIPPED: "skipped",
    MISSING: "failed",
}
_CTRF_RAW = {ERRORED: "error", MISSING: "missing"}


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
