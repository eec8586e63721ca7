"""Real HTTP servers on 127.0.0.1 speaking the OpenAI and Anthropic wire formats.

The LLM judges' client code runs unmodified against them: each server is a
ThreadingHTTPServer in a thread that checks requests the way the real APIs do
(path, headers, required fields), records them, and answers from a script:
a queue of replies (a grade as a tool call, plain text, an error status with
Retry-After, a hang) with an optional default once the queue is empty, or a
`route` that picks the reply by request when several judges run at once.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

Style = Literal["openai", "anthropic"]


class Received(NamedTuple):
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

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
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, 0), _handler(self))
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
        self._server.shutdown()
        self._server.server_close()

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
            received = Received(self.path, headers, body)
            server.received.append(received)
            reply = server.problem(self.path, headers, body)
            if reply is None and server.route is not None:
                reply = server.route(received)
            reply = reply or server.next_reply()
            if reply.hang_s:
                server.stopping.wait(reply.hang_s)
                self.close_connection = True
                return
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


def serve(style: Style) -> Iterator[FakeLLM]:
    """A started server for a fixture to yield; stopped when the fixture ends."""
    server = FakeLLM(style).start()
    try:
        yield server
    finally:
        server.stop()
