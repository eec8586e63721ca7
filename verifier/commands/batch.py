"""`verifier batch`: grade, print the summary line and where it was written."""

from __future__ import annotations

from verifier.batch import BatchRequest, run_batch, summary_paths
from verifier.batch.layout import report_path
from verifier.console import warn, write_termination_message
from verifier.errors import (
    EXIT_BUDGET,
    EXIT_DISAGREES,
    EXIT_INTERRUPTED,
    EXIT_NOT_WRITTEN_BACK,
    EXIT_OK,
    EXIT_TERMINATED,
)
from verifier.options import Options

_EXIT_BY_SIGNAL = {"SIGTERM": EXIT_TERMINATED, "SIGINT": EXIT_INTERRUPTED}


def run(options: Options) -> int:
    """Case errors do not fail the command (they are rows in the summary): in a
    Kubernetes Job a non-zero exit would re-run the whole shard for one bad case.
    A batch stopped by SIGTERM (SIGINT) exits 143 (130) after writing the summary of
    the cases it finished; a rerun resumes the rest. One whose --max-cost-usd was spent
    before every case was graded exits 8, with the summary of what it graded; one
    whose --min-agreement a labelled judge does not reach exits 7; one whose
    --write-back left a trial of the job as it was exits 12."""
    request = BatchRequest.from_options(options)
    summary = run_batch(request)
    print(f"batch: {summary.line()}")
    calibration = summary.calibration
    for line in calibration.lines() if calibration is not None else ():
        print(line)
    for path in summary_paths(request.out, request.shard):
        print(f"wrote {path}")
    if summary.report is not None:
        print("\n".join(summary.report.lines()))
        print(f"wrote {report_path(request.out, request.shard)}")
    if summary.written_back is not None:
        print(f"batch: {summary.written_back.line(request.cases)}")
    write_termination_message(options.termination_log, summary.line())
    if summary.stopped_by is not None:
        return _EXIT_BY_SIGNAL.get(summary.stopped_by, EXIT_OK)
    if summary.budget is not None and summary.budget.exhausted:
        hint = summary.budget.hint()
        if hint is not None:
            warn(hint)
        return EXIT_BUDGET
    if calibration is not None and calibration.failing:
        return EXIT_DISAGREES
    if summary.written_back is not None and summary.written_back.refused:
        return EXIT_NOT_WRITTEN_BACK
    return EXIT_OK
