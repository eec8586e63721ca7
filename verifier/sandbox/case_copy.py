"""The private copy of the case a command runs in: bounded, sparse files kept sparse.

Every command gets its own copy, whoever the grader is: its writes reach no other
judge, and a read-only case (a non-root grader over a read-only volume) still lets
its tests write their report. What the agent left decides how big the copy is, so
its size is a fact about the case, never the grader's problem: only data extents
are copied (a 900 MiB file of holes costs nothing), and the bytes written are counted
against a cap and against the free space of the filesystem the copy is on (re-read as
the copy grows, so that copies side by side cannot together fill it), and on a tmpfs
against the memory the cgroup may still use. Past either, the copy stops with
CaseCopyError, which the command's judge reports as its failure.

Directories, regular files (mode and times kept, setuid bits dropped) and symlinks
(as links) are copied; FIFOs, sockets and devices are left out. The walk holds a
descriptor per level (no path grows past PATH_MAX, nothing is followed), to a depth
cap.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from collections.abc import Collection, Iterator
from typing import Any

from verifier.system import cgroup_memory_headroom

MAX_COPY_BYTES = 4 * 1024**3  # data of a case copied for one command
MAX_COPY_ENTRIES = 1_000_000  # files, dirs and links
MAX_COPY_DEPTH = 128  # levels of dirs
MARGIN_BYTES = 64 * 1024**2  # left free on the copy's filesystem (at most an eighth of it)
MARGIN_INODES = 1024
_RECHECK_BYTES = 32 * 1024**2  # free space is read again after this much is written
_CHUNK = 1024**2
_TMPFS_MAGIC = 0x01021994
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class CaseCopyError(Exception):
    """The case cannot be copied for the command: a fact about the case."""


def copy_case(
    case_dir: str,
    target: str,
    owner: int | None = None,
    leave_out: Collection[tuple[int, int]] = (),
    *,
    skip_unreadable: bool = False,
) -> None:
    """Copy case_dir to target (which must not exist), every entry owned by `owner` when
    given (the grader is root), the entries whose (st_dev, st_ino) are in `leave_out`
    left out (the grader's own dirs, should one lie inside the case). CaseCopyError
    when the case is over the budget, too deep, or cannot be read (`skip_unreadable`,
    for a dir of the image copied for a command: a file or dir the grader cannot read
    is left out instead, and a dir of another filesystem, a mount, is copied empty);
    OSError when the copy's own filesystem fails."""
    budget = _Budget(os.path.dirname(target) or ".")
    source = os.open(case_dir, _DIR_FLAGS)
    try:
        info = os.fstat(source)
        os.mkdir(target, 0o700)
        destination = os.open(target, _DIR_FLAGS)
    except BaseException:
        os.close(source)
        raise
    _walk(source, destination, info, budget, owner, frozenset(leave_out), skip=skip_unreadable)


def _walk(
    source: int,
    destination: int,
    info: os.stat_result,
    budget: _Budget,
    owner: int | None,
    leave_out: frozenset[tuple[int, int]],
    *,
    skip: bool = False,
) -> None:
    """Depth first, one (source, destination) pair of descriptors per level open."""
    stack = [(source, destination, info, _entries(source, ""))]
    try:
        while stack:
            src, dst, dir_info, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                _finish_dir(dst, dir_info, owner)
                os.close(src)
                os.close(dst)
                continue
            name, entry_info = entry
            if (entry_info.st_dev, entry_info.st_ino) in leave_out:
                continue
            budget.take_entry()
            if skip and stat.S_ISDIR(entry_info.st_mode) and entry_info.st_dev != info.st_dev:
                os.mkdir(name, 0o755, dir_fd=dst)  # a mount: its point alone
                if owner is not None:
                    os.chown(name, owner, owner, dir_fd=dst)
                continue
            if stat.S_ISDIR(entry_info.st_mode):
                if len(stack) >= MAX_COPY_DEPTH:
                    raise CaseCopyError(f"the case is nested deeper than {MAX_COPY_DEPTH} levels")
                try:
                    child_src, child_dst = _open_dir_pair(src, dst, name)
                except CaseCopyError:
                    if skip:
                        continue
                    raise
                stack.append((child_src, child_dst, entry_info, _entries(child_src, name)))
            elif stat.S_ISREG(entry_info.st_mode):
                try:
                    _copy_file(src, dst, name, entry_info, budget, owner)
                except CaseCopyError:
                    if not skip or not _unreadable(src, name):
                        raise
            elif stat.S_ISLNK(entry_info.st_mode):
                _copy_link(src, dst, name, entry_info, owner)
    finally:
        for src, dst, _, _ in stack:
            os.close(src)
            os.close(dst)


def _entries(directory: int, where: str) -> Iterator[tuple[str, os.stat_result]]:
    """The names in a directory, each with its lstat."""
    try:
        with os.scandir(directory) as listing:
            names = [entry.name for entry in listing]
    except OSError as error:
        raise CaseCopyError(f"{where or '.'} cannot be listed ({error.strerror})") from None
    for name in names:
        try:
            yield name, os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError as error:
            raise CaseCopyError(f"{name} cannot be read ({error.strerror})") from None


def _unreadable(directory: int, name: str) -> bool:
    """Whether the file `name` cannot be opened for reading (rather than over a budget)."""
    try:
        os.close(os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory))
    except OSError:
        return True
    return False


def _open_dir_pair(src: int, dst: int, name: str) -> tuple[int, int]:
    try:
        child_src = os.open(name, _DIR_FLAGS, dir_fd=src)
    except OSError as error:
        raise CaseCopyError(f"dir {name} cannot be read ({error.strerror})") from None
    try:
        os.mkdir(name, 0o700, dir_fd=dst)
        child_dst = os.open(name, _DIR_FLAGS, dir_fd=dst)
    except BaseException:
        os.close(child_src)
        raise
    return child_src, child_dst


def _finish_dir(dst: int, info: os.stat_result, owner: int | None) -> None:
    """Once filled: the dir's own mode (its owner may always enter and write it), owner
    and times."""
    os.fchmod(dst, (info.st_mode & 0o777) | 0o700)
    if owner is not None:
        os.fchown(dst, owner, owner)
    os.utime(dst, ns=(info.st_atime_ns, info.st_mtime_ns))


def _copy_file(
    src: int, dst: int, name: str, info: os.stat_result, budget: _Budget, owner: int | None
) -> None:
    try:
        reader = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src
        )
    except OSError as error:
        raise CaseCopyError(f"{name} cannot be read ({error.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(reader).st_mode):  # swapped since it was listed
            return
        writer = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=dst
        )
        try:
            for start, end in _data_extents(reader, info.st_size):
                budget.take_bytes(end - start)
                _copy_range(reader, writer, start, end)
            os.ftruncate(writer, info.st_size)
            os.fchmod(writer, info.st_mode & 0o777)
            if owner is not None:
                os.fchown(writer, owner, owner)
            os.utime(writer, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(writer)
    finally:
        os.close(reader)


def _data_extents(descriptor: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of data, holes skipped (the whole file where the
    filesystem cannot say)."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(descriptor, offset, os.SEEK_DATA)
        except OSError as error:
            if error.errno == errno.ENXIO:  # only a hole is left
                return
            yield offset, size
            return
        try:
            end = min(os.lseek(descriptor, start, os.SEEK_HOLE), size)
        except OSError:
            end = size
        if end <= start:
            return
        yield start, end
        offset = end


def _copy_range(reader: int, writer: int, start: int, end: int) -> None:
    """Bytes [start, end) of reader to the same offsets of writer: in the kernel where it
    can (copy_file_range), else through a buffer."""
    offset = start
    while offset < end:
        try:
            copied = os.copy_file_range(reader, writer, end - offset, offset, offset)
        except OSError as error:
            if error.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            break
        if copied == 0:  # the file got shorter
            return
        offset += copied
    while offset < end:
        chunk = os.pread(reader, min(_CHUNK, end - offset), offset)
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            written = os.pwrite(writer, view, offset)
            offset += written
            view = view[written:]


def _copy_link(src: int, dst: int, name: str, info: os.stat_result, owner: int | None) -> None:
    try:
        target = os.readlink(name, dir_fd=src)
    except OSError as error:
        raise CaseCopyError(f"{name} cannot be read ({error.strerror})") from None
    os.symlink(target, name, dir_fd=dst)
    if owner is not None:
        os.chown(name, owner, owner, dir_fd=dst, follow_symlinks=False)
    with contextlib.suppress(OSError, NotImplementedError):
        os.utime(name, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=dst, follow_symlinks=False)


class _Budget:
    """What the copy may still use: bytes of data and entries, within the cap, the free
    space and inodes of the copy's filesystem and, on a tmpfs, the cgroup's memory."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.bytes_left = MAX_COPY_BYTES
        self.entries_left = MAX_COPY_ENTRIES
        self.since_check = 0
        self.limit_bytes = MAX_COPY_BYTES
        self._check(first=True)

    def take_bytes(self, count: int) -> None:
        self.bytes_left -= count
        self.since_check += count
        if self.since_check >= _RECHECK_BYTES:
            self._check()
        if self.bytes_left < 0:
            raise CaseCopyError(
                f"the case holds more than {self.limit_bytes} bytes of data, more than its "
                f"copy may take (at most {MAX_COPY_BYTES}, within the free space of "
                f"{self.directory})"
            )

    def take_entry(self) -> None:
        self.entries_left -= 1
        if self.entries_left < 0:
            raise CaseCopyError(
                f"the case holds more than {MAX_COPY_ENTRIES} entries, or more "
                "than the copy's filesystem has inodes for"
            )

    def _check(self, first: bool = False) -> None:
        """Lower what is left to what the filesystem (and memory) can still take."""
        self.since_check = 0
        self.bytes_left = min(self.bytes_left, free_bytes(self.directory))
        if first:
            self.limit_bytes = max(self.bytes_left, 0)
            inodes = free_inodes(self.directory)
            if inodes is not None:
                self.entries_left = min(self.entries_left, inodes - MARGIN_INODES)


def free_bytes(directory: str) -> int:
    """Bytes a copy may still put in directory's filesystem, a margin left: its free
    blocks, and on a tmpfs (pages of memory) also what the cgroup may still allocate."""
    info = os.statvfs(directory)
    margin = min(MARGIN_BYTES, info.f_blocks * info.f_frsize // 8)
    free = info.f_bavail * info.f_frsize - margin
    if _is_tmpfs(directory):
        headroom = cgroup_memory_headroom()
        if headroom is not None:
            free = min(free, headroom - MARGIN_BYTES)
    return free


def allocated_bytes(directory: str) -> int:
    """What the files beneath directory take on disk (their allocated blocks), followed
    nowhere; entries that vanish while it looks are left out."""
    total = 0
    pending = [directory]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    try:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def free_inodes(directory: str) -> int | None:
    info = os.statvfs(directory)
    return info.f_favail if info.f_files else None


def _is_tmpfs(directory: str) -> bool:
    import ctypes

    from verifier.linux import libc

    buffer = _statfs_buffer()
    if libc().statfs(os.fsencode(directory), ctypes.byref(buffer)) != 0:
        return False
    return bool(buffer.f_type == _TMPFS_MAGIC)


@functools.cache
def _statfs_buffer() -> Any:
    """A struct statfs to read f_type into (its first field), made once."""
    import ctypes

    class Statfs(ctypes.Structure):
        _fields_ = (("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 120))

    return Statfs()
