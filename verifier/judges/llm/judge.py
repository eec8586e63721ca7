"""One LLM judge at grading time: prompt, N samples, one grade with its details.

In `verifier grade` the whole judge runs inside its forked process (`__call__`): the
prompt is built, the samples are asked side by side (threads), and the answers are
reduced to one grade. `verifier batch` runs the same three steps apart: `prompt` in
the worker that read the case, `sample` in the batch's shared request pool, and
`conclude` once every sample is back.

The judge keeps its own deadline a little short of its timeout, which is its whole
budget (prompt, every sample, every retry), so that a slow or failing endpoint ends
as an error saying what happened (status, attempts, what could not be parsed) rather
than as a bare timeout. Nothing here ever turns a failure into a value.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from verifier.judges.base import JudgeAnswer, Record
from verifier.judges.llm.cache import ResponseCache
from verifier.judges.llm.client import Client
from verifier.judges.llm.parse import Grade, excerpt, read_grade
from verifier.judges.llm.prompt import Prompt, PromptPlan
from verifier.judges.llm.providers import Endpoint, Generation
from verifier.judges.llm.redact import known_secrets, redact, redact_tree
from verifier.judges.llm.sampling import reduce_samples
from verifier.judges.llm.scale import AnswerError
from verifier.judges.llm.template import TemplateProblem
from verifier.judges.llm.tokens import is_context_overflow
from verifier.judges.llm.transport import RequestFailed, RetryPolicy
from verifier.named import NamedTuple


class LLMJudgeError(Exception):
    """The judge could not grade this case; str() is the reason, `details` go to judges.json."""

    def __init__(self, reason: str, details: dict[str, Any]) -> None:
        secrets = known_secrets()
        super().__init__(redact(reason, secrets))
        self.details = redact_tree(details, secrets)


class Sample(NamedTuple):
    """One sample's outcome: a grade, or the problem that left it without one."""

    grade: Grade | None
    problem: str | None = None
    latency_s: float = 0.0
    attempts: int = 0
    usage: Mapping[str, int] = MappingProxyType({})
    cached: bool = False
    endpoint_failed: bool = False  # no response at all (vs. an answer that could not be read)
    answer: str | None = None  # an excerpt of an answer that could not be read
    overflowed: bool = False  # the endpoint refused the prompt for its length: a case fact


class Spend(NamedTuple):
    """What one judge's samples cost: for the batch summary, not judges.json."""

    model: str
    requests: int = 0  # HTTP requests sent, retries included
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latencies: tuple[float, ...] = ()  # of the requests that were answered

    @classmethod
    def of(cls, model: str, samples: Sequence[Sample]) -> Spend:
        sent = [sample for sample in samples if not sample.cached]
        return cls(
            model=model,
            requests=sum(sample.attempts for sample in sent),
            cache_hits=sum(sample.cached for sample in samples),
            input_tokens=sum(sample.usage.get("input_tokens", 0) for sample in sent),
            output_tokens=sum(sample.usage.get("output_tokens", 0) for sample in sent),
            latencies=tuple(
                sample.latency_s
                for sample in sent
                if not sample.endpoint_failed and sample.attempts
            ),
        )


class LLMJudge(NamedTuple):
    endpoint: Endpoint
    plan: PromptPlan
    generation: Generation
    policy: RetryPolicy
    samples: int
    timeout_s: float
    arguments: Mapping[str, Any] = MappingProxyType({})
    cache: ResponseCache | None = None  # `grade --llm-cache DIR`

    def __call__(self, record: Record) -> JudgeAnswer:
        """The whole judge, in `grade`'s judge process: its samples side by side."""
        deadline = self.deadline(time.monotonic())
        prompt = self.prompt(record)
        if prompt.case_fact is not None:
            return self.lowest(prompt, prompt.case_fact)
        client = Client(capacity=self.samples, cache=self.cache)
        if self.samples == 1:
            return self.conclude(prompt, [self.sample(prompt, client, 0, deadline)])
        found: list[Sample | None] = [None] * self.samples

        def ask(index: int) -> None:
            found[index] = self.sample(prompt, client, index, deadline)

        threads = [
            threading.Thread(target=ask, args=(i,), daemon=True) for i in range(self.samples)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()) + 1.0)
        late = Sample(None, "no answer within the judge's timeout", endpoint_failed=True)
        return self.conclude(prompt, [sample or late for sample in found])

    def deadline(self, started: float, spent_s: float = 0.0) -> float:
        """When the judge stops asking: its timeout from started, less what it already
        spent (spent_s) and a margin to say why it stopped."""
        return started + self.timeout_s - spent_s - min(2.0, 0.1 * self.timeout_s)

    def prompt(self, record: Record) -> Prompt:
        """The case's prompt (LLMJudgeError when the template fails to render)."""
        try:
            return self.plan.build(record, self.arguments)
        except TemplateProblem as error:
            raise LLMJudgeError(
                f"the prompt template failed to render: {error}",
                {**self._origin(), "cached": False},
            ) from None

    def sample(self, prompt: Prompt, client: Client, index: int, deadline: float) -> Sample:
        """Sample number index; never raises (a failure is the sample's problem)."""
        try:
            answered = client.ask(
                self.endpoint,
                prompt,
                self.plan.scale,
                self.generation,
                self.policy,
                index,
                deadline,
            )
        except RequestFailed as error:
            endpoint = self.endpoint
            if is_context_overflow(error.status, str(error)):
                return Sample(None, f"model {endpoint.model} refused the prompt for its length "
                              f"({error})", attempts=error.attempts, overflowed=True)  # fmt: skip
            reason = (
                f"{endpoint.provider.label} endpoint {endpoint.url}, model {endpoint.model}: "
                f"{error}{endpoint.hint(error.status)}"
            )
            return Sample(None, reason, attempts=error.attempts, endpoint_failed=True)
        except Exception as error:  # a bug must not leave a sample unanswered
            return Sample(None, f"internal error: {type(error).__name__}: {error}")
        usage: Mapping[str, int] = {}
        try:
            reply = self.endpoint.read(answered.payload)
            usage = reply.usage
            grade = read_grade(reply, self.plan.scale)
        except AnswerError as error:
            text = excerpt(_reply_text(answered.payload))
            return Sample(
                None, str(error), answered.latency_s, answered.attempts, usage,
                answered.cached, answer=text,
            )  # fmt: skip
        client.keep(answered)
        return Sample(grade, None, answered.latency_s, answered.attempts, usage, answered.cached)

    def lowest(self, prompt: Prompt, fact: str) -> JudgeAnswer:
        """The judge's lowest value (false, or its score_range's low end) for a fact about
        the case that leaves nothing to grade: an error here could be dropped from the
        reward and raise it."""
        scale = self.plan.scale
        value: bool | float = False if scale.kind == "pass_fail" else scale.low
        details = {**self._origin(), "case_fact": fact, "prompt_tokens_estimate": prompt.tokens}
        rationale = f"{fact}: counted as the lowest value"
        secrets = known_secrets()
        return JudgeAnswer(value, redact(rationale, secrets), redact_tree(details, secrets))

    def conclude(self, prompt: Prompt, samples: Sequence[Sample]) -> JudgeAnswer:
        """One grade from the samples (LLMJudgeError when most gave none; the lowest
        value when the endpoint refused the prompt for its length)."""
        overflowed = next((sample for sample in samples if sample.overflowed), None)
        if overflowed is not None:
            return self.lowest(prompt, str(overflowed.problem))
        details: dict[str, Any] = {**self._origin(), "truncated": prompt.truncated}
        if prompt.truncated:
            details["cut_chars"] = prompt.cut_chars
            details["case_chars"] = prompt.case_chars
        answers = [sample.answer for sample in samples if sample.answer is not None]
        if answers:
            details["answers"] = answers
        graded = [sample.grade for sample in samples if sample.grade is not None]
        attempts = sum(sample.attempts for sample in samples)
        cached = bool(samples) and all(sample.cached for sample in samples)
        failed = [sample for sample in samples if sample.endpoint_failed]
        if failed and len(graded) * 2 <= self.samples:  # the endpoint failed this judge
            details.update(attempts=attempts, cached=cached)
            raise LLMJudgeError(str(failed[0].problem), details)
        details["latency_s"] = round(sum(sample.latency_s for sample in samples), 3)
        details["attempts"] = attempts
        usage: dict[str, int] = {}
        for sample in samples:
            for name, count in sample.usage.items():
                usage[name] = usage.get(name, 0) + count
        if usage:
            details["usage"] = usage
        details["samples"] = self.samples
        details["cached"] = cached
        problems = [sample.problem for sample in samples if sample.problem is not None]
        if problems:
            details["failed_samples"] = problems
        if len(graded) * 2 <= self.samples:
            reason = (
                problems[0]
                if self.samples == 1
                else f"{len(problems)} of {self.samples} answers unusable: {'; '.join(problems)}"
            )
            raise LLMJudgeError(f"model {self.endpoint.model}: {reason}", details)
        details.pop("answers", None)
        reduced = reduce_samples([grade.value for grade in graded], self.plan.scale)
        if self.samples > 1:
            details["sample_values"] = [grade.value for grade in graded]
            details["agreement"] = round(reduced.agreement, 4)
            if reduced.spread is not None:
                details["spread"] = reduced.spread
        chosen = min(graded, key=lambda grade: abs(float(grade.value) - float(reduced.value)))
        details["answer_format"] = chosen.via
        secrets = known_secrets()
        rationale = redact(chosen.rationale, secrets) if chosen.rationale else None
        return JudgeAnswer(reduced.value, rationale, redact_tree(details, secrets))

    def fingerprint(self) -> dict[str, Any]:
        """What, besides eval.yaml, decides this judge's answers: for a batch's resume key."""
        return {
            **self._origin(),
            "generation": self.generation._asdict(),
            "max_case_chars": self.plan.max_case_chars,
            "context_tokens": self.plan.context_tokens,
        }

    def _origin(self) -> dict[str, Any]:
        return {
            "model": self.endpoint.model,
            "provider": self.endpoint.provider.name,
            "endpoint": self.endpoint.base_url,
        }


def _reply_text(payload: Mapping[str, Any]) -> str:
    """The model's raw answer, for the record of an answer that could not be read."""
    return json.dumps(payload.get("choices") or payload.get("content") or payload, default=str)
