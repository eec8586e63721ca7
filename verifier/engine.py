"""Runs the judges of one case, each in its own forked process, and collects their records.

Forking (not threads, not a fresh interpreter) is what makes isolation cheap: the
child shares the already-loaded config and record, costs about a millisecond, and
whatever it does (hang, exhaust memory, sys.exit, os._exit, segfault) ends with
that child. The parent only reads a JSON result from a pipe, so the worst a judge
can do is become an error or timeout record.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import resource
import selectors
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from verifier.judges.base import (
    JudgeReturnError,
    Pool,
    PreparedJudge,
    Record,
    details_of,
    interpret,
)
from verifier.options import DEFAULT_LLM_PARALLEL, DEFAULT_MEMORY_MB, Options
from verifier.results import JudgeResult, Status
from verifier.system import available_cpus

_READ_CHUNK = 65536


class Limits(NamedTuple):
    """How many judges run at once (per pool), how much memory each may use, and which
    pools are skipped outright (`--no-llm`)."""

    parallel: int | None = None  # CPU judges at once; None: the CPU count
    llm_parallel: int = DEFAULT_LLM_PARALLEL
    memory_mb: int | None = DEFAULT_MEMORY_MB
    skip_pools: frozenset[Pool] = frozenset()

    @classmethod
    def from_options(cls, options: Options, **overrides: object) -> Limits:
        limits = cls(
            llm_parallel=options.llm_parallel,
            memory_mb=options.memory_mb,
            skip_pools=frozenset({Pool.LLM}) if options.no_llm else frozenset(),
        )
        return limits._replace(**overrides)

    def capacity(self, pool: Pool) -> int:
        if pool is Pool.LLM:
            return self.llm_parallel
        return self.parallel if self.parallel is not None else available_cpus()


class _Running:
    """A judge process the engine waits on, and what it has written so far."""

    __slots__ = ("chunks", "fd", "judge", "pid", "started")

    def __init__(self, judge: PreparedJudge, pid: int, fd: int, started: float) -> None:
        self.judge = judge
        self.pid = pid
        self.fd = fd
        self.started = started
        self.chunks: list[bytes] = []

    @property
    def deadline(self) -> float:
        return self.started + self.judge.config.timeout_s


def run_judges(
    judges: Sequence[PreparedJudge], record: Record, limits: Limits | None = None
) -> tuple[JudgeResult, ...]:
    """One record per judge, in the judges' order."""
    limits = limits or Limits()
    pending = [judge for judge in judges if judge.pool not in limits.skip_pools]
    running: dict[int, _Running] = {}
    results = {
        judge.config.name: JudgeResult(
            name=judge.config.name,
            kind=judge.config.kind,
            status=Status.SKIPPED,
            rationale=f"{judge.pool.value} judges are switched off for this run",
        )
        for judge in judges
        if judge.pool in limits.skip_pools
    }
    sys.stdout.flush()
    sys.stderr.flush()
    with selectors.DefaultSelector() as selector:
        while pending or running:
            for judge in _startable(pending, running.values(), limits):
                pending.remove(judge)
                run = _spawn(judge, record, limits.memory_mb)
                running[run.fd] = run
                selector.register(run.fd, selectors.EVENT_READ)
            nearest = min(run.deadline for run in running.values())
            for key, _ in selector.select(timeout=max(0.0, nearest - time.monotonic())):
                run = running[key.fd]
                chunk = os.read(key.fd, _READ_CHUNK)
                if chunk:
                    run.chunks.append(chunk)
                    continue
                selector.unregister(key.fd)
                del running[key.fd]
                results[run.judge.config.name] = _finish(run)
            now = time.monotonic()
            for run in [run for run in running.values() if run.deadline <= now]:
                selector.unregister(run.fd)
                del running[run.fd]
                results[run.judge.config.name] = _time_out(run)
    return tuple(results[judge.config.name] for judge in judges)


def _startable(
    pending: Sequence[PreparedJudge], running: Any, limits: Limits
) -> list[PreparedJudge]:
    busy: dict[Pool, int] = {}
    for run in running:
        busy[run.judge.pool] = busy.get(run.judge.pool, 0) + 1
    chosen = []
    for judge in pending:
        if busy.get(judge.pool, 0) < limits.capacity(judge.pool):
            busy[judge.pool] = busy.get(judge.pool, 0) + 1
            chosen.append(judge)
    return chosen


def _spawn(judge: PreparedJudge, record: Record, memory_mb: int | None) -> _Running:
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _child_main(judge, record, memory_mb, write_fd)
    os.close(write_fd)
    with contextlib.suppress(OSError):  # the child already did it, or has already exited
        os.setpgid(pid, pid)
    return _Running(judge=judge, pid=pid, fd=read_fd, started=started)


def _child_main(judge: PreparedJudge, record: Record, memory_mb: int | None, write_fd: int) -> None:
    try:
        os.setpgid(0, 0)
        _isolate(memory_mb)
        payload = _judge_payload(judge, record)
        data = json.dumps(payload, allow_nan=False, default=str).encode()
    except BaseException as error:  # the child must always reach os._exit
        data = json.dumps({"status": "error", "error": _describe(error)}).encode()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view) :]
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def _isolate(memory_mb: int | None) -> None:
    """No stdin, judge prints go to stderr (stdout is the verifier's summary), bounded memory."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    faulthandler.disable()  # a crashing judge is reported in its record, not as a dump
    if memory_mb is not None:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _judge_payload(judge: PreparedJudge, record: Record) -> dict[str, Any]:
    try:
        if not judge.should_run(record):
            return {"status": Status.SKIPPED.value}
    except Exception as error:
        return {"status": "error", "error": f"if: {_describe(error)}"}
    try:
        returned = judge.call(record)
    except BaseException as error:  # SystemExit from a judge is its error
        return {"status": "error", "error": _describe(error), "details": details_of(error)}
    try:
        value, rationale = interpret(returned, judge.config)
    except JudgeReturnError as error:
        return {"status": "error", "error": str(error), "details": details_of(returned)}
    return {
        "status": Status.OK.value,
        "value": value,
        "rationale": rationale,
        "details": details_of(returned),
    }


def _describe(error: BaseException) -> str:
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


def _finish(run: _Running) -> JudgeResult:
    duration = time.monotonic() - run.started
    os.close(run.fd)
    status = _reap(run.pid)
    data = b"".join(run.chunks)
    if not data:
        return _result(run, Status.ERROR, duration, error=_exit_reason(status))
    payload = json.loads(data)
    outcome = Status(payload["status"])
    return _result(
        run,
        outcome,
        duration,
        value=payload.get("value"),
        rationale=payload.get("rationale"),
        error=payload.get("error"),
        details=payload.get("details") or {},
    )


def _time_out(run: _Running) -> JudgeResult:
    os.close(run.fd)
    _reap(run.pid)
    timeout = run.judge.config.timeout_s
    return _result(
        run, Status.TIMEOUT, timeout, error=f"timed out after {timeout:g}s (judge timeout)"
    )


def _reap(pid: int) -> int:
    """Kill whatever the judge left running in its process group, then collect its status."""
    with contextlib.suppress(OSError):  # the group is already gone
        os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return status


def _exit_reason(status: int) -> str:
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"judge process was killed by {name}{hint} before returning a result"
    return f"judge process exited with code {os.WEXITSTATUS(status)} before returning a result"


def _result(run: _Running, status: Status, duration: float, **fields: Any) -> JudgeResult:
    return JudgeResult(
        name=run.judge.config.name,
        kind=run.judge.config.kind,
        status=status,
        duration_s=duration,
        **fields,
    )
