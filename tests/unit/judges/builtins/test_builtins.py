"""Builtin judges: file checks, regexes, JSON values and commands, confined to the case dir."""

from __future__ import annotations

import os
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
        write_config,
        make_case,
        "command_succeeds",
        "{command: 'pwd; env | grep -c sk-do-not-leak'}",
    )
    assert result.value is False  # grep found no secret and failed
    assert "exit code 1" in result.rationale
    assert "/case" in result.rationale
    assert "sk-do-not-leak" not in result.rationale


def test_a_commands_env_may_set_its_home(write_config: WriteConfig, make_case: MakeCase) -> None:
    result = run_builtin(
        write_config,
        make_case,
        "command_succeeds",
        """{command: 'test "$HOME" = /tmp/elsewhere', env: {HOME: /tmp/elsewhere}}""",
    )
    assert (result.status, result.value) == (Status.OK, True), result.error


def test_a_program_the_case_put_on_the_graders_path_is_never_run(
    write_config: WriteConfig, make_case: MakeCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative PATH entry, or one into the case, would run the agent's `python3`."""
    case = make_case({"bin/python3": "#!/bin/sh\necho forged\n"})
    (case / "bin" / "python3").chmod(0o755)
    monkeypatch.setenv("PATH", f"bin:{case}/bin:{os.environ['PATH']}")
    config = write_config(
        "judges:\n  - name: c\n    builtin: command_output_contains\n"
        "    arguments: {cmd: 'python3 -c \"print(1 + 1)\"', text: forged}\n"
    )
    result = grade(load_eval(config), case).results[0]
    assert (result.status, result.value) == (Status.OK, False), result


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


# --- what the agent leaves makes a builtin fail, never error ----------------------------


def hostile_case(make_case: MakeCase) -> Path:
    case = make_case(CASE)
    (case / "results.json").symlink_to("results.json")
    (case / "gone.json").symlink_to("nowhere.json")
    os.mkfifo(case / "pipe.json")
    (case / "adir").mkdir()
    with (case / "huge.json").open("wb") as handle:
        handle.truncate(2_500_000_000)
    (case / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    return case


@pytest.mark.parametrize(
    ("path", "fact"),
    [
        ("results.json", "results.json is a symlink loop"),
        ("gone.json", "gone.json is a dangling symlink"),
        ("pipe.json", "pipe.json is not a regular file (a FIFO)"),
        ("adir", "adir is a directory, not a file"),
        ("huge.json", "huge.json is 2500000000 bytes, over the"),
        ("../../etc/passwd", "../../etc/passwd leaves the case dir"),
        ("deep.json", "deep.json is JSON nested too deeply to read"),
    ],
)
@pytest.mark.parametrize("builtin", ["json_path_equals", "file_contains", "file_matches"])
def test_case_facts_make_file_builtins_fail_with_the_fact(
    write_config: WriteConfig, make_case: MakeCase, builtin: str, path: str, fact: str
) -> None:
    if builtin != "json_path_equals" and path == "deep.json":
        fact = "deep.json "  # plain text to these two: read, and simply not matched
    arguments = {
        "json_path_equals": f"{{path: '{path}', key: status, expected: done}}",
        "file_contains": f"{{path: '{path}', text: done}}",
        "file_matches": f"{{path: '{path}', pattern: done}}",
    }[builtin]
    config = write_config(f"judges:\n  - {{name: j, builtin: {builtin}, arguments: {arguments}}}\n")
    result = grade(load_eval(config), hostile_case(make_case)).results[0]
    assert result.status is Status.OK, result.error
    assert result.value is False
    assert result.rationale.startswith(fact)


@pytest.mark.parametrize(
    ("path", "exists"),
    [("results.json", False), ("gone.json", False), ("pipe.json", True), ("adir", True)],
)
def test_file_exists_says_what_is_there(
    write_config: WriteConfig, make_case: MakeCase, path: str, exists: bool
) -> None:
    config = write_config(
        f"judges:\n  - {{name: j, builtin: file_exists, arguments: {{path: {path}}}}}\n"
    )
    result = grade(load_eval(config), hostile_case(make_case)).results[0]
    assert (result.status, result.value) == (Status.OK, exists), result.error
