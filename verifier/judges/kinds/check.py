"""`check:` judges: an inline Python function body written by the task author.

Compiled at load time, so a syntax error or a body that never returns fails the
config (exit 2) once instead of erroring on every case.
"""

from __future__ import annotations

import ast
import builtins
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from verifier.config import EvalConfig, JudgeConfig, Key, KindDefaults, Locator
from verifier.config.fields import Text
from verifier.judges.base import Pool, Record
from verifier.named import NamedTuple


class CheckSpec(NamedTuple):
    body: str


class CheckKind(KindDefaults):
    name = "check"
    pool = Pool.CPU
    case_bound = False
    keys = (Key("check", Text(description="a Python function body; receives outputs, "
                              "arguments; must return")),)  # fmt: skip
    claim_keys = ("check",)

    def spec(self, values: Mapping[str, Any], at: Locator) -> CheckSpec:
        if "check" not in values:
            raise at.child("check").error("must be a string")
        return CheckSpec(values["check"])

    def entry_schema(self) -> dict[str, Any]:
        """A body, and one that can return (prepare() also compiles it)."""
        return {"properties": {"check": {"type": "string", "pattern": r"\breturn\b"}}}

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[Record], Any]:
        """Compile the body into `fn(outputs, arguments)`."""
        at = config.locator(f"{judge.key}.check")
        filename = f"<{judge.key}.check>"
        source = "def check(outputs, arguments):\n" + textwrap.indent(
            textwrap.dedent(judge.spec.body), "    "
        )
        try:
            tree = ast.parse(source, filename=filename)
        except SyntaxError as error:
            line = (error.lineno or 1) - 1
            raise at.error(f"does not compile: {error.msg} (line {line})") from None
        if not any(isinstance(node, ast.Return) for node in ast.walk(tree)):
            raise at.error("never returns; end it with `return <value>`")
        ast.increment_lineno(tree, -1)
        namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": f"check_{judge.name}"}
        exec(compile(tree, filename, "exec"), namespace)
        check = namespace["check"]
        arguments = dict(judge.arguments)
        return lambda record: check(record, arguments)

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        return "check"


CHECK = CheckKind()
