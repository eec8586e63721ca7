"""Every builtin is total over what the case holds: property-based, all 30 of them.

For each builtin, hypothesis writes a fuzzed document (tests/unit/fuzzing.py: JSON,
ATIF and event trails, test reports, YAML, XML, workbooks, raw bytes, nesting past
any recursion limit) where the builtin's arguments point, reads the case as grading
does, and runs the builtin. It must answer: a bool, or for a partial-credit builtin a
finite number in [0, 1], with a rationale, in bounded time, and never raise (an
exception is an error record, which `on_error: drop` drops and a policy learns to
cause). The LLM builtins are fuzzed with the prompt builder (test_fuzz_readers.py).
The crashes this found are named regression tests at the end.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.fuzzing import (
    ATIF,
    CONTENTS,
    DEEP_JSON,
    EVENT,
    FUZZ,
    GO_EVENT,
    JSON_VALUES,
    JUNIT,
    PYTEST_JSON,
    YAML_TEXT,
    lines,
    to_bytes,
    workbooks,
)
from verifier.case import check_case_dir, read_case
from verifier.config import Locator
from verifier.judges.base import JudgeAnswer
from verifier.judges.builtins import BUILTINS, BuiltinContext, all_builtins
from verifier.sandbox import Sandbox

TIME_BOUND_S = 20.0  # per example: the sandboxed command builtins start processes
FILE = "f"  # where each builtin's path argument points

# Arguments of each builtin, pointing at the fuzzed FILE (a trail builtin reads it as
# the trajectory; the record-based ones get it as the case's trajectory too).
ARGUMENTS: dict[str, dict[str, Any]] = {
    "trajectory_tool_used": {"tool_name": "Bash", "path": FILE},
    "trajectory_tool_not_used": {"tool_name": "Read", "path": FILE},
    "trajectory_turn_count": {"max_turns": 2, "path": FILE},
    "cost_budget": {"max_cost_usd": 1.0},
    "consulted_docs": {"min_coverage": 0.5},
    "tool_call_validation": {},
    "file_exists": {"path": FILE},
    "file_not_exists": {"path": FILE},
    "file_contains": {"path": FILE, "text": "a", "ignore_case": True},
    "file_contains_regex": {"path": FILE, "pattern": "^a+$"},
    "file_matches": {"path": FILE, "expected": "a"},
    "files_equal": {"path1": FILE, "reference": "ref.txt", "ignore_whitespace": True},
    "diff_ratio": {"path": FILE, "reference": "ref.txt"},
    "json_key_equals": {"path": FILE, "key": "a", "expected": 1},
    "json_path_equals": {"path": FILE, "json_path": "steps.0.source", "expected": "agent"},
    "yaml_path_equals": {"path": FILE, "yaml_path": "a", "expected": [1]},
    "csv_cell_equals": {"path": FILE, "row": 0, "col": 0, "expected": 1},
    "sqlite_query_equals": {"db_path": FILE, "query": "SELECT 1", "expected": 1, "timeout": 5},
    "files_unchanged": {"paths": ["f", "**/*.json"], "reference": "protected"},
    "no_new_files_matching": {"paths": ["*.pth", "conftest.py"]},
    "no_tamper": {"paths": [FILE]},
    "command_succeeds": {"cmd": f"cat {FILE}"},
    "command_output_contains": {"cmd": f"cat {FILE}", "text": "a"},
    "command_output_matches": {"cmd": f"cat {FILE}", "expected": "a"},
    "command_output_matches_regex": {"cmd": f"cat {FILE}", "pattern": "a"},
    "pass_rate": {"report": FILE},
    "all_passed": {"report": FILE},
    "xlsx_cell_equals": {"path": FILE, "cell": "A1", "expected": 1},
    # the task's script hands the fuzzed file back as its reward files (dirs every Debian
    # host has stand in for /app, /tests and /logs/verifier)
    "script": {
        "tests": "script-tests",
        "case_at": "/srv",
        "tests_at": "/mnt",
        "logs_at": "/media",
        "timeout": 10,
    },
}
# Builtins that run a command from the case: fewer examples (each starts processes).
COMMANDS = {name for name, found in BUILTINS.items() if found.runs_case_code}
REFERENCES = {
    "ref.txt": "a reference\n",
    "protected/f": "original\n",
    "script-tests/test.sh": f"cat {FILE}; cp {FILE} /media/reward.txt; cp {FILE} /media/reward.json\n",
}
_TRAILS = st.one_of(ATIF.map(json.dumps), st.lists(EVENT, max_size=5).map(json.dumps))
_REPORTS = st.one_of(JUNIT, PYTEST_JSON.map(json.dumps), st.lists(GO_EVENT, max_size=5).map(lines))
_JSON = st.one_of(JSON_VALUES.map(json.dumps), DEEP_JSON)
# Python as an agent writes it: statements the guard flags or passes, nested and mixed.
_PYTHON_LINES = (
    "import sys",
    "import sys as s",
    "from gc import get_objects",
    "sys.settrace(None)",
    "getattr(sys, 'settrace')",
    "__import__('ctypes')",
    "class A(int):\n    def __eq__(self, o):\n        return True",
    "class B:\n    __eq__ = lambda self, o: True\n    __hash__ = None",
    "def pytest_configure(config):\n    config.pluginmanager",
    "f.__code__ = g.__code__",
    "x = (" * 150 + ")" * 150,
    "def f(",
    "# -*- coding: latin-1 -*-",
)
_PYTHON = st.lists(st.one_of(st.sampled_from(_PYTHON_LINES), st.text(max_size=40)), max_size=8).map(
    "\n".join
)
# The documents each builtin reads, drawn as often as everything else.
FOCUS = {
    **dict.fromkeys(
        (
            "trajectory_tool_used",
            "trajectory_tool_not_used",
            "trajectory_turn_count",
            "cost_budget",
            "consulted_docs",
            "tool_call_validation",
        ),
        _TRAILS,
    ),
    **dict.fromkeys(("json_key_equals", "json_path_equals"), _JSON),
    "yaml_path_equals": YAML_TEXT,
    "no_tamper": _PYTHON,
    **dict.fromkeys(("pass_rate", "all_passed"), _REPORTS),
    "script": st.one_of(
        st.floats().map(repr), JSON_VALUES.map(lambda value: json.dumps({"reward": value}))
    ),
}


def contents(name: str) -> st.SearchStrategy[bytes]:
    focus = FOCUS.get(name)
    return CONTENTS if focus is None else st.one_of(focus.map(to_bytes), CONTENTS)


def test_every_builtin_is_fuzzed() -> None:
    code_builtins = {found.name for found in all_builtins() if found.prompt is None}
    assert set(ARGUMENTS) == code_builtins
    assert len(all_builtins()) == 31


def answer_of(
    name: str, arguments: dict[str, Any], files: dict[str, bytes], sandbox: Sandbox
) -> Any:
    """The builtin's answer on a case holding files, read as grading reads it (with the
    case's own trail as the trajectory, so the record-based trail builtins see it)."""
    found = BUILTINS[name]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        config_dir, case = root / "config", root / "case"
        for relative, text in REFERENCES.items():
            (config_dir / relative).parent.mkdir(parents=True, exist_ok=True)
            (config_dir / relative).write_text(text)
        case.mkdir()
        for relative, data in files.items():
            (case / relative).write_bytes(data)
        case = check_case_dir(case)
        annotations = {"expected_files": ["docs/a.md", "b.md"]}
        record = read_case(case, (), annotations, trajectory_from=FILE).record
        bound = found.bind(arguments, Locator("eval.yaml", name, config_dir))
        started = time.monotonic()
        context = BuiltinContext(case, config_dir, record, sandbox)
        returned = found.run(context, bound)
        assert time.monotonic() - started < TIME_BOUND_S
    return returned


def assert_an_answer(name: str, returned: Any) -> None:
    """A value on the builtin's scale and a rationale, as the engine would record them."""
    value, rationale = (
        (returned.value, returned.rationale) if isinstance(returned, JudgeAnswer) else returned
    )
    assert isinstance(rationale, str) and rationale
    if BUILTINS[name].score_range is None:
        assert isinstance(value, bool), (name, value)
    else:
        assert isinstance(value, int | float) and not isinstance(value, bool)
        assert math.isfinite(value) and 0.0 <= value <= 1.0, (name, value)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(ARGUMENTS) - COMMANDS))
def test_a_builtin_answers_whatever_the_file_holds(name: str, sandbox: Sandbox) -> None:
    @settings(FUZZ, max_examples=60)
    @given(content=contents(name), neighbours=st.lists(CONTENTS, max_size=2))
    def check(content: bytes, neighbours: list[bytes]) -> None:
        files = {FILE: content, **{f"n{i}.json": data for i, data in enumerate(neighbours)}}
        assert_an_answer(name, answer_of(name, ARGUMENTS[name], files, sandbox))

    check()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_builtin_answers_whatever_the_command_prints(name: str, sandbox: Sandbox) -> None:
    @settings(FUZZ, max_examples=8)
    @given(content=contents(name))
    def check(content: bytes) -> None:
        assert_an_answer(name, answer_of(name, ARGUMENTS[name], {FILE: content}, sandbox))

    check()


@settings(FUZZ, max_examples=10)
# SIGSTOP (19) stops the command, which cannot be caught or run on: it waits out its timeout
@given(number=st.integers(min_value=1, max_value=64).filter(lambda n: n != 19), printed=CONTENTS)
def test_a_command_that_dies_by_any_signal_fails(
    sandbox: Sandbox, number: int, printed: bytes
) -> None:
    arguments = {"cmd": f"cat {FILE}; kill -{number} $$", "text": "a"}
    if number in (17, 18, 20, 21, 22, 23, 28):  # ignored or stopping by default: kill with 9
        arguments["cmd"] += "; kill -9 $$"
    for name in ("command_succeeds", "command_output_contains"):
        chosen = {
            key: value
            for key, value in arguments.items()
            if key == "cmd" or name != "command_succeeds"
        }
        assert_an_answer(name, answer_of(name, chosen, {FILE: printed}, sandbox))


@FUZZ
@given(data=workbooks())
def test_a_workbook_of_any_bytes_is_a_value_or_a_fact(sandbox: Sandbox, data: bytes) -> None:
    assert_an_answer(
        "xlsx_cell_equals",
        answer_of("xlsx_cell_equals", ARGUMENTS["xlsx_cell_equals"], {FILE: data}, sandbox),
    )
