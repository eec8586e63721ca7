"""Builtins that run a command in the case dir: code from the case, so through the sandbox."""

from __future__ import annotations

import signal

from verifier.config import Key
from verifier.config.fields import Number
from verifier.judges.base import JudgeAnswer
from verifier.judges.builtins.fields import CommandLine, Environment
from verifier.judges.builtins.registry import BuiltinContext, builtin
from verifier.judges.sandbox import CommandRun, run_in_sandbox

_OUTPUT_TAIL_CHARS = 2000
COMMAND = Key("command", CommandLine(), required=True)
TIMEOUT = Key("timeout", Number(positive=True, problem="must be a positive number of seconds"),
              default=30)  # fmt: skip
ENV = Key("env", Environment())


@builtin("process", COMMAND, TIMEOUT, ENV, runs_case_code=True)
def command_succeeds(
    context: BuiltinContext,
    command: str | list[str],
    timeout: float,
    env: dict[str, str] | None,
) -> JudgeAnswer:
    """The command's exit code is the verdict (0: true), run in the sandbox
    (verifier.judges.sandbox) with the case dir as its working dir."""
    run = run_in_sandbox(command, context.case_dir, timeout=timeout, env=env)
    return JudgeAnswer(run.exit_code == 0, describe_run(run, timeout), {"sandbox": run.confinement})


def describe_run(run: CommandRun, timeout: float) -> str:
    """The rationale: how the command ended, and the end of what it printed."""
    if run.timed_out:
        return f"timed out after {timeout:g}s"
    tail = run.tail[-_OUTPUT_TAIL_CHARS:]
    if run.exit_code is None and run.signal is None:
        return tail  # it never started
    ended = (
        f"exit code {run.exit_code}"
        if run.signal is None
        else f"killed by {signal.Signals(run.signal).name}"
    )
    return f"{ended}\n{tail}".rstrip()
