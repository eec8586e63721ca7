"""The batch's LLM stage: every case's LLM judges against one bounded pool of requests.

A worker that has run a case's CPU judges and built its LLM judges' prompts hands
them to the parent, which passes them here and gives the worker its next case: a
case waiting on a model holds no CPU slot. This is one process, forked by the
parent before any thread exists anywhere (the parent never starts a thread, so it
can keep forking workers), holding for each endpoint URL a lane: its queue of
requests and as many threads, each sending one request at a time, as the endpoint's
Gate lets in flight. The gate starts at START_IN_FLIGHT and grows while the endpoint
keeps up, up to `capacity` (--llm-concurrency), a ceiling (verifier.judges.llm.gate);
one backoff per endpoint (a 429 or 503 slows every request to it), one response
cache and one memory of what each model rejects. Each finished case goes back with
what the gates allow in flight now, which bounds how many cases the parent keeps
waiting here.

A judge's samples are queued together and asked side by side; its timeout, its
whole budget, runs from when its first sample is sent, less the time its prompt
took to build. The parent gets each case back with every LLM judge's JudgeResult
and what its requests cost (Spend).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
import time
from collections.abc import Mapping
from typing import Any

import attrs

from verifier.batch.channel import Channel, ChannelError, channel_pair, wait
from verifier.batch.process_tree import fork, reap
from verifier.judges.base import JudgeReturnError, PreparedJudge, details_of, interpret
from verifier.judges.llm.cache import ResponseCache
from verifier.judges.llm.client import Client
from verifier.judges.llm.gate import Gate, GateFigures
from verifier.judges.llm.guard import Screening
from verifier.judges.llm.judge import LLMJudge, Sample, Spend
from verifier.judges.llm.prompt import Prompt
from verifier.results import JudgeResult, Status


@attrs.frozen
class LLMTask:
    """One LLM judge of one case: judge `index` in the config, its prompt, the seconds
    building it took (already spent of the judge's budget), the case's deadline
    (`--deadline`, a time.monotonic() instant: the clock is the machine's, shared by
    the worker that set it and this process), and what its guard found."""

    index: int
    prompt: Prompt
    prompt_s: float
    deadline: float | None = None
    screening: Screening | None = None


@attrs.frozen
class LLMDone:
    """A judge's result, and what its requests cost (one Spend per model it asked)."""

    index: int
    result: JudgeResult
    spends: tuple[Spend, ...]


START_IN_FLIGHT = 16  # a gate's first limit: small enough for a small endpoint's first wave


# What the parent and the LLM stage send each other (verifier.batch.channel).
STAGE_TYPES = (
    "verifier.batch.llm_stage:LLMTask",
    "verifier.batch.llm_stage:LLMDone",
    "verifier.judges.llm.prompt:Prompt",
    "verifier.judges.llm.judge:Spend",
    "verifier.judges.llm.gate:GateFigures",
    "verifier.judges.llm.guard:Screening",
    "verifier.judges.llm.guard:Guard",
    "verifier.judges.llm.guard:Finding",
    "verifier.results:JudgeResult",
    "verifier.results:Status",
)
_FIGURES_WAIT_S = 30.0


@attrs.frozen
class LLMSettings:
    capacity: int  # requests in flight per endpoint, at most (--llm-concurrency)
    cache: ResponseCache | None

    @property
    def start(self) -> int:
        return min(START_IN_FLIGHT, self.capacity)


class LLMStage:
    """The parent's handle on the request process (see the module doc)."""

    def __init__(
        self, judges: Mapping[int, PreparedJudge], settings: LLMSettings, close: list[int]
    ) -> None:
        parent_end, child_end = channel_pair(STAGE_TYPES)
        self.pid, self.pidfd = fork(
            lambda: _serve(child_end, judges, settings), close=[*close, *parent_end.fds()]
        )
        child_end.close()
        self.conn = parent_end

    def submit(self, case: str, tasks: tuple[LLMTask, ...]) -> None:
        self.conn.send((case, tasks))

    def received(self) -> list[Any]:
        """What the stage has sent (its conn is readable): finished cases (each with what
        every gate allows in flight now), and after `finish` the endpoints' figures.
        ChannelError when it cannot be read; an empty list when the stage is gone (its
        pidfd says so)."""
        try:
            return self.conn.messages()
        except (EOFError, OSError):
            return []

    def figures(self) -> dict[str, GateFigures] | None:
        """The reply to `finish`, waited for a while (None: none came)."""
        deadline = time.monotonic() + _FIGURES_WAIT_S
        while wait([self.conn], max(0.0, deadline - time.monotonic())):
            try:
                messages = self.conn.messages()
            except (EOFError, OSError, ChannelError):
                return None
            for message in messages:
                if isinstance(message, dict):
                    return message
        return None

    def finish(self) -> None:
        """No more cases: the process sends its figures and ends."""
        with contextlib.suppress(OSError):
            self.conn.send(None)

    def close(self, *, kill: bool) -> None:
        if kill:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        self.conn.close()
        reap(self.pid, self.pidfd)


def _serve(conn: Channel, judges: Mapping[int, PreparedJudge], settings: LLMSettings) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the batch stops
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    client = Client(settings.capacity, settings.cache, initial=settings.start)
    sending = threading.Lock()
    lanes: dict[str, _Lane] = {}

    def reply(name: str, done: tuple[LLMDone, ...]) -> None:
        allowed = sum(lane.gate.limit for lane in list(lanes.values()))
        with sending:
            conn.send((name, done, allowed))

    while (message := conn.recv()) is not None:
        name, tasks = message
        case = _CaseRun(name, len(tasks), reply)
        for task in tasks:
            run = _JudgeRun(case, task, judges[task.index])
            for index in range(run.judge.asks):
                url = run.judge.endpoint_of(index).url
                if url not in lanes:
                    lanes[url] = _Lane(client, client.gate(url))
                lanes[url].put((run, index))
    with sending:
        conn.send(client.figures())


class _Lane:
    """One endpoint's queue of requests, and threads to send them: one more whenever
    there is work, no thread idle, and the gate lets more in flight than there are
    threads (so a gate that grows gets the threads to fill it, and no more)."""

    def __init__(self, client: Client, gate: Gate) -> None:
        self.client = client
        self.gate = gate
        self.work: queue.SimpleQueue[tuple[_JudgeRun, int]] = queue.SimpleQueue()
        self.threads = 0
        self.idle = 0
        self.lock = threading.Lock()

    def put(self, item: tuple[_JudgeRun, int]) -> None:
        self.work.put(item)
        self._grow()

    def _grow(self) -> None:
        with self.lock:
            if self.idle == 0 and not self.work.empty() and self.threads < self.gate.limit:
                self.threads += 1
                threading.Thread(target=self._send, daemon=True).start()

    def _send(self) -> None:
        while True:
            with self.lock:
                self.idle += 1
            run, index = self.work.get()
            with self.lock:
                self.idle -= 1
            self._grow()
            run.ask(self.client, index)


class _CaseRun:
    """One case's LLM judges; sent back to the parent when the last one is done."""

    def __init__(self, name: str, count: int, reply: Any) -> None:
        self.name = name
        self.left = count
        self.done: list[LLMDone] = []
        self.reply = reply
        self.lock = threading.Lock()

    def judged(self, done: LLMDone) -> None:
        with self.lock:
            self.done.append(done)
            self.left -= 1
            finished = self.left == 0
        if finished:
            self.reply(self.name, tuple(self.done))


class _JudgeRun:
    """One judge of one case: its samples as they come back, then its result."""

    def __init__(self, case: _CaseRun, task: LLMTask, prepared: PreparedJudge) -> None:
        self.case = case
        self.task = task
        self.config = prepared.config
        self.judge: LLMJudge = prepared.call  # type: ignore[assignment]
        self.samples: list[Sample | None] = [None] * self.judge.asks
        self.left = self.judge.asks
        self.started: float | None = None
        self.lock = threading.Lock()

    def ask(self, client: Client, index: int) -> None:
        with self.lock:
            if self.started is None:
                self.started = time.monotonic()
            deadline = self.judge.deadline(self.started, self.task.prompt_s)
            if self.task.deadline is not None:
                deadline = min(deadline, self.task.deadline)
        sample = self.judge.sample(self.task.prompt, client, index, deadline)
        with self.lock:
            self.samples[index] = sample
            self.left -= 1
            if self.left:
                return
        self.case.judged(self._result())

    def _result(self) -> LLMDone:
        samples = [sample for sample in self.samples if sample is not None]
        spends = self.judge.spends(samples)
        assert self.started is not None
        fields: dict[str, Any] = {
            "name": self.config.name,
            "kind": self.config.kind,
            "duration_s": time.monotonic() - self.started + self.task.prompt_s,
        }
        try:
            answer = self.judge.conclude(self.task.prompt, samples, self.task.screening)
            value, rationale = interpret(answer, self.config)
        except JudgeReturnError as error:
            result = JudgeResult(
                status=Status.ERROR, error=str(error), details=details_of(answer), **fields
            )
        except Exception as error:  # LLMJudgeError: its reason and details; a bug: its text
            result = JudgeResult(
                status=Status.ERROR, error=str(error), details=details_of(error), **fields
            )
        else:
            result = JudgeResult(
                status=Status.OK,
                value=value,
                rationale=rationale,
                details=details_of(answer),
                **fields,
            )
        return LLMDone(self.task.index, result, spends)
