"""The worker pool: cases graded side by side in forked workers, one case at a time each.

A worker that dies is replaced and its case recorded as an error; Ctrl-C or SIGTERM
stops the pool and keeps what is already graded.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from verifier.batch.cases import Case
from verifier.batch.summary import CaseOutcome, CaseStatus


class _Worker:
    """A forked worker, its end of the pipe, and the case it is grading (None: idle)."""

    __slots__ = ("case", "conn", "process")

    def __init__(self, process: Any, conn: multiprocessing.connection.Connection) -> None:
        self.process = process  # multiprocessing.context.ForkProcess
        self.conn = conn
        self.case: Case | None = None


class _Stop(Exception):
    """SIGTERM (a Kubernetes deadline or deletion): stop, keep what is graded."""


def run_pool(
    cases: Sequence[Case],
    work: Callable[[Case], CaseOutcome],
    jobs: int,
    report: Callable[[CaseOutcome], None],
) -> tuple[dict[str, CaseOutcome], bool]:
    """Grade cases in `jobs` forked workers, one case at a time each.

    Returns the outcomes by case name and whether the run was interrupted. Forking
    (not spawning) is what shares the loaded config; each worker then forks its
    case's judges itself.
    """
    pending = deque(cases)
    outcomes: dict[str, CaseOutcome] = {}
    workers: list[_Worker] = []
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    try:
        for _ in range(min(jobs, len(cases))):
            workers.append(_start_worker(work))
        for worker in workers:
            _dispatch(worker, pending)
        while any(worker.case is not None for worker in workers):
            for worker, outcome in _collect(workers, work):
                outcomes[outcome.name] = outcome
                report(outcome)
                _dispatch(worker, pending)
        return outcomes, False
    except (KeyboardInterrupt, _Stop):
        return outcomes, True
    finally:
        signal.signal(signal.SIGTERM, previous)
        _stop_workers(workers)


def _start_worker(work: Callable[[Case], CaseOutcome]) -> _Worker:
    context = multiprocessing.get_context("fork")
    parent_end, child_end = context.Pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    process = context.Process(target=_worker_main, args=(child_end, work), daemon=True)
    process.start()
    child_end.close()
    return _Worker(process=process, conn=parent_end)


def _worker_main(conn: multiprocessing.connection.Connection, work: Callable[..., Any]) -> None:
    """The parent handles Ctrl-C and SIGTERM and then stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while (case := conn.recv()) is not None:
        conn.send(work(case))


def _dispatch(worker: _Worker, pending: deque[Case]) -> None:
    worker.case = pending.popleft() if pending else None
    if worker.case is not None:
        worker.conn.send(worker.case)


def _collect(
    workers: list[_Worker], work: Callable[[Case], CaseOutcome]
) -> Iterator[tuple[_Worker, CaseOutcome]]:
    """Wait for results; a worker that died is replaced and its case is an error row."""
    busy = [worker for worker in workers if worker.case is not None]
    waitables: list[Any] = [worker.conn for worker in busy]
    waitables += [worker.process.sentinel for worker in busy]
    ready = set(multiprocessing.connection.wait(waitables))
    for worker in busy:
        assert worker.case is not None
        dead = worker.process.sentinel in ready
        if worker.conn not in ready and not dead:
            continue
        outcome = _receive(worker.conn) if worker.conn in ready else None
        if outcome is None or dead:
            worker.process.join()
            if outcome is None:
                outcome = CaseOutcome(
                    worker.case.name, CaseStatus.FAILED, error=_death(worker.process.exitcode)
                )
            worker.conn.close()
            index = workers.index(worker)
            workers[index] = worker = _start_worker(work)
        yield worker, outcome


def _receive(conn: multiprocessing.connection.Connection) -> CaseOutcome | None:
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"the worker grading this case was killed by {signal.Signals(-exitcode).name}"
    return f"the worker grading this case exited with code {exitcode}"


def _stop_workers(workers: list[_Worker]) -> None:
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):
            if worker.case is None:
                worker.conn.send(None)
            else:
                worker.process.terminate()
    for worker in workers:
        worker.process.join(timeout=5)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop
