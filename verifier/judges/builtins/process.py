"""Builtins that run a command in the case dir: code from the case, so through the sandbox.

rewardkit's command criteria, with its names (`cmd`, `cwd`, `timeout`); `command`
is this verifier's older name for `cmd`, and both are accepted.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verifier.config import Key
from verifier.config.fields import Number, Text
from verifier.judges.base import JudgeAnswer
from verifier.judges.builtins.fields import (
    CasePath,
    CommandLine,
    Environment,
    Pattern,
    ProvidedFiles,
)
from verifier.judges.builtins.registry import BuiltinContext, builtin
from verifier.judges.sandbox import STDOUT_BYTES, CommandRun, run_in_sandbox

_OUTPUT_TAIL_CHARS = 2000
_SHOWN_CHARS = 200
TIMEOUT = Key("timeout", Number(positive=True, problem="must be a positive number of seconds"),
              default=30)  # fmt: skip
ENV = Key("env", Environment())
PROVIDE = Key("provide", ProvidedFiles())
COMMAND_KEYS = (
    Key("cmd", CommandLine(description="a shell string, or an argv list (rewardkit's name)")),
    Key("command", CommandLine(description="the same as cmd")),
    Key("cwd", CasePath(description="a dir in the case to run in (default: the case dir)")),
    TIMEOUT,
    ENV,
    PROVIDE,
)
ONE_COMMAND = (("cmd", "command"),)


def run_command(context: BuiltinContext, arguments: dict[str, Any], **options: Any) -> CommandRun:
    """Run the judge's command (`cmd` or `command`) in the sandbox."""
    return run_in_sandbox(
        arguments["cmd"] or arguments["command"],
        context.case_dir,
        timeout=arguments["timeout"],
        env=arguments["env"],
        cwd=arguments["cwd"] or "",
        provided=provided_files(context, arguments["provide"]),
        **options,
    )


def provided_files(context: BuiltinContext, provide: dict[str, Any] | None) -> dict[str, Path]:
    """A `provide` argument as the sandbox takes it: each name -> its file beside eval.yaml."""
    return {name: context.config_dir / file for name, file in (provide or {}).items()}


@builtin("process", *COMMAND_KEYS, runs_case_code=True, one_of=ONE_COMMAND)
def command_succeeds(context: BuiltinContext, **arguments: Any) -> JudgeAnswer:
    """The command's exit code is the verdict (0: true), run in the sandbox
    (verifier.judges.sandbox) with the case dir as its working dir."""
    run = run_command(context, arguments)
    return JudgeAnswer(
        run.exit_code == 0, describe_run(run, arguments["timeout"]), {"sandbox": run.confinement}
    )


@builtin("process", *COMMAND_KEYS, Key("text", Text(), required=True), runs_case_code=True,
         one_of=ONE_COMMAND)  # fmt: skip
def command_output_contains(context: BuiltinContext, text: str, **arguments: Any) -> JudgeAnswer:
    """What the command prints on stdout contains the text (whatever its exit code)."""
    claims = (f"contains {text!r}", f"does not contain {text!r}")
    return _judge_stdout(context, arguments, lambda out: text in out, claims)


@builtin("process", *COMMAND_KEYS, Key("expected", Text(), required=True), runs_case_code=True,
         one_of=ONE_COMMAND)  # fmt: skip
def command_output_matches(context: BuiltinContext, expected: str, **arguments: Any) -> JudgeAnswer:
    """stdout, stripped, equals the expected text, stripped."""
    claims = (f"is {expected.strip()!r}", f"is not {expected.strip()!r}")
    return _judge_stdout(context, arguments, lambda out: out.strip() == expected.strip(), claims)


@builtin("process", *COMMAND_KEYS, Key("pattern", Pattern(), required=True), runs_case_code=True,
         one_of=ONE_COMMAND)  # fmt: skip
def command_output_matches_regex(
    context: BuiltinContext, pattern: str, **arguments: Any
) -> JudgeAnswer:
    """`re.search(pattern, stdout, re.MULTILINE)` matches."""
    claims = (f"matches /{pattern}/", f"has no match for /{pattern}/")
    return _judge_stdout(
        context, arguments, lambda out: re.search(pattern, out, re.MULTILINE) is not None, claims
    )


def _judge_stdout(
    context: BuiltinContext,
    arguments: dict[str, Any],
    test: Callable[[str], bool],
    claims: tuple[str, str],
) -> JudgeAnswer:
    """Run the command with stdout apart; test(stdout) is the verdict, and the rationale
    says the claim that holds (true's, false's) and how the command ended.

    A command that times out, cannot start, or prints more than STDOUT_BYTES fails:
    what it printed is not all there to judge.
    """
    run = run_command(context, arguments, separate_stdout=True)
    details = {"sandbox": run.confinement}
    if run.timed_out or (run.exit_code is None and run.signal is None):
        return JudgeAnswer(False, describe_run(run, arguments["timeout"]), details)
    if run.stdout_cut_bytes:
        return JudgeAnswer(False, f"printed more than {STDOUT_BYTES} bytes on stdout", details)
    stdout = run.stdout or ""
    passed = test(stdout)
    rationale = (
        f"stdout {claims[0 if passed else 1]} ({_ending(run)}); it ends {stdout[-_SHOWN_CHARS:]!r}"
    )
    return JudgeAnswer(passed, rationale, details)


def describe_run(run: CommandRun, timeout: float) -> str:
    """The rationale: how the command ended, and the end of what it printed."""
    if run.timed_out:
        return f"timed out after {timeout:g}s"
    tail = run.tail[-_OUTPUT_TAIL_CHARS:]
    if run.exit_code is None and run.signal is None:
        return tail  # it never started
    return f"{_ending(run)}\n{tail}".rstrip()


def _ending(run: CommandRun) -> str:
    if run.signal is None:
        return f"exit code {run.exit_code}"
    return f"killed by {signal.Signals(run.signal).name}"
