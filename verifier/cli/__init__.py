"""The `verifier` command: dispatch only.

verifier.cli.parser reads the command line (from the declarations in
verifier.cli.options) and runs the command's module (verifier.commands) on its own
record; verifier.cli.help writes every help text. `verifier grade` is the
hot path (once per RL rollout): its process turns the garbage collector off and exits
without the interpreter's teardown once its files are written.
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
    from verifier.cli.parser import run

    code = run(args)
    if args[:1] == ["grade"]:
        exit_without_teardown(code)
    flush_output()  # here, not in the interpreter's exit: a reader gone is no error
    raise SystemExit(code)
