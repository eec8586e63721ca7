"""The batch's process tree: forked helpers that die with it, and nothing left behind.

The parent is a child subreaper while the batch runs: a judge process whose worker
died (killed by the judge itself, or by the parent on SIGTERM) and anything a judge
left running in a new session are re-parented to it instead of to init, so `sweep`
can find and kill them. Forked helpers (workers, the LLM request process) get
SIGKILL when the parent dies, so a killed batch leaves no worker behind either.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import NoReturn

from verifier.console import signal_name
from verifier.linux import become_subreaper, children, die_with_parent

_SWEEP_S = 5.0


@contextlib.contextmanager
def subreaper() -> Iterator[frozenset[int]]:
    """This process adopts orphaned descendants while the block runs; yields the children
    it had before (which sweep leaves alone)."""
    before = frozenset(children(os.getpid()))
    become_subreaper()
    try:
        yield before
    finally:
        become_subreaper(False)


def fork(main: Callable[[], None], close: Sequence[int] = ()) -> tuple[int, int]:
    """(pid, pidfd) of a child running main, which dies with this process.

    The pidfd becomes readable when the child ends, however many of its own
    descendants still hold its pipes. The child closes `close` (other helpers' ends).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _child(main, close, parent)
    return pid, os.pidfd_open(pid)


def _child(main: Callable[[], None], close: Sequence[int], parent: int) -> NoReturn:
    code = 0
    try:
        die_with_parent()
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)
        signal.set_wakeup_fd(-1)  # the parent's, whose descriptor is closed here
        for descriptor in close:
            with contextlib.suppress(OSError):
                os.close(descriptor)
        main()
    except BaseException:
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def sweep(keep: Collection[int]) -> int:
    """Kill and reap every child of this process not in keep, with its process group,
    until none is left (their own children come to this subreaper as they die).
    Returns how many were killed."""
    killed = 0
    deadline = time.monotonic() + _SWEEP_S
    while time.monotonic() < deadline:
        strays = [pid for pid in children(os.getpid()) if pid not in keep]
        if not strays:
            break
        for pid in strays:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(pid, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
                killed += 1
    return killed


def reap(pid: int, pidfd: int) -> int:
    """Wait for a child that has ended (or was killed) and close its pidfd; its exit status."""
    with contextlib.suppress(OSError):
        os.close(pidfd)
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal_name(os.WTERMSIG(status))}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"
