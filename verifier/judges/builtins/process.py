"""Builtins that run a command in the case dir: code from the case, so through the sandbox.

rewardkit's command criteria, with its names (`cmd`, `cwd`, `timeout`); `command`
is this verifier's older name for `cmd`, and both are accepted. A command the toolchain
cannot run at all (its program missing or not executable, judged without the case:
toolchain.py) makes the judge error, never a silent false.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from verifier.config.fields import Number, Text
from verifier.console import signal_name
from verifier.judges.base import JudgeAnswer
from verifier.judges.builtins.arguments import (
    CasePath,
    CommandLine,
    Environment,
    Pattern,
    ProvidedFiles,
)
from verifier.judges.builtins.files import universal_newlines
from verifier.judges.builtins.registry import BuiltinContext, argument, builtin
from verifier.judges.builtins.toolchain import check_program, check_start
from verifier.sandbox import STDOUT_BYTES, Command, CommandRun

OUTPUT_CHARS = 2000  # of a command's output in a rationale: its start and its end
_SHOWN_CHARS = 200
TIMEOUT = Number(positive=True, problem="must be a positive number of seconds")
ONE_COMMAND = (("cmd", "command"),)


@attrs.frozen(kw_only=True)
class CommandArguments:
    """The arguments of the process builtins: a command, where and how long it runs,
    its variables and the trusted files it is handed."""

    cmd: str | list[str] | None = argument(
        CommandLine(description="a shell string, or an argv list (rewardkit's name)")
    )
    command: str | list[str] | None = argument(CommandLine(description="the same as cmd"))
    cwd: str | None = argument(
        CasePath(description="a dir in the case to run in (default: the case dir)")
    )
    timeout: float = argument(TIMEOUT, default=30)
    env: dict[str, str] | None = argument(Environment())
    provide: dict[str, PurePosixPath] | None = argument(ProvidedFiles())


@attrs.frozen(kw_only=True)
class OutputContainsArguments(CommandArguments):
    text: str = argument(Text(), required=True)


@attrs.frozen(kw_only=True)
class OutputMatchesArguments(CommandArguments):
    expected: str = argument(Text(), required=True)


@attrs.frozen(kw_only=True)
class OutputRegexArguments(CommandArguments):
    pattern: str = argument(Pattern(), required=True)


def run_command(context: BuiltinContext, arguments: CommandArguments, **options: Any) -> CommandRun:
    """Run the judge's command (`cmd` or `command`) in the sandbox; ToolchainFault when
    the toolchain cannot run it."""
    command, env = arguments.cmd or arguments.command or "", arguments.env
    sandbox = context.command_sandbox
    check_program(sandbox, command, env)
    request = Command(
        command,
        arguments.timeout,
        cwd=arguments.cwd or "",
        env=env or {},
        provided=provided_files(context, arguments.provide),
        **options,
    )
    run = sandbox.run(request, context.case_dir)
    check_start(sandbox, run, command, env)
    return run


def provided_files(
    context: BuiltinContext, provide: dict[str, PurePosixPath] | None
) -> dict[str, Path]:
    """A `provide` argument as the sandbox takes it: each name -> its file beside eval.yaml."""
    return {name: context.config_dir / file for name, file in (provide or {}).items()}


@builtin("process", CommandArguments, runs_case_code=True, one_of=ONE_COMMAND)
def command_succeeds(context: BuiltinContext, arguments: CommandArguments) -> JudgeAnswer:
    """The command's exit code is the verdict (0: true), run in the sandbox
    (verifier.sandbox) with the case dir as its working dir."""
    run = run_command(context, arguments)
    return JudgeAnswer(
        run.exit_code == 0, describe_run(run, arguments.timeout), {"sandbox": run.confinement}
    )


@builtin("process", OutputContainsArguments, runs_case_code=True, one_of=ONE_COMMAND)
def command_output_contains(
    context: BuiltinContext, arguments: OutputContainsArguments
) -> JudgeAnswer:
    """What the command prints on stdout contains the text (whatever its exit code)."""
    text = arguments.text
    claims = (f"contains {text!r}", f"does not contain {text!r}")
    return _judge_stdout(context, arguments, lambda out: text in out, claims)


@builtin("process", OutputMatchesArguments, runs_case_code=True, one_of=ONE_COMMAND)
def command_output_matches(
    context: BuiltinContext, arguments: OutputMatchesArguments
) -> JudgeAnswer:
    """stdout, stripped, equals the expected text, stripped."""
    expected = arguments.expected
    claims = (f"is {expected.strip()!r}", f"is not {expected.strip()!r}")
    return _judge_stdout(context, arguments, lambda out: out.strip() == expected.strip(), claims)


@builtin("process", OutputRegexArguments, runs_case_code=True, one_of=ONE_COMMAND)
def command_output_matches_regex(
    context: BuiltinContext, arguments: OutputRegexArguments
) -> JudgeAnswer:
    """`re.search(pattern, stdout)` matches, as rewardkit's (`(?m)` for per-line anchors)."""
    pattern = arguments.pattern
    claims = (f"matches /{pattern}/", f"has no match for /{pattern}/")
    return _judge_stdout(
        context, arguments, lambda out: re.search(pattern, out) is not None, claims
    )


def _judge_stdout(
    context: BuiltinContext,
    arguments: CommandArguments,
    test: Callable[[str], bool],
    claims: tuple[str, str],
) -> JudgeAnswer:
    """Run the command with stdout apart; test(stdout) is the verdict, and the rationale
    says the claim that holds (true's, false's) and how the command ended.

    A command that times out, cannot start, or prints more than STDOUT_BYTES fails:
    what it printed is not all there to judge. stdout is read with universal newlines.
    """
    run = run_command(context, arguments, separate_stdout=True)
    details = {"sandbox": run.confinement}
    if run.timed_out or (run.exit_code is None and run.signal is None):
        return JudgeAnswer(False, describe_run(run, arguments.timeout), details)
    if run.stdout_cut_bytes:
        return JudgeAnswer(False, f"printed more than {STDOUT_BYTES} bytes on stdout", details)
    stdout = universal_newlines(run.stdout or "")  # as rewardkit reads it (text=True)
    passed = test(stdout)
    rationale = (
        f"stdout {claims[0 if passed else 1]} ({_ending(run)}); it ends {stdout[-_SHOWN_CHARS:]!r}"
    )
    return JudgeAnswer(passed, rationale, details)


def describe_run(run: CommandRun, timeout: float, limit: int = OUTPUT_CHARS) -> str:
    """The rationale: how the command ended, and what it printed, within about `limit`
    characters: its start and (three quarters of them) its end, the decisive lines."""
    if run.timed_out:
        return f"timed out after {timeout:g}s"
    output = clip(output_of(run), limit)
    if run.exit_code is None and run.signal is None:
        return output  # it never started
    return f"{_ending(run)}\n{output}".rstrip()


def output_of(run: CommandRun) -> str:
    """What the command printed as far as it was kept: the start and the tail, and how
    much between them was not."""
    if not run.head:
        return run.tail
    lost = run.cut_bytes - len(run.head.encode())
    between = f"\n[... {lost} bytes not kept ...]\n" if lost > 0 else ""
    return f"{run.head}{between}{run.tail}"


def clip(text: str, limit: int) -> str:
    """text within about limit characters: its first quarter and its last three."""
    if len(text) <= limit:
        return text
    head = limit // 4
    return f"{text[:head]}\n[... {len(text) - limit} characters ...]\n{text[-(limit - head) :]}"


def _ending(run: CommandRun) -> str:
    if run.signal is None:
        return f"exit code {run.exit_code}"
    return f"killed by {signal_name(run.signal)}"
