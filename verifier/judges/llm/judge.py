"""One LLM judge at grading time: prompt, N samples, one grade with its details.

This runs inside the judge's forked process. It keeps its own deadline a little
short of the judge's timeout so that a slow or failing endpoint ends as an
error saying what happened (status, attempts, what could not be parsed) rather
than as a bare timeout. Nothing here ever turns a failure into a value.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from verifier.judges.base import JudgeAnswer, Record
from verifier.judges.llm.parse import Grade, excerpt, read_grade
from verifier.judges.llm.prompt import Prompt, PromptPlan
from verifier.judges.llm.providers import Endpoint, Generation
from verifier.judges.llm.redact import known_secrets, redact, redact_tree
from verifier.judges.llm.sampling import reduce_samples
from verifier.judges.llm.scale import AnswerError
from verifier.judges.llm.template import TemplateProblem
from verifier.judges.llm.transport import RequestFailed, RetryPolicy, post_json


class LLMJudgeError(Exception):
    """The judge could not grade this case; str() is the reason, `details` go to judges.json."""

    def __init__(self, reason: str, details: dict[str, Any]) -> None:
        secrets = known_secrets()
        super().__init__(redact(reason, secrets))
        self.details = redact_tree(details, secrets)


class _Sample(NamedTuple):
    grade: Grade | None
    problem: str | None
    latency_s: float
    attempts: int
    usage: dict[str, int]


class LLMJudge(NamedTuple):
    endpoint: Endpoint
    plan: PromptPlan
    generation: Generation
    policy: RetryPolicy
    samples: int
    timeout_s: float
    arguments: Mapping[str, Any] = MappingProxyType({})

    def __call__(self, record: Record) -> JudgeAnswer:
        deadline = time.monotonic() + self.timeout_s - min(2.0, 0.1 * self.timeout_s)
        details: dict[str, Any] = {
            "model": self.endpoint.model,
            "provider": self.endpoint.provider.name,
            "endpoint": self.endpoint.base_url,
        }
        try:
            prompt = self.plan.build(record, self.arguments)
        except TemplateProblem as error:
            raise LLMJudgeError(f"the prompt template failed to render: {error}", details) from None
        details["truncated"] = prompt.truncated
        if prompt.truncated:
            details["cut_chars"] = prompt.cut_chars
            details["case_chars"] = prompt.case_chars
        samples: list[_Sample] = []
        for _ in range(self.samples):
            try:
                samples.append(self._sample(prompt, deadline, details))
            except LLMJudgeError as error:  # the endpoint failed: stop asking it
                if sum(sample.grade is not None for sample in samples) * 2 <= self.samples:
                    raise
                samples.append(_Sample(None, str(error), 0.0, error.details["attempts"], {}))
                break
        return self._answer(samples, details)

    def _sample(self, prompt: Prompt, deadline: float, details: dict[str, Any]) -> _Sample:
        headers, body = self.endpoint.request(prompt, self.plan.scale, self.generation)
        try:
            exchange = post_json(self.endpoint.url, headers, body, self.policy, deadline)
        except RequestFailed as error:
            endpoint = self.endpoint
            raise LLMJudgeError(
                f"{endpoint.provider.label} endpoint {endpoint.url}, model {endpoint.model}: "
                f"{error}{endpoint.hint(error.status)}",
                {**details, "attempts": error.attempts},
            ) from None
        usage: dict[str, int] = {}
        try:
            reply = self.endpoint.read(exchange.payload)
            usage = reply.usage
            grade = read_grade(reply, self.plan.scale)
        except AnswerError as error:
            details.setdefault("answers", []).append(excerpt(_reply_text(exchange.payload)))
            return _Sample(None, str(error), exchange.latency_s, exchange.attempts, usage)
        return _Sample(grade, None, exchange.latency_s, exchange.attempts, usage)

    def _answer(self, samples: list[_Sample], details: dict[str, Any]) -> JudgeAnswer:
        details["latency_s"] = round(sum(sample.latency_s for sample in samples), 3)
        details["attempts"] = sum(sample.attempts for sample in samples)
        usage: dict[str, int] = {}
        for sample in samples:
            for name, count in sample.usage.items():
                usage[name] = usage.get(name, 0) + count
        if usage:
            details["usage"] = usage
        details["samples"] = self.samples
        graded = [sample.grade for sample in samples if sample.grade is not None]
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


def _reply_text(payload: Mapping[str, Any]) -> str:
    """The model's raw answer, for the record of an answer that could not be read."""
    return json.dumps(payload.get("choices") or payload.get("content") or payload, default=str)
