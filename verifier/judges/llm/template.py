"""Prompt templates: Jinja2 in a sandbox, strict about names, fencing the case's text.

Existing prompt files use Jinja2 (`{{ outputs }}`, `{{ conversation }}`,
`{% for %}`), so that is the syntax; the sandboxed environment keeps a template
from reaching Python internals, and StrictUndefined makes a misspelt name an
error instead of an empty string that would quietly grade nothing.

Every value that comes from the case directory is wrapped as `CaseText` before
rendering; whenever the template prints one, it goes through a `Fence`, which
puts it between delimiters the agent cannot forge and cuts it to its share of
the size budget.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import jinja2
import jinja2.meta
from jinja2.sandbox import SandboxedEnvironment

from verifier.errors import did_you_mean
from verifier.references import ANNOTATION_PREFIX

KNOWN_VARIABLES = ("outputs", "annotations", "inputs", "conversation", "stdout", "arguments")
CASE_VARIABLES = frozenset({"outputs", "inputs", "conversation", "stdout"})
FENCE_VARIABLE = "verifier_fence__"
_TRUSTED_RECORD_KEYS = frozenset({"annotations", "case_dir", "inputs_trusted"})
_TASK_INPUT_KEYS = frozenset({"inputs"})
_Context = jinja2.runtime.Context


class TemplateProblem(ValueError):
    """A template that does not compile or names an unknown variable (a load-time error)."""


class CaseText(str):
    """A string that came from the case directory: untrusted, fenced whenever printed."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> CaseText:  # `stdout[-2000:]` compiles to a plain slice
        return CaseText(super().__getitem__(key))


class Fence(Protocol):
    def wrap(self, text: str) -> str: ...


class PromptTemplate(NamedTuple):
    source: str
    template: jinja2.Template
    variables: frozenset[str]

    @property
    def places_case(self) -> bool:
        """Whether the template itself puts the case's material somewhere."""
        return bool(self.variables & CASE_VARIABLES)

    def render(self, variables: Mapping[str, Any], fence: Fence) -> str:
        """The text; a render error (an undefined name, a sandbox refusal) is TemplateProblem."""
        try:
            return self.template.render({**variables, FENCE_VARIABLE: fence})
        except jinja2.TemplateError as error:
            raise TemplateProblem(f"{type(error).__name__}: {error}") from None


def compile_template(source: str) -> PromptTemplate:
    """Compile and check the names a template uses; TemplateProblem saying what is wrong."""
    environment = _environment()
    try:
        tree = environment.parse(source)
        template = environment.from_string(source)
    except jinja2.TemplateSyntaxError as error:
        raise TemplateProblem(
            f"template syntax error on line {error.lineno}: {error.message}"
        ) from None
    variables = frozenset(jinja2.meta.find_undeclared_variables(tree))
    unknown = sorted(variables - set(KNOWN_VARIABLES))
    if unknown:
        hint = did_you_mean(unknown[0], KNOWN_VARIABLES)
        raise TemplateProblem(
            f"unknown template variable {unknown[0]!r}{hint}; known: {', '.join(KNOWN_VARIABLES)}"
        )
    return PromptTemplate(source=source, template=template, variables=variables)


def mark_case(value: Any) -> Any:
    """value with every string inside it marked as CaseText (dicts and lists are copied)."""
    if isinstance(value, str):
        return CaseText(value)
    if isinstance(value, Mapping):  # keys too: file names are the agent's choice
        return {mark_case(key): mark_case(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [mark_case(item) for item in value]
    return value


def mark_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record as `outputs`: the case's parts marked, the verifier's own left as they are
    (the task input too, when it came from the task author's side, and the dataset's
    annotation files, `annotation_<key>_content`)."""
    trusted = _TRUSTED_RECORD_KEYS | (_TASK_INPUT_KEYS if record.get("inputs_trusted") else set())
    return {
        key: value if key in trusted or key.startswith(ANNOTATION_PREFIX) else mark_case(value)
        for key, value in record.items()
    }


def as_text(value: Any) -> str:
    """How a non-string value prints: structures as indented JSON, None as `(none)`."""
    if value is None:
        return "(none)"
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return str(value)


def contains_case_text(value: Any) -> bool:
    if isinstance(value, CaseText):
        return True
    if isinstance(value, Mapping):
        return any(contains_case_text(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(contains_case_text(item) for item in value)
    return False


@jinja2.pass_context
def _finalize(context: jinja2.runtime.Context, value: Any) -> Any:
    """Every `{{ ... }}` output: case material fenced, structures as JSON."""
    if contains_case_text(value):
        fence = context.get(FENCE_VARIABLE)
        return fence.wrap(as_text(value))
    if value is None or isinstance(value, Mapping | list | tuple):
        return as_text(value)
    return value


class _TaintingSandbox(SandboxedEnvironment):
    """A sandbox in which what is computed from case text stays case text.

    `{{ conversation | truncate(500) }}`, `outputs.files[p].splitlines()` or
    `stdout[-2000:]` build new strings; they are marked again so the fence still
    applies to them.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.filters = {name: _tainting(f) for name, f in self.filters.items()}

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        result = super().call(context, obj, *args, **kwargs)
        sources = (getattr(obj, "__self__", None), *args, *kwargs.values())
        return mark_case(result) if any(map(contains_case_text, sources)) else result


def _tainting(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)  # keeps jinja's pass_context/pass_eval_context marker
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        sources = [arg for arg in (*args, *kwargs.values()) if not isinstance(arg, _Context)]
        tainted = any(map(contains_case_text, sources))
        return mark_case(result) if tainted and isinstance(result, str | list) else result

    return wrapper


def _environment() -> SandboxedEnvironment:
    return _TaintingSandbox(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
