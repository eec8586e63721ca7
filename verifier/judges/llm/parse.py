"""A model's reply -> a grade on the judge's scale, or AnswerError saying why not.

Structured output (a forced tool call or a JSON schema) is asked for first, but
not every OpenAI-compatible server honours it, so a plain-text answer is read by
a tolerant fallback: a JSON object anywhere in the text, then `score: 4`-style
lines, then a bare verdict. Tolerant is not credulous: an answer that names two
different grades is ambiguous and an error, never a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

import attrs

from verifier.judges.llm.answer_scale import AnswerError, AnswerScale

EXCERPT_CHARS = 300
_TRUE_WORDS = frozenset({"true", "yes", "pass", "passed", "passes"})
_FALSE_WORDS = frozenset({"false", "no", "fail", "failed", "fails"})
_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_SCORE_LINE = re.compile(
    rf"(?i)\b(?:score|rating|grade)\b[*_\s]*(?:is|of|[:=])?[*_\s]*({_NUMBER})"
    rf"(?:\s*(?:/|out\s+of)\s*({_NUMBER}))?"
)
_FRACTION = re.compile(rf"(?<![\w.])({_NUMBER})\s*(?:/|out\s+of)\s*({_NUMBER})(?!\.?\d|\w)")
_VERDICT_LINE = re.compile(
    r"(?i)\b(?:passed|pass|verdict|result|decision|answer)\b[*_\s]*[:=][*_\s]*"
    r"(true|false|yes|no|pass(?:ed|es)?|fail(?:ed|s)?)\b"
)


@attrs.frozen
class Reply:
    """What one response said, provider-neutral."""

    text: str | None  # the answer's prose, if any
    arguments: Any = None  # the tool call's arguments or the JSON-schema output, if any
    stop_reason: str | None = None
    usage: Mapping[str, int] = MappingProxyType({})
    model: str | None = None  # the model the server says answered


@attrs.frozen
class Grade:
    value: bool | float
    rationale: str | None
    via: Literal["structured", "text"]
    verdicts: tuple[Any, ...] = ()  # a criteria judge's, one per criterion (criteria.Verdict)
    grader_directed: bool | None = None  # the model's guard answer, when it was asked


def answer_object(reply: Reply) -> dict[str, Any] | None:
    """The answer as a JSON object: the tool call's arguments, the JSON-schema output,
    else the last JSON object in the text; None when there is none."""
    arguments = reply.arguments
    if isinstance(arguments, str):
        arguments = _decode_object(arguments)
    if isinstance(arguments, dict):
        return arguments
    objects = _json_objects(reply.text or "")
    return objects[-1] if objects else None


def read_grade(reply: Reply, scale: AnswerScale) -> Grade:
    """The grade in reply, checked against scale."""
    if isinstance(reply.arguments, str):
        decoded = _decode_object(reply.arguments)
        arguments: Any = decoded if decoded is not None else None
        text = reply.arguments if decoded is None else reply.text
    else:
        arguments, text = reply.arguments, reply.text
    if isinstance(arguments, dict):
        value, rationale = _from_fields(arguments, scale)
        return Grade(scale.check(value), rationale or _clean(text), "structured")
    if text is None or not text.strip():
        cut = (
            " (cut at the max_tokens limit)"
            if reply.stop_reason in ("length", "max_tokens")
            else ""
        )
        raise AnswerError(f"the model's answer is empty{cut}")
    try:
        value, rationale = parse_text(text, scale)
    except AnswerError as error:
        if reply.stop_reason in ("length", "max_tokens"):
            raise AnswerError(f"{error} (the answer was cut at the max_tokens limit)") from None
        raise
    return Grade(scale.check(value), rationale, "text")


def read_answer(reply: Reply, form: Any) -> Grade:
    """The grade in reply as the judge's answer form asks for it: an AnswerScale's (a
    single grade), or the form's own reader (criteria, the guard's question)."""
    if isinstance(form, AnswerScale):
        return read_grade(reply, form)
    return form.read(reply)


def parse_text(text: str, scale: AnswerScale) -> tuple[bool | float, str | None]:
    """(value, rationale) from a plain-text answer; AnswerError when absent or ambiguous."""
    for candidate in reversed(_json_objects(text)):
        if scale.field in candidate:
            return _from_fields(candidate, scale)
    found = _verdicts(text) if scale.kind == "pass_fail" else _scores(text, scale)
    distinct = sorted(set(found), key=str)
    if len(distinct) > 1:
        shown = ", ".join(str(value) for value in distinct)
        raise AnswerError(f"the answer is ambiguous: it names {shown}: {excerpt(text)!r}")
    if not distinct:
        wanted = "pass/fail verdict" if scale.kind == "pass_fail" else "score"
        raise AnswerError(f"no {wanted} found in the model's answer: {excerpt(text)!r}")
    return distinct[0], _clean(text)


def excerpt(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."


def _from_fields(fields: dict[str, Any], scale: AnswerScale) -> tuple[bool | float, str | None]:
    if scale.field not in fields:
        raise AnswerError(
            f"the answer has no {scale.field!r} field: {excerpt(json.dumps(fields, default=str))}"
        )
    raw = fields[scale.field]
    value = as_bool(raw) if scale.kind == "pass_fail" else as_number(raw)
    if value is None:
        raise AnswerError(f"the answer's {scale.field!r} is {raw!r}, not a {_kind_word(scale)}")
    rationale = fields.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        rationale = json.dumps(rationale, default=str)
    return value, _clean(rationale)


def _kind_word(scale: AnswerScale) -> str:
    return "true/false verdict" if scale.kind == "pass_fail" else "number"


def as_bool(raw: Any) -> bool | None:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        word = raw.strip().strip(".!*").lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    return None


def as_number(raw: Any) -> float | None:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, str) and re.fullmatch(_NUMBER, raw.strip()):
        return float(raw.strip())
    return None


def _scores(text: str, scale: AnswerScale) -> list[float]:
    found = []
    for match in _SCORE_LINE.finditer(text):
        denominator = match.group(2)
        if denominator is None or float(denominator) == scale.high:
            found.append(float(match.group(1)))
    if not found:
        for match in _FRACTION.finditer(text):
            if float(match.group(2)) == scale.high:
                found.append(float(match.group(1)))
    if not found and re.fullmatch(rf"\s*\**({_NUMBER})\**\.?\s*", text):
        found.append(float(text.strip().strip("*.")))
    return found


def _verdicts(text: str) -> list[bool]:
    found = [as_bool(match.group(1)) for match in _VERDICT_LINE.finditer(text)]
    if not found:
        lines = [line for line in text.splitlines() if line.strip()]
        for line in {lines[0], lines[-1]} if lines else ():
            found.append(as_bool(re.sub(r"[^A-Za-z]", "", line)))
    return [value for value in found if value is not None]


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object that starts at a `{` in text (code fences and prose around them)."""
    decoder = json.JSONDecoder()
    found = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        position = text.find("{", end)
    return found


def _decode_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        objects = _json_objects(text)
        return objects[-1] if objects else None
    return value if isinstance(value, dict) else None


def _clean(text: str | None) -> str | None:
    if text is None:
        return None
    text = text.strip()
    return text or None
