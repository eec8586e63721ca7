"""`criteria:` many rubric points graded in one request, and combined into one value.

The prompt lists every criterion with its own scale (binary, Likert 1..points,
numeric min..max, rubric levels 0..n-1, as rewardkit's criterion types); the answer
carries one verdict per criterion, each with its rationale. Every verdict is read
strictly: a criterion the answer leaves out, or answers off its scale, makes the
whole answer unusable (an AnswerError naming the criterion), exactly as an
unreadable single grade does, so a sample without it counts as a failed sample and
a judge without any usable answer is an error record: never a default verdict.

A verdict becomes a value in [0, 1] (yes 1, no 0; Likert (v - 1) / (points - 1);
numeric (v - min) / (max - min); rubric v / (levels - 1)), inverted when the
criterion is `negate`d. A criterion *passes* at 1 (yes, or the top of its scale).
The aggregate combines the values: `weighted-mean` (the default), `all-pass`,
`any-pass`, `threshold` (the weighted mean reaches it: 1, else 0), `required-pass`
(rewardkit's: every criterion not marked optional passes). Whatever the rule, a
criterion marked `required` that does not pass makes the aggregate 0. The judge's
value is the aggregate on its declared scale: pass/fail at 1, a number
lo + aggregate * (hi - lo), [0, 1] when none is declared.

Samples are reduced per criterion before the aggregate (the lower median of a
discrete scale, so a binary criterion takes the majority and a tie fails; the
median of a numeric one), and so are a panel's members (verifier.judges.llm.panel).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from verifier.judges.llm.answer_scale import AnswerError, AnswerScale
from verifier.judges.llm.parse import Grade, Reply, answer_object, as_bool, as_number, excerpt
from verifier.judges.llm.spec import CriterionSpec

VERDICTS_FIELD = "criteria"
SCORE_FIELD = "score"


@attrs.frozen
class Verdict:
    """One criterion's answer: as the model gave it (raw) and as a value in [0, 1]."""

    name: str
    raw: bool | float
    value: float
    rationale: str | None = None


def normalize(criterion: CriterionSpec, raw: Any) -> tuple[bool | float, float]:
    """(the verdict as read, its value in [0, 1] after negate); AnswerError off its scale."""
    where = f"criterion {criterion.name!r}"
    if criterion.type == "binary":
        verdict: bool | float | None = as_bool(raw)
        if verdict is None and isinstance(raw, int | float) and raw in (0, 1):
            verdict = bool(raw)
        if verdict is None:
            raise AnswerError(f"{where}: answered {raw!r}, not yes or no")
        value = 1.0 if verdict else 0.0
    else:
        number = as_number(raw)
        low, high = scale_of(criterion)
        if number is None or not math.isfinite(number):
            raise AnswerError(f"{where}: answered {raw!r}, not a number")
        if not low <= number <= high:
            raise AnswerError(f"{where}: answered {number:g}, outside {low:g}..{high:g}")
        if criterion.type != "numeric" and not number.is_integer():
            raise AnswerError(f"{where}: answered {number:g}, not a whole number")
        verdict, value = number, (number - low) / (high - low)
    return verdict, 1.0 - value if criterion.negate else value


def scale_of(criterion: CriterionSpec) -> tuple[float, float]:
    """The answer's range of a Likert, numeric or rubric criterion."""
    if criterion.type == "likert":
        return 1.0, float(criterion.points)
    if criterion.type == "rubric":
        return 0.0, float(len(criterion.levels) - 1)
    return criterion.low, criterion.high


def is_discrete(criterion: CriterionSpec) -> bool:
    return criterion.type != "numeric"


def passes(value: float) -> bool:
    return value >= 1.0


def aggregate(
    criteria: Sequence[CriterionSpec], values: Sequence[float], rule: str, threshold: float
) -> float:
    """The criteria's values (in [0, 1], in their order) combined by rule, in [0, 1]."""
    if any(c.required and not passes(v) for c, v in zip(criteria, values, strict=True)):
        return 0.0
    if rule == "all-pass":
        return float(all(passes(value) for value in values))
    if rule == "any-pass":
        return float(any(passes(value) for value in values))
    if rule == "required-pass":
        counted = [v for c, v in zip(criteria, values, strict=True) if not c.optional]
        return float(bool(counted) and all(passes(value) for value in counted))
    weights = [criterion.weight for criterion in criteria]
    mean = math.fsum(w * v for w, v in zip(weights, values, strict=True)) / math.fsum(weights)
    if rule == "threshold":
        return float(mean >= threshold)
    return mean


def reduce_values(criterion: CriterionSpec, values: Sequence[float]) -> float:
    """Several answers' values of one criterion as one: the lower median of a discrete
    scale (a binary criterion's majority; a tie fails), the median of a numeric one."""
    if is_discrete(criterion):
        return statistics.median_low(values)
    return statistics.median(values)


@attrs.frozen
class CriteriaForm:
    """The answer a criteria judge asks for, and how its value is made: what the prompt,
    the request's schema and the reader of the answer take in place of an AnswerScale."""

    criteria: tuple[CriterionSpec, ...]
    rule: str
    threshold: float
    judge_scale: AnswerScale  # the judge's declared scale: where the aggregate lands

    @property
    def kind(self) -> str:
        return self.judge_scale.kind

    @property
    def field(self) -> str:
        return VERDICTS_FIELD

    def describe(self) -> str:
        lines = [
            (
                "every criterion below, each on its own scale. Give one verdict per criterion "
                f"in `{VERDICTS_FIELD}`, an object keyed by the criterion's name, each entry "
                f"with `rationale` (why, in a sentence or two) and `{SCORE_FIELD}`; a criterion "
                "that does not apply still gets a verdict. The criteria:"
            )
        ]
        lines += [f"- `{c.name}` ({_scale_words(c)}): {c.description}" for c in self.criteria]
        return "\n".join(lines)

    def schema(self) -> dict[str, Any]:
        entries = {
            c.name: {
                "type": "object",
                "properties": {
                    "rationale": {"type": "string", "description": "why, briefly"},
                    SCORE_FIELD: _score_schema(c),
                },
                "required": ["rationale", SCORE_FIELD],
            }
            for c in self.criteria
        }
        verdicts = {"type": "object", "properties": entries, "required": list(entries)}
        return {
            "type": "object",
            "properties": {VERDICTS_FIELD: verdicts},
            "required": [VERDICTS_FIELD],
        }

    def example(self) -> str:
        shown = {
            c.name: {"rationale": "<why>", SCORE_FIELD: _example_value(c)}
            for c in self.criteria[:2]
        }
        text = json.dumps({VERDICTS_FIELD: shown})
        return text if len(self.criteria) <= 2 else text[:-2] + ", ...}}"

    def answer_fields(self) -> str:
        return f"`{VERDICTS_FIELD}` (every criterion's `rationale` and `{SCORE_FIELD}`)"

    def read(self, reply: Reply) -> Grade:
        """Every criterion's verdict from the answer, and the judge's value from them."""
        found = answer_object(reply)
        if found is None:
            cut = " (cut at the max_tokens limit)" if _cut(reply) else ""
            raise AnswerError(
                f"no criteria verdicts found in the model's answer{cut}: {excerpt(reply.text)!r}"
            )
        verdicts = found.get(VERDICTS_FIELD, found)
        if not isinstance(verdicts, dict):
            raise AnswerError(
                f"the answer's {VERDICTS_FIELD!r} is not an object: "
                f"{excerpt(json.dumps(verdicts, default=str))}"
            )
        read = tuple(self._verdict(criterion, verdicts) for criterion in self.criteria)
        value = self.value_of([verdict.value for verdict in read])
        return Grade(value, rationale_of(read), "structured", verdicts=read)

    def value_of(self, values: Sequence[float]) -> bool | float:
        """The judge's value from its criteria's values (in their order)."""
        combined = aggregate(self.criteria, values, self.rule, self.threshold)
        scale = self.judge_scale
        if scale.kind == "pass_fail":
            return passes(combined)
        return scale.low + combined * (scale.high - scale.low)

    def reduce(self, answers: Sequence[Sequence[Verdict]]) -> tuple[Verdict, ...]:
        """Several samples' verdicts as one per criterion."""
        return combine_verdicts(self.criteria, answers, reduce_values)

    def combine(
        self,
        answers: Sequence[Sequence[Verdict]],
        how: Callable[[CriterionSpec, Sequence[float]], float],
    ) -> tuple[Verdict, ...]:
        """Several models' verdicts as one per criterion, each combined by how."""
        return combine_verdicts(self.criteria, answers, how)

    def _verdict(self, criterion: CriterionSpec, verdicts: Mapping[str, Any]) -> Verdict:
        if criterion.name not in verdicts:
            raise AnswerError(
                f"criterion {criterion.name!r}: the answer has no verdict for it "
                f"(it has {', '.join(map(repr, verdicts)) or 'none'})"
            )
        entry = verdicts[criterion.name]
        rationale = None
        if isinstance(entry, dict):
            if SCORE_FIELD not in entry:
                shown = excerpt(json.dumps(entry, default=str))
                raise AnswerError(
                    f"criterion {criterion.name!r}: the verdict has no {SCORE_FIELD!r}: {shown}"
                )
            rationale = entry.get("rationale")
            rationale = rationale.strip() or None if isinstance(rationale, str) else None
            entry = entry[SCORE_FIELD]
        raw, value = normalize(criterion, entry)
        return Verdict(criterion.name, raw, value, rationale)


def combine_verdicts(
    criteria: Sequence[CriterionSpec],
    answers: Sequence[Sequence[Verdict]],
    combine: Callable[[CriterionSpec, Sequence[float]], float],
) -> tuple[Verdict, ...]:
    """One verdict per criterion from several answers: the value `combine` gives, with
    the raw answer and rationale of the answer closest to it."""
    combined = []
    for index, criterion in enumerate(criteria):
        given = [answer[index] for answer in answers]
        value = combine(criterion, [verdict.value for verdict in given])
        closest = min(given, key=lambda verdict: abs(verdict.value - value))
        combined.append(attrs.evolve(closest, value=value))
    return tuple(combined)


def rationale_of(verdicts: Sequence[Verdict]) -> str:
    """The judge's rationale: each criterion's verdict and why, one line each."""
    return "\n".join(
        f"{verdict.name}: {_shown(verdict.raw)}"
        + (f" - {verdict.rationale}" if verdict.rationale else "")
        for verdict in verdicts
    )


def verdict_rows(
    criteria: Sequence[CriterionSpec], verdicts: Sequence[Verdict]
) -> list[dict[str, Any]]:
    """judges.json's `criteria`: every criterion with its verdict, value and rationale."""
    rows = []
    for criterion, verdict in zip(criteria, verdicts, strict=True):
        row: dict[str, Any] = {
            "name": criterion.name,
            "type": criterion.type,
            "verdict": verdict.raw,
            "value": round(verdict.value, 6),
            "weight": criterion.weight,
            "passed": passes(verdict.value),
        }
        for flag in ("negate", "required", "optional"):
            if getattr(criterion, flag):
                row[flag] = True
        if criterion.id is not None:
            row["id"] = criterion.id
        row["rationale"] = verdict.rationale
        rows.append(row)
    return rows


def _scale_words(criterion: CriterionSpec) -> str:
    if criterion.type == "binary":
        return "true for yes, false for no"
    if criterion.type == "likert":
        return f"an integer from 1 (worst) to {criterion.points} (best)"
    if criterion.type == "numeric":
        return f"a number from {criterion.low:g} to {criterion.high:g}"
    levels = "; ".join(f"{index} = {level}" for index, level in enumerate(criterion.levels))
    return f"an integer from 0 to {len(criterion.levels) - 1}, where {levels}"


def _score_schema(criterion: CriterionSpec) -> dict[str, Any]:
    if criterion.type == "binary":
        return {"type": "boolean", "description": "true for yes"}
    low, high = scale_of(criterion)
    kind = "number" if criterion.type == "numeric" else "integer"
    return {"type": kind, "description": f"from {low:g} to {high:g}"}


def _example_value(criterion: CriterionSpec) -> Any:
    if criterion.type == "binary":
        return True
    high = scale_of(criterion)[1]
    return high if criterion.type == "numeric" else int(high)


def _shown(raw: bool | float) -> str:
    if isinstance(raw, bool):
        return "yes" if raw else "no"
    return f"{raw:g}"


def _cut(reply: Reply) -> bool:
    return reply.stop_reason in ("length", "max_tokens")
