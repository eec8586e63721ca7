"""`builtin:` judges: a judge shipped with the verifier, by `name` or `category/name`.

The builtins themselves are a registry in verifier.judges.builtins; this kind looks
one up and binds its declared arguments at load time, so a misspelt builtin or
argument, or an argument of the wrong type, fails the config once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from verifier.config import EvalConfig, JudgeConfig, Key, KindDefaults, Locator
from verifier.config.fields import Text, object_schema
from verifier.judges.base import JudgeContext, Pool
from verifier.scale import FeedbackType


@attrs.frozen
class BuiltinSpec:
    name: str  # as written: `file_exists` or `files/file_exists`


class BuiltinKind(KindDefaults):
    name = "builtin"
    pool = Pool.CPU
    # A builtin is the verifier's own code: only the case can make it run out of time or
    # memory, or die (a command from the case, a crafted file), so those are its failures.
    case_bound = True
    keys = (Key("builtin", Text(non_empty=True, description="name or category/name")),)
    claim_keys = ("builtin",)

    def claims(self, entry: Mapping[str, Any]) -> bool:
        """A `builtin:` entry, unless it names an LLM builtin (the llm kind runs those)."""
        return "builtin" in entry and not is_prompt_builtin(entry["builtin"])

    def spec(self, values: Mapping[str, Any], at: Locator) -> BuiltinSpec:
        if "builtin" not in values:
            raise at.child("builtin").error("must be a non-empty string")
        return BuiltinSpec(values["builtin"])

    def default_score_range(self, spec: Any) -> tuple[float, float] | None:
        """A builtin that gives partial credit declares its scale ([0, 1])."""
        from verifier.judges.builtins import find_builtin

        found = find_builtin(spec.name)
        return found.score_range if found is not None else None

    def default_feedback_type(self, spec: Any) -> FeedbackType | None:
        """A builtin without a partial-credit scale gives a verdict: true or false."""
        from verifier.judges.builtins import find_builtin

        found = find_builtin(spec.name)
        return "bool" if found is not None and found.score_range is None else None

    def entry_schema(self) -> dict[str, Any]:
        """A known builtin, with the arguments it declares (bind_builtin's checks)."""
        from verifier.judges.builtins import all_builtins

        found = all_builtins()
        names = sorted(name for b in found for name in (b.name, b.qualified_name))
        return {
            "required": ["builtin"],
            "properties": {"builtin": {"enum": names}},
            "allOf": [
                {
                    "if": {"properties": {"builtin": {"enum": [b.name, b.qualified_name]}}},
                    "then": {
                        "properties": {"arguments": _arguments_schema(b)},
                        **(
                            {"required": ["arguments"]}
                            if b.one_of or any(k.required for k in b.arguments)
                            else {}
                        ),
                    },
                }
                for b in found
            ],
        }

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[JudgeContext], Any]:
        from verifier.judges.builtins import bind_builtin

        return bind_builtin(judge, config)

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        return f"builtin {judge.spec.name}"


KIND = BuiltinKind()


def _arguments_schema(found: Any) -> dict[str, Any]:
    """A builtin's arguments: their types, and exactly one of each one_of group."""
    schema = object_schema(found.arguments)
    if found.one_of:
        schema["allOf"] = [
            {"oneOf": [{"required": [name]} for name in group]} for group in found.one_of
        ]
    return schema


def is_prompt_builtin(name: Any) -> bool:
    """Whether `builtin: name` is an LLM builtin (a shipped prompt: the llm kind runs it)."""
    if not isinstance(name, str):
        return False
    from verifier.judges.builtins import find_builtin

    found = find_builtin(name)
    return found is not None and found.prompt is not None
