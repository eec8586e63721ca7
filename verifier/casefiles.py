"""Safe reads of files in the case: the one way the verifier opens anything the agent left.

A path is resolved without following symlinks out of the case (loops do not
raise), stat'ed before it is opened (a FIFO is never opened), opened without
following a final symlink and without blocking, and read up to a cap; anything
that stops it is returned as a fact ("is a symlink loop", "is not a regular file
(a FIFO)", "is 3221225472 bytes, over the 16777216-byte cap"), never raised.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import NamedTuple

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class CaseFile(NamedTuple):
    """One file of the case: its bytes, or the fact that makes it unusable."""

    data: bytes | None
    problem: str | None  # e.g. "is a symlink loop"; None when data is there

    def text(self) -> str | None:
        """The file as text (undecodable bytes replaced), None when it could not be read."""
        return None if self.data is None else self.data.decode("utf-8", errors="replace")


def resolve_inside(case_dir: Path, relative: str) -> tuple[Path | None, str | None]:
    """(real path, None) of case_dir/relative, or (None, the fact) when it leaves the case.

    case_dir must be real (check_case_dir). Symlink loops do not raise here: they
    resolve to a path that stat then reports as a loop.
    """
    if "\0" in relative:
        return None, "is not a valid path"
    real = os.path.realpath(os.path.join(case_dir, relative))
    base = str(case_dir)
    if real != base and not real.startswith(base.rstrip("/") + "/"):
        return None, "leaves the case dir"
    return Path(real), None


def read_case_file(case_dir: Path, relative: str, max_bytes: int) -> CaseFile:
    """A regular file of the case, at most max_bytes of it, or the fact that stops it."""
    path, problem = resolve_inside(case_dir, relative)
    if path is None:
        return CaseFile(None, problem)
    problem = _file_problem(case_dir, relative, path, max_bytes)
    if problem is not None:
        return CaseFile(None, problem)
    try:
        descriptor = os.open(path, _READ_FLAGS)
    except OSError as error:
        return CaseFile(None, _os_problem(error))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # swapped since the stat
            return CaseFile(None, "is not a regular file")
        data = os.read(descriptor, max_bytes + 1)
    except OSError as error:
        return CaseFile(None, _os_problem(error))
    finally:
        os.close(descriptor)
    if len(data) > max_bytes:
        return CaseFile(None, f"is over the {max_bytes}-byte cap")
    return CaseFile(data, None)


def existence_problem(case_dir: Path, relative: str) -> str | None:
    """None when case_dir/relative exists inside the case (file, dir or other), else the fact."""
    path, problem = resolve_inside(case_dir, relative)
    if path is None:
        return problem
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ENOENT and os.path.islink(os.path.join(case_dir, relative)):
            return "is a dangling symlink"
        return _os_problem(error)
    return None


def _file_problem(case_dir: Path, relative: str, path: Path, max_bytes: int) -> str | None:
    try:
        info = os.stat(path)
    except OSError as error:
        if error.errno == errno.ENOENT and os.path.islink(os.path.join(case_dir, relative)):
            return "is a dangling symlink"
        return _os_problem(error)
    if stat.S_ISDIR(info.st_mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(info.st_mode):
        return f"is not a regular file ({kind_of(info.st_mode)})"
    if info.st_size > max_bytes:
        return f"is {info.st_size} bytes, over the {max_bytes}-byte cap"
    return None


def _os_problem(error: OSError) -> str:
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        return "does not exist"
    if error.errno == errno.ELOOP:
        return "is a symlink loop"
    return f"cannot be read ({error.strerror or error})"


_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def kind_of(mode: int) -> str:
    """What a non-regular, non-directory file is, in words."""
    return next((name for test, name in _SPECIAL_FILES if test(mode)), "not a file")
