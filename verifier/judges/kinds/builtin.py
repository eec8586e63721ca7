"""`builtin:` judges: a judge shipped with the verifier, by `name` or `category/name`.

The builtins themselves are a registry in verifier.judges.builtins; this kind looks
one up and binds its declared arguments at load time, so a misspelt builtin or
argument, or an argument of the wrong type, fails the config once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from verifier.config import EvalConfig, JudgeConfig, Key, Locator
from verifier.config.fields import Text
from verifier.judges.base import Pool, Record


class BuiltinSpec(NamedTuple):
    name: str  # as written: `file_exists` or `files/file_exists`


class BuiltinKind:
    name = "builtin"
    pool = Pool.CPU
    # A builtin is the verifier's own code: only the case can make it run out of time or
    # memory, or die (a command from the case, a crafted file), so those are its failures.
    case_bound = True
    keys = (Key("builtin", Text(non_empty=True, description="name or category/name")),)

    def claims(self, entry: Mapping[str, Any]) -> bool:
        return "builtin" in entry and not is_prompt_builtin(entry["builtin"])

    def spec(self, values: Mapping[str, Any], at: Locator) -> BuiltinSpec:
        if "builtin" not in values:
            raise at.child("builtin").error("must be a non-empty string")
        return BuiltinSpec(values["builtin"])

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[Record], Any]:
        from verifier.judges.builtins import bind_builtin

        return bind_builtin(judge, config)

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        return f"builtin {judge.spec.name}"


BUILTIN = BuiltinKind()


def is_prompt_builtin(name: Any) -> bool:
    """Whether `builtin: name` is an LLM builtin (a shipped prompt: the llm kind runs it)."""
    if not isinstance(name, str):
        return False
    from verifier.judges.builtins import find_builtin

    found = find_builtin(name)
    return found is not None and found.prompt is not None
