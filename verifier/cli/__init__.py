"""The `verifier` command: dispatch only.

`verifier grade` is the hot path (once per RL rollout) and `verifier batch` forks a
judge per case from its workers, so their plain command lines are read by
verifier.cli.fast without importing typer; every other command line (theirs with
--help or a mistake included) goes to the typer app (verifier.cli.app), which gives
every command its help and its usage errors. Both read the same declarations
(verifier.options) and run the same command modules (verifier.commands).
"""

from __future__ import annotations

import gc
import sys

from verifier.console import exit_without_teardown, flush_output


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["grade"]:
        # One short process whose garbage dies with it: collecting it (during the
        # imports, mostly) is time spent for nothing. Judges' processes turn it back on.
        gc.disable()
        from verifier.cli.fast import run_grade

        exit_without_teardown(run_grade(args[1:]))
    if args[:1] == ["batch"]:
        from verifier.cli.fast import run_batch

        code = run_batch(args[1:])
    else:
        from verifier.cli.app import run

        code = run(args)
    flush_output()  # here, not in the interpreter's exit: a reader gone is no error
    raise SystemExit(code)
