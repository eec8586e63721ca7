"""`verifier grade` parsed with argparse, from the same option declarations as every command."""

from __future__ import annotations

import argparse

from verifier.commands import grade
from verifier.console import guarded
from verifier.options import COMMANDS, OPTIONS, build_options


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """A fixed width: argparse builds a formatter for every add_argument, and asking the
    terminal for its width imports shutil (and bz2, lzma) on the grading path."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=100)


def grade_parser() -> argparse.ArgumentParser:
    command = COMMANDS["grade"]
    parser = argparse.ArgumentParser(
        prog="verifier grade",
        description=command.help,
        epilog=grade.EXIT_CODES,
        formatter_class=_HelpFormatter,
    )
    for name in command.options:
        option = OPTIONS[name]
        where = command.source_of(option)
        help_text = f"{command.help_of(option)} ({where})" if where else command.help_of(option)
        if option.is_flag:
            parser.add_argument(*option.flags, dest=name, action="store_const", const=True,
                                default=None, help=help_text)  # fmt: skip
        else:
            parser.add_argument(*option.flags, dest=name, metavar=option.metavar, default=None,
                                help=help_text)  # fmt: skip
    return parser


def run_grade(argv: list[str]) -> int:
    given = vars(grade_parser().parse_args(argv))
    return guarded(lambda: grade.run(build_options("grade", given)), debug=bool(given["debug"]))
