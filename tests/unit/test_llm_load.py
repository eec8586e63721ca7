"""LLM judge keys checked at load: each mistake is a ConfigError naming the key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from verifier.errors import ConfigError
from verifier.grading import LoadedEval, load_eval
from verifier.judges.llm.judge import LLMJudge

WriteConfig = Callable[..., Path]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EVAL_JUDGE_MODEL", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
                 "VERIFIER_LLM_RETRIES", "VERIFIER_LLM_OUTPUT", "VERIFIER_LLM_TEMPERATURE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def load_judge(write_config: WriteConfig, judge: str, top: str = "") -> LLMJudge:
    loaded = load(write_config, judge, top)
    call = loaded.judges[0].call
    assert isinstance(call, LLMJudge)
    return call


def load(write_config: WriteConfig, judge: str, top: str = "") -> LoadedEval:
    lines = "\n".join("    " + line for line in judge.strip().splitlines())
    return load_eval(write_config(f"name: t\n{top}judges:\n  - name: q\n{lines}\n"))


def load_error(write_config: WriteConfig, judge: str, top: str = "") -> str:
    with pytest.raises(ConfigError) as caught:
        load(write_config, judge, top)
    return caught.value.message


@pytest.mark.parametrize(
    ("model", "provider", "sent"),
    [
        ("openai/gpt-4o-mini", "openai", "gpt-4o-mini"),
        ("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "anthropic", "claude-sonnet-4-5@20250929"),
        ("Qwen/Qwen2.5-7B-Instruct", "openai", "Qwen/Qwen2.5-7B-Instruct"),
        ("gpt-4o", "openai", "gpt-4o"),
    ],
)
def test_provider_from_the_model_name(
    write_config: WriteConfig, model: str, provider: str, sent: str
) -> None:
    judge = load_judge(write_config, f"llm_rubric: ok?\nmodel: {model}")
    assert (judge.endpoint.provider, judge.endpoint.model) == (provider, sent)


def test_provider_key_wins_and_sends_the_name_verbatim(write_config: WriteConfig) -> None:
    judge = load_judge(write_config, "llm_rubric: ok?\nmodel: openai/gpt-oss-20b\nprovider: vllm")
    assert (judge.endpoint.provider, judge.endpoint.model) == ("openai", "openai/gpt-oss-20b")


def test_model_falls_back_to_models_judge_then_the_env(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = load_judge(write_config, "llm_rubric: ok?", top="models: {judge: claude-x}\n")
    assert judge.endpoint.model == "claude-x"
    monkeypatch.setenv("EVAL_JUDGE_MODEL", "openai/from-env")
    assert load_judge(write_config, "llm_rubric: ok?").endpoint.model == "from-env"
    judge = load_judge(write_config, "llm_rubric: ok?", top="models: {judge: claude-x}\n")
    assert judge.endpoint.model == "claude-x"


def test_no_model_anywhere_is_a_load_error(write_config: WriteConfig) -> None:
    message = load_error(write_config, "llm_rubric: ok?")
    assert "judges[0] (q).model: no model for this LLM judge: set model on the judge" in message
    assert "$EVAL_JUDGE_MODEL" in message


def test_base_urls_come_from_the_env(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = load_judge(write_config, "llm_rubric: ok?\nmodel: m")
    assert judge.endpoint.url == "https://api.openai.com/v1/chat/completions"
    judge = load_judge(write_config, "llm_rubric: ok?\nmodel: claude-3")
    assert judge.endpoint.url == "https://api.anthropic.com/v1/messages"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://vllm.ns.svc:8000/v1/")
    judge = load_judge(write_config, "llm_rubric: ok?\nmodel: m")
    assert judge.endpoint.url == "http://vllm.ns.svc:8000/v1/chat/completions"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "not a url")
    message = load_error(write_config, "llm_rubric: ok?\nmodel: claude-3")
    assert "$ANTHROPIC_BASE_URL 'not a url' is not an http(s) URL" in message


def test_prompt_file_is_read_relative_to_eval_yaml(write_config: WriteConfig) -> None:
    write_config("Grade {{ conversation }}\n", name="grader.j2")
    judge = load_judge(write_config, "prompt_file: grader.j2\nmodel: m")
    assert judge.plan.template.source == "Grade {{ conversation }}\n"
    assert judge.plan.append_material is False


def test_missing_prompt_file(write_config: WriteConfig) -> None:
    message = load_error(write_config, "prompt_file: nowhere.md\nmodel: m")
    assert "judges[0] (q).prompt_file:" in message and "nowhere.md not found" in message


def test_missing_context_file(write_config: WriteConfig) -> None:
    message = load_error(write_config, "llm_rubric: ok?\nmodel: m\ncontext: [guide.md]")
    assert "judges[0] (q).context:" in message and "guide.md not found" in message


def test_unknown_template_variable(write_config: WriteConfig) -> None:
    message = load_error(write_config, "prompt: 'Grade {{ conversaton }}'\nmodel: m")
    assert "judges[0] (q).prompt: unknown template variable 'conversaton'" in message
    assert "(did you mean 'conversation'?)" in message


def test_template_syntax_error(write_config: WriteConfig) -> None:
    message = load_error(write_config, "llm_rubric: 'Grade {% for x in outputs %}'\nmodel: m")
    assert "judges[0] (q).llm_rubric: template syntax error on line 1" in message


def test_only_one_prompt_source(write_config: WriteConfig) -> None:
    message = load_error(write_config, "llm_rubric: a\nprompt: b\nmodel: m")
    assert "judges[0] (q).prompt: set only one of llm_rubric, prompt" in message


@pytest.mark.parametrize("samples", ["0", "true", "2.5", "100"])
def test_bad_samples(write_config: WriteConfig, samples: str) -> None:
    message = load_error(write_config, f"llm_rubric: a\nmodel: m\nsamples: {samples}")
    assert "judges[0] (q).samples:" in message and "whole number from 1 to 25" in message


def test_unknown_provider(write_config: WriteConfig) -> None:
    message = load_error(write_config, "llm_rubric: a\nmodel: m\nprovider: gemini")
    assert "judges[0] (q).provider: 'gemini' must be one of" in message


def test_bad_tuning_variable(write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_LLM_RETRIES", "lots")
    message = load_error(write_config, "llm_rubric: a\nmodel: m")
    assert message == "environment: VERIFIER_LLM_RETRIES: 'lots' must be a whole number >= 0"


def test_rubric_without_case_variables_gets_the_material_appended(
    write_config: WriteConfig,
) -> None:
    assert load_judge(write_config, "llm_rubric: 'Is it good?'\nmodel: m").plan.append_material
    judge = load_judge(write_config, "llm_rubric: 'Is {{ stdout }} good?'\nmodel: m")
    assert not judge.plan.append_material
    judge = load_judge(write_config, "llm_rubric: 'Want {{ annotations.x }}'\nmodel: m")
    assert judge.plan.append_material  # annotations are not the case's material


def test_scale_follows_the_judge(write_config: WriteConfig) -> None:
    scale = load_judge(write_config, "llm_rubric: a\nmodel: m\nfeedback_type: bool").plan.scale
    assert scale.kind == "pass_fail"
    scale = load_judge(write_config, "llm_rubric: a\nmodel: m\nscore_range: [0, 2]").plan.scale
    assert (scale.kind, scale.low, scale.high, scale.integer) == ("number", 0, 2, True)
    scale = load_judge(write_config, "llm_rubric: a\nmodel: m\nscore_range: [0, 1]").plan.scale
    assert (scale.low, scale.high, scale.integer) == (0, 1, False)
    scale = load_judge(write_config, "llm_rubric: a\nmodel: m").plan.scale
    assert (scale.low, scale.high) == (1, 5)  # the default range
