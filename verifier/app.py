"""The typer app behind every `verifier` command except the `grade` fast path."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from verifier import __version__
from verifier.cli import guarded
from verifier.errors import EXIT_OK

app = typer.Typer(
    name="verifier",
    help="Grade agent case directories against eval.yaml and write Harbor rewards.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
def grade(ctx: typer.Context) -> None:
    """Grade one case dir and write reward.json, reward.txt, judges.json (see grade --help)."""
    from verifier.grade_command import run_grade

    raise typer.Exit(run_grade(ctx.args))


@app.command()
def check(
    config: Annotated[Path, typer.Argument(help="the eval.yaml to validate")],
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
) -> None:
    """Validate eval.yaml without grading: judges, reward mode, warnings, every problem."""
    from verifier.check_command import run_check

    raise typer.Exit(guarded(lambda: run_check(config), debug=debug))


@app.command()
def version() -> None:
    """Print the verifier's version."""
    print(__version__)
    raise typer.Exit(EXIT_OK)
