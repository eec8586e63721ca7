"""Runs the judges of one case, each in its own forked process, and collects their results.

Forking (not threads, not a fresh interpreter) is what makes isolation cheap: the
child shares the already-loaded config and record, with nothing to import or parse
(verifier.engine.child). The grader itself is a child subreaper and not dumpable,
so that nothing a judge starts can leave the tree it cleans up or read its /proc
entries. When a judge ends (or times out, or exceeds its memory limit) its whole
tree is killed: its process group, everything below it, and every orphan that
carries its token; whatever is left when all judges are done is killed before any
output file is written. What judges print reaches stderr only after redaction.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import resource
import select
import signal
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from verifier.console import signal_name
from verifier.defaults import DEFAULT_LLM_PARALLEL, DEFAULT_MEMORY_MB
from verifier.engine.child import FORKED, judge_main
from verifier.errors import OutOfProcessesError, UsageError
from verifier.judges import runs_case_code
from verifier.judges.base import JudgeContext, Pool, PreparedJudge, Record
from verifier.linux import (
    become_subreaper,
    children,
    descendants,
    kill_trees,
    make_undumpable,
    private_bytes,
    private_bytes_bound,
    reap,
    token_of,
)
from verifier.redact import known_secrets, redact, redact_tree
from verifier.results import JudgeResult, Status
from verifier.system import available_cpus, container_memory_bytes

if TYPE_CHECKING:
    from verifier.sandbox import Sandbox

_READ_CHUNK = 65536
_MAX_OUTPUT_BYTES = 64 * 1024  # of one judge's prints passed on to stderr
_WATCH_INTERVAL_S = 0.05  # memory and orphans are checked this often while judges run
_FORK_PATIENCE_S = 5.0  # how long forks may keep failing with no judge left to end


@attrs.frozen
class Limits:
    """How many judges run at once (per pool), how much memory each may use, which
    pools are skipped outright (`--no-llm`), and when every judge must be done (the
    grade's `--deadline`, as a time.monotonic() instant)."""

    parallel: int | None = None  # CPU judges at once; None: the CPU count
    llm_parallel: int = DEFAULT_LLM_PARALLEL
    memory_mb: int | None = DEFAULT_MEMORY_MB
    skip_pools: frozenset[Pool] = frozenset()
    deadline: float | None = None  # None: each judge's own timeout only
    deadline_s: float | None = None  # the --deadline it came from, for messages
    # The container's share for the judges running at once (container_share): their
    # memory together, and what the limits' numbers come from, for the error records.
    memory_total_mb: int | None = None
    memory_note: str | None = None

    def until(self, seconds: float | None, started: float | None = None) -> Limits:
        """These limits with a whole-grade deadline `seconds` after `started` (default:
        now), less the margin the grader needs after its judges to write the reward
        files (reward_margin_s); unchanged when seconds is None."""
        if seconds is None:
            return self
        started = time.monotonic() if started is None else started
        return attrs.evolve(
            self, deadline=started + seconds - reward_margin_s(seconds), deadline_s=seconds
        )

    @classmethod
    def asked(
        cls,
        memory_mb: int,
        llm_parallel: int,
        no_llm: bool,
        workers: int = 1,
        **overrides: Any,
    ) -> Limits:
        """The limits a command asked for (--memory-mb, --llm-parallel, --no-llm), within
        the container's memory (container_share; `workers`: the processes that each run
        one judge at a time, a batch's --jobs; 1 for grade, whose judges share one
        parent). UsageError (exit 2) when this process may not use the memory asked for
        (a hard `ulimit -d` below it) or the container leaves the judges too little."""
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY and hard < memory_mb * 1024 * 1024:
            raise UsageError(
                f"--memory-mb {memory_mb}: this process may use at most "
                f"{hard // (1024 * 1024)} MiB (its hard data limit, ulimit -d); ask for less"
            )
        limits = cls(
            llm_parallel=llm_parallel,
            memory_mb=memory_mb,
            skip_pools=frozenset({Pool.LLM}) if no_llm else frozenset(),
        )
        container = container_memory_bytes()
        if container is not None:
            own = private_bytes([os.getpid()])
            limits = attrs.evolve(limits, **container_share(memory_mb, container, own, workers))
        return attrs.evolve(limits, **overrides)

    def capacity(self, pool: Pool) -> int:
        if pool is Pool.LLM:
            return self.llm_parallel
        return self.parallel if self.parallel is not None else available_cpus()


GRADER_HEADROOM_MB = 32  # what a grading process needs beyond its size now: outputs, pipes
MIN_JUDGE_MB = 32  # below this no judge can run (a Python judge alone is about 10 MiB)


def container_share(
    asked_mb: int, container_bytes: int, own_bytes: int, workers: int
) -> dict[str, Any]:
    """The judges' memory limits in a container whose cgroup allows container_bytes.

    The kernel kills a process of the container when they all together pass it, so
    the verifier's own limits must strike first: the container less what the grading
    processes need (each the size of this one now, plus GRADER_HEADROOM_MB; a batch
    has its workers, the parent and the LLM stage) is what the judges may use
    together (`memory_total_mb`), and a `workers`-th of it each, unless --memory-mb
    asked for less. Nothing changes when the container allows more than that needs.
    UsageError when it leaves a judge less than MIN_JUDGE_MB.
    """
    mib = 1024 * 1024
    processes = 1 if workers == 1 else workers + 2
    reserve_mb = processes * (-(-own_bytes // mib) + GRADER_HEADROOM_MB)
    container_mb = container_bytes // mib
    total_mb = container_mb - reserve_mb
    each_mb = total_mb // workers
    if each_mb >= asked_mb and workers * asked_mb <= total_mb:
        return {}
    shared = f", shared by {workers} workers" if workers > 1 else ""
    note = (
        f"the container's memory limit, {container_mb} MiB (cgroup), less {reserve_mb} MiB "
        f"for the grader{shared}"
    )
    if each_mb < MIN_JUDGE_MB:
        raise UsageError(
            f"{note[0].upper()}{note[1:]} leaves {max(each_mb, 0)} MiB per judge (less than "
            f"{MIN_JUDGE_MB}): give the container more memory"
            + (" or pass fewer --jobs" if workers > 1 else "")
        )
    return {"memory_mb": each_mb, "memory_total_mb": total_mb, "memory_note": note}


def reward_margin_s(deadline_s: float) -> float:
    """What a whole-grade deadline keeps back for stopping the judges still running
    (killing and reaping their trees) and writing the four files: a tenth of it, at
    most 2 s."""
    return min(2.0, 0.1 * deadline_s)


_Reason = TypeVar("_Reason", str, None)  # a judge's rationale or error, if any


class _Running:
    """A judge process the parent waits on: its pipes, what they carried, its token."""

    __slots__ = (
        "grade_deadline",
        "judge",
        "lane",
        "memory_exceeded",
        "output",
        "output_cut",
        "output_fd",
        "pid",
        "result",
        "result_closed",
        "result_fd",
        "started",
        "token",
    )

    def __init__(
        self,
        judge: PreparedJudge,
        pid: int,
        result_fd: int,
        output_fd: int,
        token: str,
        *,
        grade_deadline: float | None,
        lane: int | None,
    ) -> None:
        self.judge = judge
        self.grade_deadline = grade_deadline
        self.lane = lane
        self.pid = pid
        self.result_fd = result_fd
        self.output_fd = output_fd
        self.token = token
        self.started = time.monotonic()
        self.result = bytearray()
        self.result_closed = False
        self.output = bytearray()
        self.output_cut = 0
        self.memory_exceeded: str | None = None  # what it exceeded, once it has

    @property
    def deadline(self) -> float:
        """Its own timeout, or the grade's deadline when that comes first."""
        own = self.started + self.judge.config.timeout_s
        return own if self.grade_deadline is None else min(own, self.grade_deadline)

    def stopped_by_grade_deadline(self) -> bool:
        own = self.started + self.judge.config.timeout_s
        return self.grade_deadline is not None and self.grade_deadline < own

    def is_over(self, now: float) -> bool:
        """It answered, died without answering, exceeded its memory or its time."""
        done = b"\n" in self.result or self.result_closed
        return done or self.memory_exceeded is not None or self.deadline <= now

    def take_output(self, chunk: bytes) -> None:
        room = _MAX_OUTPUT_BYTES - len(self.output)
        self.output += chunk[: max(room, 0)]
        self.output_cut += max(len(chunk) - max(room, 0), 0)


def run_judges(
    judges: Sequence[PreparedJudge],
    record: Record,
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
) -> tuple[JudgeResult, ...]:
    """One result per judge, in the judges' order. Nothing a judge started is left
    running when this returns, or when it raises (a signal, say). `sandbox`: where the
    judges that run code from the case run it (ValueError when one does and there is
    none: see grading.command_sandbox)."""
    limits = limits or Limits()
    running = [judge.config.name for judge in judges if runs_case_code(judge.config)]
    if running and sandbox is None:
        raise ValueError(f"judge {running[0]} runs code from the case: it needs a sandbox")
    guard_grader()
    processes = _JudgeProcesses(limits, known_secrets(), sandbox)
    try:
        return processes.run(judges, record)
    finally:
        processes.stop_everything()


@functools.cache
def guard_grader() -> None:
    """Once per process (a fork inherits it, as it inherits both settings): adopt orphans
    (subreaper) and close /proc/<pid> to same-UID code."""
    become_subreaper()
    make_undumpable()


class _JudgeProcesses:
    def __init__(self, limits: Limits, secrets: tuple[str, ...], sandbox: Sandbox | None) -> None:
        self.limits = limits
        self.secrets = secrets
        self.sandbox = sandbox
        self.running: dict[int, _Running] = {}  # by pid
        self.poller = select.poll()
        self.watched: dict[int, _Running] = {}  # by pipe fd
        # Children of this process from before grading (a test runner's, a pool's) are not
        # the judges' and are left alone; any other child is a judge or fell to us from one.
        self.earlier_children = frozenset(children(os.getpid()))
        self.fork_failing_since: float | None = None
        # Each CPU judge running has a lane of its own: as root, its commands' UID.
        self.free_lanes = list(range(limits.capacity(Pool.CPU)))

    def run(self, judges: Sequence[PreparedJudge], record: Record) -> tuple[JudgeResult, ...]:
        pending = [judge for judge in judges if judge.pool not in self.limits.skip_pools]
        results = {
            judge.config.name: JudgeResult(
                name=judge.config.name,
                kind=judge.config.kind,
                status=Status.SKIPPED,
                rationale=f"{judge.pool.value} judges are switched off for this run",
            )
            for judge in judges
            if judge.pool in self.limits.skip_pools
        }
        sys.stdout.flush()
        sys.stderr.flush()
        next_watch = time.monotonic() + _WATCH_INTERVAL_S
        while pending or self.running:
            if self.limits.deadline is not None and time.monotonic() >= self.limits.deadline:
                for judge in pending:  # never started: the grade ran out of time first
                    results[judge.config.name] = self._not_started(judge)
                pending = []
            for judge in self._startable(pending):
                if not self._spawn(judge, record):
                    break
                pending.remove(judge)
            wake = min([next_watch, *(run.deadline for run in self.running.values())])
            if pending and self.limits.deadline is not None:
                wake = min(wake, self.limits.deadline)
            for fd, _ in self.poller.poll(max(0.0, wake - time.monotonic()) * 1000):
                self._read(self.watched[fd], fd)
            now = time.monotonic()
            if now >= next_watch:
                self._watch()
                next_watch = now + _WATCH_INTERVAL_S
            for run in list(self.running.values()):
                if run.is_over(now):
                    results[run.judge.config.name] = self._finish(run)
        return tuple(results[judge.config.name] for judge in judges)

    def stop_everything(self) -> None:
        """Kill every judge still running and everything below this process; reap them."""
        for run in list(self.running.values()):
            self._close(run)
        # A dying process hands its children to this subreaper only as it exits, which
        # may be after they were looked for (a command killed by its judge's death, whose
        # token could no longer be read): look again until no new child is left.
        while left := self._new_children():
            kill_trees(left)
            reap(left)

    def _new_children(self) -> list[int]:
        return [pid for pid in children(os.getpid()) if pid not in self.earlier_children]

    def _startable(self, pending: Sequence[PreparedJudge]) -> list[PreparedJudge]:
        busy: dict[Pool, int] = {}
        for run in self.running.values():
            busy[run.judge.pool] = busy.get(run.judge.pool, 0) + 1
        chosen = []
        for judge in pending:
            if busy.get(judge.pool, 0) < self.limits.capacity(judge.pool):
                busy[judge.pool] = busy.get(judge.pool, 0) + 1
                chosen.append(judge)
        return chosen

    def _spawn(self, judge: PreparedJudge, record: Record) -> bool:
        """Fork the judge's process; False when the fork failed for want of processes
        (tried again on the next round, once strays are killed and running judges end)."""
        result_read, result_write = os.pipe()
        output_read, output_write = os.pipe()
        token = os.urandom(8).hex()
        lane = min(self.free_lanes) if judge.pool is Pool.CPU and self.free_lanes else None
        try:
            pid = os.fork()
        except (BlockingIOError, MemoryError) as error:
            for fd in (result_read, result_write, output_read, output_write):
                os.close(fd)
            self._fork_failed(error)
            return False
        self.fork_failing_since = None
        if pid == 0:  # the judge's process: never returns
            os.close(result_read)
            os.close(output_read)
            sandbox = self.sandbox.in_lane(lane or 0) if self.sandbox is not None else None
            judge_main(
                judge,
                JudgeContext(record, sandbox),
                self.limits.memory_mb,
                token,
                result_write,
                output_write,
                backstop_mb=self.limits.memory_total_mb,
            )
        os.close(result_write)
        os.close(output_write)
        with contextlib.suppress(OSError):  # the child did it already, or has exited
            os.setpgid(pid, pid)
        if lane is not None:
            self.free_lanes.remove(lane)
        run = _Running(
            judge,
            pid,
            result_read,
            output_read,
            token,
            grade_deadline=self.limits.deadline,
            lane=lane,
        )
        self.running[pid] = run
        for fd in (result_read, output_read):
            self.poller.register(fd, select.POLLIN)
            self.watched[fd] = run
        return True

    def _fork_failed(self, error: BaseException) -> None:
        """A fork failed: kill whatever no judge owns, and keep trying while judges run
        (their ends free processes); with none running, give up after a while."""
        now = time.monotonic()
        if self.fork_failing_since is None:
            self.fork_failing_since = now
        self._watch()
        if not self.running and now - self.fork_failing_since > _FORK_PATIENCE_S:
            reason = getattr(error, "strerror", None) or type(error).__name__
            raise OutOfProcessesError(
                f"cannot start a judge's process ({reason}): this UID's or this "
                "container's process limit is reached (ulimit -u, pids.max); raise it, or "
                "grade fewer cases at once"
            )

    def _read(self, run: _Running, fd: int) -> None:
        chunk = os.read(fd, _READ_CHUNK)
        if not chunk:
            self._unwatch(fd)
            run.result_closed = run.result_closed or fd == run.result_fd
            return
        if fd == run.result_fd:
            run.result += chunk
        else:
            run.take_output(chunk)

    def _watch(self) -> None:
        """Kill orphans no running judge owns; stop judges over their memory limit."""
        owners = {run.token: run for run in self.running.values()}
        adopted: dict[int, list[int]] = {pid: [] for pid in self.running}
        strays = []
        for orphan in self._new_children():
            if orphan in self.running:
                continue
            owner = owners.get(token_of(orphan) or "")
            if owner is None:
                strays.append(orphan)
            else:
                adopted[owner.pid].append(orphan)
        if strays:
            kill_trees(strays)
            reap(strays)
        if self.limits.memory_mb is None:
            return
        limit = self.limits.memory_mb * 1024 * 1024
        total = self.limits.memory_total_mb
        trees: dict[int, list[int]] = {}
        for pid in self.running:
            trees[pid] = [pid, *descendants(pid)]
            for orphan in adopted[pid]:
                trees[pid] += [orphan, *descendants(orphan)]
        # Their counters first (no page-table walk): the private pages are counted only
        # when they might be over a limit (the same decisions, at a fraction of the cost).
        used = {pid: private_bytes_bound(tree) for pid, tree in trees.items()}
        over_total = total is not None and sum(used.values()) > total * 1024 * 1024
        for pid, run in self.running.items():
            if used[pid] > limit or over_total:
                used[pid] = private_bytes(trees[pid])
            if used[pid] > limit:
                run.memory_exceeded = f"the memory limit of {self.limits.memory_mb} MiB"
        if total is not None and sum(used.values()) > total * 1024 * 1024:
            largest = self.running[max(used, key=used.__getitem__)]
            largest.memory_exceeded = largest.memory_exceeded or (
                f"the memory limit of {total} MiB of the judges running together"
            )

    def _finish(self, run: _Running) -> JudgeResult:
        answered = b"\n" in run.result or run.result_closed
        timed_out = not answered and not run.memory_exceeded
        status = self._close(run)
        duration = time.monotonic() - run.started
        if run.output or run.output_cut:
            self._pass_on_output(run)
        if run.memory_exceeded:
            return self._unanswered(
                run, Status.ERROR, duration, self._memory_reason(f"exceeded {run.memory_exceeded}")
            )
        if timed_out and run.stopped_by_grade_deadline():
            return self._unanswered(
                run,
                Status.TIMEOUT,
                duration,
                self._deadline_reason(f"stopped after {duration:.1f}s"),
            )
        if timed_out:
            timeout = run.judge.config.timeout_s
            return self._unanswered(
                run, Status.TIMEOUT, timeout, f"timed out after {timeout:g}s (judge timeout)"
            )
        lines = [line for line in bytes(run.result).splitlines() if line.strip()]
        payloads = [_payload(line) for line in lines]
        if any(payload.get("status") == FORKED for payload in payloads) or len(payloads) > 1:
            return self._result(
                run,
                Status.ERROR,
                duration,
                error="the judge forked: it returned in more than one process",
            )
        if not payloads:
            return self._unanswered(run, Status.ERROR, duration, _exit_reason(status))
        payload = payloads[0]
        return self._result(
            run,
            Status(payload["status"]),
            duration,
            value=payload.get("value"),
            rationale=self._memory_reason(payload.get("rationale")),
            error=self._memory_reason(payload.get("error")),
            details=payload.get("details") or {},
        )

    def _memory_reason(self, text: _Reason) -> _Reason:
        """A memory limit the judge ran into, with where the limit came from when the
        container set it (the child only knows the number)."""
        note = self.limits.memory_note
        if note is None or not isinstance(text, str):
            return text
        return re.sub(
            r"(the memory limit of \d+ MiB( of the judges running together)?)",
            rf"\1 ({note})",
            text,
            count=1,
        )

    def _deadline_reason(self, what: str) -> str:
        return (
            f"{what}: the grade's deadline (--deadline {self.limits.deadline_s:g}s, less "
            f"{reward_margin_s(self.limits.deadline_s or 0):g}s to write the reward) came "
            "first"
        )

    def _not_started(self, judge: PreparedJudge) -> JudgeResult:
        """A judge still waiting for a slot when the grade's deadline came: as a judge
        stopped at once (a case-bound judge's wait is the case's doing too: the judges
        before it ran on the case)."""
        reason = self._deadline_reason("not started")
        if judge.case_bound:
            return _answer(
                judge,
                Status.OK,
                0.0,
                self.secrets,
                value=False,
                rationale=(
                    f"the judge gave no answer on this case ({reason}): counted as a failure"
                ),
            )
        return _answer(judge, Status.TIMEOUT, 0.0, self.secrets, error=reason)

    def _unanswered(
        self, run: _Running, status: Status, duration: float, reason: str
    ) -> JudgeResult:
        """A judge that gave no answer: its failure when only the case can have caused it
        (a case-bound judge: a builtin), else an error (or timeout) saying why."""
        if run.judge.case_bound:
            return self._result(
                run,
                Status.OK,
                duration,
                value=False,
                rationale=(
                    f"the judge gave no answer on this case ({reason}): counted as a failure"
                ),
            )
        return self._result(run, status, duration, error=reason)

    def _close(self, run: _Running) -> int:
        """Kill the judge's process group and reap the judge; then what it started in
        other groups or sessions (orphans carrying its token, which fell to this
        subreaper when it died) and their trees; take what is left in its pipes, close
        them. Returns the judge process's wait status."""
        with contextlib.suppress(OSError):  # the judge leads its own process group
            os.killpg(run.pid, signal.SIGKILL)
        status = 0
        with contextlib.suppress(ChildProcessError):
            _, status = os.waitpid(run.pid, 0)
        orphans = [
            pid
            for pid in self._new_children()
            if pid not in self.running and token_of(pid) == run.token
        ]
        if orphans:
            kill_trees(orphans)
            reap(orphans)
        del self.running[run.pid]
        if run.lane is not None:
            self.free_lanes.append(run.lane)
        for fd in (run.result_fd, run.output_fd):
            self._unwatch(fd)
            _drain(fd, run)
            os.close(fd)
        return status

    def _unwatch(self, fd: int) -> None:
        if self.watched.pop(fd, None) is not None:
            self.poller.unregister(fd)

    def _pass_on_output(self, run: _Running) -> None:
        text = redact(bytes(run.output).decode("utf-8", errors="replace"), self.secrets)
        cut = f"\n[... {run.output_cut} more bytes not shown]" if run.output_cut else ""
        sys.stderr.write(text.rstrip("\n") + cut + "\n")
        sys.stderr.flush()

    def _result(
        self, run: _Running, status: Status, duration: float, **fields: object
    ) -> JudgeResult:
        return _answer(run.judge, status, duration, self.secrets, **fields)


def _answer(
    judge: PreparedJudge,
    status: Status,
    duration: float,
    secrets: tuple[str, ...],
    **fields: object,
) -> JudgeResult:
    """A judge's result, with every secret the grader knows redacted from its text."""
    for name in ("rationale", "error"):
        if isinstance(fields.get(name), str):
            fields[name] = redact(fields[name], secrets)  # type: ignore[arg-type]
    if fields.get("details"):
        fields["details"] = redact_tree(fields["details"], secrets)
    return JudgeResult(
        name=judge.config.name,
        kind=judge.config.kind,
        status=status,
        duration_s=duration,
        **fields,  # type: ignore[arg-type]
    )


def _drain(fd: int, run: _Running) -> None:
    """What a pipe still holds, without waiting for writers that may never close it."""
    os.set_blocking(fd, False)
    while True:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            return
        if fd == run.result_fd:
            run.result += chunk
        else:
            run.take_output(chunk)


def _payload(line: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(line)
    except ValueError:
        return {"status": FORKED}
    return payload if isinstance(payload, dict) else {"status": FORKED}


def _exit_reason(status: int) -> str:
    if os.WIFSIGNALED(status):
        name = signal_name(os.WTERMSIG(status))
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"judge process was killed by {name}{hint} before returning a result"
    return f"judge process exited with code {os.WEXITSTATUS(status)} before returning a result"
