"""One LLM judge at grading time: prompt, N samples, one grade with its details.

In `verifier grade` the whole judge runs inside its forked process (`__call__`): the
prompt is built, the samples are asked side by side (threads), and the answers are
reduced to one grade. `verifier batch` runs the same three steps apart: `prompt` in
the worker that read the case, `sample` in the batch's shared request pool, and
`conclude` once every sample is back.

A judge asks `samples` answers of each of its models: its one model, or each member
of its panel (verifier.judges.llm.panel), whose values are then combined. Its guard,
when it has one, screens the prompt's material first (verifier.judges.llm.guard);
its criteria, when it lists them, are all answered in each request and combined into
its value (verifier.judges.llm.criteria), or with `mode: individual` each in a request
of its own, joined back before the samples are reduced (verifier.judges.llm.individual).

The judge keeps its own deadline a little short of its timeout, which is its whole
budget (prompt, every sample, every retry), so that a slow or failing endpoint ends
as an error saying what happened (status, attempts, what could not be parsed) rather
than as a bare timeout. Nothing here ever turns a failure into a value.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from verifier.judges.base import JudgeAnswer, JudgeContext, Record
from verifier.judges.llm import individual, panel
from verifier.judges.llm.answer_scale import AnswerError, AnswerScale
from verifier.judges.llm.cache import ResponseCache
from verifier.judges.llm.client import Client
from verifier.judges.llm.criteria import CriteriaForm, is_discrete, rationale_of, verdict_rows
from verifier.judges.llm.guard import Guard, Screening, fenced_blocks, model_flags, screen
from verifier.judges.llm.parse import Grade, excerpt, read_answer
from verifier.judges.llm.pricing import Price, cost_usd
from verifier.judges.llm.prompt import Prompt, PromptPlan
from verifier.judges.llm.providers import Endpoint, Generation
from verifier.judges.llm.sampling import Sample, reduce_samples
from verifier.judges.llm.template import TemplateProblem
from verifier.judges.llm.tokens import is_context_overflow
from verifier.judges.llm.transport import RequestFailed, RetryPolicy
from verifier.redact import known_secrets, redact, redact_tree


class LLMJudgeError(Exception):
    """The judge could not grade this case; str() is the reason, `details` go to judges.json."""

    def __init__(self, reason: str, details: dict[str, Any]) -> None:
        secrets = known_secrets()
        super().__init__(redact(reason, secrets))
        self.details = redact_tree(details, secrets)


@attrs.frozen
class Spend:
    """What one model's samples for a judge cost: for the batch summary, not judges.json."""

    model: str
    requests: int = 0  # HTTP requests sent, retries included
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latencies: tuple[float, ...] = ()  # of the requests that were answered
    cost_usd: float | None = 0.0  # of the requests sent; None: the model has no price

    @classmethod
    def of(cls, model: str, samples: Sequence[Sample], price: Price | None = None) -> Spend:
        sent = [sample for sample in samples if not sample.cached]
        input_tokens = sum(sample.usage.get("input_tokens", 0) for sample in sent)
        output_tokens = sum(sample.usage.get("output_tokens", 0) for sample in sent)
        return cls(
            model=model,
            requests=sum(sample.attempts for sample in sent),
            cache_hits=sum(sample.cached for sample in samples),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latencies=tuple(
                sample.latency_s
                for sample in sent
                if not sample.endpoint_failed and sample.attempts
            ),
            cost_usd=cost_usd(price, input_tokens, output_tokens),
        )


@attrs.frozen
class _Member:
    """One model's samples reduced: its value, or why it has none (problem)."""

    value: bool | float | None
    details: dict[str, Any]  # judges.json fields of its samples
    chosen: Grade | None = None  # the sample closest to the value
    verdicts: tuple[Any, ...] = ()  # a criteria judge's reduced verdicts
    problem: str | None = None


@attrs.frozen
class LLMJudge:
    endpoint: Endpoint  # the judge's model (a panel's first member)
    plan: PromptPlan
    generation: Generation
    policy: RetryPolicy
    samples: int  # asked of each model
    timeout_s: float
    arguments: Mapping[str, Any] = MappingProxyType({})
    cache: ResponseCache | None = None  # `grade --llm-cache DIR`
    panel: tuple[Endpoint, ...] = ()  # every member, with a panel
    panel_rule: str = "median"
    criteria: CriteriaForm | None = None  # the form plan.scale asks for, with criteria
    guard: Guard | None = None
    prices: tuple[Price | None, ...] = ()  # each model's, in the order of `members`
    prompt_sha256: str = ""  # what the calibration report names as the prompt measured
    individual: bool = False  # `mode: individual`: a request per criterion

    @property
    def members(self) -> tuple[Endpoint, ...]:
        """The models asked: the panel's, else the judge's one."""
        return self.panel or (self.endpoint,)

    @property
    def asks(self) -> int:
        """Requests one case needs (before retries): samples of each model (of each
        criterion, for an individual judge)."""
        return len(self.members) * self.samples * self._requests_per_sample

    @property
    def _requests_per_sample(self) -> int:
        return len(self.criteria.criteria) if self.individual and self.criteria else 1

    @property
    def judge_scale(self) -> AnswerScale:
        return self.plan.scale.judge_scale

    def __call__(self, context: JudgeContext) -> JudgeAnswer:
        """The whole judge, in `grade`'s judge process: its samples side by side."""
        deadline = self.deadline(time.monotonic())
        prompt = self.prompt(context.record)
        screening = self.screen(prompt)
        unasked = self.unasked(prompt, screening)
        if unasked is not None:
            return unasked
        client = Client(capacity=self.asks, cache=self.cache)
        if self.asks == 1:
            return self.conclude(prompt, [self.sample(prompt, client, 0, deadline)], screening)
        found: list[Sample | None] = [None] * self.asks

        def ask(index: int) -> None:
            found[index] = self.sample(prompt, client, index, deadline)

        threads = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(self.asks)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()) + 1.0)
        late = Sample(None, "no answer within the judge's timeout", endpoint_failed=True)
        return self.conclude(prompt, [sample or late for sample in found], screening)

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
                {**self.origin(), "cached": False},
            ) from None

    def screen(self, prompt: Prompt) -> Screening | None:
        """The guard's findings in the prompt's fenced material (None: no guard)."""
        if self.guard is None:
            return None
        secrets = known_secrets()  # before any excerpt is cut: no half key survives a cut
        material = [redact(block, secrets) for block in fenced_blocks(prompt.user, prompt.nonce)]
        return screen(self.guard, material)

    def unasked(self, prompt: Prompt, screening: Screening | None) -> JudgeAnswer | None:
        """The judge's answer when nothing is to be sent (None: ask the models): the
        lowest value for a fact about the case in its prompt, or for text aimed at the
        grader that its guard zeroes."""
        if prompt.case_fact is not None:
            return self.case_fact(prompt, prompt.case_fact)
        if screening is not None and screening.zeroes:
            return self.zeroed(prompt, screening)
        return None

    def zeroed(self, prompt: Prompt, screening: Screening) -> JudgeAnswer:
        """The judge's lowest value, unasked: its guard found text aimed at the grader."""
        details: dict[str, Any] = {**self.origin(), "truncated": prompt.truncated}
        details.update(attempts=0, cached=False, cost_usd=0.0, guard=screening.to_json())
        return self.lowest(_zero_rationale(screening), details)

    def sample(self, prompt: Prompt, client: Client, index: int, deadline: float) -> Sample:
        """Request number index (sample index % samples of member index // samples; an
        individual judge's: verifier.judges.llm.individual); never raises (a failure is
        the sample's problem)."""
        prompt, scale = self.asked(prompt, index)
        sample_index = index % self.samples
        endpoint = self.endpoint_of(index)
        try:
            answered = client.ask(
                endpoint,
                prompt,
                scale,
                self.generation,
                self.policy,
                sample=sample_index,
                deadline=deadline,
            )
        except RequestFailed as error:
            if is_context_overflow(error.status, str(error)):
                return Sample(
                    None,
                    f"model {endpoint.model} refused the prompt for its length ({error})",
                    attempts=error.attempts,
                    overflowed=True,
                )
            reason = (
                f"{endpoint.provider.label} endpoint {endpoint.url}, model {endpoint.model}: "
                f"{error}{endpoint.hint(error.status)}"
            )
            return Sample(None, reason, attempts=error.attempts, endpoint_failed=True)
        except Exception as error:  # a bug must not leave a sample unanswered
            return Sample(None, f"internal error: {type(error).__name__}: {error}")
        usage: Mapping[str, int] = {}
        try:
            reply = endpoint.read(answered.payload)
            usage = reply.usage
            grade = read_answer(reply, scale)
        except AnswerError as error:
            text = excerpt(_reply_text(answered.payload))
            return Sample(
                None,
                str(error),
                answered.latency_s,
                answered.attempts,
                usage,
                answered.cached,
                answer=text,
            )
        client.keep(answered)
        return Sample(grade, None, answered.latency_s, answered.attempts, usage, answered.cached)

    def endpoint_of(self, index: int) -> Endpoint:
        """The model request number index asks."""
        return self.members[self._member_of(index)]

    def _member_of(self, index: int) -> int:
        return index // (self.samples * self._requests_per_sample)

    def spends(self, samples: Sequence[Sample]) -> tuple[Spend, ...]:
        """What each model's samples cost (samples in request order)."""
        return tuple(
            Spend.of(endpoint.model, self._of_member(samples, index), self._price(index))
            for index, endpoint in enumerate(self.members)
        )

    def asked(self, prompt: Prompt, index: int) -> tuple[Prompt, Any]:
        """The prompt and answer form of request number index: the judge's, or for an
        individual judge its criterion's (verifier.judges.llm.individual)."""
        scale: Any = self.plan.scale
        if self.individual and self.criteria is not None:
            request = individual.request_of(index, len(self.criteria.criteria), self.samples)
            scale = individual.asking(scale, request.criterion)
            prompt = individual.prompt_for(prompt, scale, self.plan.output_mode)
        return prompt, scale

    def ceiling_usd(self, prompt: Prompt) -> float | None:
        """The most this judge's requests for prompt can cost, as counted (the answered
        attempt's usage): every request (each sample of each model, of each criterion for
        an individual judge) at its prompt's token ceiling and its endpoint's output
        ceiling (max_tokens, with a thinking budget on top). What `--max-cost-usd`
        reserves before they are sent; None: a model without a price."""
        costs = []
        for index in range(self.asks):
            asked, scale = self.asked(prompt, index)
            member = self._member_of(index)
            output = self.members[member].output_ceiling(self.generation)
            tokens = self.plan.input_ceiling(asked, scale)
            costs.append(cost_usd(self._price(member), tokens, output))
        known = [cost for cost in costs if cost is not None]
        return math.fsum(known) if len(known) == len(costs) else None

    def lowest(self, rationale: str, details: Mapping[str, Any]) -> JudgeAnswer:
        """The judge's lowest value (false, or its scale's low end) with why: for what
        the case did, which a judge never turns into an error (an error could be dropped
        from the reward and raise it), nor into a grade the model was asked for. Every
        such path comes here: a fact about the case (case_fact), text aimed at the
        grader under `guard: {on_detect: zero}`."""
        scale = self.judge_scale
        value: bool | float = False if scale.kind == "pass_fail" else scale.low
        secrets = known_secrets()
        return JudgeAnswer(value, redact(rationale, secrets), redact_tree(dict(details), secrets))

    def case_fact(self, prompt: Prompt, fact: str, samples: Sequence[Sample] = ()) -> JudgeAnswer:
        """The lowest value for a fact about the case that leaves nothing to grade: its
        material overflows a model's context (samples: what was asked, every member's,
        for its attempts and cost), its template looks up what it lacks (nothing sent)."""
        costs = [spend.cost_usd for spend in self.spends(samples)] if samples else [0.0]
        details = {
            **self.origin(),
            "case_fact": fact,
            "prompt_tokens_estimate": prompt.tokens,
            "attempts": sum(sample.attempts for sample in samples),
            "cost_usd": None if None in costs else _rounded(math.fsum(costs)),  # type: ignore[arg-type]
        }
        return self.lowest(f"{fact}: counted as the lowest value", details)

    def conclude(
        self, prompt: Prompt, samples: Sequence[Sample], screening: Screening | None = None
    ) -> JudgeAnswer:
        """One grade from the samples (LLMJudgeError when too few gave one; the lowest
        value when an endpoint refused the prompt for its length, for any member)."""
        if self.individual and self.criteria is not None:
            samples = individual.joined(samples, self.criteria, len(self.members), self.samples)
        overflowed = next((sample for sample in samples if sample.overflowed), None)
        if overflowed is not None:
            return self.case_fact(prompt, str(overflowed.problem), samples)
        head: dict[str, Any] = {**self.origin(), "truncated": prompt.truncated}
        if prompt.truncated:
            head["cut_chars"] = prompt.cut_chars
            head["case_chars"] = prompt.case_chars
        if self.panel:
            value, rationale, details = self._panel(head, samples)
        else:
            member = self._member(self.endpoint, samples, self._price(0))
            if member.value is None:
                raise LLMJudgeError(str(member.problem), {**head, **member.details})
            details = {**head, **member.details}
            value = member.value
            assert member.chosen is not None
            rationale = member.chosen.rationale
            if self.criteria is not None:
                rationale = rationale_of(member.verdicts)
                details["criteria"] = verdict_rows(self.criteria.criteria, member.verdicts)
        if self.criteria is not None:
            details["aggregate"] = {"rule": self.criteria.rule}
            if self.criteria.rule == "threshold":
                details["aggregate"]["threshold"] = self.criteria.threshold
        if screening is not None:
            votes = [
                sample.grade.grader_directed
                for sample in samples
                if sample.grade is not None and sample.grade.grader_directed is not None
            ]
            details["guard"] = screening.to_json(votes)
            if details["guard"]["flagged"] and screening.guard.on_detect == "zero":
                return self.lowest(_zero_rationale(screening, votes), details)
        secrets = known_secrets()
        rationale = redact(rationale, secrets) if rationale else None
        return JudgeAnswer(value, rationale, redact_tree(details, secrets))

    def fingerprint(self) -> dict[str, Any]:
        """What, besides eval.yaml, decides this judge's answers: for a batch's resume key."""
        generation = attrs.asdict(self.generation, recurse=False)
        if generation["reasoning_effort"] is None:  # the keys of judges without one unchanged
            del generation["reasoning_effort"]
        return {
            **self.origin(),
            "generation": generation,
            "max_case_chars": self.plan.max_case_chars,
            "context_tokens": self.plan.context_tokens,
        }

    def _member(
        self, endpoint: Endpoint, samples: Sequence[Sample], price: Price | None
    ) -> _Member:
        """One model's samples as one value, with their judges.json fields."""
        details: dict[str, Any] = {}
        answers = [sample.answer for sample in samples if sample.answer is not None]
        if answers:
            details["answers"] = answers
        graded = [sample.grade for sample in samples if sample.grade is not None]
        attempts = sum(sample.attempts for sample in samples)
        cached = bool(samples) and all(sample.cached for sample in samples)
        spent = Spend.of(endpoint.model, samples, price).cost_usd
        failed = [sample for sample in samples if sample.endpoint_failed]
        if failed and len(graded) * 2 <= self.samples:  # the endpoint failed this judge
            details.update(attempts=attempts, cached=cached, cost_usd=_rounded(spent))
            return _Member(None, details, problem=str(failed[0].problem))
        details["latency_s"] = round(sum(sample.latency_s for sample in samples), 3)
        details["attempts"] = attempts
        usage: dict[str, int] = {}
        for sample in samples:
            for name, count in sample.usage.items():
                usage[name] = usage.get(name, 0) + count
        if usage:
            details["usage"] = usage
        details["cost_usd"] = _rounded(spent)
        if spent is None:
            details["cost_note"] = f"no price for model {endpoint.model}: set it in prices"
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
            return _Member(None, details, problem=f"model {endpoint.model}: {reason}")
        details.pop("answers", None)
        values = [grade.value for grade in graded]
        verdicts: tuple[Any, ...] = ()
        if self.criteria is None:
            reduced = reduce_samples(values, self.judge_scale)
            value, agreement, spread = reduced.value, reduced.agreement, reduced.spread
        else:
            verdicts = self.criteria.reduce([grade.verdicts for grade in graded])
            value = self.criteria.value_of([verdict.value for verdict in verdicts])
            agreement = panel.agreement([float(v) for v in values], float(value))
            numbers = [float(v) for v in values]
            spread = None if self.judge_scale.kind == "pass_fail" else max(numbers) - min(numbers)
        if self.samples > 1:
            details["sample_values"] = values
            details["agreement"] = round(agreement, 4)
            if spread is not None:
                details["spread"] = spread
        chosen = min(graded, key=lambda grade: abs(float(grade.value) - float(value)))
        details["answer_format"] = chosen.via
        return _Member(value, details, chosen, verdicts)

    def _panel(
        self, head: dict[str, Any], samples: Sequence[Sample]
    ) -> tuple[bool | float, str | None, dict[str, Any]]:
        """The members' values combined by the panel's rule (LLMJudgeError: too few)."""
        rule, members, rows = self.panel_rule, [], []
        for index, endpoint in enumerate(self.panel):
            member = self._member(endpoint, self._of_member(samples, index), self._price(index))
            members.append(member)
            row = {
                "model": endpoint.model,
                "provider": endpoint.provider.name,
                "endpoint": endpoint.base_url,
                "value": member.value,
                **member.details,
            }
            if member.problem is not None:
                row["error"] = member.problem
            rows.append(row)
        details: dict[str, Any] = {**head, "panel": rows, "panel_aggregate": rule}
        details["attempts"] = sum(row["attempts"] for row in rows)
        costs = [row.get("cost_usd") for row in rows]
        details["cost_usd"] = None if None in costs else _rounded(sum(costs))  # type: ignore[arg-type]
        details["samples"] = self.samples
        details["cached"] = all(row["cached"] for row in rows)
        answered = [member for member in members if member.value is not None]
        if not panel.enough_members(rule, len(answered), len(members)):
            problems = "; ".join(str(m.problem) for m in members if m.value is None)
            need = "every model" if rule == "min" else "more than half of them"
            raise LLMJudgeError(
                f"panel: {len(answered)} of {len(members)} models gave a value "
                f"({rule} needs {need}): {problems}",
                details,
            )
        values = [member.value for member in answered]
        scale = self.judge_scale
        verdicts: tuple[Any, ...] = ()
        if self.criteria is not None:
            verdicts = self.criteria.combine(
                [member.verdicts for member in answered],
                lambda criterion, found: panel.combine(
                    found, rule, discrete=is_discrete(criterion)
                ),
            )
            value: bool | float = self.criteria.value_of([verdict.value for verdict in verdicts])
            details["criteria"] = verdict_rows(self.criteria.criteria, verdicts)
        elif scale.kind == "pass_fail":
            value = panel.combine_pass_fail([bool(v) for v in values], rule)
        else:
            value = panel.combine([float(v) for v in values], rule, discrete=scale.integer)  # type: ignore[arg-type]
        numbers = [float(v) for v in values]  # type: ignore[arg-type]
        details["member_values"] = values
        details["agreement"] = round(panel.agreement(numbers, float(value)), 4)
        if scale.kind != "pass_fail":
            details["spread"] = max(numbers) - min(numbers)
        if self.criteria is not None:
            return value, rationale_of(verdicts), details
        closest = min(answered, key=lambda member: abs(float(member.value) - float(value)))  # type: ignore[arg-type]
        assert closest.chosen is not None
        model = self.panel[members.index(closest)].model
        rationale = closest.chosen.rationale
        return value, f"{model}: {rationale}" if rationale else None, details

    def _of_member(self, samples: Sequence[Sample], index: int) -> Sequence[Sample]:
        """Member index's part of samples: its requests', or its joined samples."""
        width = len(samples) // len(self.members)
        return samples[index * width : (index + 1) * width]

    def _price(self, index: int) -> Price | None:
        return self.prices[index] if index < len(self.prices) else None

    def origin(self) -> dict[str, Any]:
        """Which model(s) this judge asks, through which provider(s) and endpoint(s)."""
        members = self.members
        return {
            "model": ", ".join(endpoint.model for endpoint in members),
            "provider": ", ".join(dict.fromkeys(e.provider.name for e in members)),
            "endpoint": ", ".join(dict.fromkeys(e.base_url for e in members)),
        }


def _zero_rationale(screening: Screening, votes: Sequence[bool] = ()) -> str:
    found = "; ".join(f"{f.rule}: {f.excerpt}" for f in screening.findings)
    if model_flags(votes):
        found = "; ".join(
            filter(None, [found, f"the model said so in {sum(votes)} of {len(votes)} answers"])
        )
    return f"guard (on_detect: zero): the case material addresses the grader ({found})"


def _rounded(cost: float | None) -> float | None:
    return None if cost is None else round(cost, 8)


def _reply_text(payload: Mapping[str, Any]) -> str:
    """The model's raw answer, for the record of an answer that could not be read."""
    return json.dumps(payload.get("choices") or payload.get("content") or payload, default=str)
