"""The hot paths, `verifier grade` and `verifier batch`, read without typer.

The command lines that RL harnesses, Harbor and Kubernetes run (`--flag value`,
`--flag=value`, switches, each given once) are read here from the same option
declarations the typer app is built from, into what its command would collect, and
run by the same command modules; anything else (--help, a mistake, an abbreviation,
a repeated flag) is left to the typer app, which explains or refuses it. So users
see one CLI. Reading them here saves what importing typer and click costs a grade
(about half of one), and keeps them out of a batch worker's memory, which every
judge's fork copies.
"""

from __future__ import annotations

from verifier.commands import grade
from verifier.console import guarded
from verifier.options import COMMANDS, OPTIONS, build_options

Given = dict[str, str | bool | None]  # option name -> raw text, True for a flag, None


def simple_arguments(command: str, argv: list[str]) -> Given | None:
    """What the command's typer parser would collect from argv, when argv is exact
    `--flag [value]` pairs of the command's options each given once; else None."""
    spec = COMMANDS[command]
    by_flag = {flag: OPTIONS[name] for name in spec.options for flag in OPTIONS[name].flags}
    given: Given = dict.fromkeys(spec.options)
    position = 0
    while position < len(argv):
        word = argv[position]
        # `--flag=value`; in `-j=2` the value is `=2` (click's reading, rarely meant)
        flag, equals, value = word.partition("=") if word.startswith("--") else (word, "", "")
        option = by_flag.get(flag)
        if option is None or option.name in spec.positional or given[option.name] is not None:
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


def run_grade(argv: list[str]) -> int:
    """The exit code of `verifier grade ARGV`."""
    given = simple_arguments("grade", argv)
    if given is None:
        return _typer_app(["grade", *argv])
    return guarded(lambda: grade.run(build_options("grade", given)), debug=bool(given["debug"]))


def run_batch(argv: list[str]) -> int:
    """The exit code of `verifier batch ARGV`."""
    given = simple_arguments("batch", argv)
    if given is None:
        return _typer_app(["batch", *argv])
    from verifier.commands import batch  # not on grade's path: the pool, its workers

    return guarded(lambda: batch.run(build_options("batch", given)), debug=bool(given["debug"]))


def _typer_app(args: list[str]) -> int:
    from verifier.cli.app import run

    return run(args)
