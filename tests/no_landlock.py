"""Run a command as on a kernel without Landlock: `python no_landlock.py COMMAND...`.

Installs a seccomp filter under which landlock_create_ruleset, landlock_add_rule and
landlock_restrict_self fail with ENOSYS (what a kernel without Landlock answers),
checks that it holds, and execs COMMAND. Standalone (the standard library only, none
of the verifier's code), so that it tests the verifier rather than sharing its bugs.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

_ARCHES = {"x86_64": (0xC000003E, 317), "aarch64": (0xC00000B7, 277)}  # audit arch, seccomp
_LANDLOCK = (444, 445, 446)
_PR_SET_NO_NEW_PRIVS = 38
_LD_W_ABS, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000


def without_landlock() -> None:
    arch, seccomp = _ARCHES[os.uname().machine]
    op = struct.Struct("=HBBI").pack
    program = b"".join(
        [
            op(_LD_W_ABS, 0, 0, 4),  # 0: arch
            op(_JEQ_K, 0, 6, arch),  # 1: another ABI: allow (8)
            op(_LD_W_ABS, 0, 0, 0),  # 2: nr
            op(_JEQ_K, 3, 0, _LANDLOCK[0]),  # 3: -> 7
            op(_JEQ_K, 2, 0, _LANDLOCK[1]),  # 4: -> 7
            op(_JEQ_K, 1, 0, _LANDLOCK[2]),  # 5: -> 7
            op(_RET_K, 0, 0, _ALLOW),  # 6
            op(_RET_K, 0, 0, _ERRNO | errno.ENOSYS),  # 7
            op(_RET_K, 0, 0, _ALLOW),  # 8
        ]
    )

    class Program(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_char_p))

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = Program(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    if libc.syscall(seccomp, 1, 0, ctypes.byref(fprog)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER)")
    if libc.syscall(_LANDLOCK[0], None, 0, 1) != -1 or ctypes.get_errno() != errno.ENOSYS:
        raise SystemExit("no_landlock: Landlock still answers")


if __name__ == "__main__":
    without_landlock()
    os.execvp(sys.argv[1], sys.argv[1:])  # noqa: S606 (the command it wraps, as given)
