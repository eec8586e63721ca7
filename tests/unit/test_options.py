"""One options record for every command: the same flag, variable, parser and default
whichever command reads it, and help generated from the same declarations."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from verifier.errors import UsageError
from verifier.options import build_options

VERIFIER = str(Path(sys.executable).with_name("verifier"))
BOTH = ("grade", "batch")
BATCH_REQUIRED = {"cases": "/cases", "out": "/out"}


def options_of(command: str, environ: dict[str, str], **given: str | bool):
    required = BATCH_REQUIRED if command == "batch" else {}
    return build_options(command, {**required, **given}, environ)


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
        build_options("batch", {"out": "/o"}, {})
    with pytest.raises(UsageError, match="batch: missing --out"):
        build_options("batch", {"cases": "/c"}, {})
    assert build_options("batch", {"cases": "/c"}, {"VERIFIER_OUT": "/o"}).out == Path("/o")


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
