"""Builtins over test reports: partial credit (`tests/pass_rate`) and its gate
(`tests/all_passed`).

Where the report comes from:
- `report` alone: whatever file (or files, by glob) the case holds; the agent could
  have written it.
- `report` with `command`: what the command wrote while it ran, in the sandbox. A
  report left in the case as it was proves nothing, so only reports the command wrote
  or rewrote count; one it left as it was is stale. As root the command runs in a
  private copy of the case, where the report is found by a probe of the dir it ran in
  (verifier.sandbox.WorkdirProbe).
- `runner` (`pytest`, `go`): the verifier builds a hardened command itself (runners.py)
  and its report comes back from outside the case copy ($VERIFIER_RESULTS).

Which tests count: every test of the report; or, with a trusted list (`tests`,
`fail_to_pass`, `pass_to_pass`: testlists.py), only the listed ones, a missing or
skipped listed test counting as failed.

Every read goes through verifier.casefiles and every parse through reports.py, so a
missing, empty, malformed, huge, looping or out-of-case report is a failure with
that fact as its rationale, never an error. A toolchain that cannot run the tests at
all, judged without the case, is an error (toolchain.py): reward.on_error decides.

The parts, each in its module: the arguments record and its rules
(pass_rate_arguments.py), running the command or the runner (sandboxed_runs.py), the
case's report files (report_files.py), a runner's signed report (runner_reports.py),
the verdict (verdicts.py), its rationale and details (rationales.py), ctrf.json's tests
(ctrf_output.py).
"""

from __future__ import annotations

import functools

from verifier.judges.base import JudgeAnswer
from verifier.judges.builtins.pass_rate_arguments import (
    ONE_SOURCE,
    PassRateArguments,
    check_arguments,
)
from verifier.judges.builtins.registry import PARTIAL_CREDIT, BuiltinContext, builtin
from verifier.judges.builtins.report_files import read_reports
from verifier.judges.builtins.runners import plan_runner
from verifier.judges.builtins.sandboxed_runs import run_report_command, run_tests
from verifier.judges.builtins.verdicts import Graded, judge_reading

_TESTS_BUILTIN = functools.partial(
    builtin,
    "tests",
    PassRateArguments,
    runs_case_code=True,
    one_of=ONE_SOURCE,
    check=check_arguments,
)


@_TESTS_BUILTIN(score_range=PARTIAL_CREDIT)
def pass_rate(context: BuiltinContext, arguments: PassRateArguments) -> JudgeAnswer:
    """passed / (passed + failed + errored) of the report, or passed / listed with a
    test list; 0.0 when the report is unusable."""
    graded = grade_tests(context, arguments)
    value = graded.passed / graded.total if graded.total else 0.0
    return JudgeAnswer(value, graded.rationale, graded.details)


@_TESTS_BUILTIN()
def all_passed(context: BuiltinContext, arguments: PassRateArguments) -> JudgeAnswer:
    """True when the report is usable, enough tests ran, and every one counted passed."""
    graded = grade_tests(context, arguments)
    return JudgeAnswer(
        graded.total > 0 and graded.passed == graded.total, graded.rationale, graded.details
    )


def grade_tests(context: BuiltinContext, arguments: PassRateArguments) -> Graded:
    """Get the report (run the runner or the command when there is one), and judge it."""
    listed = arguments.listed()
    judge = functools.partial(judge_reading, min_tests=arguments.min_tests, listed=listed)
    if arguments.runner is not None:
        options = arguments.pytest_options(context.config_dir)
        plan = plan_runner(
            arguments.runner, arguments.executable, arguments.paths, arguments.args, options, listed
        )
        return run_tests(context, plan, arguments, judge)
    assert arguments.report is not None  # one of report and runner: Builtin.bind
    if arguments.command is None:
        return judge(read_reports(context.case_dir, arguments.report, arguments.format), {})
    return run_report_command(context, arguments, judge)
