"""One CLI: every command's help and usage errors come from the typer app, built from the
option declarations, and the hot paths' own reading of grade's and batch's command
lines (verifier.cli.fast) cannot be told from it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.fuzzing import FUZZ
from verifier.cli.app import app
from verifier.cli.fast import simple_arguments
from verifier.options import COMMANDS, OPTIONS

VERIFIER = str(Path(sys.executable).with_name("verifier"))
HOT_PATHS = ("grade", "batch")


def verifier(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([VERIFIER, *args], capture_output=True, text=True, timeout=60)


def squeezed(text: str) -> str:
    """text without whitespace: click wraps help lines anywhere a space or hyphen is."""
    return "".join(text.split())


def typer_collects(command: str, argv: list[str]) -> dict[str, object]:
    """What the typer app's command collects from argv (its raw values, before
    build_options), or click's UsageError."""
    group = typer.main.get_command(app)
    assert isinstance(group, click.Group)
    context = group.commands[command].make_context(command, list(argv))
    return dict(context.params)


@pytest.mark.parametrize(
    ("command", "argv", "expected"),
    [
        ("grade", [], {}),
        (
            "grade",
            ["--config=e.yaml", "--case", "c", "--debug"],
            {"config": "e.yaml", "case": "c", "debug": True},
        ),
        (
            "grade",
            ["--out=", "--no-llm", "--memory-mb", "512", "--case-id", "x"],
            {"out": "", "no_llm": True, "memory_mb": "512", "case_id": "x"},
        ),
        ("batch", ["--cases", "c", "--out", "o"], {"cases": "c", "out": "o"}),
        (
            "batch",
            ["--cases=c", "--out=o", "-j", "2", "--force", "--keep-errors"],
            {"cases": "c", "out": "o", "jobs": "2", "force": True, "keep_errors": True},
        ),
        (
            "batch",
            ["--shard", "1/4", "--no-llm", "--llm-concurrency", "64"],
            {"shard": "1/4", "no_llm": True, "llm_concurrency": "64"},
        ),
    ],
)
def test_plain_command_lines_are_read_as_typer_reads_them(
    command: str, argv: list[str], expected: dict[str, object]
) -> None:
    given = simple_arguments(command, argv)
    assert given is not None
    assert {name: value for name, value in given.items() if value is not None} == expected
    assert given == typer_collects(command, argv)


@pytest.mark.parametrize("command", HOT_PATHS)
@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--conf", "e.yaml"],
        ["--config", "a", "--config", "b"],
        ["--case", "-x"],
        ["--case"],
        ["--debug=yes"],
        ["positional"],
        ["--no-such-flag"],
        ["-j2"],
        ["-j=2"],
        ["--"],
    ],
)
def test_other_command_lines_are_left_to_typer(command: str, argv: list[str]) -> None:
    assert simple_arguments(command, argv) is None


VALUES = st.text(st.sampled_from("x1/=.,- ="), max_size=4)


@st.composite
def _plain_lines(draw: st.DrawFn, command: str) -> list[str]:
    """A command line of the command's own flags, each once: `--flag value`,
    `--flag=value` or a bare switch, as harnesses write them."""
    names = draw(st.lists(st.sampled_from(COMMANDS[command].options), unique=True))
    line = []
    for name in names:
        option = OPTIONS[name]
        flag = draw(st.sampled_from(option.flags))
        if option.is_flag:
            line.append(flag)
        elif flag.startswith("--") and draw(st.booleans()):
            line.append(f"{flag}={draw(VALUES)}")
        else:
            line += [flag, draw(VALUES.filter(lambda value: not value.startswith("-")))]
    return line


@st.composite
def _near_plain_lines(draw: st.DrawFn, command: str) -> list[str]:
    """A plain line with one word more anywhere: any command's flag, a value, a
    `flag=value` of a short flag or a switch too, a repeat; where a misreading would be."""
    line = draw(_plain_lines(command))
    flags = st.sampled_from(sorted({flag for option in OPTIONS.values() for flag in option.flags}))
    word = draw(st.one_of(flags, VALUES, st.builds("{}={}".format, flags, VALUES)))
    position = draw(st.integers(0, len(line)))
    return [*line[:position], word, *line[position:]]


@pytest.mark.parametrize("command", HOT_PATHS)
def test_the_hot_paths_read_plain_lines_as_typer_does(command: str) -> None:
    @settings(FUZZ, max_examples=200)
    @given(_plain_lines(command))
    def check(argv: list[str]) -> None:
        read = simple_arguments(command, argv)
        assert read is not None, argv
        assert read == typer_collects(command, argv)

    check()


@pytest.mark.parametrize("command", HOT_PATHS)
def test_whatever_line_the_hot_paths_read_typer_reads_alike(command: str) -> None:
    """Any other line they take, typer collects the same values from; the rest they
    leave to typer."""

    @settings(FUZZ, max_examples=300)
    @given(_near_plain_lines(command))
    def check(argv: list[str]) -> None:
        read = simple_arguments(command, argv)
        if read is not None:
            assert read == typer_collects(command, argv)

    check()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_commands_help_lists_its_options_variables_defaults_and_exit_codes(
    name: str,
) -> None:
    command = COMMANDS[name]
    completed = verifier(*name.split(), "--help")
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    shown = squeezed(completed.stdout)
    assert squeezed(command.help) in shown
    for option_name in command.options:
        option = OPTIONS[option_name]
        for flag in option.flags:
            assert flag in completed.stdout or option_name in command.positional, flag
        assert squeezed(command.help_of(option)) in shown, option_name
        assert squeezed(command.source_of(option)) in shown, option_name
    for code in command.exit_codes:
        assert squeezed(f"{code} {command.meaning_of(code)}") in shown, code


def test_help_is_plain_text_with_brackets_as_written() -> None:
    """No rich markup: `[environment].docker_image` is not taken for a style tag."""
    completed = verifier("task", "init", "--help")
    assert completed.returncode == 0
    assert "([environment].docker_image)" in completed.stdout
    assert not set("╭╮╰╯│─") & set(completed.stdout)


def test_the_top_level_help_lists_every_command_and_the_version_flag() -> None:
    completed = verifier("--help")
    assert completed.returncode == 0
    commands = completed.stdout.split("Commands:", 1)[1]
    for name in ("grade", "check", "batch", "schema", "task", "version"):
        assert f"\n  {name} " in commands, name
    assert "-V, --version" in completed.stdout


@pytest.mark.parametrize("args", [["-h"], ["grade", "-h"], ["batch", "-h"], ["task", "init", "-h"]])
def test_dash_h_is_help_as_before(args: list[str]) -> None:
    completed = verifier(*args)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == verifier(*args[:-1], "--help").stdout
    assert completed.stdout.startswith(f"Usage: verifier {' '.join(args[:-1])}".rstrip())


@pytest.mark.parametrize("args", [[], ["task"]])
def test_a_group_without_its_command_shows_its_help_and_exits_2(args: list[str]) -> None:
    completed = verifier(*args)
    assert completed.returncode == 2
    assert completed.stdout.startswith(f"Usage: verifier {' '.join(args)}".rstrip())
    assert "Commands:" in completed.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["grade", "--conf", "e.yaml"], "grade: No such option '--conf'. Did you mean '--config'?"),
        (["grade", "--case"], "grade: Option '--case' requires an argument."),
        (["grade", "--debug=yes"], "grade: Option '--debug' does not take a value."),
        (["grade", "extra"], "grade: Got unexpected extra argument (extra)"),
        (["batch", "-j"], "batch: Option '-j' requires an argument."),
        (
            ["batch", "--case", "c"],
            "batch: No such option '--case'. (Did you mean one of: '--cases', '--force'?)",
        ),
        (["check", "a.yaml", "b.yaml"], "check: Got unexpected extra argument (b.yaml)"),
        (["task", "init", "--bogus"], "task init: No such option '--bogus'."),
        (["task", "ini"], "task: No such command 'ini'. Did you mean 'init'?"),
        (["grde"], "No such command 'grde'. Did you mean 'grade'?"),
    ],
)
def test_usage_errors_are_one_line_naming_the_flag_and_exit_2(
    args: list[str], message: str
) -> None:
    completed = verifier(*args)
    assert completed.returncode == 2
    assert completed.stderr == f"verifier: error: {message}\n"
    assert completed.stdout == ""


def test_a_bad_value_reads_the_same_on_either_path(tmp_path: Path) -> None:
    """`--memory-mb 0` is read by the fast path, `--memory-mb 0 --memory-mb 0` by typer:
    one message."""
    out = str(tmp_path / "o")
    fast = verifier("grade", "--out", out, "--memory-mb", "0")
    typer_path = verifier("grade", "--out", out, "--memory-mb", "0", "--memory-mb", "0")
    assert fast.returncode == typer_path.returncode == 2
    assert (
        fast.stderr == typer_path.stderr == "verifier: error: --memory-mb: 0 must be at least 1\n"
    )


def test_grade_read_by_typer_grades_as_the_fast_path_does(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text("judges:\n  - {name: a, check: 'return True'}\n")
    (tmp_path / "case").mkdir()
    plain = ["--config", str(config), "--case", str(tmp_path / "case")]
    fast = verifier("grade", *plain, "--out", str(tmp_path / "fast"))
    # A flag given twice is not the fast path's: typer reads it (the last one wins).
    typer_path = verifier("grade", *plain, "--out", "elsewhere", "--out", str(tmp_path / "typer"))
    assert fast.returncode == typer_path.returncode == 0, typer_path.stderr
    assert fast.stdout.splitlines()[0] == typer_path.stdout.splitlines()[0]
    for out in ("fast", "typer"):
        assert json.loads((tmp_path / out / "reward.json").read_text()) == {"reward": 1.0, "a": 1.0}


def into_a_closed_pipe(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`verifier ARGS` whose stdout's reader has gone away before it writes (`| head -1`
    once head has its line)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [VERIFIER, *args], stdout=write, stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=60
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "args",
    [("schema",), ("--help",), ("grade", "--help"), ("check", "eval.yaml"), ("grade",)],
    ids=" ".join,
)
def test_a_reader_gone_ends_the_command_quietly_by_sigpipe(tmp_path: Path, args: tuple) -> None:
    """It was "verifier: internal error: BrokenPipeError" (exit 1); a help, exit 1."""
    (tmp_path / "eval.yaml").write_text("judges:\n  - {name: a, check: return True}\n")
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "a.txt").write_text("a")
    if args == ("grade",):
        args = ("grade", "--config", "eval.yaml", "--case", "case", "--out", "out")
    done = into_a_closed_pipe(*args, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (-signal.SIGPIPE, "")
    if args[0] == "grade" and "--help" not in args:  # its files are written first
        assert json.loads((tmp_path / "out" / "reward.json").read_text())["reward"] == 1.0


def test_a_shell_shows_a_reader_gone_as_141() -> None:
    """The schema (over 100 KiB) outlasts the pipe's buffer, so head has gone before
    the verifier's last write."""
    done = subprocess.run(
        ["bash", "-c", f'{VERIFIER} schema | head -c 1 >/dev/null; echo "${{PIPESTATUS[0]}}"'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.stdout, done.stderr) == ("141\n", "")


def test_a_usage_error_with_stdout_gone_is_still_the_usage_error() -> None:
    done = into_a_closed_pipe("grade", "--conf", "x")
    assert done.returncode == 2 and "No such option '--conf'" in done.stderr
