"""What runs inside a judge's process: the judge, its value read strictly, one result line.

The process is forked from the grader (sharing its loaded config and the case's
record), so whatever the judge does (hang, exhaust memory, sys.exit, os._exit,
segfault, fork) ends with this process or its descendants, which the runner
kills. The result is one JSON line on a pipe only this process holds; what the
judge prints goes to a second pipe, which the runner redacts before passing it on.
"""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import resource
import signal
import sys
import time
from typing import Any

from verifier.judges.base import (
    JudgeContext,
    JudgeReturnError,
    PreparedJudge,
    details_of,
    interpret,
)
from verifier.processes import JUDGE_TOKEN_ENV, children, die_with_parent
from verifier.results import Status

FORKED = "forked"  # the status a forked copy of the judge reports instead of a value
_FORK_GRACE_S = 0.5  # how long the judge's process waits for its own forks to return
MEMORY_BACKSTOP_FACTOR = 2  # RLIMIT_DATA, a hard stop far above the watched limit


def judge_main(
    judge: PreparedJudge,
    context: JudgeContext,
    memory_mb: int | None,
    token: str,
    result_fd: int,
    output_fd: int,
    *,
    backstop_mb: int | None = None,
) -> None:
    """The body of a judge's process; never returns. `context`: the record, and the
    sandbox of the judge's lane (as root, the UID its commands run as); `backstop_mb`: a
    lower ceiling for the memory backstop (the container's share for all judges: see
    runner.container_share)."""
    judge_pid = os.getpid()
    # The collector, off in `verifier grade`, is on for the judge; what the grader had
    # allocated is frozen, so collections never touch (and copy) the pages shared with it.
    gc.freeze()
    gc.enable()
    forks: list[int] = []
    os.register_at_fork(after_in_parent=lambda: forks.extend(_newest_child(forks)))
    try:
        os.setpgid(0, 0)
        die_with_parent()
        _isolate(memory_mb, token, output_fd, backstop_mb)
        payload = _judge_payload(judge, context)
    except BaseException as error:  # the process must always reach os._exit
        payload = {"status": Status.ERROR.value, "error": describe(error)}
    if payload.get("error", "").startswith("MemoryError") and memory_mb is not None:
        payload["error"] = f"exceeded the memory limit of {memory_mb} MiB (MemoryError)"
        if judge.case_bound:  # as the runner counts it (runner._unanswered)
            payload = {
                "status": Status.OK.value,
                "value": False,
                "rationale": (
                    f"the judge gave no answer on this case ({payload['error']}): "
                    "counted as a failure"
                ),
            }
    if os.getpid() != judge_pid:  # a copy made by os.fork() inside the judge returned
        payload = {"status": FORKED}
    else:
        _wait_for_forks(forks)
    line = json.dumps(payload, allow_nan=False, default=str).encode() + b"\n"
    try:
        sys.stdout.flush()  # the runner kills this process once the line arrives
        sys.stderr.flush()
        view = memoryview(line)
        while view:
            view = view[os.write(result_fd, view) :]
    finally:
        os._exit(0)


def _isolate(memory_mb: int | None, token: str, output_fd: int, backstop_mb: int | None) -> None:
    """No stdin; prints go to the output pipe; default signals; a memory backstop; and the
    judge's token in the environment of everything it starts (see processes.token_of)."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    sys.stdout = sys.stderr
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    faulthandler.disable()  # a crashing judge is reported in its record, not as a dump
    os.environ[JUDGE_TOKEN_ENV] = token
    if memory_mb is not None:
        limit = MEMORY_BACKSTOP_FACTOR * memory_mb * 1024 * 1024
        if backstop_mb is not None:  # in a container: no more than it leaves the judges
            limit = min(limit, _data_size() + backstop_mb * 1024 * 1024)
        _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard == resource.RLIM_INFINITY or hard > limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _data_size() -> int:
    """This process's data segment now (VmData: what RLIMIT_DATA counts), most of it the
    grader's, shared since the fork: the backstop bounds what the judge adds to it."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _judge_payload(judge: PreparedJudge, context: JudgeContext) -> dict[str, Any]:
    try:
        if not judge.should_run(context.record):
            return {"status": Status.SKIPPED.value}
    except Exception as error:
        return {"status": Status.ERROR.value, "error": f"if: {describe(error)}"}
    try:
        returned = judge.call(context)
    except BaseException as error:  # SystemExit from a judge is its error
        return {
            "status": Status.ERROR.value,
            "error": describe(error),
            "details": details_of(error),
        }
    try:
        value, rationale = interpret(returned, judge.config)
    except JudgeReturnError as error:
        return {"status": Status.ERROR.value, "error": str(error), "details": details_of(returned)}
    return {
        "status": Status.OK.value,
        "value": value,
        "rationale": rationale,
        "details": details_of(returned),
    }


def describe(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"judge called sys.exit({error.code!r})"
    if isinstance(error, MemoryError):
        return "MemoryError: the judge ran out of memory"
    if details_of(error):  # a judge that explains its own failure (LLM judges) needs no location
        return str(error)
    import traceback  # only on errors: it costs start-up time on the grading path

    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def _newest_child(known: list[int]) -> list[int]:
    """The child os.fork() just made (register_at_fork does not pass its pid)."""
    return [pid for pid in children(os.getpid()) if pid not in known][-1:]


def _wait_for_forks(forks: list[int]) -> None:
    """Give copies of this process made with os.fork() a moment to return too, so that a
    judge that returns in two processes is reported whichever finishes first."""
    deadline = time.monotonic() + _FORK_GRACE_S
    pending = list(forks)
    while pending and time.monotonic() < deadline:
        pending = [pid for pid in pending if _still_running(pid)]
        if pending:
            time.sleep(0.01)


def _still_running(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0
