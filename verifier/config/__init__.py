"""eval.yaml, loaded and validated: fields (value types), records, judge entries, the
reward block, and the loader that ties them together."""

from verifier.config.fields import Key, Locator, Problems
from verifier.config.load import IncompleteConfig, load_config
from verifier.config.records import (
    DEFAULT_TIMEOUT_S,
    NO_TASK_INPUT,
    EvalConfig,
    JudgeConfig,
    JudgeKind,
    JudgeKinds,
    KindDefaults,
    TaskInput,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "NO_TASK_INPUT",
    "EvalConfig",
    "IncompleteConfig",
    "JudgeConfig",
    "JudgeKind",
    "JudgeKinds",
    "Key",
    "KindDefaults",
    "Locator",
    "Problems",
    "TaskInput",
    "load_config",
]
