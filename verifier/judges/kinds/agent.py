"""`agent:` judges (an agent grading the case) are suite-level: refused with a clear error."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verifier.config import EvalConfig, JudgeConfig, Key, KindDefaults, Locator
from verifier.config.fields import Arguments
from verifier.judges.base import JudgeContext, Pool


class AgentKind(KindDefaults):
    name = "agent"
    pool = Pool.CPU
    case_bound = False
    keys = (Key("agent", Arguments(description="not supported by this image")),)
    claim_keys = ("agent",)

    def spec(self, values: Mapping[str, Any], at: Locator) -> Any:
        raise at.child("agent").error(
            "agent judges are not supported by this image; "
            "use check, module, builtin or an LLM judge"
        )

    def entry_schema(self) -> dict[str, Any]:
        return {"not": {}, "description": "agent judges are not supported by this image"}

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[JudgeContext], Any]:
        raise AssertionError("an agent judge never loads")

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        return "agent"


KIND = AgentKind()
