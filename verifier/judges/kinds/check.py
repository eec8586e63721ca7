"""`check:` judges: an inline Python function body written by the task author.

Compiled at load time, so a syntax error, a body that never says `return` or a name
defined nowhere (a typo: `ouputs`) fails the config (exit 2) once instead of erroring
on every case.

At run time the body reads what the agent left, so what the case holds must not make
it error: an error can be dropped from the reward and raise it. An exception raised
once the body has read the record is the case's doing (a missing file, text that is
no number, a binary file's marker where text was expected) and makes the judge false,
or the low end of its scale, with the exception as the fact; only what no case can
cause is the author's error: an exception before the body read anything of the
record, a name defined nowhere, a module the image lacks, a key the record or
`arguments` never has (`outputs["file"]`), an attribute of the record
(`outputs.files`), running out of memory.
"""

from __future__ import annotations

import builtins
import math
import os
import re
from collections.abc import Callable, Mapping
from types import CodeType
from typing import Any

import attrs

from verifier.config import EvalConfig, JudgeConfig, Key, KindDefaults, Locator
from verifier.config.fields import Text
from verifier.errors import did_you_mean
from verifier.judges.base import JudgeAnswer, JudgeContext, Pool, Record
from verifier.scale import JudgeValue


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
        undefined = _undefined_names(source, filename, namespace)
        if undefined:
            name, line = undefined[0]
            hint = did_you_mean(name, ("outputs", "arguments")) or (
                ' (annotations are outputs["annotations"])' if name == "annotations" else ""
            )
            raise at.error(
                f"uses {name!r} (line {line - 1}), defined nowhere{hint}: a check sees "
                "outputs, arguments, the names it assigns or imports, and Python's builtins"
            )
        # The author's code from eval.yaml, run in the judge's own process (never the case's).
        exec(_lines_shifted(code, -1), namespace)  # noqa: S102 (line 1 is the body's first line)
        return _Check(
            namespace["check"],
            _Strict(judge.arguments, "arguments"),
            _lowest(judge, config),
            filename,
        )

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        return "check"


KIND = CheckKind()
_RETURN = re.compile(r"\breturn\b")  # the rule `verifier schema` gives editors, too


class _AuthorMistake(Exception):
    """A mistake no case can cause, told without the verifier's own frames: the line of
    the body it was made on (set as it leaves the body) is in the message and in
    judges.json's `check_line`."""

    line: int | None = None

    def __str__(self) -> str:
        return str(self.args[0]) + (f" (line {self.line} of the check)" if self.line else "")

    @property
    def details(self) -> Mapping[str, Any]:
        return {"check_line": self.line} if self.line else {}


class RecordKeyError(_AuthorMistake, KeyError):
    """A key that the record (or `arguments`, or the annotations) never has: the author's
    typo, whatever the case holds. A KeyError, so the body's own `except KeyError` holds."""


class RecordAttributeError(_AuthorMistake, AttributeError):
    """An attribute read of the record (`outputs.files`): the author's mistake."""


# What no case can cause: the author's to fix, so an error of the judge.
AUTHOR_ERRORS = (NameError, ImportError, _AuthorMistake, MemoryError)


class _Strict(dict[str, Any]):
    """A mapping whose keys the task author's setup decides (the record's top level,
    `arguments`, the annotations), as a check sees it: a dict, whose missing key is
    RecordKeyError naming the keys it has."""

    __slots__ = ("_name",)

    def __init__(self, items: Mapping[str, Any], name: str) -> None:
        super().__init__(items)
        self._name = name

    def __missing__(self, key: Any) -> Any:
        keys = ", ".join(sorted(map(str, self))) or "none"
        hint = did_you_mean(str(key), map(str, self))
        raise RecordKeyError(f"{self._name} has no key {key!r}{hint} (its keys: {keys})")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise RecordAttributeError(f"{self._name} is a mapping: write {self._name}[{name!r}]")


class _Record(_Strict):
    """The record as a check sees it: a _Strict that notes whether the body has read
    anything of it. Until it has, nothing of the case can have made the body raise."""

    __slots__ = ("read",)

    def __init__(self, items: Mapping[str, Any]) -> None:
        super().__init__(items, "outputs")
        self.read = False


def _reading(name: str) -> Callable[..., Any]:
    """dict's method `name`, noting the read first."""
    method = getattr(dict, name)

    def read(self: _Record, *args: Any, **kwargs: Any) -> Any:
        self.read = True
        return method(self, *args, **kwargs)

    read.__name__ = name
    return read


# Every way a body reaches the record's values (its keys are the verifier's, not the case's).
for _name in (
    "__getitem__",
    "get",
    "items",
    "values",
    "keys",
    "__iter__",
    "copy",
    "pop",
    "popitem",
    "setdefault",
    "__or__",
    "__ror__",
    "__repr__",
    "__reduce_ex__",
):
    setattr(_Record, _name, _reading(_name))


@attrs.frozen
class _Check:
    """The compiled body run over one case's record: what the case makes it raise is its
    lowest value with the fact; the author's errors (AUTHOR_ERRORS) stay errors."""

    function: Callable[[Record, Mapping[str, Any]], Any]
    arguments: Mapping[str, Any]
    lowest: JudgeValue
    filename: str

    def __call__(self, context: JudgeContext) -> Any:
        record = context.record
        outputs = _Record(record)
        annotations = record.get("annotations")
        if isinstance(annotations, Mapping):
            dict.__setitem__(outputs, "annotations", _Strict(annotations, 'outputs["annotations"]'))
        try:
            return self.function(outputs, self.arguments)
        except _AuthorMistake as error:
            error.line = self._line(error)
            raise
        except AUTHOR_ERRORS:
            raise
        except Exception as error:
            if not outputs.read:  # raised before the body read anything of the case
                raise
            line = self._line(error)
            fact = f"{type(error).__name__}: {error}" + (f" (line {line})" if line else "")
            counted = "false" if self.lowest is False else f"{self.lowest:g}, its lowest value"
            return JudgeAnswer(
                self.lowest,
                f"the check raised {fact} over what the case holds: counted as {counted}",
                {"case_fact": fact},
            )

    def _line(self, error: BaseException) -> int | None:
        """The body's last line the exception passed through."""
        line, trace = None, error.__traceback__
        while trace is not None:
            if trace.tb_frame.f_code.co_filename == self.filename:
                line = trace.tb_lineno
            trace = trace.tb_next
        return line


def _lowest(judge: JudgeConfig, config: EvalConfig) -> JudgeValue:
    """The judge's lowest value: false, or for a numeric judge (feedback_type int or
    float, or a score_range) the low end of its scale; without a score_range, a number
    that every reward mode maps to 0 (clamped from [0, 1], or normalized over the
    block's fallback range or [1, 5])."""
    numeric = judge.feedback_type in ("int", "float") or judge.score_range is not None
    if not numeric:
        return False
    if judge.score_range is not None:
        return judge.score_range[0]
    fallback = config.reward.score_range
    return float(math.floor(min(0.0, fallback[0] if fallback is not None else 0.0)))


def _undefined_names(
    source: str, filename: str, namespace: Mapping[str, Any]
) -> list[tuple[str, int]]:
    """(name, line in source) of each name the function reads as a global that neither
    its namespace, Python's builtins nor a `global` statement that assigns it defines."""
    import ast
    import symtable  # only at load, and only for configs with checks

    defined = set(dir(builtins)) | set(namespace) | {"check"}
    read: set[str] = set()
    tables = list(symtable.symtable(source, filename, "exec").get_children())
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        for symbol in table.get_symbols():
            if not symbol.is_global():
                continue
            if symbol.is_declared_global() and symbol.is_assigned():
                defined.add(symbol.get_name())
            elif symbol.is_referenced():
                read.add(symbol.get_name())
    undefined = read - defined
    if not undefined:
        return []
    lines = [
        (node.id, node.lineno)
        for node in ast.walk(ast.parse(source, filename))
        if isinstance(node, ast.Name) and node.id in undefined
    ]
    return sorted(set(lines), key=lambda found: (found[1], found[0]))


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
