"""Asks a model one sample's question: the cache, the endpoint's gate, what the model rejects.

A Client is shared by every request of one run of judges (the samples of a judge in
`grade`, every LLM request of a `verifier batch`) and is safe to use from many
threads. It holds one Gate per endpoint URL (the concurrency bound and the shared
backoff), the response cache, and what each model was found to reject: a 400 that
names `temperature`, `max_tokens` or `seed` makes the request go again without it
(or with `max_completion_tokens`), and every later request to that model leaves it
out. The cache key is taken from the request as configured, before any such change,
so a rerun finds what an earlier run stored whatever it had to learn first.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import attrs

from verifier.judges.llm.answer_scale import AnswerScale
from verifier.judges.llm.cache import ResponseCache
from verifier.judges.llm.gate import Gate, GateFigures
from verifier.judges.llm.providers import Endpoint, Generation, Quirks, learn_quirk
from verifier.judges.llm.transport import RequestFailed, RetryPolicy, post_json

if TYPE_CHECKING:
    from verifier.judges.llm.prompt import Prompt


@attrs.frozen
class Answered:
    """A response to one sample: from the endpoint, or from the cache (cached)."""

    payload: dict[str, Any]
    latency_s: float  # the successful attempt; 0.0 from the cache
    attempts: int  # requests sent for it (0 from the cache)
    cached: bool
    key: str | None  # its cache key (None: no cache)
    model: str


class Client:
    def __init__(
        self, capacity: int, cache: ResponseCache | None = None, initial: int | None = None
    ) -> None:
        self.capacity = capacity  # requests in flight per endpoint, at most
        self.initial = initial  # where each gate starts (None: at capacity); see gate.Gate
        self.cache = cache
        self._gates: dict[str, Gate] = {}
        self._quirks: dict[tuple[str, str], Quirks] = {}
        self._lock = threading.Lock()

    def ask(
        self,
        endpoint: Endpoint,
        prompt: Prompt,
        scale: AnswerScale,
        generation: Generation,
        policy: RetryPolicy,
        *,
        sample: int,
        deadline: float,
    ) -> Answered:
        """One sample's response (RequestFailed when there is none)."""
        headers, body = endpoint.request(prompt, scale, generation)
        key = None
        if self.cache is not None:
            fields = {
                "provider": endpoint.provider.name,
                "url": endpoint.url,
                "model": endpoint.model,
                "output_mode": generation.output_mode,
                "sample": sample,
            }
            key = self.cache.key(fields, body, prompt.nonce)
            stored = self.cache.get(key)
            if stored is not None:
                return Answered(stored, 0.0, 0, True, key, endpoint.model)
        gate = self.gate(endpoint.url)
        spent = 0
        while True:
            quirks = self._quirks.get((endpoint.url, endpoint.model), frozenset())
            if quirks:
                headers, body = endpoint.request(prompt, scale, generation, quirks)
            try:
                exchange = post_json(endpoint.url, headers, body, policy, deadline, gate)
            except RequestFailed as error:
                spent += error.attempts
                learned = learn_quirk(str(error), body) if error.status == 400 else None
                if learned is None:
                    raise RequestFailed(str(error), spent, error.status) from None
                self._learn(endpoint, learned)
                continue
            return Answered(
                exchange.payload,
                exchange.latency_s,
                spent + exchange.attempts,
                False,
                key,
                endpoint.model,
            )

    def keep(self, answered: Answered) -> None:
        """Store a response whose answer was usable (nothing without a cache, or from it)."""
        if self.cache is not None and answered.key is not None and not answered.cached:
            self.cache.put(answered.key, answered.payload, answered.model)

    def figures(self) -> dict[str, GateFigures]:
        """Each endpoint's gate figures, by URL."""
        with self._lock:
            gates = dict(self._gates)
        return {url: gate.figures() for url, gate in gates.items()}

    def gate(self, url: str) -> Gate:
        """The endpoint's gate (made on first use)."""
        with self._lock:
            gate = self._gates.get(url)
            if gate is None:
                gate = self._gates[url] = Gate(self.capacity, self.initial)
            return gate

    def _learn(self, endpoint: Endpoint, quirk: str) -> None:
        with self._lock:
            model = (endpoint.url, endpoint.model)
            self._quirks[model] = self._quirks.get(model, frozenset()) | {quirk}
