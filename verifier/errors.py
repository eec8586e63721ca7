"""Every way a command can fail before a reward exists, each with its exit code.

The exit code is the contract with scripts and Harbor's logs: a caller can tell a
broken eval.yaml (the task author's fault) from a missing case (the pipeline's
fault) from an unwritable output dir (the platform's fault) without parsing text.
Factored out of the modules that raise them so that every layer can import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_CONFIG = 2
EXIT_CASE = 3
EXIT_OUTPUT = 4
EXIT_JUDGE_ERROR = 5  # reward.on_error: fail, and a judge errored
EXIT_STALE_REWARD = 6  # no reward written, and an earlier reward file could not be removed
EXIT_DISAGREES = 7  # batch --min-agreement: an LLM judge agrees with the labels less than that
EXIT_BUDGET = 8  # batch --max-cost-usd: the budget was spent before every case was graded
EXIT_TASK_TEST = 9  # task test: a build, the solution or a reward is not what the package needs
EXIT_SANDBOX = 10  # code from the case would run in a sandbox weaker than it must be
EXIT_NO_PROCESSES = 11  # the grader cannot start a process (the process limit is reached)
EXIT_NOT_WRITTEN_BACK = 12  # batch --write-back: a trial of the job was not written back
EXIT_INTERRUPTED = 130  # SIGINT (Ctrl-C), as shells report it
EXIT_BROKEN_PIPE = 141  # SIGPIPE: stdout's reader went away (`| head -1`), as shells report it
EXIT_TERMINATED = 143  # SIGTERM (a Kubernetes deadline or deletion)

# What each code means, as help and docs/cli.md say it (a command may say it its own way:
# verifier.cli.options.Command.exit_meanings).
EXIT_MEANINGS = {
    EXIT_OK: "done",
    EXIT_CONFIG: "eval.yaml or usage error (a bad flag or VERIFIER_* value)",
    EXIT_CASE: "case dir missing, unreadable or not a directory",
    EXIT_OUTPUT: "output dir not writable",
    EXIT_JUDGE_ERROR: "a judge errored under reward.on_error: fail",
    EXIT_STALE_REWARD: "no reward written, and an earlier reward file cannot be removed",
    EXIT_DISAGREES: "--min-agreement: a labelled judge agrees with the labels less",
    EXIT_BUDGET: "--max-cost-usd was spent before every case was graded",
    EXIT_TASK_TEST: "a build, the solution or a reward is not what the package needs",
    EXIT_SANDBOX: "code from the case would run in a weak sandbox (no Landlock: see "
    "--weak-sandbox) or has no temp dir",
    EXIT_NO_PROCESSES: "the grader cannot start a process (the process limit is reached)",
    EXIT_NOT_WRITTEN_BACK: "--write-back: a trial was not written back (multi-step, not "
    "graded, or not writable; the line names each)",
    EXIT_INTERRUPTED: "stopped by SIGINT",
    EXIT_BROKEN_PIPE: "stdout's reader went away (piped into head): ended quietly by SIGPIPE",
    EXIT_TERMINATED: "stopped by SIGTERM",
    EXIT_INTERNAL: "internal error (a bug: rerun with --debug and report it)",
}


class VerifierError(Exception):
    """A failure with a one-line message for the user; never shown as a traceback."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(VerifierError):
    """eval.yaml (or a file it references) cannot be used: the task author must fix it."""

    exit_code = EXIT_CONFIG

    def __init__(self, source: str, key: str, problem: str) -> None:
        location = f"{source}: {key}" if key else source
        super().__init__(f"{location}: {problem}")
        self.source = source
        self.key = key
        self.problem = problem


class ConfigErrors(ConfigError):
    """Several problems: the message is the first (one line); `problems` has them all."""

    def __init__(self, problems: Sequence[ConfigError]) -> None:
        first = problems[0]
        super().__init__(first.source, first.key, first.problem)
        self.problems = tuple(problems)
        if len(problems) > 1:
            self.message += f" (and {len(problems) - 1} more; run `verifier check`)"


class JudgesErrored(VerifierError):
    """A judge errored and the reward block says `on_error: fail`: no reward is written."""

    exit_code = EXIT_JUDGE_ERROR


class MissingModelError(ConfigError):
    """An LLM judge has no model: none on the judge, no models.judge, no $variable.

    Grading cannot go on without one (exit 2). A linter, though, does not run where
    grading runs, and the grading environment may well set the variable, so `verifier
    check` reports this one problem as a warning (`warning()`); --strict makes it an error.
    """

    def __init__(self, source: str, key: str, variable: str) -> None:
        super().__init__(
            source,
            key,
            f"no model for this LLM judge: set model on the judge, models.judge in eval.yaml, "
            f"or ${variable}",
        )
        self.variable = variable

    def warning(self) -> str:
        return (
            f"{self.source}: {self.key}: no model here: set ${self.variable} when grading "
            "(or model on the judge, or models.judge in eval.yaml)"
        )


class UsageError(VerifierError):
    """The command line (or a VERIFIER_* variable standing in for a flag) is wrong."""

    exit_code = EXIT_CONFIG


class CaseError(VerifierError):
    """The case directory is missing, unreadable or not a directory: nothing to grade."""

    exit_code = EXIT_CASE


class OutputError(VerifierError):
    """The output directory cannot be written, so no reward can be delivered."""

    exit_code = EXIT_OUTPUT


class StaleRewardError(OutputError):
    """No reward was written, and a reward file from an earlier run is still there."""

    exit_code = EXIT_STALE_REWARD


class SandboxError(VerifierError):
    """Judges would run code from the case where the sandbox cannot be what it must: the
    kernel cannot hide the grader's files from it (no Landlock, and no other UID whose
    file modes keep them out) and the user did not accept that (--weak-sandbox), or
    there is no temp dir to make its scratch in. Nothing is graded."""

    exit_code = EXIT_SANDBOX


class OutOfProcessesError(VerifierError):
    """The grader cannot fork (its UID's or its cgroup's process limit is reached) and
    waiting for its judges to end did not free any: nothing is graded."""

    exit_code = EXIT_NO_PROCESSES


class Terminated(BaseException):
    """SIGTERM arrived (a Kubernetes deadline, `docker stop`): stop now, write no reward.

    A BaseException, like KeyboardInterrupt for SIGINT, so that no `except Exception`
    on the way up can swallow it."""


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest candidate, or '' when none is close."""
    import difflib  # only on errors: it costs start-up time on the grading path

    match = difflib.get_close_matches(word, sorted(candidates), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""
