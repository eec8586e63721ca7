"""One safe YAML reader for every file the verifier parses.

Safe means no Python objects. PyYAML reads every file, with libyaml's C parser when
it is installed (faster on big files). The task author's files (read_yaml) are read
strictly: a key given twice in one mapping is an error (YAML silently keeps the
last), and every read error is a ConfigError naming the file and, for syntax
errors, the line and column.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from verifier.errors import ConfigError


@functools.cache
def _loaders() -> tuple[type[yaml.SafeLoader], type[yaml.SafeLoader]]:
    """PyYAML's safe loader and a strict one, refusing a key given twice in one mapping."""
    safe: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(safe):  # type: ignore[misc, valid-type]
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, list | dict):
                    continue  # unhashable: the base constructor reports it
                if key in seen:
                    raise yaml.MarkedYAMLError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"duplicate key {key!r} (the later one would silently win)",
                        key_node.start_mark,
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return safe, StrictLoader


def _pyyaml_load(text: str, *, strict: bool) -> Any:
    safe, strict_loader = _loaders()
    return yaml.load(text, Loader=strict_loader if strict else safe)  # noqa: S506 (both are SafeLoaders)


def read_yaml(path: Path, *, missing: str = "file not found") -> Any:
    """The parsed document of a trusted YAML file; ConfigError (exit 2) saying what is wrong."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, "", missing) from None
    except IsADirectoryError:
        raise ConfigError(source, "", "is a directory, not a YAML file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(source, "", f"cannot be read: {error}") from None
    try:
        return _pyyaml_load(text, strict=True)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(source, where, f"invalid YAML: {error.problem}") from None
    except yaml.YAMLError as error:
        raise ConfigError(source, "", f"invalid YAML: {error}") from None
    except (ValueError, RecursionError, MemoryError) as error:
        # e.g. a number of more digits than Python converts, or absurd nesting
        problem = str(error) if isinstance(error, ValueError) else "nested too deeply"
        raise ConfigError(source, "", f"invalid YAML: {problem}") from None


def parse_untrusted_yaml(data: bytes, max_expansion: int) -> tuple[Any, str | None]:
    """(document, None) or (None, why it is refused) for YAML from the case: never raises.

    Not valid YAML, absurdly nested, or an alias bomb (see _oversized) are facts.
    """
    text = data.decode("utf-8", errors="replace")
    try:
        document = _pyyaml_load(text, strict=False)
    except (yaml.YAMLError, ValueError, RecursionError):
        return None, "not valid YAML"
    problem = _oversized(document, max_expansion)
    return (None, problem) if problem is not None else (document, None)


def _oversized(document: Any, limit: int) -> str | None:
    """Why a parsed YAML document is refused, or None.

    YAML aliases share one object between many places, so a small file can stand
    for an enormous document (the "billion laughs"): anything that walks it (a
    template, a JSON dump) would blow up. Measure it with aliases expanded (a value
    counts 1, a string its length), each shared object's size computed once, and
    refuse cycles.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(value: Any) -> int:
        if isinstance(value, str):
            return max(1, len(value))
        if not isinstance(value, dict | list):
            return 1
        marker = id(value)
        if marker in sizes:
            return sizes[marker]
        if marker in on_path:
            raise _Refused("it refers to itself (a recursive alias)")
        on_path.add(marker)
        items = value.items() if isinstance(value, dict) else enumerate(value)
        total = 1
        for _, item in items:
            total += size(item)
            if total > limit:
                raise _Refused(f"with its aliases expanded it is larger than {limit} values")
        on_path.discard(marker)
        sizes[marker] = total
        return total

    try:
        size(document)
    except _Refused as refused:
        return str(refused)
    except RecursionError:
        return "it is nested too deeply"
    return None


class _Refused(Exception):
    pass
