"""Linux process primitives for keeping code from the case away from the grader.

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
import stat
from collections.abc import Callable, Iterable
from typing import Any

JUDGE_TOKEN_ENV = "VERIFIER_JUDGE_TOKEN"
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_KILL_ROUNDS = 50


def _prctl(option: int, value: int) -> None:
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
    _prctl(_PR_SET_CHILD_SUBREAPER, int(enabled))


def make_undumpable() -> None:
    """/proc/<pid>/{fd,environ,mem} of this process (and of its forks, until they exec)
    belong to root: code from the case, running as the same UID, cannot open them."""
    _prctl(_PR_SET_DUMPABLE, 0)


def forbid_new_privileges() -> None:
    """No setuid binary can raise the privileges of this process or its children."""
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    _prctl(_PR_SET_PDEATHSIG, signum)


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


# --- Landlock: what code from the case may read and write, and whom it may signal ----------

_LANDLOCK_CREATE_RULESET = 444  # the same numbers on x86_64 and aarch64
_LANDLOCK_ADD_RULE = 445
_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_RULE_PATH_BENEATH = 1
_LANDLOCK_CREATE_RULESET_VERSION = 1
_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_MAKE_AND_REMOVE = sum(1 << bit for bit in (4, 5, 6, 7, 8, 9, 10, 11, 12))  # dirs, files, ...
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE  # what a rule on a file may grant
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1  # ABI 6


_CLONE_NEWNS = 0x00020000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_RELATIME = 1 << 21
# statvfs's ST_NODEV, ST_NOEXEC, ST_NOATIME, ST_NODIRATIME: the same bits as mount's.
_KEPT_FLAGS = os.ST_NODEV | os.ST_NOEXEC | os.ST_NOATIME | os.ST_NODIRATIME


def own_mount_namespace() -> None:
    """Give this process a mount namespace of its own, inside a user namespace that maps
    its own UID and GID to themselves and nothing else (no other user's files become
    its, no privilege over anything outside), with every mount private: what it mounts
    after this, only it and its children see. OSError when the kernel or a seccomp
    profile refuses user namespaces (docker's default profile does)."""
    import ctypes

    uid, gid = os.getuid(), os.getgid()
    # After a UID switch its /proc files are root's until it is dumpable again: it could
    # not write its own maps. It is not dumpable again before it runs anything.
    _prctl(_PR_SET_DUMPABLE, 1)
    try:
        if libc().unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"unshare(CLONE_NEWUSER|CLONE_NEWNS): {os.strerror(error)}")
        maps = (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1"))
        for name, text in maps:  # raw writes: no codec to import as a user who may not
            descriptor = os.open(f"/proc/self/{name}", os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(descriptor, text.encode())
            finally:
                os.close(descriptor)
    finally:
        _prctl(_PR_SET_DUMPABLE, 0)
    _mount(None, "/", _MS_REC | _MS_PRIVATE)


def run_as_init() -> None:
    """Go on as PID 1 of a PID namespace of its own (call it in a process that made its
    own user namespace): when it ends, the kernel kills everything left in the
    namespace at once, so nothing it started outlives it, not even for the moment its
    end takes to be seen. The process that called this stays outside as its parent,
    holding nothing (no descriptor: a pipe's end is the child's alone), and ends as
    the child ended (its exit code, or the same signal)."""
    import ctypes

    if libc().unshare(_CLONE_NEWPID) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unshare(CLONE_NEWPID): {os.strerror(error)}")
    child = os.fork()
    if child == 0:
        die_with_parent()
        return
    os.closerange(0, os.sysconf("SC_OPEN_MAX"))
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def bind_mount(source: str, target: str, *, read_only: bool) -> None:
    """Mount the dir `source` at `target` (in this process's own mount namespace), read-only
    when asked (and never honouring setuid bits there)."""
    _mount(source, target, _MS_BIND | _MS_REC)
    if read_only:
        # The flags the mount already has stay: a user namespace may not clear them.
        kept = os.statvfs(target).f_flag
        flags = kept & _KEPT_FLAGS | (_MS_RELATIME if kept & os.ST_RELATIME else 0)
        _mount(None, target, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | flags)


def _mount(source: str | None, target: str, flags: int) -> None:
    import ctypes

    encoded = None if source is None else os.fsencode(source)
    if libc().mount(encoded, os.fsencode(target), None, flags, None) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount {source or ''} on {target}: {os.strerror(error)}")


@functools.cache
def libc() -> Any:
    """The C library, its errno kept (ctypes.get_errno) for the calls made through it."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is unavailable (or filtered)."""
    version = libc().syscall(_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    return max(version, 0)


@functools.cache
def _landlock_structs() -> tuple[Any, Any]:
    import ctypes

    class RulesetAttr(ctypes.Structure):
        _fields_ = (("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64))

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = (("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))

    return RulesetAttr, PathBeneath


def confine_with_landlock(
    abi: int,
    writable: Iterable[str],
    devices: str = "/dev",
    *,
    readable: Iterable[str] | None = None,
    before_restricting: Callable[[], None] | None = None,
) -> None:
    """Restrict this process (and everything it starts) with Landlock: it may write only
    beneath `writable` (and to files in `devices`, such as /dev/null); from ABI 6 on it
    may not signal, nor reach the abstract sockets of, any process outside its domain.
    With `readable`, it may also read and execute only beneath `readable` and
    `writable`: what is in neither (nor beneath a path in them) cannot be opened, listed
    or run. A readable path that is gone or cannot be opened is left out; a symlink
    needs no rule (what it points to is checked). Call it after fork, before exec, with
    no_new_privs set. `before_restricting` runs once the rules hold their dirs and
    before the process is restricted: what must happen before (mounts) but may hide the
    paths the rules were found by."""
    import ctypes

    library = libc()
    RulesetAttr, PathBeneath = _landlock_structs()
    handled = _WRITE_FILE | _MAKE_AND_REMOVE
    handled |= _REFER if abi >= 2 else 0
    handled |= _TRUNCATE if abi >= 3 else 0
    handled |= _READ if readable is not None else 0
    scoped = _SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0
    attr = RulesetAttr(handled, 0, scoped)
    size = ctypes.sizeof(attr) if abi >= 6 else 16  # older kernels know fs and net only
    ruleset = library.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")

    def add(path: str, allowed: int, *, required: bool) -> None:
        try:
            descriptor = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            if required:
                raise
            return
        try:
            mode = os.fstat(descriptor).st_mode
            if stat.S_ISLNK(mode):
                return
            if not stat.S_ISDIR(mode):
                allowed &= _FILE_RIGHTS
            rule = PathBeneath(allowed & handled, descriptor)
            if (
                library.syscall(
                    _LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0
                )
                != 0
            ):
                raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
        finally:
            os.close(descriptor)

    try:
        for path in writable:
            add(path, handled, required=True)
        add(devices, _WRITE_FILE | _TRUNCATE, required=True)
        for path in readable or ():
            add(path, _READ, required=False)
        if before_restricting is not None:
            before_restricting()
        if library.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
