"""Every command's help, made from its declarations: plain text, wrapped at 80 columns.

`verifier --help` and `verifier task --help` list their commands; `verifier COMMAND
--help` shows the command's arguments and flags, where each value comes from when
not given (its VERIFIER_* variable, its default) and what each exit code means.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from verifier.cli.options import COMMANDS, GROUPS, OPTIONS, Command

WIDTH = 80  # what help is wrapped at (at most)
TERM_WIDTH = 30  # a longer term has its text on the lines below it
EPILOG = "Run `verifier COMMAND --help` for one command's options, variables and exit codes."
HELP_ROW = ("-h, --help", "show this help and exit")
VERSION_HELP = "Print the version."


def paragraph(text: str, indent: int = 2) -> list[str]:
    return textwrap.wrap(
        text, WIDTH - indent, initial_indent=" " * indent, subsequent_indent=" " * indent
    )


def definitions(rows: Sequence[tuple[str, str]]) -> list[str]:
    """Two columns: `  TERM  text`, the text wrapped in its column; a term longer than
    TERM_WIDTH on its own line, its text on the lines below."""
    column = min(max((len(term) for term, _ in rows), default=0), TERM_WIDTH) + 4
    lines: list[str] = []
    for term, text in rows:
        wrapped = textwrap.wrap(text, max(WIDTH - column, 10)) or [""]
        if len(term) + 4 > column:
            lines.append(f"  {term}")
        else:
            lines.append(f"  {term:<{column - 4}}  {wrapped.pop(0)}".rstrip())
        lines += [" " * column + line for line in wrapped]
    return lines


def synopsis(command: Command) -> str:
    """`verifier check [OPTIONS] [FILE]`: an argument in brackets when it may be left out
    (its variable gives it, or it is not required)."""
    words = [f"verifier {command.name} [OPTIONS]"]
    for name in command.positional:
        option = OPTIONS[name]
        metavar = option.metavar or name.upper()
        words.append(metavar if name in command.required and not option.env else f"[{metavar}]")
    return " ".join(words)


def option_term(command: Command, name: str) -> str:
    """`--jobs, -j N`, `--force`, or an argument's `DEST`."""
    option = OPTIONS[name]
    metavar = option.metavar or name.upper()
    if name in command.positional:
        return metavar
    flags = ", ".join(option.flags)
    return flags if option.is_flag else f"{flags} {metavar}"


def option_text(command: Command, name: str) -> str:
    option = OPTIONS[name]
    where = command.source_of(option)
    return f"{command.help_of(option)} ({where})" if where else command.help_of(option)


def exit_code_lines(command: Command) -> list[str]:
    lines = ["  Exit codes:"]
    for code in command.exit_codes:
        first = f"    {code:<4} "
        lines += textwrap.wrap(
            command.meaning_of(code),
            WIDTH,
            initial_indent=first,
            subsequent_indent=" " * len(first),
        )
    return lines


def command_help(command: Command) -> str:
    arguments = [(option_term(command, n), option_text(command, n)) for n in command.positional]
    flags = [
        (option_term(command, name), option_text(command, name))
        for name in command.options
        if name not in command.positional
    ]
    lines = [f"Usage: {synopsis(command)}", "", *paragraph(command.help), ""]
    if arguments:
        lines += ["Arguments:", *definitions(arguments), ""]
    lines += ["Options:", *definitions([*flags, HELP_ROW]), ""]
    return "\n".join([*lines, *exit_code_lines(command)])


def group_help(group: str) -> str:
    """`verifier --help` (group "") or `verifier task --help`: the group's commands."""
    prefix = f"{group} " if group else ""
    rows = [
        (name.removeprefix(prefix), command.help)
        for name, command in COMMANDS.items()
        if name.startswith(prefix) and " " not in name.removeprefix(prefix)
    ]
    options = [HELP_ROW]
    if not group:
        rows += [("version", VERSION_HELP)]
        rows += [(name, text) for name, text in GROUPS.items() if name]
        options = [("-V, --version", "print the version"), HELP_ROW]
    usage = f"verifier {prefix}[OPTIONS] COMMAND [ARGS]..."
    lines = [f"Usage: {usage}", "", *paragraph(GROUPS[group]), ""]
    lines += ["Options:", *definitions(options), "", "Commands:", *definitions(rows)]
    if not group:
        lines += ["", *paragraph(EPILOG)]
    return "\n".join(lines)


def version_help() -> str:
    return "\n".join(["Usage: verifier version", "", *paragraph(VERSION_HELP)])
