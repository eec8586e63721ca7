"""Builtins over JSON files in the case."""

from __future__ import annotations

import json
from typing import Any

from verifier.config import Key
from verifier.config.fields import Text
from verifier.judges.builtins.fields import AnyValue
from verifier.judges.builtins.files import PATH, case_text
from verifier.judges.builtins.registry import BuiltinContext, ValueWithRationale, builtin


@builtin(
    "json",
    PATH,
    Key("key", Text(non_empty=True, description="dotted; list indices as numbers: items.0.id"),
        required=True),
    Key("expected", AnyValue(), required=True),
)  # fmt: skip
def json_path_equals(
    context: BuiltinContext, path: str, key: str, expected: Any
) -> ValueWithRationale:
    content, problem = case_text(context, path)
    if content is None:
        return False, problem
    try:
        current: Any = json.loads(content)
    except ValueError as error:
        return False, f"{path} is not valid JSON: {error}"
    except RecursionError:
        return False, f"{path} is JSON nested too deeply to read"
    for part in key.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and _is_index(part, len(current)):
            current = current[int(part)]
        else:
            return False, f"{path}: {key} not found (stopped at {part!r})"
    equal = json_equal(current, expected)
    return equal, f"{path}: {key} is {json.dumps(current)[:200]}, expected {json.dumps(expected)}"


def _is_index(part: str, length: int) -> bool:
    return part.lstrip("-").isdigit() and -length <= int(part) < length


def json_equal(actual: Any, expected: Any) -> bool:
    """JSON equality where true is not 1 but 1 is 1.0."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    return bool(actual == expected)
