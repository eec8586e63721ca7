"""Faults of the toolchain, told apart from what the case did.

A command judge's verdict speaks of the case only when its command could run: a test
runner that is not installed, or that cannot be executed, says nothing of the agent's
work, and a `false` would be a silent zero in the training data. Such a fault raises
ToolchainFault: the judge's status is error, and reward.on_error decides.

A fault is judged without the case, so that nothing the agent leaves can fake one:
- before the case is staged, the command's program (an argv's first word when it is
  a name or an absolute path; /bin/sh for a shell string) must be in the toolchain,
  found in the PATH the command gets;
- when the command could not be executed (exec failed) although its program is the
  toolchain's, that is a fault; when the program is a path into the case
  (`./run_tests.sh`), it is the case's doing;
- when a shell string exits 126 or 127 (cannot execute, not found), each plain word
  that starts one of its commands is looked up as the sandbox user in an empty dir;
  one that is missing there is a fault, and when all are found the 126/127 came from
  the case (an agent's script that exits 127 stays a failure);
- a runner's own probe (runners.py: `--probe` of the pytest launcher, `go version`)
  runs in an empty dir when the real run left no usable report.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verifier.sandbox import Command, CommandRun, Sandbox, command_path, leads_into

SHELL = "/bin/sh"  # what subprocess runs a shell string with
NOT_STARTED_CODES = (126, 127)  # a shell's "cannot execute" and "not found"
PROBE_TIMEOUT_S = 20  # a probe does little: it must leave the judge time to report
_SHOWN_CHARS = 1500
_INTERPRETER_DEPTH = 4  # the kernel's limit of nested #! interpreters
# Words that start a command without being one: the shell's keywords and the prefixes
# that run the next word.
_PREFIXES = frozenset(
    {
        "!",
        "{",
        "}",
        "(",
        "if",
        "then",
        "else",
        "elif",
        "while",
        "until",
        "do",
        "exec",
        "command",
        "time",
        "nohup",
        "builtin",
    }
)
_COMPOUND = frozenset({"for", "case", "select", "function"})  # their words are no commands
_BUILTINS = frozenset(
    {
        ":",
        ".",
        "[",
        "[[",
        "alias",
        "bg",
        "break",
        "cd",
        "continue",
        "declare",
        "echo",
        "eval",
        "exit",
        "export",
        "false",
        "fc",
        "fg",
        "fi",
        "done",
        "esac",
        "getopts",
        "hash",
        "jobs",
        "kill",
        "let",
        "local",
        "printf",
        "pwd",
        "read",
        "readonly",
        "return",
        "set",
        "shift",
        "source",
        "test",
        "times",
        "trap",
        "true",
        "type",
        "typeset",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "wait",
    }
)
_SEPARATORS = frozenset({"&&", "||", ";", ";;", "|", "|&", "&", "(", ")"})
# For each word: print it unless it resolves, as the sandbox user, to an executable file.
_LOOKUP = 'for w do p=$(command -v "$w") && [ -x "$p" ] || printf "%s\\n" "$w"; done'


class ToolchainFault(Exception):
    """The toolchain cannot run the command: no verdict on the case. `details` go to
    judges.json (and make the judge's error this message alone)."""

    def __init__(self, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = {"toolchain_fault": message, **(details or {})}


def check_program(
    sandbox: Sandbox, command: str | Sequence[str], env: Mapping[str, str] | None
) -> None:
    """Before the case is staged: the command's program must be in the toolchain, found
    in the PATH the command gets in `sandbox`."""
    program = toolchain_program(command)
    if program is None:
        return
    hidden = sandbox.policy.hidden
    problem = executable_problem(program, command_path(env or {}, os.environ, hidden), hidden)
    if problem is not None:
        raise ToolchainFault(f"the toolchain cannot run {program}: {problem}")


def toolchain_program(command: str | Sequence[str]) -> str | None:
    """The program a command executes when it belongs to the toolchain: /bin/sh for a
    shell string, an argv's first word when it is a name or an absolute path; None for
    a path into the case (`./run.sh`, `bin/test`)."""
    if isinstance(command, str):
        return SHELL
    program = command[0]
    return program if "/" not in program or program.startswith("/") else None


def executable_problem(program: str, path: str, hidden: tuple[str, ...] = ()) -> str | None:
    """None when the grader finds program (a name in the command's PATH, `path`, or an
    absolute path to an executable file) outside `hidden`, else why not. A program in
    the case's dir (or whose symlinks lead there: `/usr/local/bin/python3 ->
    /app/.venv/bin/python3`) is the agent's, never the toolchain: the environment put
    its toolchain in the case, which is the author's to fix (the agent cannot move a
    program of the toolchain there, and one it puts in a PATH dir inside the case is
    never looked at: that dir is not in the command's PATH)."""
    if "/" in program:
        if not os.path.isfile(program):
            return "it does not exist"
        if not os.access(program, os.X_OK):
            return "it is not executable"
        found = program
    else:
        which = shutil.which(program, path=path)
        if which is None:
            return f"{program!r} is not in its PATH ({path})"
        found = which
    for step in _interpreters(found):
        place = leads_into(step, hidden)
        if place is not None:
            via = "" if step == found else f" (the interpreter of {found})"
            return (
                f"{step}{via} lies in {place}, the case's or the grader's own, never the "
                "toolchain (a toolchain in the agent's work dir is the agent's: install it "
                "outside, e.g. a venv in /opt/venv)"
            )
    return None


def _interpreters(program: str) -> list[str]:
    """program, and the interpreters its `#!` line runs it with, as the kernel follows
    them (a venv's script copied out of `/app/.venv` still names `/app/.venv/bin/python`):
    the agent's, when the case is where they lie."""
    chain = [program]
    for _ in range(_INTERPRETER_DEPTH):
        try:
            with open(chain[-1], "rb") as handle:
                first = handle.readline(256)
        except OSError:
            break
        words = first[2:].split(None, 1) if first.startswith(b"#!") else []
        if not words or not words[0].startswith(b"/"):
            break
        chain.append(os.fsdecode(words[0]))
    return chain


def check_start(
    sandbox: Sandbox,
    run: CommandRun,
    command: str | Sequence[str],
    env: Mapping[str, str] | None,
) -> None:
    """After the run: a toolchain program that could not be executed, or a shell
    string's 126/127 whose command words the toolchain lacks, is a fault."""
    if run.start_error is not None:
        program = toolchain_program(command)
        if program is not None:
            raise ToolchainFault(
                f"the toolchain cannot start {program}: {run.start_error}",
                {"sandbox": run.confinement},
            )
        return
    if isinstance(command, str) and run.exit_code in NOT_STARTED_CODES:
        missing = missing_words(sandbox, command_words(command), env)
        if missing:
            raise ToolchainFault(
                f"the command exited {run.exit_code}: the toolchain has no "
                f"{', '.join(missing)} (looked up in an empty dir, without the case)",
                {"sandbox": run.confinement},
            )


def command_words(command: str) -> list[str]:
    """The words that start the commands of a shell string and name programs: not
    keywords, builtins, assignments, expansions or paths into the case. [] when the
    string cannot be split (then nothing can be told)."""
    words: list[str] = []
    for line in command.splitlines():
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError:
            return []
        starting = True
        for token in tokens:
            if token in _SEPARATORS:
                starting = True
                continue
            if not starting:
                continue
            if token in _PREFIXES or _is_assignment(token):
                continue
            starting = False
            if token in _COMPOUND or token in _BUILTINS or any(c in token for c in "$`*?[~<>"):
                continue
            if "/" not in token or token.startswith("/"):
                words.append(token)
    return list(dict.fromkeys(words))


def missing_words(
    sandbox: Sandbox, words: Sequence[str], env: Mapping[str, str] | None
) -> list[str]:
    """The words the sandbox user cannot run, looked up by /bin/sh in an empty dir."""
    if not words:
        return []
    run = run_without_case(sandbox, [SHELL, "-c", _LOOKUP, "sh", *words], env)
    if run.timed_out or run.exit_code is None:
        raise ToolchainFault(f"the toolchain's {SHELL} cannot run: {_shown(run)}")
    return [line for line in run.tail.splitlines() if line in words]


def run_without_case(
    sandbox: Sandbox,
    command: Sequence[str],
    env: Mapping[str, str] | None,
    provided: Mapping[str, Path] | None = None,
    timeout: float = PROBE_TIMEOUT_S,
) -> CommandRun:
    """A command run in the sandbox in an empty dir: what the toolchain does on its own."""
    request = Command(tuple(command), timeout, env=env or {}, provided=provided or {})
    with tempfile.TemporaryDirectory(prefix="verifier-empty-") as empty:
        return sandbox.run(request, Path(empty))


def _is_assignment(token: str) -> bool:
    name, equals, _ = token.partition("=")
    return bool(equals) and name.isidentifier()


def _shown(run: CommandRun) -> str:
    if run.timed_out:
        return "it timed out"
    text = (run.start_error or run.tail).strip()
    return text[-_SHOWN_CHARS:] or f"exit code {run.exit_code}"
