"""The judge kinds: how an entry is recognized, what its own keys are, how it runs.

KINDS is the registry the loader asks, in order (eval-yaml.md: builtin > check >
agent > llm_rubric/prompt/prompt_file > module + function). Adding a kind is one
module here defining a `RunnableKind`, plus its place in KINDS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from verifier.config import EvalConfig, JudgeConfig, JudgeKind
from verifier.judges.base import Pool, Record
from verifier.judges.kinds.agent import AGENT
from verifier.judges.kinds.builtin import BUILTIN
from verifier.judges.kinds.check import CHECK
from verifier.judges.kinds.llm import LLM
from verifier.judges.kinds.module import MODULE


class RunnableKind(JudgeKind, Protocol):
    @property
    def pool(self) -> Pool: ...

    @property
    def case_bound(self) -> bool:
        """Whether only the case can make the judge time out, exceed the memory limit or
        die without answering; the engine then counts those as the judge's failure, not
        errors."""
        ...

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[Record], Any]:
        """The per-case callable; load-time checks (compile, import, files) raise ConfigError."""
        ...

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        """What the judge is, in a few words, for `verifier check`."""
        ...


KINDS: tuple[RunnableKind, ...] = (BUILTIN, CHECK, AGENT, LLM, MODULE)
KINDS_BY_NAME = {kind.name: kind for kind in KINDS}
