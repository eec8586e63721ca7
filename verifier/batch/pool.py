"""The worker pool: cases graded side by side in forked workers, LLM requests shared.

Each worker takes one case at a time and runs its CPU stage (verifier.batch.grader);
a case with LLM requests goes from the worker to the LLM stage (verifier.batch.llm_stage)
through the parent, and the worker takes the next case at once, so CPU judges keep
the workers busy while any number of cases, bounded to keep memory in check, wait on
the endpoint. The parent never starts a thread: it can fork a worker at any time.

A worker that dies (a judge that kills it, a crash) is noticed through its pidfd,
whatever its judges still hold open: its case is an error row, anything it left
running is killed, and a new worker takes its place. SIGTERM or SIGINT stops the
pool: no case is handed out any more, the workers, their judges (the parent is a
child subreaper, so it finds them) and the LLM stage are killed, and the rows of
every case already finished are returned; the caller writes the summary. With a
budget (--max-cost-usd), a case goes to the LLM stage only once the most its requests
can cost is reserved (verifier.batch.budget): one that does not fit waits for the
cases out to settle, or is refused (not graded); while one waits, or once the budget
is spent, no case is handed out, and the cases begun finish.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from verifier.batch.budget import Verdict
from verifier.batch.cases import Case
from verifier.batch.channel import Channel, ChannelError, channel_pair, wait
from verifier.batch.forks import describe_exit, fork, reap, subreaper, sweep
from verifier.batch.grader import PendingCase
from verifier.batch.summary import CaseOutcome, CaseStatus
from verifier.errors import OutOfProcessesError
from verifier.judges.base import PreparedJudge

if TYPE_CHECKING:
    from verifier.batch.budget import Purse
    from verifier.batch.llm_stage import LLMDone, LLMSettings, LLMStage
    from verifier.judges.llm.gate import GateFigures
    from verifier.judges.llm.judge import Spend

Work = Callable[[Case], CaseOutcome | PendingCase]
# The work of one slot of the pool (as root, a slot's commands run as UIDs of its own).
SlotWork = Callable[[int], Work]
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_FORK_PATIENCE_S = 5.0  # how long a worker's fork may keep failing before the batch stops
# What the parent and its workers send each other (verifier.batch.channel).
WORKER_TYPES = (
    "verifier.batch.cases:Case",
    "verifier.batch.summary:CaseOutcome",
    "verifier.batch.summary:CaseStatus",
    "verifier.batch.grader:PendingCase",
    "verifier.grading:CaseContext",
    "verifier.config.records:TaskInput",
    "verifier.results:JudgeResult",
    "verifier.results:Status",
    "verifier.batch.llm_stage:LLMTask",
    "verifier.judges.llm.prompt:Prompt",
    "verifier.judges.llm.guard:Screening",
    "verifier.judges.llm.guard:Guard",
    "verifier.judges.llm.guard:Finding",
)


@attrs.frozen
class LLMPlan:
    """How the pool runs the LLM stage: the judges (by index), the request pool's
    settings, how many endpoints they use, how the parent finishes a case, and the
    budget that pays for a case's requests before they go (None: none)."""

    judges: Mapping[int, PreparedJudge]
    settings: LLMSettings
    endpoints: int
    finish: Callable[[PendingCase, Sequence[LLMDone]], CaseOutcome]
    purse: Purse | None = None

    def waiting_bound(self, allowed: int | None) -> int:
        """Cases waiting on the stage at most: twice what the endpoints' gates allow in
        flight (`allowed`, as the stage last said; at first where they start), enough to
        keep every endpoint busy and its gate growing, few enough that the prompts of a
        whole batch never sit in memory at once."""
        if allowed is None:
            allowed = self.settings.start * self.endpoints
        return 2 * allowed


@attrs.frozen
class PoolResult:
    outcomes: dict[str, CaseOutcome]
    stopped_by: int | None  # the signal that stopped the pool (None: it ran to the end)
    spends: tuple[Spend, ...] = ()  # every LLM judge's
    endpoints: Mapping[str, GateFigures] = MappingProxyType({})  # by URL, when the stage ended
    not_started: int = 0  # cases never handed out: the budget was spent


class _Worker:
    """A forked worker, its end of the pipe, its slot (which sandbox UID its commands
    run as), the case it is grading (None: idle), and whether it was killed (it takes
    no case, and is replaced once its pidfd says it is gone)."""

    __slots__ = ("case", "conn", "killed", "pid", "pidfd", "slot")

    def __init__(self, pid: int, pidfd: int, conn: Channel, slot: int) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.conn = conn
        self.slot = slot
        self.case: Case | None = None
        self.killed = False


class _Pool:
    def __init__(self, work: SlotWork, llm: LLMPlan | None, keep: frozenset[int]) -> None:
        self.work = work
        self.llm = llm
        self.keep = keep  # the parent's children from before the pool: not ours to kill
        self.workers: list[_Worker] = []
        self.stage: LLMStage | None = None
        self.waiting: dict[str, PendingCase] = {}  # sent to the LLM stage
        self.held: deque[PendingCase] = deque()  # waiting for room in the budget
        self.purse = llm.purse if llm is not None else None
        self.spends: list[Spend] = []
        self.allowed: int | None = None  # requests the stage's gates allow in flight now
        self.endpoints: Mapping[str, GateFigures] = MappingProxyType({})
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def own_fds(self) -> list[int]:
        """The parent's descriptors a new child must close."""
        fds = [self.wake_r, self.wake_w]
        for worker in self.workers:
            fds += [*worker.conn.fds(), worker.pidfd]
        if self.stage is not None:
            fds += [*self.stage.conn.fds(), self.stage.pidfd]
        return fds

    def start_worker(self, slot: int) -> _Worker:
        """A new worker for the slot; while the fork fails for want of processes, strays
        are killed and it is tried again, then OutOfProcessesError (exit 11)."""
        work = self.work
        deadline = time.monotonic() + _FORK_PATIENCE_S
        while True:
            parent_end, child_end = channel_pair(WORKER_TYPES)
            try:
                main = functools.partial(_worker_main, child_end, work(slot))
                pid, pidfd = fork(main, close=[*self.own_fds(), *parent_end.fds()])
            except (BlockingIOError, MemoryError) as error:
                parent_end.close()
                child_end.close()
                sweep(self.known())
                if time.monotonic() > deadline:
                    raise OutOfProcessesError(
                        f"cannot start a batch worker ({error}): this UID's or this "
                        "container's process limit is reached (ulimit -u, pids.max)"
                    ) from None
                time.sleep(0.1)
                continue
            child_end.close()
            return _Worker(pid, pidfd, parent_end, slot)

    def start_stage(self) -> None:
        from verifier.batch.llm_stage import LLMStage

        assert self.llm is not None
        self.stage = LLMStage(self.llm.judges, self.llm.settings, close=self.own_fds())

    def budget_stops(self) -> bool:
        """Whether no case may be handed out: one waits for room in the budget, or a case
        like those it funded found none."""
        return bool(self.held) or (self.purse is not None and self.purse.closed)

    def admit(self, pending: PendingCase) -> None:
        """A case whose LLM requests are ready: to the stage once they are paid for."""
        if self.purse is None:
            self.submit(pending)
            return
        self.held.append(pending)
        self.release_held()

    def release_held(self) -> None:
        """The cases waiting for room, in order, to the stage while it is there; a case
        refused is not graded (no row: a rerun grades it)."""
        assert self.purse is not None
        while self.held:
            verdict = self.purse.ask(self.held[0].name, self.held[0].ceiling_usd)
            if verdict is Verdict.WAIT:
                return
            pending = self.held.popleft()
            if verdict is Verdict.GRANTED:
                self.submit(pending)

    def submit(self, pending: PendingCase) -> None:
        assert self.stage is not None
        self.waiting[pending.name] = pending
        with contextlib.suppress(OSError):  # the stage died: its pidfd makes this an error row
            self.stage.submit(pending.name, pending.tasks)

    def known(self) -> frozenset[int]:
        pids = {worker.pid for worker in self.workers}
        if self.stage is not None:
            pids.add(self.stage.pid)
        return self.keep | pids

    def stop(self, *, kill: bool) -> None:
        """End every helper: politely when the pool ran to the end, SIGKILL otherwise."""
        for worker in self.workers:
            with contextlib.suppress(OSError):
                if kill or worker.case is not None:
                    signal.pidfd_send_signal(worker.pidfd, signal.SIGKILL)
                else:
                    worker.conn.send(None)
        for worker in self.workers:
            if not _ended(worker.pidfd, timeout=5.0):
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(worker.pidfd, signal.SIGKILL)
            worker.conn.close()
            reap(worker.pid, worker.pidfd)
        self.workers = []
        if self.stage is not None:
            if not kill:
                self.stage.finish()
                figures = self.stage.figures()
                if figures is not None:
                    self.endpoints = figures
            self.stage.close(kill=kill)
            self.stage = None
        sweep(self.keep)
        os.close(self.wake_r)
        os.close(self.wake_w)


def run_pool(
    cases: Sequence[Case],
    work: SlotWork,
    jobs: int,
    report: Callable[[CaseOutcome], None],
    llm: LLMPlan | None = None,
) -> PoolResult:
    """Grade cases in `jobs` forked workers (and the LLM stage, given llm); `work(slot)`
    is what the worker of that slot does with each case.

    Forking (not spawning) is what shares the loaded config; each worker then forks
    its case's judges itself.
    """
    pending = deque(cases)
    outcomes: dict[str, CaseOutcome] = {}
    received: list[int] = []

    def record(outcome: CaseOutcome) -> None:
        outcomes[outcome.name] = outcome
        report(outcome)

    with subreaper() as before:
        pool = _Pool(work, llm, before)
        previous_wakeup = signal.set_wakeup_fd(pool.wake_w, warn_on_full_buffer=False)
        previous = {
            sig: signal.signal(sig, lambda s, _frame: received.append(s)) for sig in _STOP_SIGNALS
        }
        try:
            if llm is not None:
                pool.start_stage()
            for slot in range(min(jobs, len(cases))):
                pool.workers.append(pool.start_worker(slot))
            while not received:
                bound = len(cases) + 1
                if llm is not None:
                    bound = max(jobs, llm.waiting_bound(pool.allowed))
                for worker in pool.workers:
                    idle = worker.case is None and not worker.killed
                    if idle and pending and len(pool.waiting) < bound:
                        if pool.budget_stops():
                            break
                        _dispatch(worker, pending)
                idle = all(worker.case is None for worker in pool.workers)
                replacing = any(worker.killed for worker in pool.workers)
                if not pool.waiting and idle and not (pending and replacing):
                    break
                _step(pool, record)
        finally:
            spent = pool.purse is not None and pool.purse.closed
            pool.stop(kill=bool(received) or bool(pool.waiting) or (bool(pending) and not spent))
            signal.set_wakeup_fd(previous_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if pool.purse is not None:
                pool.purse.abandon()  # the cases still out: their requests may be billed
    return PoolResult(
        outcomes,
        received[0] if received else None,
        tuple(pool.spends),
        pool.endpoints,
        0 if received else len(pending),
    )


def _step(pool: _Pool, record: Callable[[CaseOutcome], None]) -> None:
    """Wait for something to happen, and handle it."""
    waitables: list[Any] = [pool.wake_r]
    for worker in pool.workers:
        waitables.append(worker.pidfd)
        if worker.case is not None:
            waitables.append(worker.conn)
    if pool.stage is not None:
        waitables += [pool.stage.pidfd, pool.stage.conn]
    ready = set(wait(waitables))
    if pool.wake_r in ready:
        with contextlib.suppress(OSError):
            os.read(pool.wake_r, 64)
    for index, worker in enumerate(pool.workers):
        if worker.conn in ready and worker.case is not None:
            _received(pool, worker, record)
        if worker.pidfd in ready:
            _replace(pool, index, record)
    stage = pool.stage
    if stage is not None and stage.conn in ready:
        try:
            for message in stage.received():
                name, done, allowed = message
                spends = [spend for judged in done for spend in judged.spends]
                pool.allowed = int(allowed)
                pool.spends += spends
                assert pool.llm is not None
                record(pool.llm.finish(pool.waiting.pop(name), done))
                if pool.purse is not None:
                    pool.purse.settle(name, _cost(spends))
                    pool.release_held()
        except (ChannelError, ValueError, TypeError, KeyError) as error:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(stage.pidfd, signal.SIGKILL)
            _restart_stage(pool, record, f"sent what cannot be read ({error})")
            return
    if stage is not None and stage.pidfd in ready:
        _restart_stage(pool, record)


def _restart_stage(
    pool: _Pool, record: Callable[[CaseOutcome], None], why: str | None = None
) -> None:
    """The LLM stage died (or was killed): the cases waiting on it are error rows; a new
    one takes over."""
    assert pool.stage is not None
    status = reap(pool.stage.pid, pool.stage.pidfd)
    pool.stage.conn.close()
    pool.stage = None
    for name in pool.waiting:
        error = f"the LLM request process {why or describe_exit(status)}"
        record(CaseOutcome(name, CaseStatus.FAILED, error=error))
    if pool.purse is not None:
        pool.purse.abandon(list(pool.waiting))
    pool.waiting.clear()
    sweep(pool.known())
    pool.start_stage()
    if pool.purse is not None:
        pool.release_held()


def _received(pool: _Pool, worker: _Worker, record: Callable[[CaseOutcome], None]) -> None:
    """What the worker sent about its case: the case's row, or its LLM tasks. Anything
    else (what cannot be read, more than one answer, another case's) makes the case an
    error row, and the worker, now out of step, is killed and replaced."""
    assert worker.case is not None
    try:
        messages = worker.conn.messages()
    except (EOFError, OSError):
        return  # it died: its pidfd says so
    except ChannelError as error:
        messages = [error]
    if not messages:
        return  # the rest of its answer is still on the way
    result = messages[0]
    if len(messages) > 1 or not _answers(result, worker.case):
        problem = result if isinstance(result, ChannelError) else "an answer that is not its own"
        record(
            CaseOutcome(
                worker.case.name,
                CaseStatus.FAILED,
                error=f"internal error: the worker sent {problem}",
            )
        )
        worker.case = None
        worker.killed = True
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(worker.pidfd, signal.SIGKILL)
        return
    worker.case = None
    if isinstance(result, PendingCase):
        pool.admit(result)
    else:
        record(result)


def _cost(spends: Sequence[Spend]) -> float:
    """What a case's requests cost (a budget refuses models without a price at start)."""
    return math.fsum(spend.cost_usd or 0.0 for spend in spends)


def _answers(result: Any, case: Case) -> bool:
    """A row or a PendingCase, of this case."""
    return isinstance(result, CaseOutcome | PendingCase) and result.name == case.name


def _replace(pool: _Pool, index: int, record: Callable[[CaseOutcome], None]) -> None:
    """A worker died: its case is an error row, what it left running is killed."""
    worker = pool.workers[index]
    worker.conn.close()
    status = reap(worker.pid, worker.pidfd)
    if worker.case is not None:
        error = f"the worker grading this case {describe_exit(status)}"
        record(CaseOutcome(worker.case.name, CaseStatus.FAILED, error=error))
    pool.workers.pop(index)
    sweep(pool.known())
    pool.workers.insert(index, pool.start_worker(worker.slot))


def _dispatch(worker: _Worker, pending: deque[Case]) -> None:
    case = pending.popleft()
    try:
        worker.conn.send(case)
    except OSError:  # it has just died: the case goes to the next worker
        pending.appendleft(case)
        return
    worker.case = case


def _worker_main(conn: Channel, work: Work) -> None:
    """The parent handles Ctrl-C and SIGTERM, and then stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while (case := conn.recv()) is not None:
        conn.send(work(case))


def _ended(pidfd: int, timeout: float) -> bool:
    return bool(wait([pidfd], timeout))
