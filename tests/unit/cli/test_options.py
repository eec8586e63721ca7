"""One declaration per setting: the same flag, variable, parser and default whichever
command reads it, each command's values read into its own record, and help generated
from the same declarations."""

from __future__ import annotations

import ast
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from tests.paths import REPO
from verifier.cli.options import COMMANDS, OPTIONS, read_values
from verifier.cli.parser import RUNS, record_class
from verifier.errors import UsageError

VERIFIER = str(Path(sys.executable).with_name("verifier"))
BOTH = ("grade", "batch")
BATCH_REQUIRED = {"cases": "/cases", "out": "/out"}


def options_of(command: str, environ: dict[str, str], **given: str | bool):
    required = BATCH_REQUIRED if command == "batch" else {}
    values = read_values(command, {**required, **given}, environ)
    values.pop("debug")
    return record_class(COMMANDS[command])(**values)


@pytest.mark.parametrize("command", BOTH)
@pytest.mark.parametrize(
    ("text", "skipped"),
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("no", False),
        ("off", False),
        ("", False),
    ],
)
def test_no_llm_variable_means_the_same_in_every_command(
    command: str, text: str, skipped: bool
) -> None:
    assert options_of(command, {"VERIFIER_NO_LLM": text}).no_llm is skipped


@pytest.mark.parametrize("command", BOTH)
def test_a_flag_wins_over_its_variable_which_wins_over_the_default(command: str) -> None:
    assert options_of(command, {}).memory_mb == 2048
    assert options_of(command, {"VERIFIER_JUDGE_MEMORY_MB": "512"}).memory_mb == 512
    given = options_of(command, {"VERIFIER_JUDGE_MEMORY_MB": "512"}, memory_mb="64")
    assert given.memory_mb == 64


@pytest.mark.parametrize("command", BOTH)
@pytest.mark.parametrize(
    ("given", "environ", "message"),
    [
        ({"memory_mb": "0"}, {}, "--memory-mb: 0 must be at least 1"),
        ({"memory_mb": "-5"}, {}, "--memory-mb: -5 must be at least 1"),
        ({"memory_mb": "99999999"}, {}, "--memory-mb: 99999999 is more than"),
        (
            {},
            {"VERIFIER_JUDGE_MEMORY_MB": "lots"},
            "$VERIFIER_JUDGE_MEMORY_MB: 'lots' is not a whole",
        ),
        ({}, {"VERIFIER_NO_LLM": "maybe"}, "$VERIFIER_NO_LLM: 'maybe' is not a boolean"),
        ({"config": "a\0b"}, {}, "--config: 'a\\x00b' is not a path"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_flag_or_variable(
    command: str, given: dict[str, str], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        options_of(command, environ, **given)
    assert message in caught.value.message
    assert caught.value.exit_code == 2


def test_batch_needs_cases_and_out_but_out_may_come_from_its_variable() -> None:
    with pytest.raises(UsageError, match="batch: missing --cases"):
        read_values("batch", {"out": "/o"}, {})
    with pytest.raises(UsageError, match="batch: missing --out"):
        read_values("batch", {"cases": "/c"}, {})
    assert read_values("batch", {"cases": "/c"}, {"VERIFIER_OUT": "/o"})["out"] == Path("/o")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_commands_record_has_a_field_per_option_and_no_default(name: str) -> None:
    """The declarations are the one place a default is stated: the record a command
    reads has exactly its options (--debug aside) and defaults none of them."""
    fields = attrs.fields(record_class(COMMANDS[name]))
    assert [field.name for field in fields] == [
        option for option in COMMANDS[name].options if option != "debug"
    ]
    assert all(field.default is attrs.NOTHING for field in fields)


def test_every_command_runs_from_its_module() -> None:
    assert RUNS.keys() == COMMANDS.keys()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_commands_values_with_nothing_given_are_the_declared_defaults(name: str) -> None:
    command = COMMANDS[name]
    given = dict.fromkeys(command.required, "/x")
    values = read_values(name, given, {})
    for option in command.options:
        if option not in command.required:
            assert values[option] == OPTIONS[option].default, option


def test_no_engine_judge_or_pipeline_module_imports_the_cli() -> None:
    """The core reads records of its own (Limits, BatchRequest, InitRequest): the CLI's
    declarations and its records are the CLI's and the commands' alone."""
    root = REPO / "verifier"
    for path in root.rglob("*.py"):
        relative = path.relative_to(root).parts
        if relative[0] in ("cli", "commands", "__main__.py"):
            continue
        tree = ast.parse(path.read_text())
        imported = [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        ]
        imported += [
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        ]
        assert not [
            name for name in imported if name.startswith(("verifier.cli", "verifier.commands"))
        ], path


@pytest.mark.parametrize("command", BOTH)
def test_memory_mb_zero_is_refused_on_the_command_line(command: str, tmp_path: Path) -> None:
    arguments = {
        "grade": ["--out", str(tmp_path / "o")],
        "batch": ["--cases", str(tmp_path), "--out", str(tmp_path / "o")],
    }[command]
    completed = subprocess.run(
        [VERIFIER, command, *arguments, "--memory-mb", "0"], capture_output=True, text=True
    )
    assert completed.returncode == 2
    assert completed.stderr.strip() == "verifier: error: --memory-mb: 0 must be at least 1"


@pytest.mark.parametrize("flag", ["--version", "-V", "version"])
def test_version_flags_print_the_version(flag: str) -> None:
    completed = subprocess.run([VERIFIER, flag], capture_output=True, text=True)
    assert completed.returncode == 0
    assert completed.stdout.strip() == "0.1.0"


def imported_modules(verbose_stderr: str) -> set[str]:
    """What `python -v` reports loading (also what importlib.import_module loads, as the
    judge-kind registry does, which -X importtime does not list)."""
    return set(re.findall(r"^import '([^']+)'", verbose_stderr, re.MULTILINE))


def test_grading_imports_none_of_the_costly_modules(tmp_path: Path) -> None:
    """The grading path's start-up budget: the command line is read by verifier.cli.parser
    alone, without argparse (gettext, locale) or a CLI framework (help texts and the
    suggestions of a mistake are imported only to be shown), and an eval of `check` judges loads no other judge kind, nothing of the LLM judges, and no
    part of the sandbox that only a command from the case needs. (attrs, which the
    records are, is paid for, and brings ast with it.)"""
    config = tmp_path / "eval.yaml"
    config.write_text("judges:\n  - {name: a, check: 'return True'}\n")
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "x.txt").write_text("x")
    completed = subprocess.run(
        [
            sys.executable,
            "-v",
            "-m",
            "verifier",
            "grade",
            "--config",
            str(config),
            "--case",
            str(tmp_path / "case"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert completed.returncode == 0, completed.stderr
    imported = imported_modules(completed.stderr)
    assert {"verifier.commands.grade", "verifier.judges.kinds.check"} <= imported
    costly = {
        "typer",
        "click",
        "argparse",
        "gettext",
        "difflib",
        "textwrap",
        "verifier.cli.help",
        "jinja2",
        "multiprocessing",
        "verifier.batch",
        "verifier.commands.batch",
        "verifier.judges.kinds.agent",
        "verifier.judges.kinds.builtin",
        "verifier.judges.kinds.llm",
        "verifier.judges.kinds.module",
        "verifier.judges.llm",
        "verifier.judges.builtins",
        "verifier.sandbox.supervisor",
        "verifier.sandbox.case_copy",
    }
    assert not costly & imported, sorted(costly & imported)


def test_a_memory_limit_above_the_hard_data_limit_is_a_usage_error(tmp_path: Path) -> None:
    completed = subprocess.run(
        [VERIFIER, "grade", "--out", str(tmp_path / "o"), "--memory-mb", "2048"],
        capture_output=True,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_DATA, (2**30, 2**30)),
    )
    assert completed.returncode == 2
    assert "--memory-mb 2048: this process may use at most 1024 MiB" in completed.stderr
