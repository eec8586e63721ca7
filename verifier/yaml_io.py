"""One safe YAML reader for every file the verifier parses.

Safe means no Python objects; libyaml's C parser is used when it is installed
(several times faster on big files). Read errors of the task author's files are
ConfigErrors naming the file and, for syntax errors, the line and column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from verifier.errors import ConfigError

YAMLError = yaml.YAMLError


def parse_yaml(text: str) -> Any:
    """Safe YAML (no Python objects), with libyaml's C parser when it is installed."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


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
        return parse_yaml(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(source, where, f"invalid YAML: {error.problem}") from None
    except yaml.YAMLError as error:
        raise ConfigError(source, "", f"invalid YAML: {error}") from None
