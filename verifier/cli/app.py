"""The typer app: every command's help and usage errors, and the commands' parsing.

Its commands are generated from the option declarations (verifier.options): each
flag is collected as given (text, or True for a switch) and parsed by
build_options, so typer never applies a default or reads a variable of its own.
Help is click's plain text (typer-slim, rich markup off: text in brackets, like
`[environment].docker_image`, is shown as written); a usage error is one line on
stderr and exit 2, as every other error of a command is (console.guarded).
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from collections.abc import Callable
from typing import Annotated, Any

import click
import typer

from verifier import __version__
from verifier.commands import batch, check_config, grade, kube, schema, task
from verifier.console import end_by_closed_pipe, guarded, reader_gone
from verifier.errors import EXIT_CONFIG, EXIT_OK
from verifier.options import COMMANDS, OPTIONS, Command, Options, build_options

INTRO = "Grade agent case directories against eval.yaml and write Harbor rewards."
HELP_WIDTH = 80  # what click wraps help at (at most)
HELP_FLAGS = {"help_option_names": ["-h", "--help"]}  # grade's and the overview's -h stays


def _version(given: bool) -> None:
    if given:
        print(__version__)
        raise typer.Exit(EXIT_OK)


VERSION_OPTION = typer.Option(
    "--version", "-V", help="print the version", is_eager=True, callback=_version
)


app = typer.Typer(
    name="verifier",
    help=INTRO,
    epilog="Run `verifier COMMAND --help` for one command's options, variables and exit codes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    suggest_commands=False,  # click suggests them itself
    context_settings=HELP_FLAGS,
)
task_app = typer.Typer(
    help="Harbor task packages graded by this image.",
    no_args_is_help=True,
    rich_markup_mode=None,
    suggest_commands=False,
    context_settings=HELP_FLAGS,
)
app.add_typer(task_app, name="task")


@app.callback()
def _root(version: Annotated[bool | None, VERSION_OPTION] = None) -> None:
    pass  # the app's own options (--version); its help is the app's


def _parameter(command: Command, name: str) -> inspect.Parameter:
    option = OPTIONS[name]
    where = command.source_of(option)
    help_text = f"{command.help_of(option)} ({where})" if where else command.help_of(option)
    declaration: Any
    if name in command.positional:
        declaration = typer.Argument(
            help=help_text, metavar=option.metavar or name.upper(), show_default=False
        )
    else:
        declaration = typer.Option(
            *option.flags, help=help_text, metavar=option.metavar, show_default=False
        )
    kind = bool if option.is_flag else str
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[kind | None, declaration],
    )


def exit_codes_text(spec: Command) -> str:
    """The command's exit codes, one a line (`\\b`: click keeps the lines as they are)."""
    lines = ["\b", "Exit codes:"]
    for code in spec.exit_codes:
        first = f"  {code:<4} "
        lines += textwrap.wrap(
            spec.meaning_of(code),
            HELP_WIDTH - 4,
            initial_indent=first,
            subsequent_indent=" " * len(first),
        )
    return "\n".join(lines)


def _register(parent: typer.Typer, name: str, spec: Command, run: Callable[[Options], int]) -> None:
    def command(**given: Any) -> int:
        return guarded(lambda: run(build_options(spec.name, given)), debug=bool(given["debug"]))

    parameters = [_parameter(spec, option) for option in spec.options]
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    parent.command(name, help=spec.help, short_help=spec.help, epilog=exit_codes_text(spec))(
        command
    )


_register(app, "grade", COMMANDS["grade"], grade.run)
_register(app, "check", COMMANDS["check"], check_config.run)
_register(app, "batch", COMMANDS["batch"], batch.run)
_register(app, "schema", COMMANDS["schema"], schema.run)
_register(task_app, "init", COMMANDS["task init"], task.run_init)
_register(task_app, "import", COMMANDS["task import"], task.run_import)
_register(task_app, "test", COMMANDS["task test"], task.run_test)
_register(task_app, "kube", COMMANDS["task kube"], kube.run)


@app.command("version")
def _print_version() -> None:
    """Print the version."""
    print(__version__)


def run(args: list[str]) -> int:
    """The exit code of the command line args (after `verifier`)."""
    try:
        code = typer.main.get_command(app).main(args, prog_name="verifier", standalone_mode=False)
    except SystemExit:  # click's own end of a help it could not print: EPIPE, exit 1
        if reader_gone():
            end_by_closed_pipe()
        raise
    except click.exceptions.NoArgsIsHelpError as shown:  # `verifier`, `verifier task`
        print(shown.format_message())
        return EXIT_CONFIG
    except click.UsageError as error:
        message = " ".join(error.format_message().split())
        where = _command_named(args)
        print(f"verifier: error: {where + ': ' if where else ''}{message}", file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK if code is None else int(code)


def _command_named(args: list[str]) -> str | None:
    """The command or group args begin with (`task init`, `task`), or None."""
    words = [name.split()[:length] for name in COMMANDS for length in (1, 2)]
    return max((" ".join(w) for w in words if args[: len(w)] == w), key=len, default=None)
