"""The builtin registry: what a builtin is, the record of its arguments, and the
decorator that registers one.

A builtin declares its arguments as one frozen attrs record (`@attrs.frozen(kw_only=True)`)
whose fields are made with `argument(Field, ...)`: each field is the eval.yaml key of its
name. The registry reads the keys from the record once, at registration, parses what
eval.yaml gives against them (`Builtin.bind`) and hands the builtin the record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from verifier.config import Key, Locator
from verifier.config.fields import Field
from verifier.errors import did_you_mean
from verifier.judges.base import JudgeAnswer, Record
from verifier.judges.builtins.arguments import REFERENCE_FIELDS, ProvidedFiles

if TYPE_CHECKING:
    from verifier.sandbox import Sandbox

# What a builtin returns: its value and a rationale saying what it saw (or a JudgeAnswer,
# which adds details for judges.json).
ValueWithRationale = tuple[bool | float, str]
BuiltinReturn = ValueWithRationale | JudgeAnswer
ArgumentsT = TypeVar("ArgumentsT")
ReturnT = TypeVar("ReturnT", bound=BuiltinReturn)
_FIELD = "verifier.builtin.field"  # an argument's Field, in its record field's metadata


def argument(field: Field, *, required: bool = False, default: Any = None) -> Any:
    """A field of a builtin's arguments record: the eval.yaml key of the field's name,
    its value parsed by `field`; required, or else `default` when it is not given."""
    if required:
        return attrs.field(metadata={_FIELD: field})
    return attrs.field(default=default, metadata={_FIELD: field})


def declared_keys(record: type[Any]) -> tuple[Key, ...]:
    """The eval.yaml keys an arguments record declares, in its fields' order; TypeError
    for a field not made with argument()."""
    keys = []
    for field in attrs.fields(record):
        if _FIELD not in field.metadata:
            raise TypeError(
                f"{record.__name__}.{field.name} is no builtin argument: declare it "
                "with argument(Field(...))"
            )
        required = field.default is attrs.NOTHING
        keys.append(
            Key(field.name, field.metadata[_FIELD], required, None if required else field.default)
        )
    return tuple(keys)


@attrs.frozen
class NoArguments:
    """The arguments record of a builtin that takes none."""


@attrs.frozen
class BuiltinContext:
    """What a builtin may look at: the case dir (untrusted) and eval.yaml's dir (trusted),
    and, for a builtin that runs code from the case, the sandbox it runs it in."""

    case_dir: Path
    config_dir: Path
    record: Record
    sandbox: Sandbox | None = None

    @property
    def command_sandbox(self) -> Sandbox:
        """The sandbox of a builtin registered with runs_case_code (a grade plans one
        whenever eval.yaml has such a builtin); RuntimeError for any other."""
        if self.sandbox is None:
            raise RuntimeError(
                "this builtin runs a command, but the grade planned no sandbox: register "
                "it with runs_case_code=True"
            )
        return self.sandbox


@attrs.frozen
class Builtin:
    name: str
    category: str
    run: Callable[[BuiltinContext, Any], BuiltinReturn]  # (context, its arguments record)
    record: type[Any]  # its arguments record: an attrs class of argument() fields
    arguments: tuple[Key, ...]  # the record's keys (declared_keys)
    runs_case_code: bool = False  # it executes something from the case (a command)
    one_of: tuple[tuple[str, ...], ...] = ()  # groups of arguments: exactly one is given
    prompt: str | None = None  # an LLM builtin's prompt template (then `run` is unused)
    score_range: tuple[float, float] | None = None  # the scale of a partial-credit value
    # the rules between its arguments: (given, record, at) -> None, or at.error(...)
    check: Callable[[Mapping[str, Any], Any, Locator], None] | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.category}/{self.name}"

    def bind(self, given: Mapping[str, Any], at: Locator) -> Any:
        """The record of arguments the builtin is called with: parsed, defaults filled in."""
        allowed = {key.name for key in self.arguments}
        for name in given:
            if name not in allowed:
                raise at.child(name).error(
                    f"{self.name} takes {', '.join(sorted(allowed))}{did_you_mean(name, allowed)}"
                )
        bound = {}
        for key in self.arguments:
            if key.name in given:
                bound[key.name] = key.field.parse(given[key.name], at.child(key.name))
            elif key.required:
                raise at.error(f"{self.name} needs argument {key.name!r}")
            else:
                bound[key.name] = key.default
        for group in self.one_of:
            given_names = [name for name in group if name in given]
            if len(given_names) != 1:
                raise at.error(
                    f"{self.name} needs exactly one of {', '.join(group)}"
                    + (f" (got {', '.join(given_names)})" if given_names else "")
                )
        record = self.record(**bound)
        if self.check is not None:
            self.check(given, record, at)
        return record

    def reference_paths(self, given: Mapping[str, Any]) -> list[str]:
        """The arguments (as written) that name files beside eval.yaml."""
        paths = []
        for key in self.arguments:
            value = given.get(key.name)
            if isinstance(key.field, REFERENCE_FIELDS) and isinstance(value, str):
                paths.append(value)
            elif isinstance(key.field, ProvidedFiles):
                paths += ProvidedFiles.written(value)
        return paths


BUILTINS: dict[str, Builtin] = {}
PARTIAL_CREDIT = (0.0, 1.0)  # the scale of builtins whose value is a fraction


def builtin(
    category: str,
    record: type[ArgumentsT],
    *,
    runs_case_code: bool = False,
    one_of: tuple[tuple[str, ...], ...] = (),
    score_range: tuple[float, float] | None = None,
    check: Callable[[Mapping[str, Any], ArgumentsT, Locator], None] | None = None,
) -> Callable[
    [Callable[[BuiltinContext, ArgumentsT], ReturnT]],
    Callable[[BuiltinContext, ArgumentsT], ReturnT],
]:
    """Register the decorated function, `run(context, arguments)`, as the builtin
    `category/<function name>` taking the arguments `record` declares (`argument()`).

    `runs_case_code`: it executes code from the case (through verifier.sandbox);
    the engine then counts an unexplained death of its process as a failure of the
    case's code, never as an error. `one_of`: groups of optional arguments of which
    exactly one must be given (rewardkit's name and ours, a case file or a reference).
    `score_range`: the scale of a builtin that gives partial credit, (0, 1): the judge's
    own unless eval.yaml sets one. `check(given, record, at)`: the rules between its
    arguments, a load error (at.error) when they are broken.
    """
    keys = declared_keys(record)

    def register(
        run: Callable[[BuiltinContext, ArgumentsT], ReturnT],
    ) -> Callable[[BuiltinContext, ArgumentsT], ReturnT]:
        name = getattr(run, "__name__", "")
        if name in BUILTINS:
            raise ValueError(f"builtin {name!r} is registered twice")
        BUILTINS[name] = Builtin(
            name,
            category,
            run,
            record,
            keys,
            runs_case_code,
            one_of,
            score_range=score_range,
            check=check,
        )
        return run

    return register


def prompt_builtin(category: str, name: str, prompt: str, record: type[Any]) -> None:
    """Register an LLM builtin: a shipped prompt template, graded pass/fail by a model
    (verifier.judges.kinds.llm runs it like a `prompt:` judge, its arguments record's
    fields the template's values)."""
    if name in BUILTINS:
        raise ValueError(f"builtin {name!r} is registered twice")
    BUILTINS[name] = Builtin(name, category, _no_run, record, declared_keys(record), prompt=prompt)


def _no_run(_context: BuiltinContext, _arguments: Any) -> BuiltinReturn:
    raise TypeError("an LLM builtin is run by the llm judge kind")
