"""Builtin judges: file checks, regexes, JSON values and commands, confined to the case dir."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from verifier.errors import ConfigError
from verifier.grading import grade, load_eval
from verifier.results import JudgeResult, Status

WriteConfig = Callable[..., Path]
MakeCase = Callable[..., Path]

CASE = {
    "report.md": "The bug is Fixed.\nversion: 1.2.3\n",
    "data/result.json": '{"status": "done", "items": [{"id": 7}], "count": 2, "ok": true}',
}


def run_builtin(
    write_config: WriteConfig, make_case: MakeCase, builtin: str, arguments: str
) -> JudgeResult:
    config = write_config(
        textwrap.dedent(f"""
        judges:
          - name: j
            builtin: {builtin}
            arguments: {arguments}
        """)
    )
    return grade(load_eval(config), make_case(CASE)).results[0]


@pytest.mark.parametrize(
    ("builtin", "arguments", "value"),
    [
        ("file_exists", "{path: report.md}", True),
        ("files/file_exists", "{path: data/result.json}", True),
        ("file_exists", "{path: missing.md}", False),
        ("file_exists", "{path: ../../etc/passwd}", False),
        ("file_contains", "{path: report.md, text: Fixed}", True),
        ("file_contains", "{path: report.md, text: fixed}", False),
        ("file_contains", "{path: report.md, text: fixed, ignore_case: true}", True),
        ("file_contains", "{path: missing.md, text: x}", False),
        ("file_matches", "{path: report.md, pattern: '^version: \\d+\\.\\d+\\.\\d+$'}", True),
        ("file_matches", "{path: report.md, pattern: 'v2'}", False),
        ("json_path_equals", "{path: data/result.json, key: status, expected: done}", True),
        ("json/json_path_equals", "{path: data/result.json, key: items.0.id, expected: 7}", True),
        ("json_path_equals", "{path: data/result.json, key: count, expected: 2.0}", True),
        ("json_path_equals", "{path: data/result.json, key: ok, expected: 1}", False),
        ("json_path_equals", "{path: data/result.json, key: items.3.id, expected: 7}", False),
        ("json_path_equals", "{path: report.md, key: a, expected: 1}", False),
        ("command_succeeds", "{command: 'test -f report.md'}", True),
        ("process/command_succeeds", "{command: [grep, -q, Fixed, report.md]}", True),
        ("command_succeeds", "{command: 'exit 3'}", False),
        ("command_succeeds", "{command: 'sleep 5', timeout: 0.3}", False),
    ],
)
def test_builtin_values(
    write_config: WriteConfig, make_case: MakeCase, builtin: str, arguments: str, value: bool
) -> None:
    result = run_builtin(write_config, make_case, builtin, arguments)
    assert result.status is Status.OK, result.error
    assert result.value is value
    assert result.rationale


def test_command_runs_in_the_case_dir_without_secrets(
    write_config: WriteConfig, make_case: MakeCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    result = run_builtin(
        write_config, make_case, "command_succeeds",
        "{command: 'pwd; env | grep -c sk-do-not-leak'}",
    )  # fmt: skip
    assert result.value is False  # grep found no secret and failed
    assert "exit code 1" in result.rationale
    assert "/case" in result.rationale
    assert "sk-do-not-leak" not in result.rationale


def test_command_timeout_is_reported(write_config: WriteConfig, make_case: MakeCase) -> None:
    result = run_builtin(
        write_config, make_case, "command_succeeds", "{command: 'sleep 5', timeout: 0.3}"
    )
    assert result.rationale == "timed out after 0.3s"


@pytest.mark.parametrize(
    ("builtin", "arguments", "message"),
    [
        ("file_exsts", "{path: a}", "unknown builtin 'file_exsts' (did you mean 'file_exists'?)"),
        ("json/file_exists", "{path: a}", "unknown builtin 'json/file_exists'"),
        ("file_exists", "{}", "file_exists needs argument 'path'"),
        ("file_exists", "{path: a, pth: b}", "file_exists takes path"),
        ("file_matches", "{path: a, pattern: '(unclosed'}", "not a valid regex"),
        ("command_succeeds", "{command: 3}", "command must be a shell string or a list"),
        ("command_succeeds", "{command: ls, timeout: -1}", "must be a positive number"),
    ],
)
def test_bad_builtin_use_is_a_load_error(
    write_config: WriteConfig, builtin: str, arguments: str, message: str
) -> None:
    config = write_config(
        f"judges:\n  - {{name: j, builtin: '{builtin}', arguments: {arguments}}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_eval(config)
    assert message in caught.value.message
