"""LLM judges (`llm_rubric`, `prompt` or `prompt_file`): a model grades the case.

This module only reads the entry's keys; everything that needs the prompt
machinery (templates, providers, the environment) happens in prepare(), which
imports verifier.judges.llm only when a config has an LLM judge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verifier.config import EvalConfig, JudgeConfig, Key, KindDefaults, Locator
from verifier.config.fields import Number, OneOrMany, RelativePath, Text
from verifier.judges.base import Pool, Record
from verifier.judges.kinds.builtin import is_prompt_builtin
from verifier.judges.llm.spec import LLMSpec
from verifier.named import NamedTuple

PROMPT_KEYS = ("llm_rubric", "prompt", "prompt_file")
MAX_SAMPLES = 25


class ProviderName(NamedTuple):
    """A provider name or alias from the provider registry (verifier.judges.llm.providers)."""

    description: str = "openai-compatible or anthropic; sends the model name verbatim"

    def parse(self, value: Any, at: Locator) -> str:
        from verifier.judges.llm.providers import PROVIDERS_BY_ALIAS

        if value not in PROVIDERS_BY_ALIAS:
            raise at.error(f"{value!r} must be one of {', '.join(sorted(PROVIDERS_BY_ALIAS))}")
        return value

    def schema(self) -> dict[str, Any]:
        from verifier.judges.llm.providers import PROVIDERS_BY_ALIAS

        return {"enum": sorted(PROVIDERS_BY_ALIAS), "description": self.description}


class LLMKind(KindDefaults):
    name = "llm"
    pool = Pool.LLM
    case_bound = False
    keys = (
        Key("llm_rubric", Text(non_empty=True, description="the rubric; the case's material "
                                                            "is appended")),
        Key("prompt", Text(non_empty=True, description="a Jinja2 prompt template")),
        Key("prompt_file", RelativePath(description="a Jinja2 template file beside eval.yaml")),
        Key("model", Text(non_empty=True, description="provider/model; else models.judge, "
                                                       "else $EVAL_JUDGE_MODEL")),
        Key("samples", Number(integer=True, minimum=1, maximum=MAX_SAMPLES,
                              problem=f"must be a whole number from 1 to {MAX_SAMPLES}",
                              description="answers to ask for; the value is their median"),
            default=1),
        Key("context", OneOrMany(RelativePath(), description="reference files beside "
                                                             "eval.yaml")),
        Key("provider", ProviderName()),
        Key("builtin", Text(non_empty=True, description="an LLM builtin, e.g. "
                                                         "quality/output_completeness")),
        Key("context_tokens", Number(integer=True, minimum=1024, maximum=100_000_000,
                                     problem="must be a whole number of tokens, at least 1024",
                                     description="the tokens the model takes (its context "
                                     "window); default: from the model's name, else 32768")),
    )  # fmt: skip

    claim_keys = PROMPT_KEYS

    def claims(self, entry: Mapping[str, Any]) -> bool:
        """A prompt key set, or `builtin:` naming an LLM builtin (a shipped prompt)."""
        return any(key in entry for key in PROMPT_KEYS) or (
            "builtin" in entry and is_prompt_builtin(entry["builtin"])
        )

    def spec(self, values: Mapping[str, Any], at: Locator) -> LLMSpec:
        if "builtin" in values:
            return self._builtin_spec(values, at)
        present = [key for key in PROMPT_KEYS if key in values]
        if not present:
            raise at.child("llm_rubric").error("must be a non-empty string")
        if len(present) > 1:
            raise at.child(present[1]).error(f"set only one of {', '.join(present)}")
        key = present[0]
        prompt = values[key]
        if key == "prompt_file":
            path = at.base_dir / prompt
            try:
                prompt = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise at.child(key).error(f"{path} cannot be read: {error}") from None
        return LLMSpec(
            prompt_key=key,
            prompt=prompt,
            model=values.get("model"),
            samples=values.get("samples", 1),
            context=values.get("context", ()),
            provider=values.get("provider"),
            context_tokens=values.get("context_tokens"),
        )

    def default_feedback_type(self, spec: Any) -> str | None:
        """An LLM builtin (a shipped prompt) is graded pass/fail."""
        return "bool" if spec.builtin is not None else None

    def _builtin_spec(self, values: Mapping[str, Any], at: Locator) -> LLMSpec:
        """An LLM builtin (quality/output_completeness, ...): its shipped prompt."""
        from verifier.judges.builtins import find_builtin

        present = [key for key in PROMPT_KEYS if key in values]
        if present:
            raise at.child(present[0]).error(f"builtin {values['builtin']} brings its own prompt")
        found = find_builtin(values["builtin"])
        assert found is not None and found.prompt is not None  # claims() checked it
        return LLMSpec(
            prompt_key="builtin",
            prompt=found.prompt,
            model=values.get("model"),
            samples=values.get("samples", 1),
            context=values.get("context", ()),
            provider=values.get("provider"),
            builtin=found.qualified_name,
            context_tokens=values.get("context_tokens"),
        )

    def entry_schema(self) -> dict[str, Any]:
        """Exactly one of the prompt keys set (not null)."""
        return {
            "oneOf": [
                {"required": [key], "properties": {key: {"not": {"type": "null"}}}}
                for key in PROMPT_KEYS
            ]
        }

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[Record], Any]:
        import os

        from verifier.judges.llm.load import build_judge

        return build_judge(judge, config, os.environ)

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        return f"llm {judge.spec.model or config.default_model or '$EVAL_JUDGE_MODEL'}"


LLM = LLMKind()
