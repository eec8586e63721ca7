"""`tests/script`: a Harbor task's own tests/test.sh, unchanged, as a judge.

Published Harbor tasks grade with a script that Harbor runs as /tests/test.sh, which
writes /logs/verifier/reward.txt (one number) or reward.json (a flat object of
numbers), often with a CTRF report (ctrf.json) beside it. This builtin runs such a
script in the sandbox with the paths it expects: the task's tests (a dir beside
eval.yaml, `tests`) at `tests_at`, read-only; a private, writable copy of the case at
`case_at`; a private /tmp; and a private stand-in for `logs_at` (/logs/verifier), whose
reward file is the judge's value. Nothing the script writes reaches the grader's out
dir or the real case.

What the stand-in holds is read like any file the case could have written (bounded,
never followed out of it), because the code under test runs inside the script and can
write there too. Only the reward files the task's tests write (`reward_files`, found by
`verifier task import`) are read, in Harbor's order (reward.json, then reward.txt); a
reward file the tests never write is a planted one and fails the judge. A script that
writes no reward fails with the end of its output as the rationale. The value must be
in [0, 1] (the reward Harbor would have read); anything else fails, saying so.
"""

from __future__ import annotations

import json
import math
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from verifier.casefiles import CaseFile
from verifier.config.fields import Flag, Number, Text
from verifier.judges.base import JudgeAnswer
from verifier.judges.builtins.arguments import (
    Environment,
    ImagePath,
    ReferencePath,
    Words,
)
from verifier.judges.builtins.ctrf_output import ctrf_tests
from verifier.judges.builtins.process import TIMEOUT, describe_run
from verifier.judges.builtins.registry import PARTIAL_CREDIT, BuiltinContext, argument, builtin
from verifier.judges.builtins.reports import Report, ReportError, parse_report
from verifier.judges.builtins.toolchain import ToolchainFault, check_program
from verifier.results import CTRF_DETAILS, SCRIPT_CREDITED, SCRIPT_REWARDS
from verifier.sandbox import Command
from verifier.sandbox.views import View

REWARD_JSON = "reward.json"
REWARD_TXT = "reward.txt"
REWARD_FILES = (REWARD_JSON, REWARD_TXT)  # Harbor's order: reward.json first
RESULT_BYTES = 1024 * 1024  # of a reward file; a CTRF report may be larger
CTRF_BYTES = 16 * 1024 * 1024
_MAX_KEYS = 100
# A shell's exit on SIGINT when it cannot die of it (bash, as the PID 1 it is here, sent
# SIGINT while a child that then dies of SIGINT runs): the code under test's way to end
# the script before its reward is written. No honest run ends so (pytest exits 2 on it).
INTERRUPTED = 128 + signal.SIGINT
_ABSENT = CaseFile(None, "does not exist")  # what read_case_file says of a missing file


@attrs.frozen(kw_only=True)
class ScriptArguments:
    """The task's tests dir and its script, the paths the script expects, and what it is
    handed (its HOME, variables, time)."""

    tests: PurePosixPath = argument(
        ReferencePath(
            kind="dir",
            description="the task's own tests dir, beside eval.yaml: the script's tests_at, "
            "read-only",
        ),
        required=True,
    )
    script: str = argument(
        Text(non_empty=True, description="the script, in `tests`"), default="test.sh"
    )
    tests_at: str = argument(
        ImagePath(description="where the script finds `tests`"), default="/tests"
    )
    case_at: str = argument(
        ImagePath(description="where the script finds the case: a private, writable copy"),
        required=True,
    )
    cwd: str | None = argument(
        ImagePath(description="the dir the script runs in (default: case_at)")
    )
    logs_at: str = argument(
        ImagePath(description="the dir the script writes its reward to: a private stand-in"),
        default="/logs/verifier",
    )
    reward_files: tuple[str, ...] = argument(
        Words(description="the reward files the tests write there (reward.json, reward.txt)"),
        default=REWARD_FILES,
    )
    ctrf: str | None = argument(
        Text(non_empty=True, description="the CTRF report the tests write there")
    )
    home: str | None = argument(
        ImagePath(description="a dir of the image whose copy is the script's HOME")
    )
    image_env: str | None = argument(
        ImagePath(description="the environment's variables (`env` output), for the script")
    )
    pass_env: tuple[str, ...] | None = argument(
        Words(description="the grader's variables handed to the script by name")
    )
    env: dict[str, str] | None = argument(Environment())
    as_root: bool = argument(
        Flag(
            description="run as root of its own user namespace (UID 0 inside, the sandbox's "
            "UID outside), with private copies of /etc, /home, /run, /var/log, ... and root's "
            "HOME at /root, as Harbor runs test.sh as root"
        ),
        default=False,
    )
    entrypoint: tuple[str, ...] | None = argument(
        Words(
            description="the environment's ENTRYPOINT (exec form), started before the script "
            "in its namespaces, as Harbor starts the agent's container"
        )
    )
    entrypoint_wait: float = argument(
        Number(
            minimum=0,
            maximum=600,
            problem="must be a number of seconds from 0 to 600",
            description="seconds the script waits at most for the entrypoint to reach its "
            'command (`exec "$@"`)',
        ),
        default=30,
    )
    setuid: str | None = argument(
        ImagePath(
            description="a file of the image listing its setuid-root programs (a path a "
            "line): with as_root, the users the script switches to run them as its root"
        )
    )
    timeout: float = argument(TIMEOUT, default=600)


@attrs.frozen
class ScriptResult:
    """What the script's stand-in for /logs/verifier says."""

    value: float | None  # None: no usable reward (the judge fails)
    why: str  # where the value comes from, or why there is none
    rewards: Mapping[str, float] = attrs.field(factory=dict)  # the reward file's numbers
    tests: Report | None = None  # the CTRF report, when there is a usable one
    tests_problem: str | None = None  # why the CTRF report is not usable


def read_result(
    files: Mapping[str, CaseFile],
    reward_files: Sequence[str],
    ctrf: str | None,
    logs_at: str = "/logs/verifier",
) -> ScriptResult:
    """The judge's value from the stand-in's files (each reward file's name, and the CTRF
    report's, to what was read of it): the first of `reward_files`, in Harbor's order,
    that the script wrote. A reward file the tests do not write is a planted one: no
    value. The CTRF report is detail only, never the value."""
    tests, tests_problem = _ctrf(files.get(ctrf) if ctrf else None, f"{logs_at}/{ctrf}")
    planted = [
        name
        for name in REWARD_FILES
        if name not in reward_files and files.get(name, _ABSENT).problem != _ABSENT.problem
    ]
    if planted:
        return ScriptResult(
            None,
            f"{logs_at}/{planted[0]} is there, and the task's tests never write it: written by "
            "the code under test, so no reward is read",
            tests=tests,
            tests_problem=tests_problem,
        )
    for name in (name for name in REWARD_FILES if name in reward_files):
        file = files.get(name, _ABSENT)
        if file.problem == _ABSENT.problem:
            continue
        path = f"{logs_at}/{name}"
        if file.data is None:
            return ScriptResult(
                None, f"{path} {file.problem}", tests=tests, tests_problem=tests_problem
            )
        reading = _rewards(file.data, name)
        if isinstance(reading, str):
            return ScriptResult(None, f"{path} {reading}", tests=tests, tests_problem=tests_problem)
        value, how = _value(reading)
        if not 0.0 <= value <= 1.0:
            return ScriptResult(
                None,
                f"{path} says {value:g}, outside [0, 1]",
                reading,
                tests,
                tests_problem,
            )
        return ScriptResult(value, f"{path}: {how}", reading, tests, tests_problem)
    written = " or ".join(f"{logs_at}/{name}" for name in REWARD_FILES if name in reward_files)
    return ScriptResult(
        None, f"the script wrote no {written}", tests=tests, tests_problem=tests_problem
    )


def _rewards(data: bytes, name: str) -> dict[str, float] | str:
    """The numbers of a reward file as Harbor reads it (verifier/verifier.py): reward.txt
    one float, reward.json a flat object of finite numbers; else what is wrong."""
    text = data.decode("utf-8", errors="replace").strip()
    if not text:
        return "is empty"
    if name == REWARD_TXT:
        try:
            number = float(text)
        except ValueError:
            return f"is not a number: {text[:80]!r}"
        return {"reward": number} if math.isfinite(number) else f"is {text[:20]}, not finite"
    try:
        document = json.loads(text)
    except ValueError:
        return "is not JSON"
    except RecursionError:
        return "is JSON nested too deeply to read"
    if not isinstance(document, dict) or not document:
        return "is not an object of numbers"
    if len(document) > _MAX_KEYS:
        return f"has {len(document)} keys, over {_MAX_KEYS}"
    numbers = {}
    for key, value in document.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"has {key[:80]!r}: {json.dumps(value)[:40]}, not a number"
        if not math.isfinite(value):
            return f"has {key[:80]!r}: {value}, not finite"
        numbers[key] = float(value)
    return numbers


def _value(rewards: Mapping[str, float]) -> tuple[float, str]:
    if "reward" in rewards:
        return rewards["reward"], f"reward {rewards['reward']:g}"
    if len(rewards) == 1:
        [(key, value)] = rewards.items()
        return value, f"{key} {value:g}"
    mean = sum(rewards.values()) / len(rewards)
    return mean, f"no `reward` key: the mean of its {len(rewards)} values, {mean:g}"


def _ctrf(file: CaseFile | None, path: str) -> tuple[Report | None, str | None]:
    if file is None or file.problem == _ABSENT.problem:
        return None, None
    if file.data is None:
        return None, f"{path} {file.problem}"
    try:
        return parse_report(file.data, "ctrf"), None
    except ReportError as error:
        return None, f"{path} {error}"


def details_of(result: ScriptResult, *, not_read: bool = False) -> dict[str, Any]:
    """judges.json's details: the reward file's numbers, whether they are credited (the
    judge's value is the file's: usable, and not `not_read`, a script that timed out or
    was interrupted; `--reward-keys native` writes them as they are only then,
    output.py), and the tests of the CTRF report (for ctrf.json and `harbor view`)."""
    details: dict[str, Any] = {
        SCRIPT_REWARDS: dict(result.rewards),
        SCRIPT_CREDITED: result.value is not None and not not_read,
    }
    if result.tests is not None:
        counts = result.tests.counts
        details["tests"] = {
            "passed": counts.passed,
            "failed": counts.failed,
            "errored": counts.errored,
            "skipped": counts.skipped,
        }
        details[CTRF_DETAILS] = ctrf_tests("ctrf", result.tests.outcomes)
    if result.tests_problem is not None:
        details["tests_problem"] = result.tests_problem
    return details


@builtin("tests", ScriptArguments, runs_case_code=True, score_range=PARTIAL_CREDIT)
def script(context: BuiltinContext, arguments: ScriptArguments) -> JudgeAnswer:
    """The task's own test script, run as Harbor ran it, in the sandbox with the paths it
    expects (module docstring); its reward file is the value."""
    logs_at, reward_files, ctrf = arguments.logs_at, arguments.reward_files, arguments.ctrf
    tests_at = arguments.tests_at
    tests = context.config_dir / arguments.tests
    path = str(PurePosixPath(tests_at) / arguments.script)
    argv = script_argv(tests / arguments.script, path)
    as_root = arguments.as_root
    env = {
        "TMPDIR": "/tmp",  # noqa: S108 (its private /tmp view: the sandbox's own path is covered)
        **image_environment(arguments.image_env),
        **{name: os.environ[name] for name in arguments.pass_env or () if name in os.environ},
        **({"HOME": "/root", "USER": "root", "LOGNAME": "root"} if as_root else {}),
        **(arguments.env or {}),
    }
    home = arguments.home or ("/root" if as_root and os.path.isdir("/root") else None)
    sandbox = context.command_sandbox
    check_program(sandbox, argv, env)
    command = Command(
        argv,
        arguments.timeout,
        env=env,
        provided={f"tests/{relative}": file for relative, file in _files(tests)},
        returned=tuple(dict.fromkeys((*REWARD_FILES, *([ctrf] if ctrf else [])))),
        views=(
            View(arguments.case_at, "case"),
            View(tests_at, "provided/tests"),
            View(logs_at, "results"),
            View("/tmp", "tmp"),  # noqa: S108 (the script's private /tmp)
        ),
        start_at=arguments.cwd or arguments.case_at,
        home_from=Path(home) if home else None,
        as_root=as_root,
        entrypoint=arguments.entrypoint or (),
        entrypoint_wait=arguments.entrypoint_wait,
        setuid=setuid_programs(arguments.setuid) if as_root else (),
    )
    run = sandbox.run(command, context.case_dir)
    if run.start_error is not None:
        raise ToolchainFault(
            f"the script cannot be run here: {run.start_error}", {"sandbox": run.confinement}
        )
    result = read_result(run.returned, reward_files, ctrf, logs_at)
    not_read = run.timed_out or run.exit_code == INTERRUPTED  # no reward is read then
    details = {**details_of(result, not_read=not_read), "sandbox": run.confinement}
    ending = describe_run(run, arguments.timeout)
    if run.timed_out:
        return JudgeAnswer(0.0, f"the script {ending}; no reward is read", details)
    if run.exit_code == INTERRUPTED:
        return JudgeAnswer(0.0, f"the script was interrupted; no reward is read\n{ending}", details)
    if result.value is None:
        return JudgeAnswer(0.0, f"{result.why}\n{ending}", details)
    if result.value < 1.0:  # what failed: the end of its output
        return JudgeAnswer(result.value, f"{result.why}\n{ending}", details)
    return JudgeAnswer(result.value, f"{result.why} ({ending.splitlines()[0]})", details)


def script_argv(script: Path, path: str) -> tuple[str, ...]:
    """How Harbor runs the script (`chmod +x`, then `(path)` in bash: its `#!` line
    decides, bash itself for a script without one), with its interpreter started
    directly, so that the script is PID 1 of its PID namespace: the code under test it
    runs cannot kill it (the kernel ignores a SIGKILL sent to its init from inside) and
    so end it before it writes its reward, leaving one of its own to be read. OSError
    when it cannot be read: the author's fault."""
    with script.open("rb") as handle:
        first = handle.readline(256)
    if first.startswith(b"#!"):
        words = first[2:].decode(errors="replace").strip().split(None, 1)
        if words:  # as the kernel reads it: the interpreter, and one argument at most
            return (*words, path)
    return ("bash", path)


def image_environment(path: str | None) -> dict[str, str]:
    """The environment image's variables, saved as `env` printed them when the image was
    built (NAME=value a line): the grader's file, read as such (a missing one is the
    author's fault: OSError, the judge errors)."""
    if path is None:
        return {}
    variables = {}
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        name, equals, value = line.partition("=")
        if equals and name.isidentifier() and "\0" not in value:
            variables[name] = value
    return variables


def setuid_programs(path: str | None) -> tuple[str, ...]:
    """The image's setuid-root programs, listed when the image was built (an absolute
    path a line): the grader's file (a missing one is the author's fault: OSError)."""
    if path is None:
        return ()
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    return tuple(line for line in lines if line.startswith("/") and "\0" not in line)


def _files(directory: Path) -> list[tuple[str, Path]]:
    """Every file beneath `directory` by its relative path (the task's tests: the
    author's own dir, so symlinks are followed)."""
    return sorted(
        (path.relative_to(directory).as_posix(), path)
        for path in directory.rglob("*")
        if path.is_file()
    )
