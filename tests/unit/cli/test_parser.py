"""One CLI: one parser (argparse, per command) and every help text, made from the option
declarations; usage errors are one line and exit 2."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.fuzzing import FUZZ
from verifier.cli.options import COMMANDS, OPTIONS
from verifier.cli.parser import read_arguments
from verifier.errors import UsageError

VERIFIER = str(Path(sys.executable).with_name("verifier"))


def verifier(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([VERIFIER, *args], capture_output=True, text=True, timeout=60)


def squeezed(text: str) -> str:
    """text without whitespace: help lines wrap anywhere a space or hyphen is."""
    return "".join(text.split())


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


@pytest.mark.parametrize(
    "args",
    [["-h"], ["grade", "-h"], ["batch", "-h"], ["task", "-h"], ["task", "init", "-h"]],
)
def test_dash_h_is_help(args: list[str]) -> None:
    completed = verifier(*args)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == verifier(*args[:-1], "--help").stdout
    assert completed.stdout.startswith(f"Usage: verifier {' '.join(args[:-1])}".rstrip())


def test_help_wins_over_anything_else_on_the_line() -> None:
    """As click's eager --help did: `grade --bogus --help` is grade's help."""
    completed = verifier("grade", "--bogus", "--memory-mb", "0", "--help")
    assert completed.returncode == 0
    assert completed.stdout == verifier("grade", "--help").stdout


def test_help_lines_fit_80_columns() -> None:
    for name in COMMANDS:
        text = verifier(*name.split(), "--help").stdout
        assert max(len(line) for line in text.splitlines()) <= 80, name


@pytest.mark.parametrize("args", [[], ["task"]])
def test_a_group_without_its_command_shows_its_help_and_exits_2(args: list[str]) -> None:
    completed = verifier(*args)
    assert completed.returncode == 2
    assert completed.stdout.startswith(f"Usage: verifier {' '.join(args)}".rstrip())
    assert "Commands:" in completed.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["grade", "--conf", "e.yaml"], "grade: no such option --conf (did you mean --config?)"),
        (["grade", "--conf=e.yaml"], "grade: no such option --conf (did you mean --config?)"),
        (["grade", "--case"], "grade: --case: expects a value"),
        (["grade", "--case", "--out", "o"], "grade: --case: expects a value"),
        (["grade", "--debug=yes"], "grade: --debug: takes no value"),
        (["grade", "extra"], "grade: unexpected argument 'extra'"),
        (["grade", "--", "--out"], "grade: unexpected argument '--out'"),
        (["batch", "-j"], "batch: -j: expects a value"),
        (
            ["batch", "--case", "c"],
            "batch: no such option --case (did you mean --cases or --force?)",
        ),
        (["check", "a.yaml", "b.yaml"], "check: unexpected argument 'b.yaml'"),
        (["task", "init", "--bogus"], "task init: no such option --bogus"),
        (["task", "ini"], "task: no such command ini (did you mean init?)"),
        (["task", "--bogus"], "task: no such option --bogus"),
        (["grde"], "no such command grde (did you mean grade?)"),
        (["--verison"], "no such option --verison (did you mean --version?)"),
        (["version", "x"], "version: unexpected argument 'x'"),
    ],
)
def test_usage_errors_are_one_line_naming_the_flag_and_exit_2(
    args: list[str], message: str
) -> None:
    completed = verifier(*args)
    assert completed.returncode == 2
    assert completed.stderr == f"verifier: error: {message}\n"
    assert completed.stdout == ""


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], {}),
        (
            ["--config=e.yaml", "--case", "c", "--debug"],
            {"config": "e.yaml", "case": "c", "debug": True},
        ),
        (
            ["--out=", "--no-llm", "--memory-mb", "512"],
            {"out": "", "no_llm": True, "memory_mb": "512"},
        ),
        (["--out", "a", "--out", "b"], {"out": "b"}),  # the last one counts
        (["--deadline", "-5"], {"deadline": "-5"}),  # a negative number is a value
        (["--case-id", "x=y"], {"case_id": "x=y"}),
    ],
)
def test_grades_flags_are_collected_as_given(argv: list[str], expected: dict[str, object]) -> None:
    given = read_arguments(COMMANDS["grade"], argv)
    assert given.keys() == set(COMMANDS["grade"].options)
    assert {name: value for name, value in given.items() if value is not None} == expected


@pytest.mark.parametrize(
    ("command", "argv", "expected"),
    [
        ("batch", ["-j", "2", "--cases=c"], {"jobs": "2", "cases": "c"}),
        ("batch", ["-j2"], {"jobs": "2"}),
        ("check", ["--strict", "e.yaml"], {"config": "e.yaml", "strict": True}),
        (
            "task import",
            ["src", "dest", "--force"],
            {"source": "src", "dest": "dest", "force": True},
        ),
        ("task init", ["d", "--cases", "a,b"], {"dest": "d", "case_ids": "a,b"}),
    ],
)
def test_each_command_reads_its_own_flags_and_arguments(
    command: str, argv: list[str], expected: dict[str, object]
) -> None:
    given = read_arguments(COMMANDS[command], argv)
    assert {name: value for name, value in given.items() if value is not None} == expected


@pytest.mark.parametrize(
    "flag", sorted({flag for name in COMMANDS["batch"].options for flag in OPTIONS[name].flags})
)
def test_no_flag_is_abbreviated(flag: str) -> None:
    if len(flag) <= 3:
        return  # -j: nothing shorter to abbreviate it to
    with pytest.raises(UsageError, match="no such option"):
        read_arguments(COMMANDS["batch"], [flag[:-1], "x"])


def test_a_flag_given_twice_grades_with_the_last(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text("judges:\n  - {name: a, check: 'return True'}\n")
    (tmp_path / "case").mkdir()
    plain = ["--config", str(config), "--case", str(tmp_path / "case")]
    done = verifier(
        "grade", *plain, "--out", str(tmp_path / "elsewhere"), "--out", str(tmp_path / "o")
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "o" / "reward.json").read_text()) == {"reward": 1.0, "a": 1.0}
    assert not (tmp_path / "elsewhere").exists()


def test_debug_shows_the_traceback_of_an_error(tmp_path: Path) -> None:
    plain = verifier("grade", "--config", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "o"))
    debug = verifier(
        "grade", "--config", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "o"), "--debug"
    )
    assert plain.returncode == debug.returncode == 2
    assert "Traceback" not in plain.stderr and plain.stderr.count("\n") == 1
    assert "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.endswith(plain.stderr)


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
    assert done.returncode == 2 and "no such option --conf" in done.stderr


@pytest.mark.parametrize(
    ("command", "argv", "expected"),
    [
        ("check", ["--", "-odd.yaml"], {"config": "-odd.yaml"}),
        ("check", ["-"], {"config": "-"}),
        ("task kube", ["p", "--", "--d"], {"package": "p", "dest": "--d"}),
        ("batch", ["--min-agreement", "-0.5"], {"min_agreement": "-0.5"}),
        ("batch", ["--min-agreement=-x"], {"min_agreement": "-x"}),
    ],
)
def test_arguments_after_a_double_dash_and_negative_numbers_are_values(
    command: str, argv: list[str], expected: dict[str, object]
) -> None:
    given = read_arguments(COMMANDS[command], argv)
    assert {name: value for name, value in given.items() if value is not None} == expected


VALUES = st.text(st.sampled_from("x1/=.,- ="), max_size=4)


@st.composite
def _lines(draw: st.DrawFn, command: str) -> tuple[list[str], dict[str, object]]:
    """A command line of the command's flags, each once (`--flag value`, `--flag=value`,
    `-jVALUE`, a switch), and what it gives each."""
    names = draw(st.lists(st.sampled_from(COMMANDS[command].options), unique=True))
    line: list[str] = []
    meant: dict[str, object] = {}
    for name in names:
        option = OPTIONS[name]
        if name in COMMANDS[command].positional:
            continue
        flag = draw(st.sampled_from(option.flags))
        if option.is_flag:
            line.append(flag)
            meant[name] = True
            continue
        value = draw(VALUES)
        if flag.startswith("--") and draw(st.booleans()):
            line.append(f"{flag}={value}")
        elif not flag.startswith("--") and value:
            line.append(f"{flag}{value}")
        elif value.startswith("-") and not re.fullmatch(r"-|-\d+|-\d*\.\d+", value):
            line.append(f"{flag}={value}" if flag.startswith("--") else f"{flag}{value}")
        else:
            line += [flag, value]
        meant[name] = value
    return line, meant


@pytest.mark.parametrize("command", ["grade", "batch", "task init"])
def test_any_line_of_the_commands_flags_reads_back_as_meant(command: str) -> None:
    @settings(FUZZ, max_examples=300)
    @given(_lines(command))
    def check(line_and_meant: tuple[list[str], dict[str, object]]) -> None:
        line, meant = line_and_meant
        given_ = read_arguments(COMMANDS[command], line)
        assert {k: v for k, v in given_.items() if v is not None} == meant, line

    check()
