"""The reference part of docs/cli.md, made from the declarations the CLI is built from
(verifier.cli.options: commands, flags, variables, defaults, exit codes; verifier.errors:
what each code means), so the page cannot drift from `verifier COMMAND --help`.

    python scripts/cli_reference.py          # print the reference part
    python scripts/cli_reference.py --write  # rewrite it in docs/cli.md (make cli-docs)

tests/unit/cli/test_reference.py fails when docs/cli.md's part is not what this prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

from verifier.cli.options import COMMANDS, OPTIONS, Command
from verifier.errors import EXIT_MEANINGS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
BEGIN = "<!-- reference: made by scripts/cli_reference.py (make cli-docs); do not edit below -->"
END = "<!-- end of reference -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{_cell(text)}`"


def _synopsis(command: Command) -> str:
    words = [f"verifier {command.name}"]
    for name in command.positional:
        words.append(OPTIONS[name].metavar or name.upper())
    return " ".join(words) + " [OPTIONS]"


def _command_section(command: Command) -> list[str]:
    lines = [
        f"### `verifier {command.name}`",
        "",
        command.help,
        "",
        "```",
        _synopsis(command),
        "```",
        "",
    ]
    lines += ["| flag | what | when not given |", "|---|---|---|"]
    for name in command.options:
        option = OPTIONS[name]
        if name in command.positional:
            flag = option.metavar or name.upper()
        else:
            flag = ", ".join(option.flags)
            if not option.is_flag:
                flag += f" {option.metavar or name.upper()}"
        source = command.source_of(option)
        if option.is_flag:
            source = f"{source}, else off" if source else "off"
        lines.append(
            f"| {_code(flag)} | {_cell(command.help_of(option))} | {_cell(source or 'unset')} |"
        )
    lines += ["", "| exit code | meaning |", "|---|---|"]
    lines += [f"| {code} | {_cell(command.meaning_of(code))} |" for code in command.exit_codes]
    return [*lines, ""]


def _variables() -> list[str]:
    lines = [
        "## Environment variables",
        "",
        "| variable | flag | commands | default |",
        "|---|---|---|---|",
    ]
    for option in sorted(OPTIONS.values(), key=lambda option: option.env or ""):
        if option.env is None:
            continue
        commands = [name for name, command in COMMANDS.items() if option.name in command.options]
        flag = option.flags[0] if option.flags else option.name.upper()
        default = option.default_label().removeprefix(f"${option.env}").removeprefix(", else ")
        if option.is_flag:
            default = "off"
        lines.append(
            f"| `{option.env}` | {_code(flag)} | {', '.join(commands)} | "
            f"{_cell(default or 'unset')} |"
        )
    return [*lines, ""]


def _exit_codes() -> list[str]:
    lines = ["## Exit codes", "", "| code | meaning | commands |", "|---|---|---|"]
    for code, meaning in sorted(EXIT_MEANINGS.items()):
        commands = [name for name, command in COMMANDS.items() if code in command.exit_codes]
        lines.append(f"| {code} | {_cell(meaning)} | {', '.join(commands)} |")
    return [*lines, ""]


def reference() -> str:
    lines = ["## Commands", ""]
    for command in COMMANDS.values():
        lines += _command_section(command)
    lines += _variables() + _exit_codes()
    return "\n".join(lines)


def page_with_reference(page: str) -> str:
    """The page with its reference part (between BEGIN and END) made afresh."""
    head, begin, rest = page.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise SystemExit(f"{PAGE}: the markers {BEGIN!r} and {END!r} are missing")
    return f"{head}{BEGIN}\n\n{reference()}\n{END}{tail}"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        PAGE.write_text(page_with_reference(PAGE.read_text()))
    elif sys.argv[1:]:
        raise SystemExit(f"usage: {sys.argv[0]} [--write]")
    else:
        print(reference())
