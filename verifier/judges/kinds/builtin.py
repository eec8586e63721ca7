"""`builtin:` judges: a judge shipped with the verifier, by `name` or `category/name`.

The builtins themselves are a registry in verifier.judges.builtins; this kind looks
one up and binds its declared arguments at load time, so a misspelt builtin or
argument, or an argument of the wrong type, fails the config once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from verifier.config import EvalConfig, JudgeConfig, Key, Locator
from verifier.config.fields import Text, object_schema
from verifier.judges.base import Pool, Record


class BuiltinSpec(NamedTuple):
    name: str  # as written: `file_exists` or `files/file_exists`


class BuiltinKind:
    name = "builtin"
    pool = Pool.CPU
    keys = (Key("builtin", Text(non_empty=True, description="name or category/name")),)
    claim_keys = ("builtin",)

    def spec(self, values: Mapping[str, Any], at: Locator) -> BuiltinSpec:
        if "builtin" not in values:
            raise at.child("builtin").error("must be a non-empty string")
        return BuiltinSpec(values["builtin"])

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
                        "properties": {"arguments": object_schema(b.arguments)},
                        **(
                            {"required": ["arguments"]}
                            if any(k.required for k in b.arguments)
                            else {}
                        ),
                    },
                }
                for b in found
            ],
        }

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[Record], Any]:
        from verifier.judges.builtins import bind_builtin

        return bind_builtin(judge, config)

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        return f"builtin {judge.spec.name}"


BUILTIN = BuiltinKind()
