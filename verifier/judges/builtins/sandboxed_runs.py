"""Running what writes the test report, in the sandbox the builtin is handed: the
author's command (its reports those it wrote or rewrote, found by a probe of the dir it
ran in: report_files.FreshReports) or a hardened runner (its signed report handed back:
runner_reports.py); then, when a run leaves nothing usable, the toolchain probed
without the case (a fault there is an error, else what the case did is a failure)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import attrs

from verifier.judges.builtins import pyc_store
from verifier.judges.builtins.files import MAX_FILE_BYTES
from verifier.judges.builtins.pass_rate_arguments import PassRateArguments
from verifier.judges.builtins.process import describe_run, provided_files
from verifier.judges.builtins.rationales import cut_text
from verifier.judges.builtins.registry import BuiltinContext
from verifier.judges.builtins.report_files import FreshReports
from verifier.judges.builtins.reports import Reading
from verifier.judges.builtins.runner_reports import SIGNATURE_SUFFIX, handed_back
from verifier.judges.builtins.runners import (
    PYTEST_TAMPERED_MARK,
    RunnerPlan,
    handed_input,
    with_code_store,
)
from verifier.judges.builtins.toolchain import (
    PROBE_TIMEOUT_S,
    ToolchainFault,
    check_program,
    check_start,
    run_without_case,
)
from verifier.judges.builtins.verdicts import Graded, Judge, unusable
from verifier.sandbox import Command, CommandRun, Sandbox

COMMAND_CHARS = 800  # of the command's output, when its report is unusable


def run_report_command(
    context: BuiltinContext, arguments: PassRateArguments, judge: Judge
) -> Graded:
    """Run the author's command (with the trusted files it is handed), and judge the
    reports it wrote."""
    assert arguments.command is not None
    assert arguments.report is not None
    sandbox, command, env = context.command_sandbox, arguments.command, arguments.env
    timeout = arguments.timeout
    check_program(sandbox, command, env)
    provided = provided_files(context, arguments.provide)
    request = Command(command, timeout, env=env or {}, provided=provided)
    probe = FreshReports(arguments.report, arguments.format)
    run = sandbox.run(request, context.case_dir, probe)
    details: dict[str, Any] = {"sandbox": run.confinement, "command": _ending(run)}
    if run.timed_out:
        return unusable(f"the command timed out after {timeout:g}s; no report counts", details)
    reading = run.collected if isinstance(run.collected, Reading) else None
    if reading is None or reading.report is None:
        check_start(sandbox, run, command, env)
    if reading is None:  # it never started
        return unusable(f"the command did not run: {describe_run(run, timeout)}", details)
    graded = judge(reading, details)
    if reading.report is None:
        said = describe_run(run, timeout, COMMAND_CHARS)
        return attrs.evolve(graded, rationale=f"{graded.rationale}\nthe command: {said}")
    return graded


def run_tests(
    context: BuiltinContext, plan: RunnerPlan, arguments: PassRateArguments, judge: Judge
) -> Graded:
    """Run the hardened runner, and judge the report it handed back. Without a usable
    report (or after pytest's internal or usage error) the toolchain is probed without
    the case: a fault there is an error, else what the case did is a failure."""
    sandbox, timeout = context.command_sandbox, arguments.timeout
    environment = {**plan.env, **(arguments.env or {})}
    for program in plan.programs:
        check_program(sandbox, [program], environment)
    key = secrets.token_bytes(32) if plan.signed else None
    returned: tuple[str, ...] = (
        (plan.report, f"{plan.report}{SIGNATURE_SUFFIX}") if plan.report else ()
    )
    stdin = handed_input(key or b"", plan.handed) if plan.handed else key
    store = pyc_store.open_store(sandbox.policy) if plan.code_store and key else None
    handing, running = None, plan
    if store is not None:
        hint = pyc_store.hint_key(context.config_dir, plan.command)
        handing = pyc_store.hand(store, context.case_dir, hint)
        running = with_code_store(plan, handing.provided)
        returned += pyc_store.RETURNED
    request = Command(
        running.command,
        timeout,
        env=environment,
        provided=running.provided,
        returned=returned,
        stdin=stdin,
        separate_stdout=plan.report is None,
        stdout_bytes=MAX_FILE_BYTES,
        views=plan.views,
        start_at=plan.start_at,
    )
    run = sandbox.run(request, context.case_dir)
    if store is not None and handing is not None and key is not None:
        pyc_store.keep(store, handing, run.returned, key)
    if run.start_error is not None and plan.views:  # no view here: nothing of the case's
        raise ToolchainFault(
            f"{plan.label} cannot be run here: {run.start_error}", {"sandbox": run.confinement}
        )
    details: dict[str, Any] = {
        "sandbox": run.confinement,
        "runner": plan.name,
        "command": _ending(run),
    }
    if run.timed_out:
        return unusable(f"the tests timed out after {timeout:g}s; no report counts", details)
    if plan.tampered_code is not None and run.exit_code == plan.tampered_code:
        return unusable(tampering(run, plan), details)
    reading = handed_back(run, plan, key)
    broken = run.exit_code in plan.probe_codes  # pytest's internal or usage error
    if reading.report is None or broken:
        probe_toolchain(sandbox, plan, environment, timeout)
    graded = judge(reading, details)
    if reading.report is None or broken:
        said = describe_run(run, timeout, COMMAND_CHARS)
        return attrs.evolve(graded, rationale=f"{graded.rationale}\n{plan.name}: {said}")
    return graded


def tampering(run: CommandRun, plan: RunnerPlan) -> str:
    """Why a run that ended with the runner's tampered code counts nothing: what its
    runner found, as the last line it printed says (the case may print such lines too:
    they can only fail it)."""
    found = [
        line.split(PYTEST_TAMPERED_MARK, 1)[1]
        for line in run.tail.splitlines()
        if PYTEST_TAMPERED_MARK in line
    ]
    said = f": {cut_text(found[-1], COMMAND_CHARS)}" if found else ""
    return (
        f"the code under test tampered with {plan.label}, so no test counts (exit "
        f"{run.exit_code}){said}"
    )


def probe_toolchain(
    sandbox: Sandbox, plan: RunnerPlan, env: Mapping[str, str], timeout: float
) -> None:
    """ToolchainFault unless the runner's probe succeeds in an empty dir."""
    limit = min(timeout, PROBE_TIMEOUT_S)
    probe = run_without_case(sandbox, plan.probe, env, plan.provided, limit)
    if probe.timed_out or probe.exit_code != 0:
        said = describe_run(probe, limit, COMMAND_CHARS)
        raise ToolchainFault(
            f"the toolchain cannot run {plan.name} (probed in an empty dir, without the "
            f"case): {said}",
            {"sandbox": probe.confinement, "runner": plan.name},
        )


def _ending(run: CommandRun) -> dict[str, Any]:
    return {"exit_code": run.exit_code, "signal": run.signal, "timed_out": run.timed_out}
