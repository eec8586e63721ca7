"""LLM judges (llm_rubric, prompt, prompt_file)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verifier.config import EvalConfig, JudgeConfig
from verifier.errors import ConfigError


def prepare_llm(judge: JudgeConfig, config: EvalConfig) -> Callable[[dict[str, Any]], Any]:
    raise ConfigError(
        str(config.path),
        judge.key,
        "LLM judges are not supported by this verifier version yet",
    )
