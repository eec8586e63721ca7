"""Judges shipped with the verifier, named by `builtin: name` or `builtin: category/name`.

Each builtin declares its arguments so that a missing or misspelt argument is a
load error, and each returns (bool, rationale) so the record says what was seen.
Paths are relative to the case dir and never resolve outside it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from verifier.case import resolve_inside
from verifier.config import EvalConfig, JudgeConfig
from verifier.errors import ConfigError, did_you_mean

Verdict = tuple[bool, str]
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
_OUTPUT_TAIL_CHARS = 2000


@attrs.frozen(slots=True)
class Builtin:
    name: str
    category: str
    run: Callable[..., Verdict]
    required: tuple[str, ...]
    optional: Mapping[str, Any] = attrs.field(factory=dict)
    validate: Callable[[Mapping[str, Any]], str | None] = lambda _: None


BUILTINS: dict[str, Builtin] = {}


def _register(
    category: str,
    *,
    required: tuple[str, ...],
    optional: Mapping[str, Any] | None = None,
    validate: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> Callable[[Callable[..., Verdict]], Callable[..., Verdict]]:
    def register(run: Callable[..., Verdict]) -> Callable[..., Verdict]:
        BUILTINS[run.__name__] = Builtin(
            name=run.__name__,
            category=category,
            run=run,
            required=required,
            optional=optional or {},
            validate=validate or (lambda _: None),
        )
        return run

    return register


def prepare_builtin(judge: JudgeConfig, config: EvalConfig) -> Callable[[dict[str, Any]], Any]:
    """Look the builtin up and check its arguments; the result runs it on a record."""
    assert judge.builtin is not None
    source, key = str(config.path), f"{judge.key}.builtin"
    category, _, name = judge.builtin.rpartition("/")
    found = BUILTINS.get(name)
    if found is None or category not in ("", found.category):
        known = [f"{b.category}/{b.name}" for b in BUILTINS.values()]
        hint = did_you_mean(judge.builtin, [*BUILTINS, *known]) or f"; known: {', '.join(known)}"
        raise ConfigError(source, key, f"unknown builtin {judge.builtin!r}{hint}")
    arguments = {**found.optional, **judge.arguments}
    allowed = {*found.required, *found.optional}
    for argument in judge.arguments:
        if argument not in allowed:
            raise ConfigError(
                source,
                f"{judge.key}.arguments.{argument}",
                f"{found.name} takes {', '.join(sorted(allowed))}",
            )
    for argument in found.required:
        if argument not in judge.arguments:
            raise ConfigError(
                source, f"{judge.key}.arguments", f"{found.name} needs argument {argument!r}"
            )
    problem = found.validate(arguments)
    if problem:
        raise ConfigError(source, f"{judge.key}.arguments", problem)
    return lambda record: found.run(Path(record["case_dir"]), **arguments)


def _text_of(case_dir: Path, path: str) -> str | None:
    target = resolve_inside(case_dir, path)
    if target is None or not target.is_file():
        return None
    return target.read_text(encoding="utf-8", errors="replace")


@_register("files", required=("path",))
def file_exists(case_dir: Path, path: str) -> Verdict:
    target = resolve_inside(case_dir, path)
    if target is None:
        return False, f"{path} leaves the case dir"
    return target.exists(), f"{path} {'exists' if target.exists() else 'does not exist'}"


@_register("files", required=("path", "text"), optional={"ignore_case": False})
def file_contains(case_dir: Path, path: str, text: str, ignore_case: bool) -> Verdict:
    content = _text_of(case_dir, path)
    if content is None:
        return False, f"{path} is not a file in the case"
    found = text.lower() in content.lower() if ignore_case else text in content
    return found, f"{path} {'contains' if found else 'does not contain'} {text!r}"


def _validate_pattern(arguments: Mapping[str, Any]) -> str | None:
    try:
        re.compile(str(arguments["pattern"]))
    except re.error as error:
        return f"pattern {arguments['pattern']!r} is not a valid regex: {error}"
    return None


@_register("files", required=("path", "pattern"), validate=_validate_pattern)
def file_matches(case_dir: Path, path: str, pattern: str) -> Verdict:
    content = _text_of(case_dir, path)
    if content is None:
        return False, f"{path} is not a file in the case"
    match = re.search(pattern, content, re.MULTILINE)
    if match is None:
        return False, f"{path} has no match for /{pattern}/"
    return True, f"{path} matches /{pattern}/ at {match.group(0)[:200]!r}"


@_register("json", required=("path", "key", "expected"))
def json_path_equals(case_dir: Path, path: str, key: str, expected: Any) -> Verdict:
    content = _text_of(case_dir, path)
    if content is None:
        return False, f"{path} is not a file in the case"
    try:
        current: Any = json.loads(content)
    except json.JSONDecodeError as error:
        return False, f"{path} is not valid JSON: {error}"
    for part in str(key).split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and _is_index(part, len(current)):
            current = current[int(part)]
        else:
            return False, f"{path}: {key} not found (stopped at {part!r})"
    equal = _json_equal(current, expected)
    return equal, f"{path}: {key} is {json.dumps(current)[:200]}, expected {json.dumps(expected)}"


def _is_index(part: str, length: int) -> bool:
    return part.lstrip("-").isdigit() and -length <= int(part) < length


def _json_equal(actual: Any, expected: Any) -> bool:
    """JSON equality where true is not 1 but 1 is 1.0."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    return bool(actual == expected)


def _validate_command(arguments: Mapping[str, Any]) -> str | None:
    command, timeout = arguments["command"], arguments["timeout"]
    is_argv = isinstance(command, list) and all(isinstance(arg, str) for arg in command)
    if not (isinstance(command, str) or is_argv):
        return "command must be a shell string or a list of strings"
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        return f"timeout {timeout!r} must be a positive number of seconds"
    return None


@_register("process", required=("command",), optional={"timeout": 30}, validate=_validate_command)
def command_succeeds(case_dir: Path, command: str | list[str], timeout: float) -> Verdict:
    """Runs the author's command in the case dir, without the grader's secrets in its env.

    The command stays in the judge's process group, which the engine kills once the
    judge is done, so nothing it started outlives grading.
    """
    import subprocess  # only when a command judge runs: it costs start-up time on the grading path

    env = {name: value for name, value in os.environ.items() if not _SECRET_ENV.search(name)}
    try:
        process = subprocess.Popen(
            command,
            shell=isinstance(command, str),
            cwd=case_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except OSError as error:
        return False, f"could not start: {error}"
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False, f"timed out after {timeout:g}s"
    tail = output.decode("utf-8", errors="replace")[-_OUTPUT_TAIL_CHARS:]
    return process.returncode == 0, f"exit code {process.returncode}\n{tail}".rstrip()
