"""One module per command; each `run(options) -> exit code`, called inside console.guarded.

The CLI (verifier.cli) parses flags into an Options record and dispatches here;
these modules print what the user reads and leave the work to the pipeline
(verifier.grading, verifier.batch, verifier.task).
"""
