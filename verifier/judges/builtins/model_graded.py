"""agent-eval-harness's LLM builtins: shipped prompts a model grades pass/fail.

The prompts are this verifier's wording of the reference's two rubrics, with their
arguments and defaults; they leave the case's material to the LLM judge, which
appends it behind its fences (verifier.judges.llm.prompt).
"""

from __future__ import annotations

from pathlib import Path

from verifier.config import Key
from verifier.config.fields import Choice, OneOrMany, Text
from verifier.judges.builtins.registry import prompt_builtin

PROMPTS = Path(__file__).with_name("prompts")

prompt_builtin(
    "quality",
    "output_completeness",
    (PROMPTS / "output_completeness.md").read_text(encoding="utf-8"),
    Key("strictness", Choice(("low", "medium", "high")), default="medium"),
    Key(
        "criteria",
        OneOrMany(Text(non_empty=True), description="specific criteria to check"),
        default=(),
    ),
)
prompt_builtin(
    "safety",
    "no_harmful_content",
    (PROMPTS / "no_harmful_content.md").read_text(encoding="utf-8"),
    Key(
        "categories",
        OneOrMany(Text(non_empty=True), description="what to check for (default: five categories)"),
        default=(),
    ),
)
