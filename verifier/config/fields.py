"""The value types of eval.yaml keys: each parses a value or names what is wrong with it.

Every key the loader reads is declared with one of these, so the same declaration
checks a file at load time and describes it as JSON Schema for editors
(`schema()`): one source of truth for what eval.yaml may say.

They are declarations made once at import, on the grading path: small, immutable,
typed records like every record of the package.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import attrs

from verifier.errors import ConfigError, ConfigErrors
from verifier.values import finite_float

MAX_TIMEOUT_S = 24 * 3600.0
# What RelativePath and an `outputs` entry accept, for JSON Schema: not absolute, no
# '..' part, not '.' itself (nor './', './.'), not blank, no NUL.
RELATIVE_PATH_PATTERN = (
    r"^(?!/)(?!(?:.*/)?\.\.(?:/|$))(?!(?:\.(?:/+|$))+$)"  # not absolute, no '..', not '.'
    r"(?=[\s\S]*\S)[^\u0000]*$"  # not blank, no NUL
)


class Problems:
    """Collects independent config problems so `verifier check` can list them all (a
    ConfigErrors adds each of its problems)."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def add(self, error: ConfigError) -> None:
        self.errors.extend(getattr(error, "problems", (error,)))

    def attempt(self, validate: Callable[..., Any], *args: Any) -> Any:
        try:
            return validate(*args)
        except ConfigError as error:
            self.add(error)
            return None

    def raise_if_any(self) -> None:
        if self.errors:
            raise ConfigErrors(self.errors)


@attrs.frozen
class Locator:
    """Where a value sits: the file, its key path (`judges[2] (quality).timeout`), its dir."""

    source: str
    key: str = ""
    base_dir: Path = Path()

    def child(self, name: str) -> Locator:
        return attrs.evolve(self, key=f"{self.key}.{name}" if self.key else name)

    def item(self, index: int) -> Locator:
        return attrs.evolve(self, key=f"{self.key}[{index}]")

    def error(self, problem: str) -> ConfigError:
        return ConfigError(self.source, self.key, problem)


class Field(Protocol):
    def parse(self, value: Any, at: Locator) -> Any:
        """The value as the verifier uses it, or at.error(...) saying what is wrong."""
        ...

    def schema(self) -> dict[str, Any]: ...


@attrs.frozen
class Text:
    """A string; `check` says what else is wrong with it (None: nothing)."""

    non_empty: bool = False
    description: str = ""
    check: Callable[[str], str | None] | None = None

    def parse(self, value: Any, at: Locator) -> str:
        if not isinstance(value, str) or (self.non_empty and not value.strip()):
            raise at.error("must be a non-empty string" if self.non_empty else "must be a string")
        problem = self.check(value) if self.check is not None else None
        if problem is not None:
            raise at.error(f"{_shown(value)} {problem}")
        return value

    def schema(self) -> dict[str, Any]:
        return _described(
            {"type": "string", **({"pattern": r"\S"} if self.non_empty else {})}, self
        )


@attrs.frozen
class Flag:
    description: str = ""

    def parse(self, value: Any, at: Locator) -> bool:
        if not isinstance(value, bool):
            raise at.error("must be true or false")
        return value

    def schema(self) -> dict[str, Any]:
        return _described({"type": "boolean"}, self)


@attrs.frozen
class Number:
    """A finite number; `positive` excludes 0; `integer` wants a whole number."""

    minimum: float | None = None
    maximum: float | None = None
    positive: bool = False
    integer: bool = False
    problem: str = "must be a finite number"
    description: str = ""

    def parse(self, value: Any, at: Locator) -> float:
        number = finite_float(value)
        if (
            number is None
            or (self.positive and number <= 0)
            or (self.minimum is not None and number < self.minimum)
            or (self.maximum is not None and number > self.maximum)
            or (self.integer and not number.is_integer())
        ):
            raise at.error(f"{_shown(value)} {self.problem}")
        return int(number) if self.integer else number

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer" if self.integer else "number"}
        if self.positive:
            schema["exclusiveMinimum"] = 0
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return _described(schema, self)


@attrs.frozen
class Choice:
    """One of a few words; with `empty_ok`, '' means the key is not set (None)."""

    values: tuple[str, ...]
    empty_ok: bool = False
    description: str = ""

    def parse(self, value: Any, at: Locator) -> str | None:
        if self.empty_ok and value == "":
            return None
        if value not in self.values:
            shown = ", ".join(self.values[:-1]) + f" or {self.values[-1]}"
            raise at.error(f"{value!r} must be {shown}")
        return value

    def schema(self) -> dict[str, Any]:
        return _described({"enum": [*self.values, *([""] if self.empty_ok else [])]}, self)


@attrs.frozen
class ScoreRangeField:
    description: str = "[lo, hi], two finite numbers, lo < hi"

    def parse(self, value: Any, at: Locator) -> tuple[float, float]:
        bounds = [finite_float(bound) for bound in value] if isinstance(value, list) else []
        low, high = bounds if len(bounds) == 2 else (None, None)
        if low is None or high is None:
            raise at.error(f"{_shown(value)} must be [lo, hi], two finite numbers")
        if not low < high:
            raise at.error(f"{value!r} must be increasing (lo < hi)")
        if not math.isfinite(high - low):
            raise at.error(f"{value!r} spans more than a float holds; narrow it")
        return (low, high)

    def schema(self) -> dict[str, Any]:
        return _described(
            {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}, self
        )


@attrs.frozen
class Arguments:
    """A mapping with identifier keys (passed to a judge as keyword arguments)."""

    description: str = "passed to the judge"

    def parse(self, value: Any, at: Locator) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(
            isinstance(name, str) and name.isidentifier() for name in value
        ):
            raise at.error("must be a mapping of identifier keys")
        return value

    def schema(self) -> dict[str, Any]:
        return _described(
            {"type": "object", "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}}, self
        )


@attrs.frozen
class RelativePath:
    """A file (or dir) beside eval.yaml: relative, no '..', inside its dir, present."""

    description: str = "a path relative to eval.yaml's directory"

    def parse(self, value: Any, at: Locator) -> PurePosixPath:
        if not isinstance(value, str) or not value.strip() or "\0" in value:
            raise at.error("must be a path relative to eval.yaml's dir")
        relative = PurePosixPath(value)
        if relative.is_absolute() or ".." in relative.parts or str(relative) == ".":
            raise at.error(f"{value!r} must be a path relative to eval.yaml's dir, without '..'")
        path = at.base_dir / relative
        if not path.exists():
            raise at.error(f"{path} not found (paths are relative to eval.yaml)")
        if not path.resolve().is_relative_to(at.base_dir.resolve()):
            raise at.error(f"{value!r} leads outside eval.yaml's dir")
        return relative

    def schema(self) -> dict[str, Any]:
        return _described({"type": "string", "pattern": RELATIVE_PATH_PATTERN}, self)


@attrs.frozen
class OneOrMany:
    """One value or a list of them (`context: guide.md` or `context: [a.md, b.md]`)."""

    item: Field
    description: str = ""

    def parse(self, value: Any, at: Locator) -> tuple[Any, ...]:
        if not isinstance(value, list):
            return (self.item.parse(value, at),)
        return tuple(self.item.parse(item, at.item(index)) for index, item in enumerate(value))

    def schema(self) -> dict[str, Any]:
        item = self.item.schema()
        return _described({"anyOf": [item, {"type": "array", "items": item}]}, self)


@attrs.frozen
class Key:
    """A key of a mapping in eval.yaml, the field its value must satisfy, and its default
    (None: no default; a required key has none)."""

    name: str
    field: Field
    required: bool = False
    default: Any = None


def parse_keys(entry: Mapping[str, Any], keys: Sequence[Key], at: Locator) -> dict[str, Any]:
    """The declared keys present in entry, each parsed by its field."""
    return {
        key.name: key.field.parse(entry[key.name], at.child(key.name))
        for key in keys
        if key.name in entry and entry[key.name] is not None
    }


def object_schema(
    keys: Sequence[Key], *, additional: bool = False, null_is_absent: bool = False
) -> dict[str, Any]:
    """The JSON Schema of a mapping with these keys. With `null_is_absent` (keys read by
    parse_keys, which skips null values), an optional key may also be null."""
    properties = {}
    for key in keys:
        value = key.field.schema()
        if null_is_absent and not key.required:
            value = nullable(value)
        if key.default is not None:
            value["default"] = list(key.default) if isinstance(key.default, tuple) else key.default
        properties[key.name] = value
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": additional,
    }
    required = [key.name for key in keys if key.required]
    if required:
        schema["required"] = required
    return schema


def _shown(value: Any, limit: int = 60) -> str:
    """repr(value), cut: a 4,000-digit number makes a poor error message."""
    huge = isinstance(value, int) and value.bit_length() > 200
    text = "a huge number" if huge else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """schema, or null (a key written without a value)."""
    described = {"description": schema["description"]} if "description" in schema else {}
    inner = {name: value for name, value in schema.items() if name != "description"}
    return {**described, "anyOf": [inner, {"type": "null"}]}


def _described(schema: dict[str, Any], field: Any) -> dict[str, Any]:
    if field.description:
        schema["description"] = field.description
    return schema
