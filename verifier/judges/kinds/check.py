"""`check:` judges: an inline Python function body written by the task author.

Compiled at load time, so a syntax error or a body that never says `return` fails
the config (exit 2) once instead of erroring on every case.
"""

from __future__ import annotations

import builtins
import os
import re
from collections.abc import Callable, Mapping
from types import CodeType
from typing import Any

import attrs

from verifier.config import EvalConfig, JudgeConfig, Key, KindDefaults, Locator
from verifier.config.fields import Text
from verifier.judges.base import JudgeContext, Pool


@attrs.frozen
class CheckSpec:
    body: str


class CheckKind(KindDefaults):
    name = "check"
    pool = Pool.CPU
    case_bound = False
    keys = (
        Key(
            "check",
            Text(description="a Python function body; receives outputs, arguments; must return"),
        ),
    )
    claim_keys = ("check",)

    def spec(self, values: Mapping[str, Any], at: Locator) -> CheckSpec:
        if "check" not in values:
            raise at.child("check").error("must be a string")
        return CheckSpec(values["check"])

    def entry_schema(self) -> dict[str, Any]:
        """A body, and one that can return (prepare() also compiles it)."""
        return {"properties": {"check": {"type": "string", "pattern": r"\breturn\b"}}}

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[JudgeContext], Any]:
        """Compile the body into `fn(outputs, arguments)`."""
        at = config.locator(f"{judge.key}.check")
        filename = f"<{judge.key}.check>"
        source = "def check(outputs, arguments):\n" + _indented(judge.spec.body)
        try:
            code = compile(source, filename, "exec")
        except SyntaxError as error:
            line = (error.lineno or 1) - 1
            raise at.error(f"does not compile: {error.msg} (line {line})") from None
        if not _RETURN.search(judge.spec.body):
            raise at.error("never returns; end it with `return <value>`")
        namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": f"check_{judge.name}"}
        exec(_lines_shifted(code, -1), namespace)  # line 1 is the body's first line
        check = namespace["check"]
        arguments = dict(judge.arguments)
        return lambda context: check(context.record, arguments)

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        return "check"


KIND = CheckKind()
_RETURN = re.compile(r"\breturn\b")  # the rule `verifier schema` gives editors, too


def _indented(body: str) -> str:
    """The body under a `def` line: its common leading whitespace (textwrap.dedent's
    margin) replaced by four spaces on every line that is not blank."""
    lines = body.splitlines(keepends=True)
    margin = os.path.commonprefix(  # noqa: RUF071 (characters, as dedent compares them)
        [line[: len(line) - len(line.lstrip())] for line in lines if line.strip()]
    )
    return "".join("    " + line[len(margin) :] if line.strip() else line for line in lines)


def _lines_shifted(code: CodeType, by: int) -> CodeType:
    """code, and the functions and comprehensions compiled inside it, `by` lines off."""
    constants = tuple(
        _lines_shifted(constant, by) if isinstance(constant, CodeType) else constant
        for constant in code.co_consts
    )
    return code.replace(co_firstlineno=code.co_firstlineno + by, co_consts=constants)
