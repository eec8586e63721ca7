"""`verifier batch`: grade, print the summary line and where it was written."""

from __future__ import annotations

from verifier.batch import BatchRequest, run_batch, summary_paths
from verifier.console import write_termination_message
from verifier.errors import EXIT_INTERRUPTED, EXIT_OK
from verifier.options import Options


def run(options: Options) -> int:
    """Case errors do not fail the command (they are rows in the summary): in a
    Kubernetes Job a non-zero exit would re-run the whole shard for one bad case."""
    request = BatchRequest.from_options(options)
    summary = run_batch(request)
    print(f"batch: {summary.line()}")
    for path in summary_paths(request.out, request.shard):
        print(f"wrote {path}")
    write_termination_message(options.termination_log, summary.line())
    return EXIT_INTERRUPTED if summary.interrupted else EXIT_OK
