"""Argument types that only builtins take: case paths, regexes, commands, any JSON value,
reference files beside eval.yaml, globs, a path that may be a glob, lists of words, and
lists of test ids (inline or in a file beside eval.yaml)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from verifier.config import Locator
from verifier.config.fields import RelativePath
from verifier.globs import Glob, GlobError, compile_glob


@attrs.frozen
class CasePath:
    """A path inside the case dir, as the agent left it (checked when the builtin runs)."""

    description: str = "a path relative to the case dir"

    def parse(self, value: Any, at: Locator) -> str:
        if not isinstance(value, str) or not value.strip() or "\0" in value:
            raise at.error("must be a non-empty path relative to the case dir")
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "minLength": 1, "description": self.description}


@attrs.frozen
class ImagePath:
    """An absolute path in the verifier's image (or as a command sees it): normalized,
    no '..', not the root itself."""

    description: str = "an absolute path"

    def parse(self, value: Any, at: Locator) -> str:
        path = PurePosixPath(value) if isinstance(value, str) and "\0" not in value else None
        if path is None or not path.is_absolute() or ".." in path.parts or len(path.parts) < 2:
            raise at.error("must be an absolute path below / (no '..')")
        return str(path)

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": "^/[^\\u0000]+$", "description": self.description}


@attrs.frozen
class Pattern:
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


@attrs.frozen
class CommandLine:
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


@attrs.frozen
class AnyValue:
    description: str = "any YAML value"

    def parse(self, value: Any, at: Locator) -> Any:
        return value

    def schema(self) -> dict[str, Any]:
        return {"description": self.description}


@attrs.frozen
class Environment:
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


@attrs.frozen
class ReferencePath:
    """A trusted file (or dir) the task author ships beside eval.yaml: checked at load
    time, copied by `task init`, hashed into a batch's resume key."""

    kind: str = "file"  # "file", "dir" or "file or dir"
    description: str = "a file beside eval.yaml"
    check: Callable[[Path], str | None] | None = None  # what is wrong with its contents

    def parse(self, value: Any, at: Locator) -> PurePosixPath:
        relative = RelativePath().parse(value, at)
        path = at.base_dir / relative
        if self.kind == "file" and not path.is_file():
            raise at.error(f"{path} is not a file")
        if self.kind == "dir" and not path.is_dir():
            raise at.error(f"{path} is not a directory")
        problem = self.check(path) if self.check is not None else None
        if problem is not None:
            raise at.error(f"{path}: {problem}")
        return relative

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "minLength": 1, "description": self.description}


@attrs.frozen
class ProvidedFiles:
    """Trusted files beside eval.yaml handed to a command (sandbox `provided`): a mapping
    of the name it finds each under in $VERIFIER_PROVIDED to the file, or a list of
    files, each under its own relative path."""

    description: str = (
        "files beside eval.yaml the command finds in $VERIFIER_PROVIDED: {name: file} "
        "or [file, ...]"
    )

    def parse(self, value: Any, at: Locator) -> dict[str, PurePosixPath]:
        if isinstance(value, list):
            value = {item: item for item in value} if all(isinstance(i, str) for i in value) else 0
        if not isinstance(value, dict) or not value:
            raise at.error("must map names to files beside eval.yaml, or list such files")
        provided = {}
        for name, file in value.items():
            where = at.child(str(name))
            relative = PurePosixPath(name) if isinstance(name, str) else None
            if (
                relative is None
                or relative.is_absolute()
                or ".." in relative.parts
                or not relative.parts
                or "\0" in name
            ):
                raise where.error(f"{name!r} must be a relative name, without '..'")
            provided[str(relative)] = ReferencePath().parse(file, where)
        return provided

    @staticmethod
    def written(value: Any) -> list[str]:
        """The files (as written) of a value given for this field."""
        if isinstance(value, dict):
            return [file for file in value.values() if isinstance(file, str)]
        if isinstance(value, list):
            return [file for file in value if isinstance(file, str)]
        return []

    def schema(self) -> dict[str, Any]:
        path = {"type": "string", "minLength": 1}
        return {
            "anyOf": [
                {"type": "object", "additionalProperties": path, "minProperties": 1},
                {"type": "array", "items": path, "minItems": 1},
            ],
            "description": self.description,
        }


@attrs.frozen
class Globs:
    """One glob or a list of them (verifier.globs: `tests/**`, `conftest.py`, `*.pth`)."""

    description: str = "globs relative to the case dir, as in .gitignore"

    def parse(self, value: Any, at: Locator) -> tuple[Glob, ...]:
        items = value if isinstance(value, list) else [value]
        if not items:
            raise at.error("must name at least one glob")
        globs = []
        for index, item in enumerate(items):
            where = at.item(index) if isinstance(value, list) else at
            if not isinstance(item, str):
                raise where.error("must be a glob string such as tests/**")
            try:
                globs.append(compile_glob(item))
            except GlobError as error:
                raise where.error(str(error)) from None
        return tuple(globs)

    def schema(self) -> dict[str, Any]:
        item = {"type": "string", "minLength": 1}
        return {
            "anyOf": [item, {"type": "array", "items": item, "minItems": 1}],
            "description": self.description,
        }


@attrs.frozen
class ColumnRef:
    description: str = "a column number from 0, or a header name"

    def parse(self, value: Any, at: Locator) -> int | str:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and value:
            return value
        raise at.error(f"{value!r} must be a column number from 0 or a header name")

    def schema(self) -> dict[str, Any]:
        return {
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1}],
            "description": self.description,
        }


@attrs.frozen
class PathOrGlob:
    """A path in the case, or a glob when it holds `*`, `?` or `[` (verifier.globs): a
    test runner writes one report, or one per suite (surefire's TEST-*.xml)."""

    description: str = "a path relative to the case dir, or a glob such as reports/*.xml"

    def parse(self, value: Any, at: Locator) -> str | Glob:
        path = CasePath().parse(value, at)
        if not any(char in path for char in "*?["):
            return path
        try:
            return compile_glob(path)
        except GlobError as error:
            raise at.error(str(error)) from None

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "minLength": 1, "description": self.description}


@attrs.frozen
class Words:
    """A list of non-empty strings (a runner's extra arguments, its paths, plugin modules)."""

    description: str = "a list of strings"
    problem: str = "must be a list of non-empty strings"

    def parse(self, value: Any, at: Locator) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(
            isinstance(item, str) and item and "\0" not in item for item in value
        ):
            raise at.error(self.problem)
        return tuple(value)

    def schema(self) -> dict[str, Any]:
        return {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "description": self.description,
        }


MAX_TEST_IDS = 100_000
MAX_TEST_ID_CHARS = 4000
MAX_TEST_LIST_BYTES = 32 * 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@attrs.frozen
class TestIdList:
    """Test ids (pytest node ids, go's Package/TestName, CTRF or JUnit names): a list, or
    the path of a file beside eval.yaml with one id a line (blank lines and `#` comments
    skipped), or a `.json` file holding a list of strings (SWE-bench's FAIL_TO_PASS)."""

    description: str = (
        "test ids: a list, or a file beside eval.yaml with one id a line (or a .json list)"
    )

    def parse(self, value: Any, at: Locator) -> tuple[str, ...]:
        if isinstance(value, list):
            entries = [(at.item(index), item) for index, item in enumerate(value)]
        elif isinstance(value, str):
            entries = _listed_in_file(at, RelativePath().parse(value, at))
        else:
            raise at.error(
                "must be a list of test ids, or the path of a file beside eval.yaml "
                "with one id a line"
            )
        if not entries:
            raise at.error("lists no test")
        if len(entries) > MAX_TEST_IDS:
            raise at.error(f"lists {len(entries)} tests, over the {MAX_TEST_IDS} cap")
        seen: set[str] = set()
        for where, item in entries:
            if not isinstance(item, str):
                raise where.error(f"{_shown(item)} is not a test id (a string)")
            problem = test_id_problem(item)
            if problem is not None:
                raise where.error(f"{_shown(item)} {problem}")
            if item in seen:
                raise where.error(f"{_shown(item)} is listed twice")
            seen.add(item)
        return tuple(item for _, item in entries)

    def schema(self) -> dict[str, Any]:
        item = {"type": "string", "minLength": 1, "maxLength": MAX_TEST_ID_CHARS}
        return {
            "anyOf": [
                {"type": "array", "items": item, "minItems": 1},
                {"type": "string", "minLength": 1},
            ],
            "description": self.description,
        }


def test_id_problem(test_id: str) -> str | None:
    """What makes a string no test id, or None."""
    if not test_id.strip():
        return "is empty"
    if test_id != test_id.strip():
        return "has spaces around it"
    if len(test_id) > MAX_TEST_ID_CHARS:
        return f"is over {MAX_TEST_ID_CHARS} characters"
    if _CONTROL.search(test_id):
        return "holds a control character"
    return None


def _listed_in_file(at: Locator, relative: PurePosixPath) -> list[tuple[Locator, Any]]:
    """(where, id) of each id in the file: a line's number names it in an error."""
    path = at.base_dir / relative
    if not path.is_file():
        raise at.error(f"{path} is not a file")
    if path.stat().st_size > MAX_TEST_LIST_BYTES:
        raise at.error(f"{path} is over {MAX_TEST_LIST_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise at.error(f"{path} cannot be read as UTF-8 text ({error})") from None
    if path.suffix == ".json":
        try:
            document = json.loads(text)
        except ValueError as error:
            raise at.error(f"{path} is not valid JSON ({error})") from None
        if not isinstance(document, list):
            raise at.error(f"{path} must hold a JSON list of test ids")
        return [(at.child(f"{path.name}[{index}]"), item) for index, item in enumerate(document)]
    return [
        (at.child(f"{path.name}: line {number}"), line.strip())
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# The argument types that name files beside eval.yaml when given a string: `task init`
# copies them and a batch's resume key hashes them.
REFERENCE_FIELDS = (ReferencePath, TestIdList)
