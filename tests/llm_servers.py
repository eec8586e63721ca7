"""Real HTTP servers on 127.0.0.1 speaking the OpenAI and Anthropic wire formats.

The LLM judges' client code runs unmodified against them: each server is a
ThreadingHTTPServer in a thread that checks requests the way the real APIs do
(path, headers, required fields), records them, and answers from a script:
a queue of replies (a grade as a tool call, plain text, an error status with
Retry-After, a hang, a delayed answer) with an optional default once the queue is
empty, or a `route` that picks the reply by request when several judges run at once.
It counts the requests in flight (`peak_in_flight`), and `gather = N` holds every
reply until N requests have been in flight at once (or `gather_timeout_s` passes): a
concurrency bound that is not reached shows as a peak below N, not as a timing.

A capacity model stands in for a real endpoint's limit: with `capacity = N`, at most
N requests are served at once; one more is refused at once with a 429
(`over_capacity = "refuse"`, as a rate-limited API or proxy does, `refused` counts
them; `refusal_headers` may carry a Retry-After) or waits for a free place
(`"queue"`, as vLLM queues past its batch size, so latency rises).
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

Style = Literal["openai", "anthropic"]


class Received(NamedTuple):
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = 0.0  # time.monotonic() when it arrived

    @property
    def system(self) -> str:
        if "system" in self.body:
            return self.body["system"]
        return next(m["content"] for m in self.body["messages"] if m["role"] == "system")

    @property
    def user(self) -> str:
        return next(m["content"] for m in self.body["messages"] if m["role"] == "user")


class Reply(NamedTuple):
    """One scripted response: a status and JSON body, or a hang of `hang_s` seconds."""

    status: int = 200
    body: Any = None
    raw: bytes | None = None  # sent as is instead of body (not JSON)
    headers: dict[str, str] = MappingProxyType({})
    hang_s: float = 0.0
    delay_s: float = 0.0  # answer after this long


class FakeLLM:
    """One server of one style. `url` is what goes into $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL.

    It listens on 127.0.0.1, or on `host` (0.0.0.0 for a container to reach it)."""

    def __init__(self, style: Style, host: str = "127.0.0.1") -> None:
        self.style = style
        self.script: collections.deque[Reply] = collections.deque()
        self.default: Reply | None = None
        # For concurrent judges: picks a reply by request (None: the script decides).
        self.route: Callable[[Received], Reply | None] | None = None
        self.received: list[Received] = []
        self.replied: list[tuple[float, int]] = []  # (time.monotonic(), status) as answered
        self.in_flight = 0
        self.peak_in_flight = 0
        self.gather = 0
        self.gather_timeout_s = 10.0
        self.capacity = 0  # requests served at once; 0: any number
        self.over_capacity: Literal["refuse", "queue"] = "refuse"
        self.refusal_headers: dict[str, str] = {}
        self.refused = 0
        self.in_service = 0
        self.peak_in_service = 0
        self._service = threading.Condition()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._flight = threading.Condition()
        self._server = _Server((host, 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}" + ("/v1" if self.style == "openai" else "")

    @property
    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL" if self.style == "openai" else "ANTHROPIC_BASE_URL": self.url}

    def start(self) -> FakeLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        for condition in (self._flight, self._service):
            with condition:
                condition.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def arrive(self) -> None:
        """A request is in flight; with `gather`, wait until that many are (once)."""
        with self._flight:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self._flight.notify_all()
            if self.gather and self.peak_in_flight < self.gather:
                self._flight.wait_for(
                    lambda: self.peak_in_flight >= self.gather or self.stopping.is_set(),
                    self.gather_timeout_s,
                )

    def depart(self, status: int) -> None:
        with self._flight:
            self.in_flight -= 1
            self.replied.append((time.monotonic(), status))

    def admit(self) -> bool:
        """A place to serve one more request (False: refused, over capacity)."""
        with self._service:
            if self.capacity and self.in_service >= self.capacity:
                if self.over_capacity == "refuse":
                    self.refused += 1
                    return False
                self._service.wait_for(
                    lambda: self.in_service < self.capacity or self.stopping.is_set()
                )
            self.in_service += 1
            self.peak_in_service = max(self.peak_in_service, self.in_service)
            return True

    def release(self) -> None:
        with self._service:
            self.in_service -= 1
            self._service.notify()

    def queue(self, *replies: Reply) -> FakeLLM:
        self.script.extend(replies)
        return self

    def next_reply(self) -> Reply:
        with self._lock:
            if self.script:
                return self.script.popleft()
        if self.default is not None:
            return self.default
        return self.error(500, "test server: no scripted reply left")

    # --- replies in this server's wire format ---------------------------------

    def grade(self, rationale: str = "Looks right.", **fields: Any) -> Reply:
        """A forced tool call carrying the fields (score=4 or passed=True)."""
        arguments = {"rationale": rationale, **fields}
        if self.style == "openai":
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "submit_grade", "arguments": json.dumps(arguments)},
                    }
                ],
            }
            return Reply(body=self._openai(message, "tool_calls"))
        block = {"type": "tool_use", "id": "toolu_1", "name": "submit_grade", "input": arguments}
        return Reply(body=self._anthropic([block], "tool_use"))

    def text(self, text: str, stop: str | None = None) -> Reply:
        """A plain-text answer (a server that ignores the tool)."""
        if self.style == "openai":
            message = {"role": "assistant", "content": text}
            return Reply(body=self._openai(message, stop or "stop"))
        return Reply(body=self._anthropic([{"type": "text", "text": text}], stop or "end_turn"))

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        if self.style == "openai":
            body = {"error": {"message": message, "type": "server_error", "code": status}}
        else:
            body = {"type": "error", "error": {"type": "api_error", "message": message}}
        return Reply(status=status, body=body, headers=headers or {})

    @staticmethod
    def hang(seconds: float = 30.0) -> Reply:
        return Reply(hang_s=seconds)

    def _openai(self, message: dict[str, Any], finish: str) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "served-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333},
        }

    def _anthropic(self, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "served-model",
            "content": content,
            "stop_reason": stop,
            "usage": {"input_tokens": 321, "output_tokens": 12},
        }

    # --- request checks, as the real APIs make them ---------------------------

    def problem(self, path: str, headers: dict[str, str], body: Any) -> Reply | None:
        expected = "/v1/chat/completions" if self.style == "openai" else "/v1/messages"
        if path != expected:
            return self.error(404, f"no route {path}")
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return self.error(400, "model is required")
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return self.error(400, "messages is required")
        if self.style == "anthropic":
            if "anthropic-version" not in headers:
                return self.error(400, "anthropic-version header is required")
            if not isinstance(body.get("max_tokens"), int):
                return self.error(400, "max_tokens: Field required")
            if any(m.get("role") == "system" for m in body["messages"]):
                return self.error(400, "system role is not allowed in messages")
        return None


def _handler(server: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            headers = {key.lower(): value for key, value in self.headers.items()}
            received = Received(self.path, headers, body, time.monotonic())
            server.received.append(received)
            server.arrive()
            status, answered, admitted = 0, False, False
            try:
                reply = server.problem(self.path, headers, body)
                if reply is None:
                    admitted = server.admit()
                    if not admitted:
                        reply = server.error(429, "over capacity", server.refusal_headers)
                if reply is None and server.route is not None:
                    reply = server.route(received)
                reply = reply or server.next_reply()
                status = reply.status
                if reply.hang_s:
                    server.stopping.wait(reply.hang_s)
                    self.close_connection = True
                    return
                if reply.delay_s:
                    server.stopping.wait(reply.delay_s)
                if admitted:
                    server.release()
                    admitted = False
                server.depart(status)  # before the client can see the answer and ask again
                answered = True
                self._send(reply)
            except (BrokenPipeError, ConnectionResetError):  # the client is gone (killed)
                self.close_connection = True
            finally:
                if admitted:
                    server.release()
                if not answered:
                    server.depart(status)

        def _send(self, reply: Reply) -> None:
            data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return Handler


def client_environment(*servers: FakeLLM) -> dict[str, str]:
    """The environment of a verifier process asking these servers: this one's, without
    its own VERIFIER_*, provider and proxy settings, plus the servers' base URLs."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("VERIFIER_", "OPENAI_", "ANTHROPIC_", "EVAL_"))
        and key.lower() not in ("http_proxy", "https_proxy")
    }
    for server in servers:
        environment.update(server.env)
    return environment


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # hundreds of clients connect at once; the default backlog is 5


def serve(style: Style) -> Iterator[FakeLLM]:
    """A started server for a fixture to yield; stopped when the fixture ends."""
    server = FakeLLM(style).start()
    try:
        yield server
    finally:
        server.stop()
