"""`tests/script`: the stand-in for /logs/verifier read as the judge's result, as Harbor
reads it, and never more than the task's own tests wrote (a planted file fails)."""

from __future__ import annotations

import json

import pytest

from verifier.casefiles import CaseFile
from verifier.judges.builtins.script import details_of, read_result, script_argv
from verifier.results import CTRF_DETAILS

ABSENT = CaseFile(None, "does not exist")
TXT = ("reward.txt",)
BOTH = ("reward.json", "reward.txt")


def files(**named: bytes | CaseFile) -> dict[str, CaseFile]:
    return {
        name.replace("_", "."): value if isinstance(value, CaseFile) else CaseFile(value, None)
        for name, value in named.items()
    }


@pytest.mark.parametrize(
    ("written", "declared", "value", "why"),
    [
        (files(reward_txt=b"1\n"), TXT, 1.0, "/logs/verifier/reward.txt: reward 1"),
        (files(reward_txt=b" 0.25 "), TXT, 0.25, "/logs/verifier/reward.txt: reward 0.25"),
        (files(reward_json=b'{"reward": 0.5, "x": 1}'), BOTH, 0.5, "reward.json: reward 0.5"),
        (files(reward_json=b'{"accuracy": 0.75}'), BOTH, 0.75, "reward.json: accuracy 0.75"),
        (files(reward_json=b'{"a": 1, "b": 0}'), BOTH, 0.5, "the mean of its 2 values, 0.5"),
        # Harbor's order: reward.json first, when both are written.
        (files(reward_json=b'{"reward": 0}', reward_txt=b"1"), BOTH, 0.0, "reward.json"),
    ],
)
def test_the_reward_file_is_the_value(written, declared, value, why) -> None:  # type: ignore[no-untyped-def]
    result = read_result(written, declared, None)
    assert result.value == value
    assert why in result.why


@pytest.mark.parametrize(
    ("written", "declared", "why"),
    [
        ({}, TXT, "the script wrote no /logs/verifier/reward.txt"),
        (files(reward_txt=b""), TXT, "reward.txt is empty"),
        (files(reward_txt=b"yes"), TXT, "reward.txt is not a number: 'yes'"),
        (files(reward_txt=b"nan"), TXT, "not finite"),
        (files(reward_txt=b"2"), TXT, "says 2, outside [0, 1]"),
        (files(reward_txt=b"-1"), TXT, "outside [0, 1]"),
        (files(reward_json=b"[1]"), BOTH, "is not an object of numbers"),
        (files(reward_json=b'{"reward": true}'), BOTH, "not a number"),
        (files(reward_json=b'{"reward": "1"}'), BOTH, "not a number"),
        (files(reward_json=b"{}"), BOTH, "is not an object of numbers"),
        (files(reward_json=b"{"), BOTH, "is not JSON"),
        (files(reward_json=b"[" * 100_000 + b"]" * 100_000), BOTH, "nested too deeply"),
        (files(reward_txt=CaseFile(None, "is a symlink leaving the case")), TXT, "leaving"),
        (files(reward_txt=CaseFile(None, "is a FIFO")), TXT, "reward.txt is a FIFO"),
        # The tests write reward.txt only: a reward.json is the code under test's.
        (
            files(reward_json=b'{"reward": 1}', reward_txt=b"0"),
            TXT,
            "reward.json is there, and the task's tests never write it",
        ),
        (files(reward_json=CaseFile(None, "is a FIFO")), TXT, "never write it"),
    ],
)
def test_no_usable_reward_is_no_value(written, declared, why) -> None:  # type: ignore[no-untyped-def]
    result = read_result(written, declared, None)
    assert result.value is None
    assert why in result.why


def test_a_missing_file_given_as_absent_is_not_planted() -> None:
    result = read_result({"reward.json": ABSENT, "reward.txt": CaseFile(b"1", None)}, TXT, None)
    assert result.value == 1.0


def test_the_ctrf_report_is_detail_never_the_value() -> None:
    ctrf = {
        "results": {
            "tool": {"name": "pytest"},
            "summary": {"tests": 2, "passed": 1, "failed": 1},
            "tests": [
                {"name": "test_a", "status": "passed", "duration": 1},
                {"name": "test_b", "status": "failed", "duration": 1, "message": "boom"},
            ],
        }
    }
    written = files(reward_txt=b"0", ctrf_json=json.dumps(ctrf).encode())
    result = read_result(written, TXT, "ctrf.json")
    assert result.value == 0.0
    details = details_of(result)
    assert details["tests"] == {"passed": 1, "failed": 1, "errored": 0, "skipped": 0}
    assert [test["name"] for test in details[CTRF_DETAILS]["tests"]] == ["test_a", "test_b"]
    assert details["rewards"] == {"reward": 0.0}
    broken = read_result(files(reward_txt=b"1", ctrf_json=b"{"), TXT, "ctrf.json")
    assert broken.value == 1.0 and "ctrf.json" in details_of(broken)["tests_problem"]


@pytest.mark.parametrize(
    ("text", "mode", "argv"),
    [
        # The interpreter itself, so that the script is its namespace's PID 1.
        ("#!/bin/bash\necho\n", 0o755, ("/bin/bash", "/tests/test.sh")),
        ("#!/bin/bash\necho\n", 0o644, ("/bin/bash", "/tests/test.sh")),
        ("#!/bin/bash -e  \necho\n", 0o755, ("/bin/bash", "-e", "/tests/test.sh")),
        ("#! /bin/sh\techo x\n", 0o755, ("/bin/sh", "echo x", "/tests/test.sh")),
        ("echo no shebang\n", 0o755, ("bash", "/tests/test.sh")),
        ("#!/usr/bin/env python3\nprint()\n", 0o644, ("/usr/bin/env", "python3", "/tests/test.sh")),
        ("echo no shebang\n", 0o644, ("bash", "/tests/test.sh")),
    ],
)
def test_the_script_runs_as_harbor_runs_it(tmp_path, text, mode, argv) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "test.sh"
    script.write_text(text)
    script.chmod(mode)
    assert script_argv(script, "/tests/test.sh") == argv
