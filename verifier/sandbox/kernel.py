"""The Linux features commands from the case are confined with, in their own process
before exec: no_new_privs, Landlock (what they may read, write and run, and whom they
may signal), and, for a command that asks for views of its paths, a user, mount and
PID namespace of its own."""

from __future__ import annotations

import functools
import os
import signal
import stat
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from verifier.linux import die_with_parent, libc, prctl

if TYPE_CHECKING:
    from verifier.sandbox.idmap import Mapper

_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38


def forbid_new_privileges() -> None:
    """No setuid binary can raise the privileges of this process or its children."""
    prctl(_PR_SET_NO_NEW_PRIVS, 1)


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


def own_mount_namespace(as_root: bool = False, mapper: Mapper | None = None) -> None:
    """Give this process a mount namespace of its own, inside a user namespace that maps
    its own UID and GID to themselves and nothing else (no other user's files become
    its, no privilege over anything outside), with every mount private: what it mounts
    after this, only it and its children see. `as_root`: its UID and GID are 0 inside
    instead (verifier.sandbox.idmap), and `mapper`, a helper of the grader's, writes
    the maps with a range of IDs of their own beside 0. OSError when the kernel or a
    seccomp profile refuses user namespaces (docker's default profile does)."""
    import ctypes

    uid, gid = os.getuid(), os.getgid()
    # After a UID switch its /proc files are root's until it is dumpable again: it could
    # not write its own maps. It is not dumpable again before it runs anything.
    prctl(_PR_SET_DUMPABLE, 1)
    try:
        if libc().unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"unshare(CLONE_NEWUSER|CLONE_NEWNS): {os.strerror(error)}")
        if mapper is not None:
            mapper.ask()
        else:
            inside_uid, inside_gid = (0, 0) if as_root else (uid, gid)
            maps = (
                ("setgroups", "deny"),
                ("uid_map", f"{inside_uid} {uid} 1"),
                ("gid_map", f"{inside_gid} {gid} 1"),
            )
            for name, text in maps:  # raw writes: no codec to import as a user who may not
                descriptor = os.open(f"/proc/self/{name}", os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(descriptor, text.encode())
                finally:
                    os.close(descriptor)
    finally:
        prctl(_PR_SET_DUMPABLE, 0)
    _mount(None, "/", _MS_REC | _MS_PRIVATE)


def run_as_init(keep: int = -1, before_exit: Callable[[], None] | None = None) -> None:
    """Go on as PID 1 of a PID namespace of its own (call it in a process that made its
    own user namespace): when it ends, the kernel kills everything left in the
    namespace at once, so nothing it started outlives it, not even for the moment its
    end takes to be seen. The process that called this stays outside as its parent,
    holding nothing (no descriptor: a pipe's end is the child's alone; but `keep`, a
    dir's), calls `before_exit` once the namespace is empty, and ends as the child
    ended (its exit code, or the same signal)."""
    import ctypes

    if libc().unshare(_CLONE_NEWPID) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unshare(CLONE_NEWPID): {os.strerror(error)}")
    child = os.fork()
    if child == 0:
        die_with_parent()
        return
    if keep >= 0:
        os.closerange(0, keep)
        os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
    else:
        os.closerange(0, os.sysconf("SC_OPEN_MAX"))
    _, status = os.waitpid(child, 0)
    if before_exit is not None:
        before_exit()
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def bind_mount(source: str, target: str, *, read_only: bool, setuid: bool = False) -> None:
    """Mount the dir (or file) `source` at `target` (in this process's own mount
    namespace), read-only when asked (and never honouring setuid bits there, unless
    `setuid`: a setuid program's copy, owned by root of this user namespace)."""
    _mount(source, target, _MS_BIND | _MS_REC)
    if read_only:
        # The flags the mount already has stay: a user namespace may not clear them.
        kept = os.statvfs(target).f_flag
        flags = kept & _KEPT_FLAGS | (_MS_RELATIME if kept & os.ST_RELATIME else 0)
        nosuid = _MS_NOSUID if not setuid or kept & os.ST_NOSUID else 0
        _mount(None, target, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | nosuid | flags)


def _mount(source: str | None, target: str, flags: int) -> None:
    import ctypes

    encoded = None if source is None else os.fsencode(source)
    if libc().mount(encoded, os.fsencode(target), None, flags, None) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount {source or ''} on {target}: {os.strerror(error)}")


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
    RulesetAttr, PathBeneath = _landlock_structs()  # noqa: N806 (ctypes classes)
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
