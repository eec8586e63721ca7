"""Linux process primitives the grader uses on its own processes and their trees.

prctl flags (a subreaper adopts what double-forks away from a judge; a non-dumpable
process keeps its /proc fd, environ and mem closed to other processes of its UID),
the process tree below a pid, a token in the environment that attributes an
orphan to the judge that started it, and killing a tree (stopped first, so that a
fork bomb cannot outrun the kill).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from collections.abc import Callable, Iterable
from typing import Any

JUDGE_TOKEN_ENV = "VERIFIER_JUDGE_TOKEN"  # noqa: S105 (the variable's name)
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_KILL_ROUNDS = 50


def prctl(option: int, value: int) -> None:
    import ctypes  # here, not at the top: a command that never calls prctl never loads it

    if _libc_prctl()(option, value, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl({option}, {value}): {os.strerror(error)}")


@functools.cache
def _libc_prctl() -> Callable[..., int]:
    """libc's prctl, looked up once in the grader: every judge's process, forked from it,
    calls it at start."""
    return libc().prctl


def become_subreaper(enabled: bool = True) -> None:
    """Orphans of our descendants are re-parented to this process (not to PID 1), so that
    nothing a judge starts can leave the tree we clean up (enabled=False: no longer)."""
    prctl(_PR_SET_CHILD_SUBREAPER, int(enabled))


def make_undumpable() -> None:
    """/proc/<pid>/{fd,environ,mem} of this process (and of its forks, until they exec)
    belong to root: code from the case, running as the same UID, cannot open them."""
    prctl(_PR_SET_DUMPABLE, 0)


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    prctl(_PR_SET_PDEATHSIG, signum)


def children(pid: int) -> list[int]:
    """The direct children of a single-threaded process (/proc/<pid>/task/<pid>/children)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="utf-8") as handle:
            return [int(field) for field in handle.read().split()]
    except (OSError, ValueError):
        return []


def descendants(pid: int) -> list[int]:
    """Every process below pid, parents before children."""
    found: list[int] = []
    queue = children(pid)
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children(child))
    return found


def token_of(pid: int) -> str | None:
    """The judge token in a process's initial environment, if it can be read and has one."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    prefix = f"{JUDGE_TOKEN_ENV}=".encode()
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def private_bytes(pids: Iterable[int]) -> int:
    """Memory pids use on their own together: private resident pages and swap. Pages a
    fork still shares with its parent are not counted (they are the parent's)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith(("Private_Clean:", "Private_Dirty:", "Swap:")):
                        total += int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
    return total


def private_bytes_bound(pids: Iterable[int]) -> int:
    """At least what private_bytes(pids) would count, read without walking their page
    tables (smaps_rollup does, holding each process's memory map while it reads: dear
    for the reader and the process alike): their resident and swapped pages as the
    kernel's counters have them (/proc/<pid>/status), each counter with the slack of
    its per-CPU counting (some kernels read it without summing the CPUs' shares)."""
    slack = _counter_slack()
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as handle:
                for line in handle:
                    if line.startswith((b"VmRSS:", b"VmSwap:")):
                        total += int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
        total += slack
    return total


@functools.cache
def _counter_slack() -> int:
    """How far below the truth the kernel's per-CPU memory counters of one process may
    read (its anonymous, file, shared memory and swap pages): each CPU may hold up to a
    batch (at least 32 pages, twice the CPUs) of each, not yet added in."""
    cpus = max(os.cpu_count() or 1, len(os.sched_getaffinity(0)))
    return 4 * cpus * max(32, 2 * cpus) * os.sysconf("SC_PAGE_SIZE")


def kill_trees(roots: Iterable[int]) -> None:
    """SIGKILL each root, its process group when it leads one, and everything below it,
    again until none is left, stopping each first so that nothing can fork faster than
    it is killed. Reaps nothing: the caller collects the status of its own children
    (and orphans that fall to it, see `children`)."""
    me = os.getpid()
    pending = [pid for pid in roots if pid != me]
    for pid in pending:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
    for _ in range(_KILL_ROUNDS):
        targets = [pid for pid in pending if _alive(pid)]
        targets += [child for pid in targets for child in descendants(pid)]
        if not targets:
            return
        for sent in (signal.SIGSTOP, signal.SIGKILL):
            for pid in targets:
                with contextlib.suppress(OSError):
                    os.kill(pid, sent)
        pending = targets


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those of pids that are our children (killed ones,
    orphans that fell to this subreaper)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@functools.cache
def libc() -> Any:
    """The C library, its errno kept (ctypes.get_errno) for the calls made through it."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)
