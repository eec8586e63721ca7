"""Builtins over data files in the case: JSON, YAML, CSV and SQLite values.

The case's files are untrusted: a file that is not valid JSON/YAML/CSV/SQLite, is
nested too deeply, is an alias bomb, or makes a query run too long, makes the
builtin fail with that fact, never error. Names and arguments follow rewardkit's.
"""

from __future__ import annotations

import json
import time
from typing import Any

import attrs

from verifier.casefiles import read_case_file
from verifier.config.fields import Number, Text
from verifier.judges.builtins.arguments import AnyValue, CasePath, ColumnRef
from verifier.judges.builtins.files import PathArguments, case_text
from verifier.judges.builtins.registry import (
    BuiltinContext,
    ValueWithRationale,
    argument,
    builtin,
)
from verifier.values import json_text
from verifier.yaml_io import parse_untrusted_yaml

DOTTED = "dotted; list indices as numbers: items.0.id"
MAX_YAML_BYTES = 16 * 1024 * 1024
MAX_YAML_VALUES = 4 * 1024 * 1024  # once aliases are expanded (yaml_io._oversized)
MAX_DATABASE_BYTES = 256 * 1024 * 1024
_SHOWN_CHARS = 200


@attrs.frozen(kw_only=True)
class JsonKeyArguments(PathArguments):
    key: str = argument(Text(non_empty=True), required=True)
    expected: Any = argument(AnyValue(), required=True)


@attrs.frozen(kw_only=True)
class JsonPathArguments(PathArguments):
    json_path: str | None = argument(Text(non_empty=True, description=DOTTED))
    key: str | None = argument(
        Text(non_empty=True, description=f"the same as json_path ({DOTTED})")
    )
    expected: Any = argument(AnyValue(), required=True)


@attrs.frozen(kw_only=True)
class YamlPathArguments(PathArguments):
    yaml_path: str = argument(Text(non_empty=True, description=DOTTED), required=True)
    expected: Any = argument(AnyValue(), required=True)


@attrs.frozen(kw_only=True)
class CsvCellArguments(PathArguments):
    row: int = argument(
        Number(integer=True, minimum=0, problem="must be a row number from 0"), required=True
    )
    col: int | str = argument(ColumnRef(), required=True)
    expected: Any = argument(AnyValue(), required=True)


@attrs.frozen(kw_only=True)
class SqliteQueryArguments:
    db_path: str = argument(CasePath(), required=True)
    query: str = argument(Text(non_empty=True, description="SQL, run read-only"), required=True)
    expected: Any = argument(AnyValue(), required=True)
    timeout: float = argument(
        Number(positive=True, problem="must be a positive number of seconds"), default=10
    )


@builtin("json", JsonKeyArguments)
def json_key_equals(context: BuiltinContext, arguments: JsonKeyArguments) -> ValueWithRationale:
    """A top-level key of a JSON object (the key is taken whole: dots are not paths)."""
    path, key, expected = arguments.path, arguments.key, arguments.expected
    document, problem = _json_document(context, path)
    if problem:
        return False, problem
    if not isinstance(document, dict) or key not in document:
        return False, f"{path}: no top-level key {key!r}"
    return _compare(path, key, document[key], expected)


@builtin("json", JsonPathArguments, one_of=(("json_path", "key"),))
def json_path_equals(context: BuiltinContext, arguments: JsonPathArguments) -> ValueWithRationale:
    path, json_path, key = arguments.path, arguments.json_path, arguments.key
    expected = arguments.expected
    document, problem = _json_document(context, path)
    if problem:
        return False, problem
    return _at_path(path, document, json_path or key or "", expected)


@builtin("yaml", YamlPathArguments)
def yaml_path_equals(context: BuiltinContext, arguments: YamlPathArguments) -> ValueWithRationale:
    path, yaml_path, expected = arguments.path, arguments.yaml_path, arguments.expected
    found = read_case_file(context.case_dir, path, MAX_YAML_BYTES)
    if found.data is None:
        return False, f"{path} {found.problem}"
    document, problem = parse_untrusted_yaml(found.data, MAX_YAML_VALUES)
    if problem is not None:
        return False, f"{path} is refused: {problem}"
    return _at_path(path, document, yaml_path, expected)


@builtin("csv", CsvCellArguments)
def csv_cell_equals(context: BuiltinContext, arguments: CsvCellArguments) -> ValueWithRationale:
    """rewardkit's numbering: with a column number, rows are the raw lines (row 0 is the
    header); with a header name, row 0 is the first data row."""
    path, row, col, expected = arguments.path, arguments.row, arguments.col, arguments.expected
    import csv  # each format's module is imported by its builtin only: start-up time

    content, problem = case_text(context, path)
    if content is None:
        return False, problem
    try:
        rows = list(csv.reader(content.splitlines()))
    except csv.Error as error:
        return False, f"{path} is not valid CSV: {error}"
    if isinstance(col, str):
        if not rows or col not in rows[0]:
            return False, f"{path}: no column {col!r} in the header"
        column, rows = rows[0].index(col), rows[1:]
    else:
        column = col
    if row >= len(rows) or column >= len(rows[row]):
        return False, f"{path}: no cell at row {row}, column {col!r} ({len(rows)} rows)"
    cell = rows[row][column]
    equal = _cell_equal(cell, expected)
    return (
        equal,
        f"{path}: row {row}, column {col!r} is {cell[:_SHOWN_CHARS]!r}, expected {expected!r}",
    )


@builtin("sqlite", SqliteQueryArguments)
def sqlite_query_equals(
    context: BuiltinContext, arguments: SqliteQueryArguments
) -> ValueWithRationale:
    """The query's first value equals `expected` (a list: all rows, each a value or a
    list of column values).

    The database is the agent's file: it is read into memory (never opened where it
    lies, so no journal, WAL or symlink is followed) and queried read-only with its
    schema untrusted, under a time limit.
    """
    import sqlite3

    db_path, query, timeout = arguments.db_path, arguments.query, arguments.timeout
    expected = arguments.expected
    found = read_case_file(context.case_dir, db_path, MAX_DATABASE_BYTES)
    if found.data is None:
        return False, f"{db_path} {found.problem}"
    try:
        rows = _query(found.data, query, timeout)
    except _QueryTooSlow:
        return False, f"{db_path}: the query ran over {timeout:g}s"
    except (sqlite3.Error, OverflowError, MemoryError) as error:
        return False, f"{db_path}: the query failed: {error or type(error).__name__}"
    if isinstance(expected, list):
        equal = len(rows) == len(expected) and all(map(_row_equal, rows, expected))
        shown = json.dumps([list(row) for row in rows[:20]], default=repr)[:_SHOWN_CHARS]
        return (
            equal,
            f"{db_path}: the query returned {len(rows)} rows {shown}, expected {expected!r}",
        )
    if not rows or not rows[0]:
        return False, f"{db_path}: the query returned no rows"
    value = rows[0][0]
    shown = repr(value)[:_SHOWN_CHARS]  # a text or blob value of the case's, of any size
    return _sql_equal(
        value, expected
    ), f"{db_path}: the query returned {shown}, expected {expected!r}"


class _QueryTooSlow(Exception):
    pass


def _query(data: bytes, query: str, timeout: float) -> list[tuple[Any, ...]]:
    import sqlite3

    if data[18:20] == b"\x02\x02":  # WAL mode: read the main file as a rollback database
        data = data[:18] + b"\x01\x01" + data[20:]
    connection = sqlite3.connect(":memory:")
    deadline = time.monotonic() + timeout
    try:
        if data:  # an empty file is an empty database, as SQLite opens it
            connection.deserialize(data)
        connection.execute("PRAGMA trusted_schema = OFF")
        connection.execute("PRAGMA cell_size_check = ON")
        connection.execute("PRAGMA query_only = ON")
        connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            return connection.execute(query).fetchmany(10_000)
        except sqlite3.OperationalError as error:
            if time.monotonic() > deadline and "interrupted" in str(error):
                raise _QueryTooSlow from None
            raise
    finally:
        connection.close()


def _json_document(context: BuiltinContext, path: str) -> tuple[Any, str]:
    content, problem = case_text(context, path)
    if content is None:
        return None, problem
    try:
        return json.loads(content), ""
    except ValueError as error:
        return None, f"{path} is not valid JSON: {error}"
    except RecursionError:
        return None, f"{path} is JSON nested too deeply to read"


def _at_path(path: str, document: Any, dotted: str, expected: Any) -> ValueWithRationale:
    current = document
    for part in dotted.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and _is_index(part, len(current)):
            current = current[int(part)]
        else:
            return False, f"{path}: {dotted} not found (stopped at {part!r})"
    return _compare(path, dotted, current, expected)


def _compare(path: str, where: str, actual: Any, expected: Any) -> ValueWithRationale:
    shown = json_text(actual)[:_SHOWN_CHARS]  # a YAML date key, a deep list: shown anyway
    return json_equal(
        actual, expected
    ), f"{path}: {where} is {shown}, expected {json_text(expected)}"


def _is_index(part: str, length: int) -> bool:
    return part.lstrip("-").isdigit() and -length <= int(part) < length


def json_equal(actual: Any, expected: Any) -> bool:
    """JSON equality where true is not 1 but 1 is 1.0 (a structure too deep to compare
    is not equal to what eval.yaml expects, which is never that deep)."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    try:
        return bool(actual == expected)
    except RecursionError:
        return False


def _cell_equal(cell: str, expected: Any) -> bool:
    """A CSV cell is text: equal to a string as it is, to a number by its value."""
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        try:
            return float(cell) == expected
        except ValueError:
            return False
    return cell == str(expected)


def _row_equal(row: tuple[Any, ...], expected: Any) -> bool:
    """A row against a list of column values, or a one-column row against a value."""
    if isinstance(expected, list):
        return len(row) == len(expected) and all(map(_sql_equal, row, expected))
    return len(row) == 1 and _sql_equal(row[0], expected)


def _sql_equal(actual: Any, expected: Any) -> bool:
    """SQLite has no booleans (true is stored as 1): compare accordingly."""
    if isinstance(expected, bool):
        expected = int(expected)
    return not isinstance(actual, bytes) and json_equal(actual, expected)
