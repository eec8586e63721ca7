"""What every judge kind turns into (a PreparedJudge), and how its return value is read.

A judge's return value is read strictly: anything that is not a bool or a finite
number on the judge's declared scale becomes an error record (Scale.check),
because a value that is guessed at (None as 0, "4" as 4, NaN clamped) would
silently steer training.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Mapping
from types import CodeType, MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from verifier.config import JudgeConfig
from verifier.scale import JudgeValue, ScaleError

if TYPE_CHECKING:
    from verifier.sandbox import Sandbox

MAX_RATIONALE_CHARS = 20_000
CONDITION_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "len",
        "any",
        "all",
        "min",
        "max",
        "sum",
        "abs",
        "round",
        "bool",
        "int",
        "float",
        "str",
    )
}

# The judge's input: the record a judge receives as `outputs` (see verifier.case).
Record = Mapping[str, Any]


class Pool(enum.Enum):
    """Which capacity a judge's process counts against while it runs."""

    CPU = "cpu"  # Python code on this machine: at most the CPU count at once
    LLM = "llm"  # waiting on a model endpoint: bounded by the endpoint, not the CPUs


class JudgeReturnError(ValueError):
    """The judge returned something that is not a usable value."""


@attrs.frozen
class JudgeAnswer:
    """What a judge may return besides a bare value: value, rationale, and extra
    judges.json fields (`details`: an LLM judge's model, latency, usage)."""

    value: JudgeValue
    rationale: str | None = None
    details: Mapping[str, Any] = MappingProxyType({})


@attrs.frozen
class JudgeContext:
    """What a judge is called with: the case's record, and the sandbox its commands run
    in (None when the grade planned none: no judge of it runs code from the case)."""

    record: Record
    sandbox: Sandbox | None = None


@attrs.frozen
class PreparedJudge:
    """A judge ready to run: `call(context)` returns the judge's raw return value."""

    config: JudgeConfig
    call: Callable[[JudgeContext], Any]
    condition: CodeType | None = None
    pool: Pool = Pool.CPU
    case_bound: bool = False  # its timeouts, memory overruns and deaths are the case's doing

    def should_run(self, record: Record) -> bool:
        """The judge's `if:` condition for this case (True when there is none)."""
        if self.condition is None:
            return True
        names = {
            "outputs": record,
            "annotations": record.get("annotations", {}),
            "arguments": dict(self.config.arguments),
        }
        return bool(eval(self.condition, {"__builtins__": CONDITION_BUILTINS}, names))  # noqa: S307 (the author's `when:`, checked at load)


def interpret(returned: Any, config: JudgeConfig) -> tuple[JudgeValue, str | None]:
    """(value, rationale) from what a judge returned, or JudgeReturnError saying why not."""
    value, rationale = _unpack(returned)
    if rationale is not None and not isinstance(rationale, str):
        rationale = str(rationale)
    if rationale is not None and len(rationale) > MAX_RATIONALE_CHARS:
        rationale = rationale[:MAX_RATIONALE_CHARS] + " [cut]"
    try:
        return config.scale.check(value), rationale
    except ScaleError as error:
        raise JudgeReturnError(f"returned {error}") from None


def details_of(source: object) -> dict[str, Any]:
    """Extra judges.json fields a judge attaches to its answer or its exception."""
    details = getattr(source, "details", None)
    return dict(details) if isinstance(details, Mapping) else {}


def _unpack(returned: Any) -> tuple[Any, Any]:
    if hasattr(returned, "value"):  # an answer object (a record with `value` included)
        return returned.value, getattr(returned, "rationale", None)
    if isinstance(returned, tuple):
        if len(returned) != 2:
            raise JudgeReturnError(
                f"returned a {len(returned)}-tuple; return a value or (value, rationale)"
            )
        return returned[0], returned[1]
    return returned, None
