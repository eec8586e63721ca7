"""The command line: its command words, then the command's own arguments and flags.

`verifier [task] COMMAND ...` is dispatched on its words; the command's arguments and
flags are read by read_arguments from the command's declarations (verifier.cli.options):
each flag's text as given (True for a switch), which read_values parses, so a flag and
its VERIFIER_* variable go through one parser and one default; the command's module
receives them as its own record (GradeArgs, BatchArgs, ...). Help is
verifier.cli.help's; a usage error is one line on stderr and exit 2, as every other
error of a command is (console.guarded).

Not argparse: building one parser for grade imports gettext, locale and (for its help
formatter) shutil, about 4 ms and 1.2 MiB of a grade that runs once per rollout, for
reading a few `--flag value` pairs.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from verifier import __version__
from verifier.cli.options import COMMANDS, GROUPS, OPTIONS, Command, read_values
from verifier.console import end_by_closed_pipe, guarded, reader_gone
from verifier.errors import EXIT_CONFIG, EXIT_OK, UsageError

Given = dict[str, str | bool | None]  # option name -> raw text, True for a switch, None
HELP_FLAGS = ("-h", "--help")
VERSION_FLAGS = ("-V", "--version")
# Each command's module, its record (fields: the command's options but --debug) and its
# function, imported only when it runs: grade loads no other command.
RUNS = {
    "grade": ("verifier.commands.grade", "GradeArgs", "run"),
    "check": ("verifier.commands.check_config", "CheckArgs", "run"),
    "batch": ("verifier.commands.batch", "BatchArgs", "run"),
    "schema": ("verifier.commands.schema", "SchemaArgs", "run"),
    "task init": ("verifier.commands.task", "InitArgs", "run_init"),
    "task import": ("verifier.commands.task", "ImportArgs", "run_import"),
    "task test": ("verifier.commands.task", "TestArgs", "run_test"),
    "task kube": ("verifier.commands.kube", "KubeArgs", "run"),
}


def run(args: Sequence[str]) -> int:
    """The exit code of the command line args (after `verifier`)."""
    try:
        return _dispatch(list(args))
    except UsageError as error:  # the command line's, before the command runs
        print(f"verifier: error: {error.message}", file=sys.stderr)
        return EXIT_CONFIG
    except BrokenPipeError:  # a help's reader gone (`verifier --help | head -1`)
        if reader_gone():
            end_by_closed_pipe()
        raise


def _dispatch(args: list[str]) -> int:
    if not args:
        print(_help().group_help(""))
        return EXIT_CONFIG
    word = args[0]
    if word in HELP_FLAGS:
        print(_help().group_help(""))
        return EXIT_OK
    if word in VERSION_FLAGS:
        print(__version__)
        return EXIT_OK
    if word == "version":
        return _version(args[1:])
    if word in GROUPS and word:  # "" is `verifier` itself
        return _group(word, args[1:])
    if word in COMMANDS:
        return run_command(COMMANDS[word], args[1:])
    if word.startswith("-"):
        raise UsageError(_unknown("option", word, [*HELP_FLAGS, *VERSION_FLAGS]))
    raise UsageError(_unknown("command", word, [*_commands_of(""), "version"]))


def _group(group: str, args: list[str]) -> int:
    if not args:
        print(_help().group_help(group))
        return EXIT_CONFIG
    word = args[0]
    if word in HELP_FLAGS:
        print(_help().group_help(group))
        return EXIT_OK
    name = f"{group} {word}"
    if name in COMMANDS:
        return run_command(COMMANDS[name], args[1:])
    kind = "option" if word.startswith("-") else "command"
    choices = list(HELP_FLAGS) if kind == "option" else _commands_of(group)
    raise UsageError(f"{group}: {_unknown(kind, word, choices)}")


def _version(args: list[str]) -> int:
    if any(word in HELP_FLAGS for word in args):
        print(_help().version_help())
        return EXIT_OK
    if args:
        raise UsageError(f"version: unexpected argument {args[0]!r}")
    print(__version__)
    return EXIT_OK


def _help() -> ModuleType:
    """verifier.cli.help, imported only to show a help (textwrap and the texts)."""
    from verifier.cli import help as module

    return module


def _commands_of(group: str) -> list[str]:
    prefix = f"{group} " if group else ""
    names = [name.removeprefix(prefix) for name in COMMANDS if name.startswith(prefix)]
    return [*(name for name in names if " " not in name), *(g for g in GROUPS if g and not group)]


def _unknown(kind: str, word: str, choices: Sequence[str]) -> str:
    """`no such option --conf (did you mean --config?)`."""
    import difflib  # only for a mistake

    close = difflib.get_close_matches(word, choices, n=2)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return f"no such {kind} {word}{hint}"


def run_command(command: Command, argv: list[str]) -> int:
    """Help when asked for (-h or --help anywhere before `--`), else the command run on
    what argv gives, inside console.guarded."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    if any(word in HELP_FLAGS for word in words):
        print(_help().command_help(command))
        return EXIT_OK
    given = read_arguments(command, argv)
    return guarded(lambda: _run(command, given), debug=bool(given.get("debug")))


def read_arguments(command: Command, argv: Sequence[str]) -> Given:
    """What argv gives each of the command's options: its text, True for a switch, None
    when not given (a flag given twice: the last). `--flag VALUE`, `--flag=VALUE`,
    `-j VALUE`, `-jVALUE`, a switch, the arguments in order; after `--`, arguments only.
    A flag is never abbreviated. UsageError naming the command and the word."""
    by_flag = {flag: name for name in command.options for flag in OPTIONS[name].flags}
    given: Given = dict.fromkeys(command.options)
    arguments = [name for name in command.options if name in command.positional]
    words = list(argv)
    position = 0
    while position < len(words):
        word = words[position]
        position += 1
        if word == "--":
            for word in words[position:]:
                _argument(command, given, arguments, word)
            break
        if not _is_flag(word):
            _argument(command, given, arguments, word)
            continue
        flag, equals, value = word.partition("=") if word.startswith("--") else (word, "", "")
        if not word.startswith("--") and word not in by_flag and len(word) > 2:
            flag, equals, value = word[:2], "=", word[2:]  # -j2
        name = by_flag.get(flag)
        if name is None or name in command.positional:
            raise UsageError(f"{command.name}: {_unknown('option', flag, [*by_flag, *HELP_FLAGS])}")
        if OPTIONS[name].is_flag:
            if equals:
                raise UsageError(f"{command.name}: {flag}: takes no value")
            given[name] = True
            continue
        if not equals:
            if position == len(words) or _is_flag(words[position]):
                raise UsageError(f"{command.name}: {flag}: expects a value")
            value = words[position]
            position += 1
        given[name] = value
    return given


_NUMBER = re.compile(r"-\d+|-\d*\.\d+")  # a negative number is a value, never a flag


def _is_flag(word: str) -> bool:
    return word.startswith("-") and word != "-" and not _NUMBER.fullmatch(word)


def _argument(command: Command, given: Given, arguments: list[str], word: str) -> None:
    """The next of the command's arguments (check's FILE, task init's DEST) is word."""
    if not arguments:
        raise UsageError(f"{command.name}: unexpected argument {word!r}")
    given[arguments.pop(0)] = word


def record_class(command: Command) -> type[Any]:
    """The attrs class the command's module reads its values as."""
    module, record, _ = RUNS[command.name]
    found: type[Any] = getattr(importlib.import_module(module), record)
    return found


def _run(command: Command, given: Given) -> int:
    """The command run on its record: each option's value (read_values), --debug aside."""
    values = read_values(command.name, given)
    values.pop("debug", None)
    module, _, function = RUNS[command.name]
    run_function: Callable[[Any], int] = getattr(importlib.import_module(module), function)
    return run_function(record_class(command)(**values))
