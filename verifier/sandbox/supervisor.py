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

Landlock does not govern what a process of the same UID may do to another's limits and
scheduling either (prlimit, sched_setscheduler, setpriority, ioprio_set): a file size
limit of 0 set on the grader costs it the reward files. Aimed at the caller itself
those calls go through at once; aimed at a UID they are refused; aimed at another
process or group they reach the supervisor, which lets them go on only to the command's
own processes, as it does with signals where Landlock cannot scope them (ABI < 6): then
F_SETOWN, which picks who a descriptor's SIGIO goes to, is answered the same way.
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
from typing import Any, Self

import attrs

from verifier.linux import JUDGE_TOKEN_ENV, libc, token_of

_NOTIF = struct.Struct("=QIIiIQ6Q")  # struct seccomp_notif (with its seccomp_data)
_RESPONSE = struct.Struct("=QqiI")  # struct seccomp_notif_resp
_IOCTL_RECV = 0xC0502100  # SECCOMP_IOCTL_NOTIF_RECV
_IOCTL_SEND = 0xC0182101  # SECCOMP_IOCTL_NOTIF_SEND
_IOCTL_ID_VALID = 0x40082102  # SECCOMP_IOCTL_NOTIF_ID_VALID
_NOTIF_FLAG_CONTINUE = 1  # SECCOMP_USER_NOTIF_FLAG_CONTINUE: the kernel runs the call
_OPENAT2 = 437  # the same number on x86_64 and aarch64
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10
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
_BPF_JSET_K = 0x45
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


@attrs.frozen
class ArgumentRule:
    """A syscall whose fate depends on one argument, read as the kernel reads a pid_t,
    an int or an unsigned int (its low 32 bits): the action of its value in `actions`,
    else `otherwise` (None: the rules after this one decide)."""

    number: int
    argument: int
    actions: Mapping[int, int]
    otherwise: int | None = None


def seccomp_program(
    notify: Iterable[int] = (),
    refuse: Mapping[int, int] | None = None,
    compat_refuse: Mapping[int, int] | None = None,
    arguments: Sequence[ArgumentRule] = (),
    compat_arguments: Sequence[ArgumentRule] = (),
) -> bytes:
    """A classic BPF program for seccomp: the native syscalls in `notify` go to a
    user-space supervisor, those in `refuse` (number -> errno) fail with that errno, and
    so do the compat ABI's in `compat_refuse`; `arguments` (and, for the compat ABI,
    `compat_arguments`) are tried before them, in order; everything else is allowed.
    x32 calls (the native numbers with X32_SYSCALL_BIT set, some of which have numbers of
    their own) are ENOSYS, as on the kernels built without x32."""
    arch = machine_architecture()
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {os.uname().machine}")
    instruction = struct.Struct("=HBBI")
    load_number = instruction.pack(_BPF_LD_W_ABS, 0, 0, 0)  # seccomp_data.nr

    def ret(action: int) -> bytes:
        return instruction.pack(_BPF_RET_K, 0, 0, action)

    def by_argument(rules: Sequence[ArgumentRule]) -> list[bytes]:
        code = []
        for rule in rules:
            # seccomp_data.args[i], its low half (both machines are little-endian)
            body = [instruction.pack(_BPF_LD_W_ABS, 0, 0, 16 + 8 * rule.argument)]
            for value, action in rule.actions.items():
                body += [instruction.pack(_BPF_JEQ_K, 0, 1, value & 0xFFFFFFFF), ret(action)]
            body.append(load_number if rule.otherwise is None else ret(rule.otherwise))
            code += [instruction.pack(_BPF_JEQ_K, 0, len(body), rule.number), *body]
        return code

    def by_number(rules: Iterable[tuple[int, int]]) -> list[bytes]:
        code = []
        for number, action in rules:
            code += [instruction.pack(_BPF_JEQ_K, 0, 1, number), ret(action)]
        return [*code, ret(_SECCOMP_RET_ALLOW)]

    native = [
        load_number,
        instruction.pack(_BPF_JSET_K, 0, 1, X32_SYSCALL_BIT),
        ret(_SECCOMP_RET_ERRNO | errno.ENOSYS),
        *by_argument(arguments),
        *by_number(
            [(number, _SECCOMP_RET_USER_NOTIF) for number in notify]
            + [(number, _SECCOMP_RET_ERRNO | error) for number, error in (refuse or {}).items()]
        ),
    ]
    compat = [
        load_number,
        *by_argument(compat_arguments),
        *by_number(
            [
                (number, _SECCOMP_RET_ERRNO | error)
                for number, error in (compat_refuse or {}).items()
            ]
        ),
    ]
    head = [
        instruction.pack(_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        instruction.pack(_BPF_JEQ_K, 0, len(native), arch.audit_arch),
    ]
    return b"".join(head + native + compat)


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
# The compat ABI's chmod, chown, truncate and xattr family, by machine (i386 on x86_64,
# 32-bit ARM on aarch64: fchownat and fchmodat differ) and io_uring_setup.
_COMPAT_SHARED = (15, 16, 92, 94, 95, 182, 193, 198, 207, 212, 226, 227, 228, 235, 236, 237)
_COMPAT_FAMILY = {
    "x86_64": (*_COMPAT_SHARED, 298, 306, 452, 463, 466),
    "aarch64": (*_COMPAT_SHARED, 325, 333, 452, 463, 466),
}
_COMPAT_IO_URING = 425


# Calls that change another process, which Landlock governs at no ABI: its resource
# limits, scheduling, CPUs, nice and I/O priority. Aimed at the caller (0) they are
# allowed at once; setpriority and ioprio_set aimed at a whole UID (the grader's every
# process) are EPERM; any other target goes to the supervisor, which lets the call go on
# only when it reaches the command's own processes. The compat ABI's may aim at the
# caller only.
_AIMED_NUMBERS = {
    "x86_64": {
        "prlimit64": 302,
        "sched_setparam": 142,
        "sched_setscheduler": 144,
        "sched_setaffinity": 203,
        "sched_setattr": 314,
        "setpriority": 141,
        "ioprio_set": 251,
    },
    "aarch64": {
        "prlimit64": 261,
        "sched_setparam": 118,
        "sched_setscheduler": 119,
        "sched_setaffinity": 122,
        "sched_setattr": 274,
        "setpriority": 140,
        "ioprio_set": 30,
    },
}
_COMPAT_AIMED_NUMBERS = {
    "x86_64": {
        "prlimit64": 340,
        "sched_setparam": 154,
        "sched_setscheduler": 156,
        "sched_setaffinity": 241,
        "sched_setattr": 351,
        "setpriority": 97,
        "ioprio_set": 289,
    },
    "aarch64": {
        "prlimit64": 369,
        "sched_setparam": 154,
        "sched_setscheduler": 156,
        "sched_setaffinity": 241,
        "sched_setattr": 380,
        "setpriority": 97,
        "ioprio_set": 314,
    },
}
# setpriority's and ioprio_set's `which` (args[0]) for a process, a process group and a
# UID (PRIO_*, IOPRIO_WHO_*); `who` is args[1]. The others aim at the pid in args[0].
_TARGET_KINDS = {"setpriority": (0, 1, 2), "ioprio_set": (1, 2, 3)}


# Signals, where Landlock cannot scope them (ABI < 6): each is answered by whom it is
# aimed at (args[0]: kill's pid or -group, tkill's thread, tgkill's and the
# rt_*sigqueueinfo calls' process), and so is fcntl's F_SETOWN (args[2]: the process or
# -group a descriptor's SIGIO goes to). pidfd_send_signal is ENOSYS (its pidfd could be
# swapped between the check and the call; libc and programs fall back to kill); F_SETOWN_EX
# and the sockets' FIOSETOWN and SIOCSPGRP (their owner is behind a pointer the command
# could change once checked) are EPERM, and so are the compat ABI's signal calls.
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
_SIGNAL_CALLS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
_PIDFD_SEND_SIGNAL = 424
_COMPAT_SIGNALS = {
    "x86_64": (37, 238, 270, 178, 335, 424),
    "aarch64": (37, 238, 268, 178, 363, 424),
}
_FCNTL = {"x86_64": 72, "aarch64": 25}
_IOCTL = {"x86_64": 16, "aarch64": 29}
_COMPAT_FCNTL = (55, 221)  # fcntl, fcntl64 (i386 and 32-bit ARM alike)
_COMPAT_IOCTL = 54
_F_SETOWN, _F_SETOWN_EX = 8, 15
_FIOSETOWN, _SIOCSPGRP = 0x8901, 0x8902
_EPERM = _SECCOMP_RET_ERRNO | errno.EPERM


def supervised_calls(signals: bool = False) -> dict[int, Call | str]:
    """The calls a supervisor of this machine is asked about, by syscall number: the
    chmod family's Calls, the calls aimed at other processes by name, and with `signals`
    the signal calls and fcntl (its F_SETOWN) by name."""
    arch = machine_architecture()
    if arch is None:
        return {}
    calls: dict[int, Call | str] = {
        number: _CALLS[name] for name, number in _NUMBERS[arch.name].items()
    }
    calls.update({number: name for name, number in _AIMED_NUMBERS[arch.name].items()})
    if signals:
        calls.update({number: name for name, number in _SIGNAL_NUMBERS[arch.name].items()})
        calls[_FCNTL[arch.name]] = "fcntl"
    return calls


def supervised_program(signals: bool = False) -> bytes:
    """The seccomp filter of a supervised command (see the module doc); with `signals`,
    the signal calls and F_SETOWN go to the supervisor too."""
    arch = machine_architecture()
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {os.uname().machine}")
    notify = list(_NUMBERS[arch.name].values())
    refuse = dict.fromkeys(_UNSUPPORTED, errno.ENOSYS)
    compat = dict.fromkeys(_COMPAT_FAMILY[arch.name], errno.EPERM)
    compat[_COMPAT_IO_URING] = errno.ENOSYS
    arguments = _aimed_rules(_AIMED_NUMBERS[arch.name], _SECCOMP_RET_USER_NOTIF)
    compat_arguments = _aimed_rules(_COMPAT_AIMED_NUMBERS[arch.name], _EPERM)
    if signals:
        notify += _SIGNAL_NUMBERS[arch.name].values()
        refuse[_PIDFD_SEND_SIGNAL] = errno.ENOSYS
        compat.update(dict.fromkeys(_COMPAT_SIGNALS[arch.name], errno.EPERM))
        owners = {_FIOSETOWN: _EPERM, _SIOCSPGRP: _EPERM}
        arguments += [
            ArgumentRule(
                _FCNTL[arch.name], 1, {_F_SETOWN: _SECCOMP_RET_USER_NOTIF, _F_SETOWN_EX: _EPERM}
            ),
            ArgumentRule(_IOCTL[arch.name], 1, owners),
        ]
        compat_arguments += [
            *(
                ArgumentRule(number, 1, {_F_SETOWN: _EPERM, _F_SETOWN_EX: _EPERM})
                for number in _COMPAT_FCNTL
            ),
            ArgumentRule(_COMPAT_IOCTL, 1, owners),
        ]
    return seccomp_program(notify, refuse, compat, arguments, compat_arguments)


def _aimed_rules(numbers: Mapping[str, int], otherwise: int) -> list[ArgumentRule]:
    """The calls aimed at processes: allowed aimed at the caller, EPERM at a UID, else
    `otherwise`."""
    rules = []
    for name, number in numbers.items():
        kinds = _TARGET_KINDS.get(name)
        if kinds is not None:
            rules.append(ArgumentRule(number, 0, {kinds[2]: _EPERM}))
        rules.append(ArgumentRule(number, 1 if kinds else 0, {0: _SECCOMP_RET_ALLOW}, otherwise))
    return rules


class Supervisor:
    """Answers the notifications of one command's filter: its listener descriptor (the
    command never holds it), the dirs beneath which its calls are carried out, its
    session (the command's pid: it starts one) and the judge's token: a call aimed at
    other processes (and, when `signals`, a signal) reaches only a process of that
    session or one carrying the token (linux.token_of: the command's, even one that
    left its session), never the grader's."""

    def __init__(
        self,
        listener: int,
        own_dirs: Sequence[str],
        session: int,
        signals: bool = False,
        root_inside: bool = False,
        view_targets: Sequence[str] = (),
    ) -> None:
        self.listener = listener
        # The command is root of its own user namespace, which maps 0 to the grader's
        # UID and GID alone (verifier.sandbox.idmap): the IDs of its chown are those.
        self.root_inside = root_inside
        self.own_dirs = tuple(os.path.realpath(directory) for directory in own_dirs)
        self.view_targets = tuple(view_targets)
        self._view_mounts: frozenset[str] | None = None
        self.session = session
        self.token = os.environ.get(JUDGE_TOKEN_ENV)
        self.calls: Mapping[int, Call | str] = supervised_calls(signals)

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
        call = self.calls.get(number)
        proceed = False
        try:
            if isinstance(call, Call):
                error = self._carry_out(call, notification, pid, args)
            elif call is not None:
                error, proceed = self._aimed(call, args)
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

    def _aimed(self, name: str, args: list[int]) -> tuple[int, bool]:
        """(errno, whether the kernel goes on with the call) for a call aimed at other
        processes: it goes on when it reaches only the command's."""
        if name == "fcntl":  # F_SETOWN: the process, or -group, its SIGIO goes to
            return self._reaching(_signed32(args[2]))
        if name in _TARGET_KINDS:  # setpriority, ioprio_set: which, who
            process, group, _ = _TARGET_KINDS[name]
            which, who = _signed32(args[0]), _signed32(args[1])
            if who > 0 and which == process:
                return self._reaching(who)
            if who > 0 and which == group:
                return self._reaching(-who)
            return 0, True  # no process (a UID never gets here): the kernel answers
        if name in _SIGNAL_CALLS:
            return self._signal(name, args)
        pid = _signed32(args[0])  # prlimit64, sched_*: a pid (or a thread's id)
        return self._reaching(pid) if pid > 0 else (0, True)  # < 0 names nothing

    def _signal(self, name: str, args: list[int]) -> tuple[int, bool]:
        """A signal aimed only at processes of the command goes on (kill of one process
        is sent from here, through a pidfd that pins it between the check and the
        signal); any other is EPERM."""
        target, signum = _signed32(args[0]), args[1] & 0xFFFFFFFF
        if name == "kill" and target > 0:
            return self._kill(target, signum), False
        if name == "kill" and target == -1:  # every process it may signal: the grader's too
            return errno.EPERM, False
        if name == "kill":  # its own process group (0, in its own session), or -group
            return self._reaching(target)
        if target <= 0:
            return errno.EINVAL, False
        return self._reaching(target)

    def _reaching(self, target: int) -> tuple[int, bool]:
        """A call aimed at a process (target > 0), a process group (-target), or the
        caller's own group (0): it goes on when they are all the command's."""
        if target == 0:
            return 0, True
        if target > 0:
            return (0, True) if self._ours(target) else (errno.EPERM, False)
        members = _group_members(-target)
        if not members:
            return errno.ESRCH, False
        return (0, True) if all(map(self._ours, members)) else (errno.EPERM, False)

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
            owner, group = rest[0] & 0xFFFFFFFF, rest[1] & 0xFFFFFFFF
            if self.root_inside:
                owner, group = _outside(owner, os.getuid()), _outside(group, os.getgid())
            return owner, group
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
        if any(where == own or where.startswith(own + "/") for own in self.own_dirs):
            return True
        return self._on_a_view(obj)

    def _on_a_view(self, obj: int) -> bool:
        """Whether the pinned object lies on one of the command's writable views (a bind
        mount of one of its own dirs, in its mount namespace: an object on it is
        beneath that dir, the mount's root, whatever path it is shown at)."""
        if not self.view_targets:
            return False
        if self._view_mounts is None:
            self._view_mounts = _mount_ids(self.session, self.view_targets)
        with open(f"/proc/self/fdinfo/{obj}", encoding="ascii") as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
        return fields.get("mnt_id", "").strip() in self._view_mounts


def _mount_ids(pid: int, targets: Sequence[str]) -> frozenset[str]:
    """The IDs of the mounts at `targets` in the mount namespace of process `pid`."""
    ids = set()
    with open(f"/proc/{pid}/mountinfo", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.split()
            if len(fields) > 4 and fields[4].replace("\\040", " ") in targets:
                ids.add(fields[0])
    return frozenset(ids)


class _Target:
    """The calling task, seen through /proc: its memory, cwd, descriptors and root."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.mem: int | None = None

    def __enter__(self) -> Self:
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
        if path.startswith(b"/"):
            if not self._shares_our_root():
                raise OSError(errno.EPERM, "the task changed its root")
            # From the task's root, in its mount namespace (a command with views sees
            # its own dirs at /app, /etc, ...), symlinks' absolute targets there too.
            base = os.open(f"/proc/{self.pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                return _openat2(base, path.lstrip(b"/") or b".", follow, in_root=True), rest
            finally:
                os.close(base)
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


def _openat2(base: int, path: bytes, follow: bool, *, in_root: bool = False) -> int:
    """openat2(base, path, O_PATH, RESOLVE_NO_MAGICLINKS): /proc/<pid>/fd and the like
    would resolve in the supervisor's own /proc, so they are refused (ELOOP); `in_root`:
    `base` is the task's root (RESOLVE_IN_ROOT: `..` and absolute symlinks stay in it)."""
    import ctypes

    flags = os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    resolve = _RESOLVE_NO_MAGICLINKS | (_RESOLVE_IN_ROOT if in_root else 0)
    how = struct.pack("=QQQ", flags, 0, resolve)
    descriptor = libc().syscall(_OPENAT2, base, path, how, len(how))
    if descriptor < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return int(descriptor)


def _outside(inside: int, own: int) -> int:
    """An ID of a chown made as root of a user namespace mapping 0 to `own` alone, as
    the grader's namespace knows it; EINVAL for an ID the namespace does not map (as
    the kernel answers); -1 (leave it) as it is."""
    if inside == 0xFFFFFFFF:
        return inside
    if inside != 0:
        raise OSError(errno.EINVAL, "an ID its user namespace does not map")
    return own


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
            # opened without blocking: truncate(2) would wait out a lease the command
            # holds on the file (lease-break-time, 45 s), and the judge's loop with it
            descriptor = os.open(through, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                os.ftruncate(descriptor, operands[0])
            finally:
                os.close(descriptor)
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
