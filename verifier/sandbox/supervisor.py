"""A supervisor for the syscalls Landlock does not govern: a command that runs as the
grader's own UID may change modes, owners, ACLs and sizes only beneath its own dirs.

Landlock decides what a command may read and write, but not who may chmod, chown,
setfacl or truncate(2) a file its UID owns: as the grader's UID a command could
`chmod 000` the out dir (the reward is lost) or a sibling case of a batch. A seccomp
filter sends those syscalls here (seccomp user notification); the supervisor reads
the call's arguments from the command's memory, resolves its path the way the
command would (its cwd, its descriptors), and performs the call itself when the
object lies beneath one of the command's writable dirs, else answers EPERM. It never
lets the kernel run the call (SECCOMP_USER_NOTIF_FLAG_CONTINUE would re-read
arguments the command can still change), so what it checked is what it does.

This is sound because the object is pinned by a descriptor before it is checked,
Landlock keeps anything from outside the command's dirs from being linked, renamed
or mounted into them, and the kernel refuses the command a supervisor of its own in
front of this one (one listener per filter chain: EBUSY). Newer variants whose
arguments are structs (fchmodat2, setxattrat, removexattrat) answer ENOSYS, which
libc handles by falling back to the calls above; io_uring, which would bypass
seccomp altogether, is refused, and so are the compat ABI's calls of the family
(32-bit programs: EPERM).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import re
import stat
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from verifier.processes import JUDGE_TOKEN_ENV, libc, token_of

_NOTIF = struct.Struct("=QIIiIQ6Q")  # struct seccomp_notif (with its seccomp_data)
_RESPONSE = struct.Struct("=QqiI")  # struct seccomp_notif_resp
_IOCTL_RECV = 0xC0502100  # SECCOMP_IOCTL_NOTIF_RECV
_IOCTL_SEND = 0xC0182101  # SECCOMP_IOCTL_NOTIF_SEND
_IOCTL_ID_VALID = 0x40082102  # SECCOMP_IOCTL_NOTIF_ID_VALID
_NOTIF_FLAG_CONTINUE = 1  # SECCOMP_USER_NOTIF_FLAG_CONTINUE: the kernel runs the call
_OPENAT2 = 437  # the same number on x86_64 and aarch64
_RESOLVE_NO_MAGICLINKS = 0x02
_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_AT_EMPTY_PATH = 0x1000
_PATH_MAX = 4096
_XATTR_NAME_MAX = 255
_XATTR_SIZE_MAX = 65536
_PROC_FD = re.compile(r"/proc/(?:self|thread-self|(\d+))(?:/task/\d+)?/fd/(\d+)")


# --- seccomp: syscalls a supervisor answers, and syscalls refused outright ----------------

_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_USER_NOTIF = 0x7FC00000
_SECCOMP_RET_ERRNO = 0x00050000
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_AND_K = 0x54
_BPF_RET_K = 0x06
X32_SYSCALL_BIT = 0x40000000


@attrs.frozen
class Architecture:
    """This machine's syscall ABI: its audit arch, and that of the compat ABI its
    programs may also call (32-bit x86 through int 0x80, 32-bit ARM)."""

    name: str
    audit_arch: int
    compat_arch: int
    seccomp: int  # the seccomp syscall's number


ARCHITECTURES = {
    "x86_64": Architecture("x86_64", 0xC000003E, 0x40000003, 317),
    "aarch64": Architecture("aarch64", 0xC00000B7, 0x40000028, 277),
}


@functools.cache
def machine_architecture() -> Architecture | None:
    """The syscall ABI seccomp filters are written for; None on other machines."""
    return ARCHITECTURES.get(os.uname().machine)


def seccomp_program(
    notify: Iterable[int] = (),
    refuse: Mapping[int, int] | None = None,
    compat_refuse: Mapping[int, int] | None = None,
) -> bytes:
    """A classic BPF program for seccomp: the native syscalls in `notify` go to a
    user-space supervisor, those in `refuse` (number -> errno) fail with that errno, and
    so do the compat ABI's in `compat_refuse`; everything else is allowed. x32 calls (the
    native numbers with X32_SYSCALL_BIT set) are treated as the native ones."""
    arch = machine_architecture()
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {os.uname().machine}")
    instruction = struct.Struct("=HBBI")

    def checks(rules: Iterable[tuple[int, int]]) -> list[bytes]:
        code = []
        for number, action in rules:
            code.append(instruction.pack(_BPF_JEQ_K, 0, 1, number))
            code.append(instruction.pack(_BPF_RET_K, 0, 0, action))
        code.append(instruction.pack(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW))
        return code

    native = checks(
        [(number, _SECCOMP_RET_USER_NOTIF) for number in notify]
        + [(number, _SECCOMP_RET_ERRNO | error) for number, error in (refuse or {}).items()]
    )
    compat = checks(
        [(number, _SECCOMP_RET_ERRNO | error) for number, error in (compat_refuse or {}).items()]
    )
    head = [
        instruction.pack(_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        instruction.pack(_BPF_JEQ_K, 0, 2 + len(native), arch.audit_arch),
        instruction.pack(_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        instruction.pack(_BPF_AND_K, 0, 0, ~X32_SYSCALL_BIT & 0xFFFFFFFF),
    ]
    tail = [instruction.pack(_BPF_LD_W_ABS, 0, 0, 0)]
    return b"".join(head + native + tail + compat)


def install_seccomp(program: bytes, *, listener: bool = False) -> int:
    """Install a seccomp filter on this process and everything it starts (no_new_privs
    must be set); with `listener`, the descriptor its supervisor reads notifications
    from (else 0). OSError when the kernel refuses."""
    import ctypes

    arch = machine_architecture()
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {os.uname().machine}")

    class SockFprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_char_p))

    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    flags = _SECCOMP_FILTER_FLAG_NEW_LISTENER if listener else 0
    result = libc().syscall(arch.seccomp, _SECCOMP_SET_MODE_FILTER, flags, ctypes.byref(fprog))
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"seccomp: {os.strerror(error)}")
    return int(result) if listener else 0


# --- the supervisor ---------------------------------------------------------------------


@attrs.frozen
class Call:
    """What a supervised syscall does, and where its arguments are."""

    name: str
    operation: str  # chmod, chown, truncate, setxattr, removexattr
    target: str  # "path" (args[0]), "at" (dirfd args[0], path args[1]) or "fd" (args[0])
    follow: bool = True  # a symlink at the end of the path is followed


_CALLS = {
    call.name: call
    for call in (
        Call("chmod", "chmod", "path"),
        Call("fchmod", "chmod", "fd"),
        Call("fchmodat", "chmod", "at"),
        Call("chown", "chown", "path"),
        Call("fchown", "chown", "fd"),
        Call("lchown", "chown", "path", follow=False),
        Call("fchownat", "chown", "at"),
        Call("truncate", "truncate", "path"),
        Call("setxattr", "setxattr", "path"),
        Call("lsetxattr", "setxattr", "path", follow=False),
        Call("fsetxattr", "setxattr", "fd"),
        Call("removexattr", "removexattr", "path"),
        Call("lremovexattr", "removexattr", "path", follow=False),
        Call("fremovexattr", "removexattr", "fd"),
    )
}
# Their numbers, by machine (aarch64 has only the *at variants of chmod and chown).
_NUMBERS = {
    "x86_64": {
        "chmod": 90,
        "fchmod": 91,
        "fchmodat": 268,
        "chown": 92,
        "fchown": 93,
        "lchown": 94,
        "fchownat": 260,
        "truncate": 76,
        "setxattr": 188,
        "lsetxattr": 189,
        "fsetxattr": 190,
        "removexattr": 197,
        "lremovexattr": 198,
        "fremovexattr": 199,
    },
    "aarch64": {
        "fchmod": 52,
        "fchmodat": 53,
        "fchownat": 54,
        "fchown": 55,
        "truncate": 45,
        "setxattr": 5,
        "lsetxattr": 6,
        "fsetxattr": 7,
        "removexattr": 14,
        "lremovexattr": 15,
        "fremovexattr": 16,
    },
}
# Answered ENOSYS: fchmodat2, setxattrat, removexattrat (struct arguments; libc falls
# back), io_uring_setup (its operations never pass through seccomp).
_UNSUPPORTED = (452, 463, 466, 425)
# The compat ABI's chmod, chown, truncate and xattr family (i386 and 32-bit ARM share most
# numbers; fchownat and fchmodat differ) and io_uring_setup.
_COMPAT_FAMILY = (
    15,
    16,
    92,
    94,
    95,
    182,
    193,
    198,
    207,
    212,
    226,
    227,
    228,
    235,
    236,
    237,
    298,
    306,
    325,
    333,
    452,
    463,
    466,
)
_COMPAT_IO_URING = 425


# Signals, where Landlock cannot scope them (ABI < 6): each is answered by whom it is
# aimed at (args[0]: kill's pid or -group, tkill's thread, tgkill's and the
# rt_*sigqueueinfo calls' process). pidfd_send_signal is ENOSYS (its pidfd could be
# swapped between the check and the call; libc and programs fall back to kill), and so
# are the compat ABI's signal calls (EPERM: 32-bit x86 and ARM numbers together).
_SIGNAL_NUMBERS = {
    "x86_64": {
        "kill": 62,
        "tkill": 200,
        "tgkill": 234,
        "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297,
    },
    "aarch64": {
        "kill": 129,
        "tkill": 130,
        "tgkill": 131,
        "rt_sigqueueinfo": 138,
        "rt_tgsigqueueinfo": 240,
    },
}
_PIDFD_SEND_SIGNAL = 424
_COMPAT_SIGNALS = (37, 238, 270, 268, 178, 335, 363, 424)


def supervised_calls(signals: bool = False) -> dict[int, Call | str]:
    """The supervised calls of this machine, by syscall number: the chmod family's
    Calls, and with `signals` the signal calls by name."""
    arch = machine_architecture()
    numbers = _NUMBERS[arch.name] if arch is not None else {}
    calls: dict[int, Call | str] = {number: _CALLS[name] for name, number in numbers.items()}
    if signals and arch is not None:
        calls.update({number: name for name, number in _SIGNAL_NUMBERS[arch.name].items()})
    return calls


def supervised_program(signals: bool = False) -> bytes:
    """The seccomp filter of a supervised command (see the module doc); with `signals`,
    the signal calls go to the supervisor too."""
    calls = supervised_calls(signals)
    compat = dict.fromkeys(_COMPAT_FAMILY, errno.EPERM)
    compat[_COMPAT_IO_URING] = errno.ENOSYS
    refuse = dict.fromkeys(_UNSUPPORTED, errno.ENOSYS)
    if signals:
        refuse[_PIDFD_SEND_SIGNAL] = errno.ENOSYS
        compat.update(dict.fromkeys(_COMPAT_SIGNALS, errno.EPERM))
    return seccomp_program(notify=calls, refuse=refuse, compat_refuse=compat)


class Supervisor:
    """Answers the notifications of one command's filter: its listener descriptor (the
    command never holds it), the dirs beneath which its calls are carried out, and,
    when its signals are supervised, its session (the command's pid: it starts one)
    and the judge's token: a signal reaches only a process of that session or one
    carrying the token (processes.token_of: the command's, even one that left its
    session), never the grader's."""

    def __init__(self, listener: int, own_dirs: Sequence[str], session: int | None = None) -> None:
        self.listener = listener
        self.own_dirs = tuple(os.path.realpath(directory) for directory in own_dirs)
        self.session = session
        self.token = os.environ.get(JUDGE_TOKEN_ENV)
        self.calls: Mapping[int, Call | str] = supervised_calls(signals=session is not None)

    def fileno(self) -> int:
        return self.listener

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.listener)

    def serve(self) -> None:
        """Answer one pending notification (none, when its caller is already gone)."""
        buffer = bytearray(_NOTIF.size)
        try:
            fcntl.ioctl(self.listener, _IOCTL_RECV, buffer, True)
        except OSError:
            return
        notification, pid, _flags, number, _arch, _ip, *args = _NOTIF.unpack(buffer)
        call = self.calls.get(number & ~X32_SYSCALL_BIT)
        proceed = False
        try:
            if isinstance(call, Call):
                error = self._carry_out(call, notification, pid, args)
            elif call is not None:
                error, proceed = self._signal(call, args)
            else:
                error = errno.ENOSYS
        except OSError as failure:
            error = failure.errno or errno.EPERM
        except Exception:  # whatever the command passed, it gets an answer, never a hang
            error = errno.EPERM
        flags = _NOTIF_FLAG_CONTINUE if proceed else 0
        with contextlib.suppress(OSError):
            response = _RESPONSE.pack(notification, 0, -error if error else 0, flags)
            fcntl.ioctl(self.listener, _IOCTL_SEND, response)

    def _signal(self, name: str, args: list[int]) -> tuple[int, bool]:
        """(errno, whether the kernel goes on with the call): a signal aimed only at
        processes of the command goes on (kill of one process is sent from here, through
        a pidfd that pins it between the check and the signal); any other is EPERM."""
        target, signum = _signed32(args[0]), args[1] & 0xFFFFFFFF
        if name == "kill" and target > 0:
            return self._kill(target, signum), False
        if name == "kill" and target == 0:  # its own process group, in its own session
            return 0, True
        if name == "kill" and target == -1:  # every process it may signal: the grader's too
            return errno.EPERM, False
        if name == "kill":
            members = _group_members(-target)
            if not members:
                return errno.ESRCH, False
            return (0, True) if all(map(self._ours, members)) else (errno.EPERM, False)
        if target <= 0:
            return errno.EINVAL, False
        return (0, True) if self._ours(target) else (errno.EPERM, False)

    def _kill(self, pid: int, signum: int) -> int:
        import signal

        try:
            pidfd = os.pidfd_open(pid)
        except OSError as error:
            return error.errno or errno.ESRCH
        try:
            if not self._ours(pid):
                return errno.EPERM
            signal.pidfd_send_signal(pidfd, signum)  # ESRCH when it ended meanwhile
        except OSError as error:
            return error.errno or errno.EPERM
        finally:
            os.close(pidfd)
        return 0

    def _ours(self, pid: int) -> bool:
        """Whether pid is a process (or thread) of the command: of its session, or
        carrying the judge's token in its initial environment."""
        if _session_of(pid) == self.session:
            return True
        return self.token is not None and token_of(pid) == self.token

    def _carry_out(self, call: Call, notification: int, pid: int, args: list[int]) -> int:
        with _Target(pid) as target:
            obj, rest = target.resolve(call, args)
            try:
                operands = self._operands(call, target, rest)
                if not _still_valid(self.listener, notification):
                    return errno.ESRCH
                if not self._beneath_own_dirs(obj):
                    return errno.EPERM
                return _perform(call, obj, operands)
            finally:
                os.close(obj)

    def _operands(self, call: Call, target: _Target, rest: list[int]) -> tuple[Any, ...]:
        if call.operation == "chmod":
            return (rest[0] & 0o7777,)
        if call.operation == "chown":
            return rest[0] & 0xFFFFFFFF, rest[1] & 0xFFFFFFFF
        if call.operation == "truncate":
            length = _signed64(rest[0])
            if length < 0:
                raise OSError(errno.EINVAL, "negative length")
            return (length,)
        name = target.string(rest[0], _XATTR_NAME_MAX + 1).decode("utf-8", "surrogateescape")
        if call.operation == "removexattr":
            return (name,)
        size = rest[2]
        if size > _XATTR_SIZE_MAX:
            raise OSError(errno.E2BIG, "xattr value too big")
        value = target.memory(rest[1], size) if size else b""
        return name, value, rest[3] & 0xFFFFFFFF

    def _beneath_own_dirs(self, obj: int) -> bool:
        """Where the pinned object is now: beneath one of the command's writable dirs."""
        where = os.readlink(f"/proc/self/fd/{obj}")
        if not where.startswith("/") or where.endswith(" (deleted)"):
            return False
        return any(where == own or where.startswith(own + "/") for own in self.own_dirs)


class _Target:
    """The calling task, seen through /proc: its memory, cwd, descriptors and root."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.mem: int | None = None

    def __enter__(self) -> _Target:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.mem is not None:
            os.close(self.mem)

    def memory(self, address: int, size: int) -> bytes:
        if address == 0:
            raise OSError(errno.EFAULT, "NULL")
        if self.mem is None:
            self.mem = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        data = os.pread(self.mem, size, address)
        if len(data) != size:
            raise OSError(errno.EFAULT, "short read")
        return data

    def string(self, address: int, limit: int) -> bytes:
        """A NUL-terminated string of at most limit bytes (its terminator included),
        read page by page so that one ending before an unmapped page is still read."""
        if address == 0:
            raise OSError(errno.EFAULT, "NULL")
        if self.mem is None:
            self.mem = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        data = b""
        while len(data) < limit:
            at = address + len(data)
            chunk = os.pread(self.mem, min(4096 - at % 4096, limit - len(data)), at)
            if not chunk:
                raise OSError(errno.EFAULT, "unreadable")
            end = chunk.find(b"\0")
            if end >= 0:
                return data + chunk[:end]
            data += chunk
        raise OSError(errno.ENAMETOOLONG, "path too long")

    def resolve(self, call: Call, args: list[int]) -> tuple[int, list[int]]:
        """An O_PATH descriptor of the object the call names, as the task resolves it
        (ENOENT, ELOOP, ... when it names none), and the call's other arguments."""
        if call.target == "fd":
            return self._descriptor(_signed32(args[0])), args[1:]
        if call.target == "path":
            dirfd, address, rest, flags = _AT_FDCWD, args[0], args[1:], 0
        else:
            dirfd, address, rest = _signed32(args[0]), args[1], args[2:]
            flags = args[4] if call.operation == "chown" else 0
        follow = call.follow and not flags & _AT_SYMLINK_NOFOLLOW
        path = self.string(address, _PATH_MAX)
        if not path:
            if not flags & _AT_EMPTY_PATH:
                raise OSError(errno.ENOENT, "empty path")
            return self._descriptor(dirfd), rest
        match = _PROC_FD.fullmatch(path.decode("utf-8", "surrogateescape"))
        if match is not None and match.group(1) in (None, str(self._tgid())):
            return self._descriptor(int(match.group(2))), rest  # libc's own fallback
        if path.startswith(b"/") and not self._shares_our_root():
            raise OSError(errno.EPERM, "the task changed its root")
        base = self._directory(dirfd)
        try:
            return _openat2(base, path, follow), rest
        finally:
            os.close(base)

    def _descriptor(self, fd: int) -> int:
        if fd < 0:
            raise OSError(errno.EBADF, "bad descriptor")
        return os.open(f"/proc/{self.pid}/fd/{fd}", os.O_PATH | os.O_CLOEXEC)

    def _directory(self, dirfd: int) -> int:
        if dirfd == _AT_FDCWD:
            return os.open(f"/proc/{self.pid}/cwd", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        return self._descriptor(dirfd)

    def _shares_our_root(self) -> bool:
        theirs, ours = os.stat(f"/proc/{self.pid}/root"), os.stat("/")
        return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)

    def _tgid(self) -> int:
        with open(f"/proc/{self.pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
        return self.pid


def _openat2(base: int, path: bytes, follow: bool) -> int:
    """openat2(base, path, O_PATH, RESOLVE_NO_MAGICLINKS): /proc/<pid>/fd and the like
    would resolve in the supervisor's own /proc, so they are refused (ELOOP)."""
    import ctypes

    flags = os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    how = struct.pack("=QQQ", flags, 0, _RESOLVE_NO_MAGICLINKS)
    descriptor = libc().syscall(_OPENAT2, base, path, how, len(how))
    if descriptor < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return int(descriptor)


def _perform(call: Call, obj: int, operands: tuple[Any, ...]) -> int:
    """The call, on the pinned object; 0 or the errno it failed with."""
    import ctypes

    through = f"/proc/self/fd/{obj}"
    is_link = stat.S_ISLNK(os.fstat(obj).st_mode)
    try:
        if call.operation == "chmod":
            if is_link:
                return errno.EOPNOTSUPP
            os.chmod(through, operands[0])
        elif call.operation == "chown":
            if _fchownat()(obj, b"", operands[0], operands[1], _AT_EMPTY_PATH) != 0:
                return ctypes.get_errno()
        elif call.operation == "truncate":
            os.truncate(through, operands[0])
        elif is_link:  # user xattrs on symlinks are refused; others need privileges
            return errno.EPERM
        elif call.operation == "setxattr":
            os.setxattr(through, operands[0], operands[1], operands[2])
        else:
            os.removexattr(through, operands[0])
    except OSError as error:
        return error.errno or errno.EPERM
    return 0


def _session_of(pid: int) -> int | None:
    """The session of a process or thread (/proc/<pid>/stat), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[3])  # state, ppid, pgrp, session
    except (OSError, IndexError, ValueError):
        return None


def _group_members(group: int) -> list[int]:
    """The processes of a process group."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(group).encode():
            members.append(int(entry))
    return members


def _still_valid(listener: int, notification: int) -> bool:
    """The caller still waits on this notification: the pid read through /proc was its."""
    try:
        fcntl.ioctl(listener, _IOCTL_ID_VALID, struct.pack("=Q", notification))
    except OSError:
        return False
    return True


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@functools.cache
def _fchownat() -> Any:
    """libc's fchownat, with the owner and group passed as the unsigned ints they are."""
    import ctypes

    function = libc().fchownat
    function.argtypes = (
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint32,
        ctypes.c_uint32,
        ctypes.c_int,
    )
    return function
