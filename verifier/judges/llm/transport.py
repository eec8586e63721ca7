"""POST a JSON request with a per-request timeout, bounded retries and a deadline.

Only the standard library (urllib honours HTTPS_PROXY / NO_PROXY and
SSL_CERT_FILE, which is what a cluster needs). Rate limits (429), server errors
(5xx), timeouts and dropped connections are retried with exponential backoff,
honouring Retry-After up to a cap; nothing is retried past the deadline, which
is the judge's own timeout less a margin, so the judge reports why it gave up
instead of being killed without a reason. Any other status fails at once.

Every attempt passes the endpoint's Gate (verifier.judges.llm.gate): a 429 or 503
pauses the gate for every request to that endpoint, instead of only this request
sleeping while the others keep hammering it.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import attrs

from verifier.judges.llm.gate import Gate

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
MAX_ERROR_BYTES = 64 * 1024
_RETRY_STATUSES = frozenset({408, 429})
_THROTTLE_STATUSES = frozenset({429, 503, 529})  # 529: Anthropic's "overloaded"
_CHUNK = 65536


@attrs.frozen
class RetryPolicy:
    request_timeout_s: float = 120.0  # one attempt (connect, each read, the whole body)
    retries: int = 3  # attempts after the first
    backoff_s: float = 1.0  # first wait; doubles each retry
    max_wait_s: float = 30.0  # cap on any one wait, Retry-After included


@attrs.frozen
class Exchange:
    payload: dict[str, Any]
    latency_s: float  # the successful attempt
    attempts: int


class RequestFailed(Exception):
    """The request did not produce a usable response; str() says why."""

    def __init__(self, reason: str, attempts: int, status: int | None = None) -> None:
        super().__init__(reason)
        self.attempts = attempts
        self.status = status


class _Transient(Exception):
    """One attempt failed in a way worth retrying; `throttle`: the endpoint asked to slow down."""

    def __init__(
        self, reason: str, retry_after: float | None = None, *, throttle: bool = False
    ) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.throttle = throttle


class _Fatal(Exception):
    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.status = status


def post_json(
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    policy: RetryPolicy,
    deadline: float,
    gate: Gate,
) -> Exchange:
    """The decoded JSON object of a 2xx response; RequestFailed otherwise."""
    data = json.dumps(body).encode()
    attempt = 0
    last: _Transient | None = None
    while True:
        if not gate.enter(deadline):
            why = f"{last} (gave up after {attempt} attempts: " if last else "no request sent ("
            raise RequestFailed(
                f"{why}the endpoint is throttled past the judge's timeout)", attempt
            )
        attempt += 1
        started = time.monotonic()
        try:
            payload = _attempt(
                url, headers, data, min(policy.request_timeout_s, deadline - started)
            )
        except _Fatal as error:
            raise RequestFailed(str(error), attempt, error.status) from None
        except _Transient as error:
            last = error
        else:
            latency = time.monotonic() - started
            gate.succeeded(latency)
            return Exchange(payload, latency, attempt)
        finally:
            gate.leave()
        if attempt > policy.retries:
            raise RequestFailed(f"{last} (gave up after {attempt} attempts)", attempt)
        wait = _wait(policy, attempt, last.retry_after)
        if time.monotonic() + wait + 0.05 >= deadline:
            raise RequestFailed(
                f"{last} (gave up after {attempt} attempt{'s' * (attempt > 1)}: "
                "no time left for another within the judge's timeout)",
                attempt,
            )
        if last.throttle:
            gate.throttle(wait)  # this request, like every other, waits at gate.enter
        else:
            time.sleep(wait)


def _wait(policy: RetryPolicy, attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(max(retry_after, 0.0), policy.max_wait_s)
    base = policy.backoff_s * 2 ** (attempt - 1)
    jitter = random.uniform(0, base / 2)  # noqa: S311 (spreading retries, not a secret)
    return min(base / 2 + jitter, policy.max_wait_s)


def _attempt(url: str, headers: Mapping[str, str], data: bytes, timeout: float) -> dict[str, Any]:
    if timeout <= 0.01:
        raise _Fatal("no time left for a request within the judge's timeout")
    request = urllib.request.Request(url, data=data, headers=dict(headers), method="POST")  # noqa: S310
    attempt_deadline = time.monotonic() + timeout
    try:
        # The endpoint's URL is http(s), checked when the judge was loaded.
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            raw = _read(response, attempt_deadline, MAX_RESPONSE_BYTES)
    except urllib.error.HTTPError as error:
        _raise_for_status(error)
    except TimeoutError:
        raise _Transient(f"no response within {timeout:g}s (request timeout)") from None
    except urllib.error.URLError as error:
        raise _connection_problem(error.reason) from None
    except (ConnectionError, http.client.HTTPException, OSError) as error:
        raise _connection_problem(error) from None
    try:
        payload = json.loads(raw)
    except ValueError:
        raise _Fatal(f"the response is not JSON: {_excerpt(raw)!r}") from None
    if not isinstance(payload, dict):
        raise _Fatal(f"the response is not a JSON object: {_excerpt(raw)!r}")
    return payload


def _read(response: Any, deadline: float, limit: int) -> bytes:
    """The body, failing when it is larger than limit or still arriving at the deadline."""
    chunks, size = [], 0
    while chunk := response.read1(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise _Fatal(f"the response is larger than {limit} bytes")
        if time.monotonic() > deadline:
            raise _Transient("the response was still arriving at the request timeout")
        chunks.append(chunk)
    return b"".join(chunks)


def _raise_for_status(error: urllib.error.HTTPError) -> None:
    status = error.code
    try:
        body = error.read(MAX_ERROR_BYTES)
    except (OSError, http.client.HTTPException):
        body = b""
    reason = f"HTTP {status}: {error_message(body) or error.reason}"
    if status in _RETRY_STATUSES or status >= 500:
        throttle = status in _THROTTLE_STATUSES
        raise _Transient(reason, retry_after(error.headers), throttle=throttle) from None
    raise _Fatal(reason, status) from None


def _connection_problem(reason: object) -> Exception:
    if isinstance(reason, ssl.SSLCertVerificationError):
        return _Fatal(
            f"TLS certificate verification failed ({reason.verify_message}); "
            "point SSL_CERT_FILE at the CA bundle that signs the endpoint"
        )
    if isinstance(reason, TimeoutError):
        return _Transient("no response within the request timeout")
    if isinstance(reason, ConnectionRefusedError):
        return _Transient("connection refused")
    if isinstance(reason, socket.gaierror):
        return _Transient(f"cannot resolve the host ({reason.strerror})")
    text = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
    return _Transient(f"connection failed: {text}")


def retry_after(headers: Any) -> float | None:
    """Seconds to wait from Retry-After (seconds or an HTTP date) or retry-after-ms."""
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return float(milliseconds) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def error_message(body: bytes) -> str:
    """The error text of an API error body (OpenAI, Anthropic, vLLM and FastAPI shapes)."""
    try:
        payload = json.loads(body)
    except ValueError:
        return _excerpt(body)
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _excerpt(error["message"])
        for candidate in (error, payload.get("message"), payload.get("detail")):
            if isinstance(candidate, str):
                return _excerpt(candidate)
    return _excerpt(body)


def _excerpt(data: bytes | str, limit: int = 300) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
