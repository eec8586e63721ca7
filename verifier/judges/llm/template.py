"""Prompt templates: Jinja2 in a sandbox, strict about names, fencing all but trusted text.

Existing prompt files use Jinja2 (`{{ outputs }}`, `{{ conversation }}`,
`{% for %}`), so that is the syntax; the sandboxed environment keeps a template
from reaching Python internals, and StrictUndefined makes a misspelt name an
error instead of an empty string that would quietly grade nothing.

What reaches the model unfenced is decided by what is *trusted*, never by tracking
where case text went: the template's own text (its literals, and constants such as
`{{ "{" }}`) and values looked up unchanged from `arguments` and `annotations`
(eval.yaml, wrapped as `Trusted` leaves) print as they are. Every other value a
`{{ ... }}` prints, whatever expression produced it (`~`, `%`, `+`, a filter, a
loop variable, a macro's output), goes through the finalize hook to the `Fence`,
which hands back an opaque placeholder; the case's text itself is only put into
the prompt afterwards, between fences (verifier.judges.llm.prompt). The two
constructs that write a computed value without the finalize hook (`{% filter %}`
with arguments computed at render time, and `{% call %}`) are refused at load,
as are `{% include %}`, `{% import %}` and `{% extends %}` (a prompt is one file).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs
import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.sandbox import SandboxedEnvironment

from verifier.errors import did_you_mean
from verifier.values import json_text, leaf_text

KNOWN_VARIABLES = ("outputs", "annotations", "inputs", "conversation", "stdout", "arguments")
CASE_VARIABLES = frozenset({"outputs", "inputs", "conversation", "stdout"})
FENCE_VARIABLE = "verifier_fence__"
_REFUSED_NODES = {
    nodes.CallBlock: "{% call %} blocks",
    nodes.Include: "{% include %}",
    nodes.Import: "{% import %}",
    nodes.FromImport: "{% from ... import %}",
    nodes.Extends: "{% extends %}",
}


class TemplateProblem(ValueError):
    """A template that does not compile or names an unknown variable (a load-time error),
    or fails to render on what the task author supplied."""


class CaseMaterialMissing(TemplateProblem):
    """The template looked up what the case does not hold (`outputs.files['report.md']`
    for a report the agent did not write, an index past the end of the agent's list):
    a fact about the case, which scores the judge's lowest value, not an error."""


class Trusted(str):
    """Text from the task author (eval.yaml's arguments and annotations): printed as it is.

    Anything computed from it (`| upper`, `~ "x"`) is a plain str again, and fenced."""

    __slots__ = ()


class TrustedInt(int):
    __slots__ = ()


class TrustedFloat(float):
    __slots__ = ()


TRUSTED_LEAVES = (Trusted, TrustedInt, TrustedFloat)


class TrustedDict(dict):  # type: ignore[type-arg]
    """A mapping from the task author: a key missing from it is the author's mistake."""

    __slots__ = ()


class TrustedList(list):  # type: ignore[type-arg]
    __slots__ = ()


class RecordView(dict):  # type: ignore[type-arg]
    """The record as `outputs`: its keys are fixed by eval.yaml (files, stdout, the declared
    outputs' `<name>_content`), so a key missing from it is the author's typo; what is
    missing inside its values is the case's."""

    __slots__ = ()


_AUTHORS = (TrustedDict, TrustedList, RecordView)


def _fail_on_lookup(self: jinja2.StrictUndefined, *args: Any, **kwargs: Any) -> Any:
    """StrictUndefined's failure, saying whose the missing value is: a lookup into the
    case's material is CaseMaterialMissing; one into the author's, the plain error."""
    try:
        return jinja2.StrictUndefined._fail_with_undefined_error(self, *args, **kwargs)
    except jinja2.UndefinedError as error:
        looked_in = self._undefined_obj
        if looked_in is jinja2.utils.missing or isinstance(looked_in, _AUTHORS):
            raise
        raise CaseMaterialMissing(str(error)) from None


def _message(self: jinja2.StrictUndefined) -> str:
    """Jinja2's message, naming the author's containers by their builtin type."""
    if self._undefined_hint or self._undefined_obj is jinja2.utils.missing:
        return jinja2.StrictUndefined._undefined_message.fget(self)  # type: ignore[attr-defined]
    kind = next(c for c in type(self._undefined_obj).__mro__ if c.__module__ == "builtins")
    shown = "None" if self._undefined_obj is None else f"{kind.__name__} object"
    if isinstance(self._undefined_name, str):
        return f"{shown!r} has no attribute {self._undefined_name!r}"
    return f"{shown!r} has no element {self._undefined_name!r}"


_CaseAwareUndefined = type(
    "_CaseAwareUndefined",
    (jinja2.StrictUndefined,),
    {
        "__slots__": (),
        "_undefined_message": property(_message),
        **{
            name: _fail_on_lookup
            for name in dir(jinja2.StrictUndefined)
            if getattr(jinja2.StrictUndefined, name)
            is jinja2.StrictUndefined._fail_with_undefined_error
        },
    },
)


class Fence(Protocol):
    def wrap(self, text: str) -> str: ...


@attrs.frozen
class PromptTemplate:
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
        except CaseMaterialMissing:
            raise
        except jinja2.TemplateError as error:
            raise TemplateProblem(f"{type(error).__name__}: {error}") from None


def compile_template(source: str) -> PromptTemplate:
    """Compile and check the names a template uses; TemplateProblem saying what is wrong."""
    environment = _environment()
    try:
        tree = environment.parse(source)
    except jinja2.TemplateSyntaxError as error:
        raise TemplateProblem(
            f"template syntax error on line {error.lineno}: {error.message}"
        ) from None
    _refuse_unfenced_writes(tree)
    variables = frozenset(jinja2.meta.find_undeclared_variables(tree))
    unknown = sorted(variables - set(KNOWN_VARIABLES))
    if unknown:
        hint = did_you_mean(unknown[0], KNOWN_VARIABLES)
        raise TemplateProblem(
            f"unknown template variable {unknown[0]!r}{hint}; known: {', '.join(KNOWN_VARIABLES)}"
        )
    _constants_as_text(tree)
    return PromptTemplate(
        source=source, template=environment.from_string(tree), variables=variables
    )


def mark_trusted(value: Any) -> Any:
    """value with its strings and numbers marked as the author's (dicts and lists copied)."""
    if isinstance(value, str):
        return Trusted(value)
    if isinstance(value, bool) or value is None:
        return value  # one bit: printed fenced, like any value that is not a trusted leaf
    if isinstance(value, int):
        return TrustedInt(value)
    if isinstance(value, float):
        return TrustedFloat(value)
    if isinstance(value, Mapping):
        return TrustedDict({mark_trusted(key): mark_trusted(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return TrustedList(mark_trusted(item) for item in value)
    return value


def as_text(value: Any) -> str:
    """How a non-string value prints: structures as indented JSON, None as `(none)`."""
    if value is None:
        return "(none)"
    if isinstance(value, Mapping | list | tuple):
        return json_text(value, indent=2)  # any shape the case's files parse to
    return leaf_text(value)


@jinja2.pass_context
def _finalize(context: jinja2.runtime.Context, value: Any) -> Any:
    """Every `{{ ... }}` output that is not a trusted leaf goes to the fence."""
    if isinstance(value, TRUSTED_LEAVES):
        return value
    return context.get(FENCE_VARIABLE).wrap(as_text(value))


def _refuse_unfenced_writes(tree: nodes.Template) -> None:
    """TemplateProblem for the constructs that write a value without the finalize hook."""
    for node_type, name in _REFUSED_NODES.items():
        for node in tree.find_all(node_type):
            raise TemplateProblem(
                f"{name} (line {node.lineno}) is not supported in prompt templates"
            )
    for block in tree.find_all(nodes.FilterBlock):
        chain: nodes.Node | None = block.filter
        while isinstance(chain, nodes.Filter):
            arguments = [*chain.args, *(keyword.value for keyword in chain.kwargs)]
            arguments += [node for node in (chain.dyn_args, chain.dyn_kwargs) if node is not None]
            if not all(isinstance(argument, nodes.Const) for argument in arguments):
                raise TemplateProblem(
                    f"{{% filter {chain.name} %}} (line {block.lineno}) takes arguments computed "
                    "at render time; prompt templates allow only constant filter arguments"
                )
            chain = chain.node


def _constants_as_text(tree: nodes.Template) -> None:
    """`{{ "{" }}` is the template's own text: printed as such, not fenced."""
    for output in tree.find_all(nodes.Output):
        output.nodes = [
            nodes.TemplateData(str(child.value), lineno=child.lineno)
            if type(child) is nodes.Const and isinstance(child.value, str | int | float)
            else child
            for child in output.nodes
        ]


def _environment() -> SandboxedEnvironment:
    return SandboxedEnvironment(
        undefined=_CaseAwareUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
