"""The batch's channels: whole messages both ways, whatever their size; a gone end is an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verifier.batch.cases import Case
from verifier.batch.channel import Channel, ChannelError, channel_pair, wait
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


# --- data only: what cannot be read is refused, and nothing waits on it ---------------


class _RunsCode:
    def __reduce__(self):  # what a pickle channel would have run on reading it
        return (os.system, (f"touch {MARKER}",))


MARKER = f"/tmp/verifier-channel-pickle-{os.getpid()}"


def test_a_pickle_in_the_pipe_is_refused_and_runs_nothing() -> None:
    import pickle
    import struct

    reader, writer = channel_pair(WORKER_TYPES)
    body = pickle.dumps(_RunsCode())
    os.write(writer.fds()[1], struct.pack("!Q", len(body)) + body)
    with pytest.raises(ChannelError, match="cannot be read"):
        reader.messages()
    assert not os.path.exists(MARKER)
    for end in (reader, writer):
        end.close()


def test_a_frame_over_the_bound_is_refused_before_it_is_read() -> None:
    import struct

    reader, writer = channel_pair(WORKER_TYPES)
    os.write(writer.fds()[1], struct.pack("!Q", 1 << 40) + b"never this much")
    with pytest.raises(ChannelError, match="over"):
        reader.messages()
    for end in (reader, writer):
        end.close()


def test_a_partial_frame_is_not_waited_for_and_completes_later() -> None:
    reader, writer = channel_pair(WORKER_TYPES)
    writer.send(Case("c1", Path("/cases/c1"), "c1"))
    data = os.read(reader.fileno(), 1 << 20)
    raw_reader, raw_writer = os.pipe()
    split = Channel(raw_reader, raw_writer, WORKER_TYPES)
    os.write(raw_writer, data[:5])
    assert split.messages() == []  # returns at once, the rest of the frame still to come
    os.write(raw_writer, data[5:])
    assert split.messages() == [Case("c1", Path("/cases/c1"), "c1")]
    for end in (reader, writer, split):
        end.close()


@pytest.mark.parametrize(
    "body",
    [
        b'{"\\u0000": "record", "t": "os:system", "v": ["touch /tmp/x"]}',  # not carried
        b'{"\\u0000": "record", "t": "verifier.batch.cases:Case", "v": ["c1"]}',  # fields
        b'{"\\u0000": "enum", "t": "verifier.results:Status", "v": "no such status"}',
        b"[1, 2, 3]",  # untagged
        b'{"no": "tag"}',
        b"\xff\xfe not json",
        b"[" * 100_000 + b"]" * 100_000,  # nested past any stack
    ],
)
def test_only_well_formed_records_the_channel_carries_are_built(body: bytes) -> None:
    import struct

    raw_reader, raw_writer = os.pipe()
    channel = Channel(raw_reader, raw_writer, WORKER_TYPES)
    payload = memoryview(struct.pack("!Q", len(body)) + body)
    with pytest.raises(ChannelError):
        while payload:  # in pieces the pipe takes at once, each read before the next
            payload = payload[os.write(raw_writer, payload[:32768]) :]
            channel.messages()
    channel.close()


def test_every_record_of_a_batch_crosses_as_it_was() -> None:
    from types import MappingProxyType

    from verifier.batch.grader import PendingCase
    from verifier.batch.llm_stage import STAGE_TYPES, LLMDone, LLMTask
    from verifier.batch.summary import CaseOutcome, CaseStatus
    from verifier.config.records import TaskInput
    from verifier.grading import CaseContext
    from verifier.judges.llm.gate import GateFigures
    from verifier.judges.llm.judge import Spend
    from verifier.judges.llm.prompt import Prompt
    from verifier.results import JudgeResult, Status

    result = JudgeResult(
        "j",
        "builtin",
        Status.OK,
        0.5,
        "why",
        None,
        0.25,
        MappingProxyType({"sandbox": "x", "n": [1, 2.5, None]}),
    )
    prompt = Prompt("system", "user", "nonce", 10, 0)
    pending = PendingCase(
        "c1",
        12.5,
        {0: result},
        CaseContext(("a warning",), TaskInput(None, "input.yaml", True), None, None, None),
        (LLMTask(1, prompt, 0.1),),
    )
    outcome = CaseOutcome("c1", CaseStatus.REWARDED, 1.0, ("x",), 0.5)
    worker_parent, worker_child = channel_pair(WORKER_TYPES)
    stage_parent, stage_child = channel_pair(STAGE_TYPES)
    for sent, (writer, reader) in (
        (pending, (worker_child, worker_parent)),
        (outcome, (worker_child, worker_parent)),
        (
            ("c1", (LLMDone(1, result, Spend("m", 1, 0, 2, 3, (0.5,))),)),
            (stage_child, stage_parent),
        ),
        ({"http://x": GateFigures(4, 2, 0)}, (stage_child, stage_parent)),
    ):
        writer.send(sent)
        (received,) = reader.messages()
        assert received == sent
    for end in (worker_parent, worker_child, stage_parent, stage_child):
        end.close()
