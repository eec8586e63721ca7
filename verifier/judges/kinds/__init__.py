"""The judge kinds: how an entry is recognized, what its own keys are, how it runs.

KINDS is the registry the loader asks, in order (eval-yaml.md: builtin > check >
agent > llm_rubric/prompt/prompt_file > module + function). It names each kind's
module, which is imported the first time an eval.yaml has an entry that may be of
that kind (one with a key the kind claims entries by), so grading a config of `check`
judges loads none of the LLM machinery. Adding a kind is one module here defining
`KIND`, a `RunnableKind`, plus its place in KINDS.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from verifier.config import EvalConfig, JudgeConfig, JudgeKind
from verifier.judges.base import JudgeContext, Pool


class RunnableKind(JudgeKind, Protocol):
    @property
    def pool(self) -> Pool: ...

    @property
    def case_bound(self) -> bool:
        """Whether only the case can make the judge time out, exceed the memory limit or
        die without answering; the engine then counts those as the judge's failure, not
        errors."""
        ...

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[JudgeContext], Any]:
        """The per-case callable; load-time checks (compile, import, files) raise ConfigError."""
        ...

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        """What the judge is, in a few words, for `verifier check`."""
        ...


class KindRegistry:
    """The kinds by name, in precedence order, each imported when first needed."""

    def __init__(self, triggers: Mapping[str, tuple[str, ...]]) -> None:
        """triggers: each kind's name (its module here is that name) and the keys an
        entry of that kind sets at least one of (its claim keys, and any other key its
        `claims` looks at); the kind is not asked about an entry with none of them."""
        self._triggers = dict(triggers)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._triggers)

    @property
    def triggers(self) -> dict[str, tuple[str, ...]]:
        """What the registry was made from, to make a registry with one more kind."""
        return dict(self._triggers)

    def named(self, name: str) -> RunnableKind:
        kind: RunnableKind = importlib.import_module(f"{__name__}.{name}").KIND
        return kind

    def claiming(self, entry: Mapping[str, Any]) -> RunnableKind | None:
        for name, keys in self._triggers.items():
            if any(key in entry for key in keys) and (kind := self.named(name)).claims(entry):
                return kind
        return None

    def every(self) -> Sequence[RunnableKind]:
        return tuple(self.named(name) for name in self._triggers)


KINDS = KindRegistry(
    {
        "builtin": ("builtin",),
        "check": ("check",),
        "agent": ("agent",),
        "llm": ("llm_rubric", "prompt", "prompt_file", "criteria", "judge_file", "builtin"),
        "module": ("module", "function"),
    }
)
