"""Values as eval.yaml and the case give them: what counts as a number, a finite float,
and any parsed value as JSON text without raising."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

_SHOWN_DEPTH = 64  # a structure deeper than this is shown cut, not walked to its end
_PRINTABLE_INT = 10**4000  # below Python's 4,300-digit limit on int -> str


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def finite_float(value: Any) -> float | None:
    """value as a finite float, or None (not a number, a bool, inf, NaN, or an int too
    large for a float)."""
    if not is_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def json_text(value: Any, indent: int | None = None) -> str:
    """value as JSON text, whatever a parser of the case's files produced: keys that
    are not strings (a YAML date, a tuple) shown as text, non-JSON leaves with str(),
    nesting deeper than json.dumps can walk shown cut (a RecursionError was raised),
    an integer too long to print (over 4,300 digits) named by its size."""
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False, default=leaf_text)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(_plain(value, _SHOWN_DEPTH), indent=indent, ensure_ascii=False)


def _plain(value: Any, depth: int) -> Any:
    """value with only JSON types in it, at most depth levels deep."""
    if isinstance(value, Mapping | list | tuple) and depth <= 0:
        return "[... nested too deeply to show ...]"
    if isinstance(value, Mapping):
        return {_key(key): _plain(item, depth - 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item, depth - 1) for item in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if abs(value) < _PRINTABLE_INT else leaf_text(value)
    if isinstance(value, float):
        return value
    return leaf_text(value)


def _key(key: Any) -> str:
    return key if isinstance(key, str) else leaf_text(key)


def leaf_text(value: Any) -> str:
    """A value JSON has no type for, as text (a long integer by its size: str() of one
    over 4,300 digits raises)."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return str(value)
        except ValueError:
            return f"(an integer of {value.bit_length()} bits)"
    return str(value)
