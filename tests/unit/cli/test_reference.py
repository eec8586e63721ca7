"""docs/cli.md stays true: its reference is made from the CLI's declarations
(scripts/cli_reference.py), and its examples are what the CLI prints."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.paths import REPO
from verifier.cli.options import COMMANDS, OPTIONS
from verifier.errors import EXIT_MEANINGS

ROOT = REPO
PAGE = ROOT / "docs" / "cli.md"
VERIFIER = str(Path(sys.executable).with_name("verifier"))


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "scripts/cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pages_reference_is_made_from_the_declarations() -> None:
    page = PAGE.read_text()
    assert page == _script().page_with_reference(page), "run `make cli-docs`"


def _reference() -> str:
    return PAGE.read_text().split(_script().BEGIN, 1)[1]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_reference_names_every_flag_default_and_exit_code_of_each_command(name: str) -> None:
    command = COMMANDS[name]
    section = _reference().split(f"### `verifier {name}`\n", 1)[1].split("\n### ", 1)[0]
    assert command.help in section
    for option_name in command.options:
        option = OPTIONS[option_name]
        row = next(
            line for line in section.splitlines() if f"| {command.help_of(option)} |" in line
        )
        if option_name in command.positional:
            assert row.startswith(f"| `{option.metavar}` |")
        else:
            assert row.startswith(f"| `{', '.join(option.flags)}")
        if option.env:
            assert f"${option.env}" in row
    for code in command.exit_codes:
        assert f"\n| {code} | {command.meaning_of(code)} |" in section


def test_the_reference_lists_every_variable_and_exit_code() -> None:
    reference = _reference()
    variables = reference.split("## Environment variables", 1)[1].split("## Exit codes", 1)[0]
    for option in OPTIONS.values():
        if option.env:
            assert f"\n| `{option.env}` | `{option.flags[0]}` |" in variables
    codes = reference.split("## Exit codes", 1)[1]
    for code, meaning in EXIT_MEANINGS.items():
        assert f"\n| {code} | {meaning} |" in codes


EXAMPLES = {
    "verifier: error: grade: no such option --conf (did you mean --config?)": (
        ["grade", "--conf", "e.yaml"],
        {},
    ),
    "verifier: error: batch: -j: expects a value": (["batch", "-j"], {}),
    "verifier: error: --memory-mb: 0 must be at least 1": (["grade", "--memory-mb", "0"], {}),
    "verifier: error: $VERIFIER_JUDGE_MEMORY_MB: 'x' is not a whole number": (
        ["grade"],
        {"VERIFIER_JUDGE_MEMORY_MB": "x"},
    ),
    "verifier: error: check: missing FILE": (["check"], {}),
}


def test_the_pages_usage_errors_are_the_ones_shown() -> None:
    shown = [line for line in PAGE.read_text().splitlines() if line.startswith("verifier: error")]
    assert shown == list(EXAMPLES)


@pytest.mark.parametrize("message", EXAMPLES)
def test_each_usage_error_on_the_page_is_what_the_cli_prints(message: str, tmp_path: Path) -> None:
    args, variables = EXAMPLES[message]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    completed = subprocess.run(
        [VERIFIER, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**environ, **variables, "VERIFIER_OUT": str(tmp_path / "out")},
    )
    assert completed.returncode == 2
    assert completed.stderr == message + "\n"


# Where the CLI's help sends the reader: `docs/PAGE.md, "Heading"` (plain text in --help).
_POINTER = re.compile(r'(README\.md|docs/[\w-]+\.md), "([^"]+)"')


def test_every_page_and_section_the_help_points_to_exists() -> None:
    """`--weak-sandbox` pointed to "README, Safety", gone since the README was split."""
    texts = [option.help for option in OPTIONS.values()]
    texts += [command.help for command in COMMANDS.values()]
    texts += [*EXIT_MEANINGS.values()]
    pointers = [found for text in texts for found in _POINTER.findall(text)]
    assert pointers, "no help points to a page: this test would check nothing"
    for page, heading in pointers:
        headings = [
            line.lstrip("#").strip()
            for line in (ROOT / page).read_text().splitlines()
            if line.startswith("#")
        ]
        assert any(found.startswith(heading) for found in headings), (page, heading)
    stale = [text for text in texts if "README, " in text]
    assert stale == []
