"""What a loaded eval.yaml is: immutable records that every later stage reads.

A judge entry is common keys (name, if, arguments, scale, timeout) plus a spec of
its kind (check, module, builtin, llm), a tagged union: `JudgeConfig.kind` names
the kind and `spec` holds that kind's own parsed keys. The kinds themselves are a
registry in verifier.judges.kinds, passed to the loader, so config knows nothing
of how a judge runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from verifier.config.fields import Key, Locator
from verifier.reward import RewardMode, normalization_range
from verifier.scale import FeedbackType, Scale, ScoreRange
from verifier.trajectory import FROM_AGENT_LOGS

if TYPE_CHECKING:  # imported by the loader only when eval.yaml has these blocks
    from verifier.config.execution import Execution
    from verifier.dataset import Dataset

DEFAULT_TIMEOUT_S = 60.0


class JudgeKind(Protocol):
    """How the loader recognizes a kind of judge entry and reads its own keys."""

    @property
    def name(self) -> str: ...

    @property
    def keys(self) -> Sequence[Key]: ...

    @property
    def claim_keys(self) -> tuple[str, ...]:
        """An entry with any of these keys set is of this kind."""
        ...

    def claims(self, entry: Mapping[str, Any]) -> bool:
        """Whether the entry is of this kind (KindDefaults: a claim key is set)."""
        ...

    def default_score_range(self, spec: Any) -> tuple[float, float] | None:
        """The scale of a judge that declares no score_range (a builtin's pass rate is in
        [0, 1]: without this it would be normalized over [1, 5] and score 0)."""
        ...

    def default_feedback_type(self, spec: Any) -> FeedbackType | None:
        """`bool` for a judge whose kind only gives booleans (a builtin's verdict), when
        eval.yaml declares no scale: an errored one is then a failed gate under
        `on_error: zero`, never a skipped one (verifier.reward.failed_gates)."""
        ...

    def default_timeout(self, spec: Any) -> float | None:
        """The timeout a judge's own file brings (a rewardkit judge TOML's), for eval.yaml
        to not set twice; None: DEFAULT_TIMEOUT_S unless eval.yaml sets one."""
        ...

    def spec(self, values: Mapping[str, Any], at: Locator) -> Any:
        """The kind's record from its parsed keys; at.error(...) for what is missing."""
        ...

    def entry_schema(self) -> dict[str, Any]:
        """What spec() and prepare() demand of an entry beyond its keys' types, as JSON
        Schema (for `verifier schema`); {} when nothing."""
        ...


class JudgeKinds(Protocol):
    """The judge-kind registry the loader asks (verifier.judges.kinds.KINDS), in the
    kinds' order of precedence."""

    def claiming(self, entry: Mapping[str, Any]) -> JudgeKind | None:
        """The kind of an entry: the first that claims it; None when none does."""
        ...

    def every(self) -> Sequence[JudgeKind]:
        """All the kinds (for the keys of other kinds, and the schema)."""
        ...


class KindDefaults:
    """What most kinds share: an entry is of the kind when one of its claim keys is set (a
    kind whose claim depends on a value, like an LLM builtin's name, overrides claims),
    and a judge without score_range has none of its own."""

    claim_keys: tuple[str, ...] = ()

    def claims(self, entry: Mapping[str, Any]) -> bool:
        return any(key in entry for key in self.claim_keys)

    def default_score_range(self, spec: Any) -> tuple[float, float] | None:
        return None

    def default_feedback_type(self, spec: Any) -> FeedbackType | None:
        return None

    def default_timeout(self, spec: Any) -> float | None:
        return None


@attrs.frozen
class JudgeConfig:
    name: str
    kind: str
    spec: Any  # the record of `kind`: CheckSpec, ModuleSpec, BuiltinSpec or LLMSpec
    key: str  # where it sits in eval.yaml, e.g. "judges[2] (quality)", for messages
    condition: str | None = None
    arguments: Mapping[str, Any] = MappingProxyType({})
    score_range: ScoreRange | None = None
    feedback_type: FeedbackType | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    step: str | None = None

    @property
    def scale(self) -> Scale:
        return Scale(self.feedback_type, self.score_range)


@attrs.frozen
class TaskInput:
    """The task input judges see as `inputs`, and where it came from (judges.json says)."""

    value: Any
    source: str | None  # None: there is none
    trusted: bool  # from the task author's side, not written by the agent


NO_TASK_INPUT = TaskInput(None, None, False)


@attrs.frozen
class EvalConfig:
    path: Path
    name: str
    outputs: tuple[str, ...]
    judges: tuple[JudgeConfig, ...]
    reward: RewardMode
    annotations: Mapping[str, Any]
    default_model: str | None
    warnings: tuple[str, ...]
    task_input: TaskInput = NO_TASK_INPUT
    tool_outputs: tuple[str, ...] = ()  # `{tool: NAME}` entries of outputs
    dataset: Dataset | None = None  # eval.yaml's dataset.path: per-case annotations and input
    execution: Execution | None = None  # how the harness invokes the agent; its steps
    # Where the agent's trajectory is read from: agent_logs, case, or a path in the case.
    trajectory: str = FROM_AGENT_LOGS

    @property
    def step_ids(self) -> tuple[str, ...]:
        """The ids of execution.steps, in order (none: a single-step eval)."""
        return self.execution.step_ids if self.execution is not None else ()

    @property
    def final_step(self) -> str | None:
        return self.step_ids[-1] if self.step_ids else None

    def step_judges(self, step: str) -> tuple[str, ...]:
        """The judges a step's verifier grades: those scoped to it, and on the final step
        those scoped to none (they grade the finished work)."""
        final = step == self.final_step
        return tuple(
            judge.name
            for judge in self.judges
            if judge.step == step or (final and judge.step is None)
        )

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def judge(self, name: str) -> JudgeConfig | None:
        return next((judge for judge in self.judges if judge.name == name), None)

    def scales(self) -> Mapping[str, Scale]:
        """Each judge's declared scale, by name (what the reward composes them on)."""
        return {judge.name: judge.scale for judge in self.judges}

    def normalization_range(self, name: str) -> ScoreRange:
        """The range a judge's numbers are normalized over (see reward.normalization_range)."""
        judge = self.judge(name)
        declared = judge.score_range if judge is not None else None
        return normalization_range(declared, self.reward.score_range)

    def locator(self, key: str = "") -> Locator:
        return Locator(str(self.path), key, self.base_dir)
