"""The `verifier` command: dispatch only.

`verifier grade` is the hot path (once per RL rollout), so it is parsed by
verifier.cli.fast (argparse only for help and mistakes) and never imports typer,
a heavy import beside a small grade's own work; so are `--help` and
`--version`. `verifier batch` with a plain command line is parsed there too: typer
in a worker's memory makes every judge's fork dearer. Every other command (and
batch's help and mistakes) goes through the typer app (verifier.cli.app).
Both parse into the same Options record (verifier.options) and run the same
command modules (verifier.commands).
"""

from __future__ import annotations

import gc
import sys

from verifier import __version__
from verifier.console import exit_without_teardown
from verifier.errors import EXIT_CONFIG, EXIT_OK


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["grade"]:
        # One short process whose garbage dies with it: collecting during its imports
        # is work for nothing. Judges' processes turn the collector back on.
        gc.disable()
        from verifier.cli.fast import run_grade

        exit_without_teardown(run_grade(args[1:]))
    if args[:1] == ["batch"]:
        from verifier.cli.fast import run_batch, simple_arguments

        given = simple_arguments("batch", args[1:])
        if given is not None:
            raise SystemExit(run_batch(given))
    if args[:1] in (["--version"], ["-V"], ["version"]) and len(args) == 1:
        print(__version__)
        exit_without_teardown(EXIT_OK)
    if args in ([], ["--help"], ["-h"]):
        from verifier.cli.overview import overview

        print(overview())
        exit_without_teardown(EXIT_OK if args else EXIT_CONFIG)
    from verifier.cli.app import app

    app(args, prog_name="verifier")
