"""One module per command; each `run(args) -> exit code`, called inside console.guarded.

Each command reads its own frozen record (GradeArgs, BatchArgs, InitArgs, ...), whose
fields are the command's options: the CLI (verifier.cli) fills it from the flags, the
VERIFIER_* variables and the defaults its declarations state. These modules print what
the user reads and leave the work to the pipeline (verifier.grading, verifier.batch,
verifier.task), handing it the pipeline's own records (BatchRequest, InitRequest,
Limits), never the CLI's.
"""
