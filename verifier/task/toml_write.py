"""A TOML document written from what `tomllib` reads: `verifier task import` keeps every
key of a task's task.toml and adds what separate mode needs, so it parses the file,
changes the data, and writes it back with this.

What `tomllib.loads` returns is all it writes: tables (dicts), arrays (lists), strings,
integers, floats (inf and nan included), booleans, and dates and times. In each table
the plain keys come first, then its sub-tables (`[a.b]`), then its arrays of tables
(`[[a.b]]`), each in the order the dict has them, so `tomllib.loads(dumps(document))
== document` for every document it reads. An empty table keeps its header. Comments
and layout are not data and are not kept.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from verifier.task.package import toml_str

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def dumps(document: Mapping[str, Any]) -> str:
    """The document as TOML text, ending with a newline."""
    lines: list[str] = []
    _table(lines, (), document)
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines) + "\n"


def _table(lines: list[str], path: tuple[str, ...], table: Mapping[str, Any]) -> None:
    plain = [(key, value) for key, value in table.items() if not _is_table(value)]
    tables = [(key, value) for key, value in table.items() if isinstance(value, Mapping)]
    arrays = [(key, value) for key, value in table.items() if _is_table_array(value)]
    for key, value in plain:
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in tables:
        here = (*path, key)
        if not _only_tables(value) or not value:
            lines += ["", f"[{_dotted(here)}]"]
        _table(lines, here, value)
    for key, items in arrays:
        here = (*path, key)
        for item in items:
            lines += ["", f"[[{_dotted(here)}]]"]
            _table(lines, here, item)


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping) or _is_table_array(value)


def _is_table_array(value: Any) -> bool:
    return (
        isinstance(value, list) and bool(value) and all(isinstance(item, Mapping) for item in value)
    )


def _only_tables(table: Mapping[str, Any]) -> bool:
    """A table holding only sub-tables needs no header of its own (`[a.b]` implies `a`)."""
    return all(_is_table(value) for value in table.values())


def _dotted(path: Sequence[str]) -> str:
    return ".".join(_key(part) for part in path)


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_str(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_str(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(key)} = {_value(item)}" for key, item in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"not a TOML value: {value!r}")
