"""LLM judges (`llm_rubric`, `prompt` or `prompt_file`): a model grades the case.

This module only reads the entry's keys; everything that needs the prompt
machinery (templates, providers, the environment) happens in prepare(), which
imports verifier.judges.llm only when a config has an LLM judge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from verifier.config import EvalConfig, JudgeConfig, Key, KindDefaults, Locator
from verifier.config.fields import Choice, Number, OneOrMany, RelativePath, Text
from verifier.judges.base import JudgeContext, Pool
from verifier.judges.kinds.builtin import is_prompt_builtin
from verifier.judges.llm.entry_keys import (
    CaseFilesField,
    CriteriaField,
    GuardField,
    PanelField,
    PricesField,
    RuleField,
)
from verifier.judges.llm.judge_file import JudgeFile, JudgeFileField
from verifier.judges.llm.spec import (
    CRITERIA_RULES,
    MODES,
    PANEL_RULES,
    REASONING_EFFORTS,
    LLMSpec,
)
from verifier.scale import FeedbackType

PROMPT_KEYS = ("llm_rubric", "prompt", "prompt_file")
MAX_SAMPLES = 25
# The rubric of a judge that lists criteria and no prompt (a rewardkit judge has none).
CRITERIA_RUBRIC = "Grade the agent's work against each criterion."


@attrs.frozen
class ProviderName:
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


_KEYS = (
    Key(
        "llm_rubric",
        Text(non_empty=True, description="the rubric; the case's material is appended"),
    ),
    Key("prompt", Text(non_empty=True, description="a Jinja2 prompt template")),
    Key("prompt_file", RelativePath(description="a Jinja2 template file beside eval.yaml")),
    Key(
        "model",
        Text(
            non_empty=True,
            description="provider/model; else models.judge, else $EVAL_JUDGE_MODEL",
        ),
    ),
    Key(
        "samples",
        Number(
            integer=True,
            minimum=1,
            maximum=MAX_SAMPLES,
            problem=f"must be a whole number from 1 to {MAX_SAMPLES}",
            description="answers to ask for; the value is their median",
        ),
        default=1,
    ),
    Key("context", OneOrMany(RelativePath(), description="reference files beside eval.yaml")),
    Key("provider", ProviderName()),
    Key(
        "builtin",
        Text(non_empty=True, description="an LLM builtin, e.g. quality/output_completeness"),
    ),
    Key(
        "context_tokens",
        Number(
            integer=True,
            minimum=1024,
            maximum=100_000_000,
            problem="must be a whole number of tokens, at least 1024",
            description="the tokens the model takes (its context "
            "window); default: from the model's name (a panel: "
            "its members' smallest), else 32768",
        ),
    ),
    Key("criteria", CriteriaField()),
    Key("aggregate", RuleField()),
    Key(
        "threshold",
        Number(
            minimum=0,
            maximum=1,
            problem="must be a number from 0 to 1",
            description="aggregate: threshold: the weighted mean passes at this value",
        ),
    ),
    Key("panel", PanelField()),
    Key("guard", GuardField()),
    Key("prices", PricesField()),
    Key(
        "mode",
        Choice(
            MODES,
            description="batched: every criterion in one request; individual: a "
            "request per criterion (rewardkit's)",
        ),
    ),
    Key(
        "reasoning_effort",
        Choice(
            REASONING_EFFORTS,
            description="how much the model reasons first: OpenAI's reasoning_effort, "
            "Anthropic's thinking budget; default: not sent",
        ),
    ),
    Key(
        "reference",
        RelativePath(
            description="a reference solution (file, or dir: its files) beside eval.yaml, "
            "which the model compares the agent's work with"
        ),
    ),
    Key("files", CaseFilesField()),
)


class LLMKind(KindDefaults):
    name = "llm"
    pool = Pool.LLM
    case_bound = False
    # A judge file is read with the fields of the keys it sets for the entry.
    keys = (*_KEYS, Key("judge_file", JudgeFileField({key.name: key.field for key in _KEYS})))

    claim_keys = (*PROMPT_KEYS, "criteria", "judge_file")

    def claims(self, entry: Mapping[str, Any]) -> bool:
        """A prompt key, `criteria` or `judge_file` set, or `builtin:` naming an LLM
        builtin (a shipped prompt)."""
        return any(key in entry for key in self.claim_keys) or (
            "builtin" in entry and is_prompt_builtin(entry["builtin"])
        )

    def default_score_range(self, spec: LLMSpec) -> tuple[float, float] | None:
        """A criteria judge's value is its aggregate, in [0, 1], unless it declares a scale."""
        return (0.0, 1.0) if spec.criteria else None

    def default_timeout(self, spec: LLMSpec) -> float | None:
        """A judge file's timeout is the judge's."""
        return spec.timeout_s

    def spec(self, values: Mapping[str, Any], at: Locator) -> LLMSpec:
        if "judge_file" in values:
            values = _with_judge_file(values, at)
        if "builtin" in values:
            return self._builtin_spec(values, at)
        present = [key for key in PROMPT_KEYS if key in values]
        if not present and "criteria" not in values:
            raise at.child("llm_rubric").error("must be a non-empty string")
        if len(present) > 1:
            raise at.child(present[1]).error(f"set only one of {', '.join(present)}")
        key = present[0] if present else "criteria"
        prompt: str = values[key] if present else CRITERIA_RUBRIC
        if key == "prompt_file":
            path = at.base_dir / prompt
            try:
                prompt = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise at.child(key).error(f"{path} cannot be read: {error}") from None
        return LLMSpec(prompt_key=key, prompt=prompt, **_common_spec(values, at))

    def default_feedback_type(self, spec: Any) -> FeedbackType | None:
        """An LLM builtin (a shipped prompt) is graded pass/fail."""
        return "bool" if spec.builtin is not None else None

    def _builtin_spec(self, values: Mapping[str, Any], at: Locator) -> LLMSpec:
        """An LLM builtin (quality/output_completeness, ...): its shipped prompt."""
        from verifier.judges.builtins import find_builtin

        present = [key for key in PROMPT_KEYS if key in values]
        if present:
            raise at.child(present[0]).error(f"builtin {values['builtin']} brings its own prompt")
        found = find_builtin(values["builtin"])
        assert found is not None  # claims() checked it
        assert found.prompt is not None
        if "criteria" in values:
            raise at.child("criteria").error(
                f"builtin {values['builtin']} grades pass/fail with its own prompt; "
                "remove criteria (or the builtin)"
            )
        return LLMSpec(
            prompt_key="builtin",
            prompt=found.prompt,
            builtin=found.qualified_name,
            **_common_spec(values, at),
        )

    def entry_schema(self) -> dict[str, Any]:
        """A judge file (its criteria, maybe its prompt: at most one prompt key beside it),
        or else exactly one of the prompt keys set (not null), or none of them and
        criteria; a panel instead of a model."""
        unset = {key: {"type": "null"} for key in PROMPT_KEYS}
        judge_file = {"required": ["judge_file"], "properties": {"judge_file": {"type": "string"}}}
        return {
            "if": judge_file,
            "then": {
                "not": {
                    "anyOf": [
                        {"required": [first, second]}
                        for index, first in enumerate(PROMPT_KEYS)
                        for second in PROMPT_KEYS[index + 1 :]
                    ]
                }
            },
            "else": self._prompt_schema(unset),
            "not": {
                "required": ["model", "panel"],
                "properties": {"model": {"type": "string"}, "panel": {"not": {"type": "null"}}},
            },
        }

    @staticmethod
    def _prompt_schema(unset: dict[str, Any]) -> dict[str, Any]:
        return {
            "oneOf": [
                *(
                    {"required": [key], "properties": {key: {"not": {"type": "null"}}}}
                    for key in PROMPT_KEYS
                ),
                {
                    "required": ["criteria"],
                    "properties": {"criteria": {"not": {"type": "null"}}},
                    "not": {
                        "anyOf": [
                            {"required": [key], "properties": {key: {"not": unset[key]}}}
                            for key in PROMPT_KEYS
                        ]
                    },
                },
            ],
        }

    def prepare(self, judge: JudgeConfig, config: EvalConfig) -> Callable[[JudgeContext], Any]:
        import os

        from verifier.judges.llm.from_spec import build_judge

        return build_judge(judge, config, os.environ)

    def describe(self, judge: JudgeConfig, config: EvalConfig) -> str:
        spec: LLMSpec = judge.spec
        if spec.panel:
            what = "llm panel " + ", ".join(member.model for member in spec.panel)
        else:
            what = f"llm {spec.model or config.default_model or '$EVAL_JUDGE_MODEL'}"
        if spec.criteria:
            what += f", {len(spec.criteria)} criteria ({spec.aggregate or 'weighted-mean'})"
            what += ", one request each" if spec.mode == "individual" else ""
        if spec.judge_file is not None:
            what += f", from {spec.judge_file}"
        return what


def _with_judge_file(values: Mapping[str, Any], at: Locator) -> dict[str, Any]:
    """The entry's keys and its judge file's (verifier.judges.llm.judge_file); a key
    both set is an error naming where the file sets it."""
    judge_file: JudgeFile = values["judge_file"]
    for key in judge_file.values:
        if key in values:
            raise at.child(key).error(
                f"is set by {judge_file.path} too; keep one (the entry's keys add to the file's)"
            )
    return {**values, **judge_file.values}


def _common_spec(values: Mapping[str, Any], at: Locator) -> dict[str, Any]:
    """The keys a prompt judge and an LLM builtin share, checked against each other: a
    panel instead of a model, `aggregate` for what the judge has to combine, one request
    per criterion only with criteria."""
    if "panel" in values and "model" in values:
        raise at.child("panel").error("set model or panel, not both")
    if values.get("mode") == "individual" and not values.get("criteria"):
        raise at.child("mode").error("individual asks each criterion apart; this judge has none")
    members, panel_rule = values.get("panel", ((), None))
    criteria = values.get("criteria", ())
    rule = values.get("aggregate")
    if rule is not None:
        if criteria and rule not in CRITERIA_RULES:
            raise at.child("aggregate").error(
                f"{rule!r} is a panel rule, and aggregate combines the criteria here; "
                f"give the panel's as panel: {{models: [...], aggregate: {rule}}}"
            )
        if not criteria and not members:
            raise at.child("aggregate").error(
                "combines criteria or a panel's models, and this judge has neither"
            )
        if not criteria and rule not in PANEL_RULES:
            raise at.child("aggregate").error(
                f"{rule!r} is a criteria rule; a panel combines with {', '.join(PANEL_RULES)}"
            )
        if not criteria:
            if panel_rule is not None:
                raise at.child("aggregate").error(
                    "the panel's rule is set twice (aggregate and panel.aggregate); keep one"
                )
            panel_rule, rule = rule, None
    threshold = values.get("threshold")
    if threshold is not None and rule != "threshold":
        raise at.child("threshold").error("is read only with aggregate: threshold")
    if rule == "threshold" and threshold is None:
        threshold = 0.5
    prices, prices_source = values.get("prices", ({}, None))
    judge_file: JudgeFile | None = values.get("judge_file")
    return {
        "model": values.get("model"),
        "samples": values.get("samples", 1),
        "context": values.get("context", ()),
        "provider": values.get("provider"),
        "context_tokens": values.get("context_tokens"),
        "criteria": criteria,
        "aggregate": rule,
        "threshold": threshold,
        "panel": members,
        "panel_aggregate": panel_rule,
        "guard": values.get("guard"),
        "prices": prices,
        "prices_source": prices_source,
        "mode": values.get("mode", "batched"),
        "reasoning_effort": values.get("reasoning_effort"),
        "reference": values.get("reference"),
        "files": values.get("files"),
        "timeout_s": judge_file.timeout_s if judge_file is not None else None,
        "judge_file": judge_file.path if judge_file is not None else None,
    }


KIND = LLMKind()
