"""The batch's channels: whole messages both ways, whatever their size; a gone end is an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verifier.batch.cases import Case
from verifier.batch.channel import channel_pair, wait
from verifier.batch.pool import WORKER_TYPES


def test_messages_cross_both_ways_between_processes_whatever_their_size() -> None:
    parent, child = channel_pair(WORKER_TYPES)
    big = "x" * (5 * 1024 * 1024)  # far beyond a pipe's buffer
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            parent.close()
            while (message := child.recv()) is not None:
                child.send(message)
        except BaseException:
            code = 1
        os._exit(code)
    child.close()
    case = Case("c1", Path("/cases/c1"), "c1")
    for message in (case, {"big": big}, ("tuple", 1, 2.5)):
        parent.send(message)
        assert parent.recv() == message
    parent.send(None)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    parent.close()


def test_a_closed_end_is_eof_to_its_reader_and_an_error_to_its_writer() -> None:
    first, second = channel_pair()
    second.close()
    assert wait([first], timeout=1.0) == [first]  # readable: the other end is gone
    with pytest.raises(EOFError):
        first.recv()
    with pytest.raises(OSError):
        first.send("anyone there?")
    first.close()


def test_wait_returns_only_what_is_ready_and_times_out_empty() -> None:
    first, second = channel_pair()
    read_fd, write_fd = os.pipe()
    assert wait([first, read_fd], timeout=0.05) == []
    second.send("hello")
    assert wait([first, read_fd], timeout=1.0) == [first]
    os.write(write_fd, b"!")
    assert set(wait([first, read_fd], timeout=1.0)) == {first, read_fd}
    for channel in (first, second):
        channel.close()
    os.close(read_fd)
    os.close(write_fd)
