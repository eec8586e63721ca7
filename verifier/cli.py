"""The `verifier` command: a lean dispatcher in front of the typer app.

`verifier grade` is the hot path (once per RL rollout), so it is parsed with
argparse and never imports typer, which alone costs about as much as grading a
small case. Every other command goes through the typer app in verifier.app.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable

from verifier.errors import EXIT_INTERNAL, VerifierError


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    protect_import_path()
    if args[:1] == ["grade"]:
        from verifier.grade_command import run_grade

        exit_without_teardown(run_grade(args[1:]))
    from verifier.app import app

    app(args, prog_name="verifier")


def exit_without_teardown(code: int) -> None:
    """Exit once the output is flushed, skipping the interpreter's teardown.

    By then grading holds nothing to finalize (files are closed, judge processes
    reaped), and tearing down the modules costs about a tenth of a small grade.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def protect_import_path() -> None:
    """Drop the working directory from sys.path: nothing beside the case may shadow a module.

    `python -m verifier` puts the current directory first on sys.path, and grading
    often runs with the agent's work dir as the current directory.
    """
    cwd = os.getcwd()
    sys.path[:] = [entry for entry in sys.path if entry not in ("", ".", cwd)]


def guarded(command: Callable[[], int], *, debug: bool) -> int:
    """Run a command; a VerifierError becomes its one-line message and exit code."""
    try:
        return command()
    except VerifierError as error:
        if debug:
            import traceback  # only here: it costs start-up time on the grading path

            traceback.print_exc()
        print(f"verifier: error: {error.message}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("verifier: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if debug:
            raise
        print(
            f"verifier: internal error: {type(error).__name__}: {error} "
            "(rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
