"""What the test builtins say of a report: the rationale (counts, pass rate, the tests
by outcome, within MAX_RATIONALE_CHARS) and judges.json's details. Pure functions of
the report, or of the trusted list's selection from it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from verifier.judges.builtins.reports import (
    ERRORED,
    FAILED,
    PASSED,
    SKIPPED,
    Outcome,
    Reading,
    Report,
)
from verifier.judges.builtins.testlists import GROUPS, MISSING, Selection

MAX_NAMED = 20  # tests named in a rationale
MAX_NAME_CHARS = 200
MAX_RATIONALE_CHARS = 2000
MAX_DETAIL_NAMES = 100  # failing tests listed in judges.json
_COUNT_RESERVE = 32  # characters kept on a line of names for "and 1234 more"
ORDER = (FAILED, ERRORED, SKIPPED, PASSED)  # how a rationale names the tests
LISTED_ORDER = (MISSING, *ORDER)


def summarize(report: Report, files: Sequence[str]) -> str:
    """The counts, the pass rate, then the tests by outcome (failed and errored first),
    at most MAX_NAMED of them, within MAX_RATIONALE_CHARS."""
    counts = report.counts
    rate = f"pass rate {counts.passed / counts.ran:.4g}" if counts.ran else "no pass rate"
    head = (
        f"{counts.passed} of {counts.ran} tests passed, {counts.failed} failed, "
        f"{counts.errored} errored ({counts.skipped} skipped): {rate}; "
        f"from {listed(files)} ({report.format})"
    )
    return _with_names(head, report.outcomes, ORDER)


def summarize_listed(selection: Selection, reading: Reading) -> str:
    """The listed tests' counts and pass rate, each group's, the tests left out, the
    report files; then the listed tests by outcome, missing and failed first."""
    assert reading.report is not None
    total = len(selection.listed)
    count = {result: selection.count(result) for result in LISTED_ORDER}
    parts = [
        f"{count[PASSED]} of {total} listed tests passed, {count[FAILED]} failed, "
        f"{count[ERRORED]} errored, {count[SKIPPED]} skipped, {count[MISSING]} missing"
        + (" (skipped and missing ones count as failed)" if count[SKIPPED] + count[MISSING] else "")
        + f": pass rate {count[PASSED] / total:.4g}"
    ]
    for group, passed, listed_count in group_counts(selection):
        parts.append(f"{group} {passed} of {listed_count} passed")
    if selection.unlisted:
        parts.append(f"{selection.unlisted} tests of the report not listed, ignored")
    parts.append(f"from {listed(reading.files)} ({reading.report.format})")
    outcomes = [Outcome(entry.test, entry.result) for entry in selection.listed]
    return _with_names("; ".join(parts), outcomes, LISTED_ORDER)


def _with_names(head: str, outcomes: Sequence[Outcome], order: Sequence[str]) -> str:
    names = named_outcomes(outcomes, MAX_NAMED, MAX_RATIONALE_CHARS - len(head), order)
    text = "\n".join([head, *names])
    return text if len(text) <= MAX_RATIONALE_CHARS else text[: MAX_RATIONALE_CHARS - 6] + " [cut]"


def group_counts(selection: Selection) -> list[tuple[str, int, int]]:
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
    outcomes: Sequence[Outcome], names_left: int, chars_left: int, order: Sequence[str] = ORDER
) -> list[str]:
    """One line per outcome ('failed: a, b and 3 more'), in all at most names_left names
    and about chars_left characters: the names that do not fit are counted."""
    lines = []
    for result in order:
        names = [cut(outcome.test) for outcome in outcomes if outcome.result == result]
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


def report_details(reading: Reading, report: Report) -> dict[str, Any]:
    """judges.json's details of a whole report: its files, format, counts, failing tests."""
    failing = [
        cut(outcome.test) for outcome in report.outcomes if outcome.result in (FAILED, ERRORED)
    ]
    return {
        "reports": list(reading.files[:MAX_DETAIL_NAMES]),
        "format": report.format,
        **attrs.asdict(report.counts, recurse=False),
        "failing": failing[:MAX_DETAIL_NAMES],
    }


def listed_details(selection: Selection, reading: Reading) -> dict[str, Any]:
    """judges.json's details of the listed tests: counts by outcome and by group."""
    assert reading.report is not None
    failing = [cut(entry.test) for entry in selection.listed if entry.result != PASSED]
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
            group: {"passed": passed, "listed": listed_count}
            for group, passed, listed_count in group_counts(selection)
        },
    }


def listed(paths: Sequence[str], limit: int = 5) -> str:
    """The first `limit` paths, cut, and how many more."""
    shown = ", ".join(cut(path) for path in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def cut(name: str) -> str:
    return cut_text(name, MAX_NAME_CHARS)


def cut_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
