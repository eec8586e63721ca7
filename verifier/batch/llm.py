"""The batch's LLM stage: every case's LLM judges against one bounded pool of requests.

A worker that has run a case's CPU judges and built its LLM judges' prompts hands
them to the parent, which passes them here and gives the worker its next case: a
case waiting on a model holds no CPU slot. This is one process, forked by the
parent before any thread exists anywhere (the parent never starts a thread, so it
can keep forking workers), holding for each endpoint URL `capacity` threads that
each send one request at a time through the endpoint's Gate: at most `capacity`
requests in flight per endpoint, one backoff per endpoint (a 429 or 503 slows every
request to it), one response cache and one memory of what each model rejects.

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

from verifier.batch.channel import Channel, ChannelError, channel_pair, wait
from verifier.batch.processes import fork, reap
from verifier.judges.base import JudgeReturnError, PreparedJudge, details_of, interpret
from verifier.judges.llm.cache import ResponseCache
from verifier.judges.llm.client import Client
from verifier.judges.llm.gate import GateFigures
from verifier.judges.llm.judge import LLMJudge, Sample, Spend
from verifier.judges.llm.prompt import Prompt
from verifier.named import NamedTuple
from verifier.results import JudgeResult, Status


class LLMTask(NamedTuple):
    """One LLM judge of one case: judge `index` in the config, its prompt, the seconds
    building it took (already spent of the judge's budget)."""

    index: int
    prompt: Prompt
    prompt_s: float


class LLMDone(NamedTuple):
    """A judge's result, and what its requests cost."""

    index: int
    result: JudgeResult
    spend: Spend


# What the parent and the LLM stage send each other (verifier.batch.channel).
STAGE_TYPES = (
    "verifier.batch.llm:LLMTask",
    "verifier.batch.llm:LLMDone",
    "verifier.judges.llm.prompt:Prompt",
    "verifier.judges.llm.judge:Spend",
    "verifier.judges.llm.gate:GateFigures",
    "verifier.results:JudgeResult",
    "verifier.results:Status",
)
_FIGURES_WAIT_S = 30.0


class LLMSettings(NamedTuple):
    capacity: int  # requests in flight per endpoint
    cache: ResponseCache | None


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
        """What the stage has sent (its conn is readable): finished cases, and after
        `finish` the endpoints' figures. ChannelError when it cannot be read; an empty
        list when the stage is gone (its pidfd says so)."""
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
    client = Client(settings.capacity, settings.cache)
    sending = threading.Lock()
    queues: dict[str, queue.SimpleQueue[tuple[_JudgeRun, int]]] = {}

    def reply(message: Any) -> None:
        with sending:
            conn.send(message)

    def serve_endpoint(work: queue.SimpleQueue[tuple[_JudgeRun, int]]) -> None:
        while True:
            run, index = work.get()
            run.ask(client, index)

    while (message := conn.recv()) is not None:
        name, tasks = message
        case = _CaseRun(name, len(tasks), reply)
        for task in tasks:
            run = _JudgeRun(case, task, judges[task.index])
            url = run.judge.endpoint.url
            if url not in queues:
                queues[url] = queue.SimpleQueue()
                for _ in range(settings.capacity):
                    threading.Thread(
                        target=serve_endpoint, args=(queues[url],), daemon=True
                    ).start()
            for index in range(run.judge.samples):
                queues[url].put((run, index))
    reply(client.figures())


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
            self.reply((self.name, tuple(self.done)))


class _JudgeRun:
    """One judge of one case: its samples as they come back, then its result."""

    def __init__(self, case: _CaseRun, task: LLMTask, prepared: PreparedJudge) -> None:
        self.case = case
        self.task = task
        self.config = prepared.config
        self.judge: LLMJudge = prepared.call  # type: ignore[assignment]
        self.samples: list[Sample | None] = [None] * self.judge.samples
        self.left = self.judge.samples
        self.started: float | None = None
        self.lock = threading.Lock()

    def ask(self, client: Client, index: int) -> None:
        with self.lock:
            if self.started is None:
                self.started = time.monotonic()
            deadline = self.judge.deadline(self.started, self.task.prompt_s)
        sample = self.judge.sample(self.task.prompt, client, index, deadline)
        with self.lock:
            self.samples[index] = sample
            self.left -= 1
            if self.left:
                return
        self.case.judged(self._result())

    def _result(self) -> LLMDone:
        samples = [sample for sample in self.samples if sample is not None]
        spend = Spend.of(self.judge.endpoint.model, samples)
        assert self.started is not None
        fields = {
            "name": self.config.name,
            "kind": self.config.kind,
            "duration_s": time.monotonic() - self.started + self.task.prompt_s,
        }
        try:
            answer = self.judge.conclude(self.task.prompt, samples)
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
                status=Status.OK, value=value, rationale=rationale, details=details_of(answer),
                **fields,
            )  # fmt: skip
        return LLMDone(self.task.index, result, spend)
