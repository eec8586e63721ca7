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

import attrs

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@attrs.frozen
class CaseFile:
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
    if _absent(case_dir, relative):  # the common miss, without resolving the path
        return CaseFile(None, "does not exist")
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


def _absent(case_dir: Path, relative: str) -> bool:
    """Nothing at all at a plain relative path (not even a dangling link): nothing to
    resolve. A path with '..' or an absolute one is resolved, to say where it leads."""
    if relative.startswith("/") or ".." in relative.split("/"):
        return False
    try:
        os.lstat(os.path.join(case_dir, relative))
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    return False


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


@attrs.frozen
class CaseEntry:
    path: str  # relative to the case dir, POSIX
    kind: str  # "file", "dir", "symlink" or what kind_of says ("a FIFO", ...)


@attrs.frozen
class CaseListing:
    """Every entry under a directory of the case, or the fact that stopped the listing."""

    entries: tuple[CaseEntry, ...]
    problem: str | None  # None: the listing is complete

    def files(self) -> dict[str, str]:
        """Each entry that is not a directory, by path: what it is."""
        return {entry.path: entry.kind for entry in self.entries if entry.kind != "dir"}


def list_case(
    case_dir: Path, start: str = "", max_entries: int = 200_000, max_depth: int = 64
) -> CaseListing:
    """Every entry under case_dir/start, sorted by path, symlinks listed and never
    followed. A listing that hits a cap or cannot read a dir says so in `problem`: a
    caller that must see everything (a guard) then fails rather than guess."""
    root = os.path.normpath(os.path.join(case_dir, start))
    if os.path.realpath(root) != root:  # a symlink on the way: nothing under it is listed
        return CaseListing((), None)
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            return CaseListing((), None)
    except OSError as error:
        missing = error.errno in (errno.ENOENT, errno.ENOTDIR)
        return CaseListing((), None if missing else f"{start}: {_os_problem(error)}")
    entries: list[CaseEntry] = []
    stack = [(root, start, 0)]
    while stack:
        directory, prefix, depth = stack.pop()
        try:
            with os.scandir(directory) as listing:
                children = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            return CaseListing(tuple(entries), f"{prefix or '.'}: {_os_problem(error)}")
        for child in children:
            relative = f"{prefix}/{child.name}" if prefix else child.name
            if len(entries) >= max_entries:
                return CaseListing(tuple(entries), f"more than {max_entries} entries")
            try:
                mode = child.stat(follow_symlinks=False).st_mode
            except OSError as error:
                return CaseListing(tuple(entries), f"{relative}: {_os_problem(error)}")
            if stat.S_ISDIR(mode):
                if depth + 1 >= max_depth:
                    return CaseListing(tuple(entries), f"{relative}: deeper than {max_depth}")
                entries.append(CaseEntry(relative, "dir"))
                stack.append((child.path, relative, depth + 1))
            elif stat.S_ISLNK(mode):
                entries.append(CaseEntry(relative, "symlink"))
            elif stat.S_ISREG(mode):
                entries.append(CaseEntry(relative, "file"))
            else:
                entries.append(CaseEntry(relative, kind_of(mode)))
    return CaseListing(tuple(sorted(entries, key=lambda entry: entry.path)), None)
