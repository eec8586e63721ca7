"""The typer app behind every command except the fast paths in verifier.cli.

Its commands are generated from the option declarations (verifier.options): each
flag is collected as given (text, or True for a switch) and parsed by
build_options, so typer never applies a default or reads a variable of its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from verifier.commands import batch, check, schema, task
from verifier.console import guarded
from verifier.options import COMMANDS, OPTIONS, Command, Options, build_options

app = typer.Typer(
    name="verifier",
    help="Grade agent case directories against eval.yaml and write Harbor rewards.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
task_app = typer.Typer(help="Harbor task packages graded by this image.", no_args_is_help=True)
app.add_typer(task_app, name="task")


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


def _register(parent: typer.Typer, name: str, spec: Command, run: Callable[[Options], int]) -> None:
    def command(**given: Any) -> None:
        debug = bool(given.get("debug"))
        raise typer.Exit(guarded(lambda: run(build_options(spec.name, given)), debug=debug))

    parameters = [_parameter(spec, option) for option in spec.options]
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    command.__doc__ = spec.help
    parent.command(name)(command)


_register(app, "check", COMMANDS["check"], check.run)
_register(app, "batch", COMMANDS["batch"], batch.run)
_register(app, "schema", COMMANDS["schema"], schema.run)
_register(task_app, "init", COMMANDS["task init"], task.run_init)
_register(task_app, "test", COMMANDS["task test"], task.run_test)
