"""Judges written in Python by the task author: inline `check` bodies and module functions.

Both are compiled or imported at load time so that a syntax error or a missing
module fails the config (exit 2) once, instead of erroring on every case.
Modules come only from the directory that holds eval.yaml.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verifier.config import EvalConfig, JudgeConfig
from verifier.errors import ConfigError


def prepare_check(judge: JudgeConfig, config: EvalConfig) -> Callable[[dict[str, Any]], Any]:
    """Compile an inline check body into `fn(outputs, arguments)`."""
    assert judge.check is not None
    filename = f"<{judge.key}.check>"
    source = "def check(outputs, arguments):\n" + textwrap.indent(
        textwrap.dedent(judge.check), "    "
    )
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as error:
        line = (error.lineno or 1) - 1
        raise ConfigError(
            str(config.path), f"{judge.key}.check", f"does not compile: {error.msg} (line {line})"
        ) from None
    if not any(isinstance(node, ast.Return) for node in ast.walk(tree)):
        raise ConfigError(
            str(config.path), f"{judge.key}.check", "never returns; end it with `return <value>`"
        )
    ast.increment_lineno(tree, -1)
    namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": f"check_{judge.name}"}
    exec(compile(tree, filename, "exec"), namespace)
    check = namespace["check"]
    arguments = dict(judge.arguments)
    return lambda record: check(record, arguments)


def prepare_module(judge: JudgeConfig, config: EvalConfig) -> Callable[[dict[str, Any]], Any]:
    """Import `module` from eval.yaml's directory and return `fn(outputs=record, **arguments)`."""
    assert judge.module is not None and judge.function is not None
    source = str(config.path)
    base_dir = str(config.base_dir)
    if base_dir not in sys.path:
        sys.path.insert(0, base_dir)
    try:
        module = importlib.import_module(judge.module)
    except Exception as error:
        raise ConfigError(
            source,
            f"{judge.key}.module",
            f"cannot import {judge.module!r} from {base_dir}: {type(error).__name__}: {error}",
        ) from None
    module_file = getattr(module, "__file__", None)
    if module_file is None or not Path(module_file).resolve().is_relative_to(config.base_dir):
        raise ConfigError(
            source,
            f"{judge.key}.module",
            f"{judge.module!r} resolves to {module_file or 'a built-in module'}, not a file under "
            f"{base_dir}; rename the judge module",
        )
    function = getattr(module, judge.function, None)
    if not callable(function):
        raise ConfigError(
            source, f"{judge.key}.function", f"{judge.module}.{judge.function} is not a function"
        )
    arguments = dict(judge.arguments)
    return lambda record: function(outputs=record, **arguments)
