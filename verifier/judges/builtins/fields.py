"""Argument types that only builtins take: case paths, regexes, commands, any JSON value."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from verifier.config import Locator


class CasePath(NamedTuple):
    """A path inside the case dir, as the agent left it (checked when the builtin runs)."""

    description: str = "a path relative to the case dir"

    def parse(self, value: Any, at: Locator) -> str:
        if not isinstance(value, str) or not value.strip() or "\0" in value:
            raise at.error("must be a non-empty path relative to the case dir")
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "minLength": 1, "description": self.description}


class Pattern(NamedTuple):
    description: str = "a Python regular expression"

    def parse(self, value: Any, at: Locator) -> str:
        if not isinstance(value, str):
            raise at.error("must be a string (a regular expression)")
        try:
            re.compile(value)
        except re.error as error:
            raise at.error(f"pattern {value!r} is not a valid regex: {error}") from None
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "description": self.description}


class CommandLine(NamedTuple):
    description: str = "a shell string, or an argv list"

    def parse(self, value: Any, at: Locator) -> str | list[str]:
        is_argv = isinstance(value, list) and value and all(isinstance(arg, str) for arg in value)
        if not (isinstance(value, str) and value.strip()) and not is_argv:
            raise at.error("command must be a shell string or a list of strings")
        return value

    def schema(self) -> dict[str, Any]:
        return {
            "anyOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "items": {"type": "string"}, "minItems": 1},
            ],
            "description": self.description,
        }


class AnyValue(NamedTuple):
    description: str = "any YAML value"

    def parse(self, value: Any, at: Locator) -> Any:
        return value

    def schema(self) -> dict[str, Any]:
        return {"description": self.description}


class Environment(NamedTuple):
    """Variables a command gets on top of the sandbox's allow-list: names to strings."""

    description: str = "variables for the command, on top of PATH, HOME, TMPDIR, LANG, TZ"

    def parse(self, value: Any, at: Locator) -> dict[str, str]:
        if not isinstance(value, dict) or not all(
            isinstance(name, str) and name and "=" not in name and "\0" not in name
            for name in value
        ):
            raise at.error("must be a mapping of variable names to values")
        for name, item in value.items():
            if (
                not isinstance(item, str | int | float)
                or isinstance(item, bool)
                or "\0" in str(item)
            ):
                raise at.child(name).error("must be a string or a number")
        return {name: str(item) for name, item in value.items()}

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "additionalProperties": {"type": ["string", "number"]},
            "description": self.description,
        }
