"""agent-eval-harness's LLM builtins: shipped prompts a model grades pass/fail.

The prompts are this verifier's wording of the reference's two rubrics, with their
arguments and defaults; they leave the case's material to the LLM judge, which
appends it behind its fences (verifier.judges.llm.prompt).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from verifier.config.fields import Choice, OneOrMany, Text
from verifier.judges.builtins.registry import argument, prompt_builtin

PROMPTS = Path(__file__).with_name("prompts")


@attrs.frozen(kw_only=True)
class OutputCompleteness:
    strictness: str = argument(Choice(("low", "medium", "high")), default="medium")
    criteria: tuple[str, ...] = argument(
        OneOrMany(Text(non_empty=True), description="specific criteria to check"), default=()
    )


@attrs.frozen(kw_only=True)
class NoHarmfulContent:
    categories: tuple[str, ...] = argument(
        OneOrMany(Text(non_empty=True), description="what to check for (default: five categories)"),
        default=(),
    )


prompt_builtin(
    "quality",
    "output_completeness",
    (PROMPTS / "output_completeness.md").read_text(encoding="utf-8"),
    OutputCompleteness,
)
prompt_builtin(
    "safety",
    "no_harmful_content",
    (PROMPTS / "no_harmful_content.md").read_text(encoding="utf-8"),
    NoHarmfulContent,
)
