"""`mode: individual` (rewardkit's): every criterion asked in a request of its own.

The judge's prompt is built once: its user message (the rubric and the case's
material) is the same for every criterion, and each request's system text and answer
schema are those of its one criterion. With C criteria and S samples of each model,
request index i asks member i // (C * S), criterion (i // S) % C, sample i % S.

Once every request is back, the C answers of each (member, sample) are joined into
one Sample, as if a single request had answered every criterion, and the judge
concludes as a batched one does: samples, panels, the guard and the aggregate work
the same in both modes. A joined sample without a verdict for every criterion has
none at all, the first missing criterion named, as a batched answer that leaves one
out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from verifier.judges.llm.criteria import CriteriaForm, rationale_of
from verifier.judges.llm.guard import GuardedForm
from verifier.judges.llm.parse import Grade
from verifier.judges.llm.prompt import Prompt, system_text
from verifier.judges.llm.sampling import Sample


@attrs.frozen
class Request:
    """What request number `index` of an individual judge asks."""

    member: int
    criterion: int
    sample: int


def request_of(index: int, criteria: int, samples: int) -> Request:
    per_member = criteria * samples
    return Request(index // per_member, (index % per_member) // samples, index % samples)


def asking(form: Any, criterion: int) -> Any:
    """The answer form of one criterion: the judge's (criteria, guarded or not) narrowed."""
    if isinstance(form, GuardedForm):
        return GuardedForm(asking(form.inner, criterion))
    assert isinstance(form, CriteriaForm)
    return attrs.evolve(form, criteria=(form.criteria[criterion],))


def prompt_for(prompt: Prompt, form: Any, output_mode: Any) -> Prompt:
    """The judge's prompt asking `form` (one criterion): its system text redone."""
    return attrs.evolve(prompt, system=system_text(form, output_mode, prompt.nonce))


def joined(
    samples: Sequence[Sample], form: CriteriaForm, members: int, per_model: int
) -> list[Sample]:
    """The requests' samples (in request order) as one Sample per (member, sample)."""
    count = len(form.criteria)
    out = []
    for member in range(members):
        for sample in range(per_model):
            parts = [
                samples[member * count * per_model + criterion * per_model + sample]
                for criterion in range(count)
            ]
            out.append(_join(parts, form))
    return out


def _join(parts: Sequence[Sample], form: CriteriaForm) -> Sample:
    sent = [part for part in parts if not part.cached]
    usage: dict[str, int] = {}
    for part in sent:  # what a cached answer once cost is not spent again
        for name, count in part.usage.items():
            usage[name] = usage.get(name, 0) + count
    joined = Sample(
        grade=_grade(parts, form),
        latency_s=sum(part.latency_s for part in parts),
        attempts=sum(part.attempts for part in parts),
        usage=usage,
        cached=not sent,
        endpoint_failed=any(part.endpoint_failed for part in parts),
        overflowed=any(part.overflowed for part in parts),
    )
    for criterion, part in zip(form.criteria, parts, strict=True):
        if part.grade is None:
            problem = f"criterion {criterion.name!r}: {part.problem}"
            return attrs.evolve(joined, problem=problem, answer=part.answer)
    return joined


def _grade(parts: Sequence[Sample], form: CriteriaForm) -> Grade | None:
    """Every criterion's verdict as one answer's (None unless each part has one)."""
    grades = [part.grade for part in parts if part.grade is not None]
    if len(grades) < len(parts):
        return None
    verdicts = tuple(verdict for grade in grades for verdict in grade.verdicts)
    votes = [grade.grader_directed for grade in grades if grade.grader_directed is not None]
    return Grade(
        value=form.value_of([verdict.value for verdict in verdicts]),
        rationale=rationale_of(verdicts),
        via=grades[0].via,
        verdicts=verdicts,
        grader_directed=any(votes) if votes else None,
    )
