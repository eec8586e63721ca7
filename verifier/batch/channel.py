"""Pickled messages between the batch's processes, over a pair of pipes.

multiprocessing.connection would do, but it loads socket, array and tempfile (and
with tempfile shutil, bz2, lzma and random) into every worker, and every extension
library a worker holds makes each of its judges' forks and exits dearer. A message
is its length and its pickle; a reader whose other end is gone gets EOFError, a
writer OSError (EPIPE).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import struct
from collections.abc import Iterable
from typing import Any

_LENGTH = struct.Struct("!Q")
_READ_CHUNK = 1 << 20


class Channel:
    """One end: it reads what the other end sends, and sends what the other end reads."""

    __slots__ = ("_read", "_write")

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read = read_fd
        self._write = write_fd

    def fileno(self) -> int:
        """The descriptor that becomes readable when a message (or the end) arrives."""
        return self._read

    def fds(self) -> tuple[int, int]:
        return self._read, self._write

    def send(self, message: object) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_LENGTH.pack(len(data)) + data)
        while view:
            view = view[os.write(self._write, view) :]

    def recv(self) -> Any:
        (length,) = _LENGTH.unpack(self._read_exactly(_LENGTH.size))
        return pickle.loads(self._read_exactly(length))

    def close(self) -> None:
        for fd in self.fds():
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read_exactly(self, count: int) -> bytes:
        chunks = []
        while count:
            chunk = os.read(self._read, min(count, _READ_CHUNK))
            if not chunk:
                raise EOFError("the other end of the channel is closed")
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)


def channel_pair() -> tuple[Channel, Channel]:
    """Two connected ends (close-on-exec): one for the parent, one for the child."""
    first_read, second_write = os.pipe2(os.O_CLOEXEC)
    second_read, first_write = os.pipe2(os.O_CLOEXEC)
    return Channel(first_read, first_write), Channel(second_read, second_write)


def wait(waitables: Iterable[Any], timeout: float | None = None) -> list[Any]:
    """Those of waitables (descriptors, or objects with fileno()) that are readable or
    closed, once one is or when timeout (seconds) has passed."""
    poller = select.poll()
    by_fd = {}
    for waitable in waitables:
        fd = waitable if isinstance(waitable, int) else waitable.fileno()
        by_fd[fd] = waitable
        poller.register(fd, select.POLLIN)
    events = poller.poll(None if timeout is None else timeout * 1000)
    return [by_fd[fd] for fd, _ in events]
