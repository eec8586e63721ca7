"""Builtins that run a command in the case dir."""

from __future__ import annotations

import os
import re

from verifier.config import Key
from verifier.config.fields import Number
from verifier.judges.builtins.fields import CommandLine
from verifier.judges.builtins.registry import BuiltinContext, ValueWithRationale, builtin

_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
_OUTPUT_TAIL_CHARS = 2000


@builtin(
    "process",
    Key("command", CommandLine(), required=True),
    Key("timeout", Number(positive=True, problem="must be a positive number of seconds"),
        default=30),
)  # fmt: skip
def command_succeeds(
    context: BuiltinContext, command: str | list[str], timeout: float
) -> ValueWithRationale:
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
            cwd=context.case_dir,
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
