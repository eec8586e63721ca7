"""A running command's output, kept bounded: its pipes are read into tails (the last
bytes, and the first few apart) while its supervised calls are answered and the temp
space it fills is watched, until it exits or its time is up. A command that prints
gigabytes costs nothing but the reading."""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

    from verifier.sandbox.supervisor import Supervisor

TAIL_BYTES = 64 * 1024
HEAD_BYTES = 8 * 1024  # of the start of the output, kept apart when the tail cannot hold it
STDOUT_BYTES = 1024 * 1024  # of stdout kept for judges that compare it
DRAIN_BYTES = 1024 * 1024  # read after the command exits (its leftovers may write on)
SPACE_CHECK_S = 0.1  # how often the temp space is looked at while a command runs


class OutputTail:
    """The last `size` bytes of a stream, how much came before them, and its first
    HEAD_BYTES (a command's first error is often as telling as its last line)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.chunks: collections.deque[bytes] = collections.deque()
        self.kept = 0
        self.cut = 0
        self.head = b""

    def read(self, fd: int, limit: int) -> None:
        """Whatever fd has now, up to limit bytes (a flood must not stop the clock)."""
        taken = 0
        while taken < limit:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                return
            taken += len(chunk)
            if len(self.head) < HEAD_BYTES:
                self.head += chunk[: HEAD_BYTES - len(self.head)]
            self.chunks.append(chunk)
            self.kept += len(chunk)
            while self.kept - len(self.chunks[0]) >= self.size:
                dropped = self.chunks.popleft()
                self.kept -= len(dropped)
                self.cut += len(dropped)

    def note(self, text: str) -> None:
        """End the tail with what the sandbox says about the run."""
        self.chunks.append(text.encode())
        self.kept += len(text)

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")

    def head_text(self) -> str:
        """The start of the stream up to where the tail begins, when the tail lost it."""
        return self.head[: self.cut].decode("utf-8", errors="replace")


def stream(
    process: subprocess.Popen[bytes],
    tails: Mapping[int, OutputTail],
    timeout: float,
    supervisor: Supervisor | None = None,
    space: Callable[[], str | None] | None = None,
) -> tuple[bool, str | None]:
    """Read the command's output pipes into their tails, and answer its supervised
    calls, until it exits ((False, None)) or its time is up ((True, None)); every
    SPACE_CHECK_S ask `space` whether it must stop for what it wrote (then it is
    killed: (False, why)).

    Reading stops when the command exits, not at the end of its output: what it left
    in the background may hold the pipe open for ever.
    """
    import selectors

    from verifier.processes import kill_trees

    deadline = time.monotonic() + timeout
    next_check = time.monotonic() + SPACE_CHECK_S
    with selectors.DefaultSelector() as selector:
        for fd in tails:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        if supervisor is not None:
            selector.register(supervisor.fileno(), selectors.EVENT_READ)
        while process.poll() is None:
            now = time.monotonic()
            if now >= deadline:
                return True, None
            if space is not None and now >= next_check:
                next_check = now + SPACE_CHECK_S
                stopped = space()
                if stopped is not None:
                    kill_trees([process.pid])
                    process.wait()
                    return False, stopped
            for key, _ in selector.select(timeout=min(deadline - now, SPACE_CHECK_S)):
                if supervisor is not None and key.fd == supervisor.fileno():
                    supervisor.serve()
                else:
                    tails[key.fd].read(key.fd, limit=DRAIN_BYTES)
    for fd, tail in tails.items():
        tail.read(fd, limit=DRAIN_BYTES)
    return False, None


def filling_the_temp_space(own_dir: Path, side_by_side: int) -> str | None:
    """Why the command must stop now, if it must: the temp filesystem (where every
    command's copy and HOME are, and on a tmpfs the memory the cgroup may use) is at its
    margin, and the command's dirs (`own_dir`) hold at least its share of what is used
    there among the `side_by_side` commands (so that the one filling it is stopped, not
    the commands beside it)."""
    from verifier.sandbox.case_copy import allocated_bytes, free_bytes

    if free_bytes(str(own_dir)) >= 0:
        return None
    info = os.statvfs(own_dir)
    used = (info.f_blocks - info.f_bfree) * info.f_frsize
    own = allocated_bytes(str(own_dir))
    if own < used // max(side_by_side, 1):
        return None
    return (
        f"\nstopped: the command filled the temp space ({own} bytes in its copy of the "
        "case and its HOME)"
    )
