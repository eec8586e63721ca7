"""The command lines of the hot paths, `verifier grade` and `verifier batch`, from the
same option declarations as every command.

The command lines that RL harnesses and Harbor run (`--flag value`, `--flag=value`,
flags) are read directly. For grade, importing argparse (with the gettext and locale
it pulls in) would add to every grade's start-up; anything else (--help, a
mistake, an abbreviated flag, a repeated one) goes to argparse, which explains or
refuses it. For batch, typer would stay in the memory of every worker, and a
larger worker makes each judge's fork dearer, and forks are most of a batch's time;
anything else goes to the typer app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from verifier.commands import grade
from verifier.console import guarded
from verifier.options import COMMANDS, OPTIONS, build_options

if TYPE_CHECKING:
    import argparse

Given = dict[str, str | bool | None]  # option name -> raw text, True for a flag, None


def simple_arguments(command: str, argv: list[str]) -> Given | None:
    """What the command's parser would collect from argv, when argv is exact
    `--flag [value]` pairs of the command's options each given once; else None."""
    names = COMMANDS[command].options
    by_flag = {flag: OPTIONS[name] for name in names for flag in OPTIONS[name].flags}
    given: Given = dict.fromkeys(names)
    position = 0
    while position < len(argv):
        flag, equals, value = argv[position].partition("=")
        option = by_flag.get(flag)
        if option is None or given[option.name] is not None:
            return None
        if option.is_flag:
            if equals:
                return None
            given[option.name] = True
        elif equals:
            given[option.name] = value
        elif position + 1 < len(argv) and not argv[position + 1].startswith("-"):
            position += 1
            given[option.name] = argv[position]
        else:
            return None
        position += 1
    return given


def grade_parser() -> argparse.ArgumentParser:
    import argparse

    command = COMMANDS["grade"]
    parser = argparse.ArgumentParser(
        prog="verifier grade",
        description=command.help,
        epilog=grade.EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    given = simple_arguments("grade", argv)
    if given is None:
        given = vars(grade_parser().parse_args(argv))
    return guarded(lambda: grade.run(build_options("grade", given)), debug=bool(given["debug"]))


def run_batch(given: Given) -> int:
    from verifier.commands import batch  # not on grade's path: the pool, its workers

    return guarded(lambda: batch.run(build_options("batch", given)), debug=bool(given["debug"]))
