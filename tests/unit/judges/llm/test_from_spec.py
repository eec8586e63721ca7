"""LLM judge keys checked at load, and what a loaded judge sends: each mistake is a
ConfigError naming the key; each setting is seen in the request a local server receives."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.llm_servers import FakeLLM, serve
from verifier.errors import ConfigError
from verifier.grading import grade, load_eval
from verifier.results import JudgeResult

WriteConfig = Callable[..., Path]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "EVAL_JUDGE_MODEL",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "VERIFIER_LLM_RETRIES",
        "VERIFIER_LLM_OUTPUT",
        "VERIFIER_LLM_TEMPERATURE",
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VERIFIER_LLM_REQUEST_TIMEOUT", "2")


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, FakeLLM]]:
    """Both wire formats at once, each answering every request with a grade of 3."""
    openai, anthropic = serve("openai"), serve("anthropic")
    both = {"openai": next(openai), "anthropic": next(anthropic)}
    for server in both.values():
        server.default = server.grade(score=3)
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
    yield both
    for generator in (openai, anthropic):
        next(generator, None)


def config_with(write_config: WriteConfig, judge: str, top: str = "") -> Path:
    lines = "\n".join("    " + line for line in judge.strip().splitlines())
    return write_config(f"name: t\n{top}judges:\n  - name: q\n{lines}\n")


def graded(write_config: WriteConfig, make_case, judge: str, top: str = "") -> JudgeResult:
    loaded = load_eval(config_with(write_config, judge, top))
    case = make_case({"report.md": "The bug is fixed."}, name=f"case-{next(_CASES)}")
    return grade(loaded, case).results[0]


_CASES = itertools.count()


def load_error(write_config: WriteConfig, judge: str, top: str = "") -> str:
    with pytest.raises(ConfigError) as caught:
        load_eval(config_with(write_config, judge, top))
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
    servers: dict[str, FakeLLM],
    write_config: WriteConfig,
    make_case,
    model: str,
    provider: str,
    sent: str,
) -> None:
    result = graded(write_config, make_case, f"llm_rubric: ok?\nmodel: {model}")
    assert result.value == 3.0 and result.details["provider"] == provider
    (other,) = [name for name in servers if name != provider]
    assert [request.body["model"] for request in servers[provider].received] == [sent]
    assert servers[other].received == []


def test_provider_key_wins_and_sends_the_name_verbatim(
    servers: dict[str, FakeLLM], write_config: WriteConfig, make_case
) -> None:
    graded(write_config, make_case, "llm_rubric: ok?\nmodel: openai/gpt-oss-20b\nprovider: vllm")
    assert servers["openai"].received[0].body["model"] == "openai/gpt-oss-20b"


def test_model_falls_back_to_models_judge_then_the_env(
    servers: dict[str, FakeLLM],
    write_config: WriteConfig,
    make_case,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graded(write_config, make_case, "llm_rubric: ok?", top="models: {judge: claude-x}\n")
    monkeypatch.setenv("EVAL_JUDGE_MODEL", "openai/from-env")
    graded(write_config, make_case, "llm_rubric: ok?")
    graded(write_config, make_case, "llm_rubric: ok?", top="models: {judge: claude-y}\n")
    assert [r.body["model"] for r in servers["anthropic"].received] == ["claude-x", "claude-y"]
    assert [r.body["model"] for r in servers["openai"].received] == ["from-env"]


def test_no_model_anywhere_is_a_load_error(write_config: WriteConfig) -> None:
    message = load_error(write_config, "llm_rubric: ok?")
    assert "judges[0] (q).model: no model for this LLM judge: set model on the judge" in message
    assert "$EVAL_JUDGE_MODEL" in message


def test_without_base_urls_the_hosted_apis_are_asked(
    write_config: WriteConfig, make_case, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFIER_LLM_RETRIES", "0")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing leaves this machine
    for model, url in (
        ("m", "https://api.openai.com/v1/chat/completions"),
        ("claude-3", "https://api.anthropic.com/v1/messages"),
    ):
        result = graded(write_config, make_case, f"llm_rubric: ok?\nmodel: {model}")
        assert result.status.value == "error" and f"endpoint {url}, model {model}" in result.error


def test_base_url_must_be_http(write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "not a url")
    message = load_error(write_config, "llm_rubric: ok?\nmodel: claude-3")
    assert "$ANTHROPIC_BASE_URL 'not a url' is not an http(s) URL" in message


def test_prompt_file_is_read_relative_to_eval_yaml(
    servers: dict[str, FakeLLM], write_config: WriteConfig, make_case
) -> None:
    write_config("Grade this: {{ conversation }}!\n", name="grader.j2")
    graded(write_config, make_case, "prompt_file: grader.j2\nmodel: m")
    user = servers["openai"].received[0].user
    assert user.startswith("Grade this: <case-material-")
    assert "## Material to grade" not in user  # the template places the case itself


def test_missing_prompt_file(write_config: WriteConfig) -> None:
    message = load_error(write_config, "prompt_file: nowhere.md\nmodel: m")
    assert "judges[0] (q).prompt_file:" in message and "nowhere.md not found" in message


def test_missing_context_file(write_config: WriteConfig) -> None:
    message = load_error(write_config, "llm_rubric: ok?\nmodel: m\ncontext: [guide.md]")
    assert "judges[0] (q).context[0]:" in message and "guide.md not found" in message


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


@pytest.mark.parametrize(
    ("rubric", "appended"),
    [
        ("Is it good?", True),
        ("Is {{ stdout }} good?", False),
        ("Want {{ annotations.x }}", True),  # annotations are not the case's material
    ],
)
def test_rubric_without_case_variables_gets_the_material_appended(
    servers: dict[str, FakeLLM],
    write_config: WriteConfig,
    make_case,
    rubric: str,
    appended: bool,
) -> None:
    graded(
        write_config, make_case, f"llm_rubric: '{rubric}'\nmodel: m", top="annotations: {x: 1}\n"
    )
    assert ("## Material to grade" in servers["openai"].received[0].user) is appended


@pytest.mark.parametrize(
    ("scale", "said", "field"),
    [
        ("feedback_type: bool", "pass or fail", "passed"),
        ("score_range: [0, 2]", "an integer from 0 (worst) to 2 (best)", "score"),
        ("score_range: [0, 1]", "a number (fractions allowed) from 0 (worst) to 1 (best)", "score"),
        ("", "an integer from 1 (worst) to 5 (best)", "score"),  # the default range
    ],
)
def test_scale_follows_the_judge(
    servers: dict[str, FakeLLM],
    write_config: WriteConfig,
    make_case,
    scale: str,
    said: str,
    field: str,
) -> None:
    servers["openai"].default = servers["openai"].grade(**{field: True if field == "passed" else 1})
    graded(write_config, make_case, f"llm_rubric: a\nmodel: m\n{scale}")
    request = servers["openai"].received[0]
    assert said in request.system
    assert field in request.body["tools"][0]["function"]["parameters"]["required"]


@pytest.mark.parametrize(
    ("prompt", "problem"),
    [
        ("{% call stdout.format() %}{% endcall %}", "{% call %} blocks (line 1) is not supported"),
        ("{% filter replace('a', stdout) %}a{% endfilter %}", "only constant filter arguments"),
        ("{% filter upper | replace('a', stdout) %}a{% endfilter %}", "{% filter replace %}"),
        ("{% include 'x.j2' %}", "{% include %} (line 1) is not supported"),
        ("{% extends 'base.j2' %}", "{% extends %} (line 1) is not supported"),
        ("{% from 'm.j2' import m %}", "{% from ... import %} (line 1) is not supported"),
    ],
)
def test_constructs_that_would_print_unfenced_are_load_errors(
    write_config: WriteConfig, prompt: str, problem: str
) -> None:
    message = load_error(write_config, f"prompt: {json.dumps(prompt)}\nmodel: m")
    assert "judges[0] (q).prompt" in message and problem in message


def test_a_filter_block_with_constant_arguments_is_allowed(
    servers: dict[str, FakeLLM], write_config: WriteConfig, make_case
) -> None:
    result = graded(
        write_config,
        make_case,
        "prompt: '{% filter indent(2) %}{{ stdout }}{% endfilter %}'\nmodel: m",
    )
    assert result.value == 3.0


# --- the new keys: the loader and `verifier schema` agree --------------------------

NEW_KEYS = [
    ("judges:\n  - {name: a, model: m, criteria: [{description: 'ok?'}]}\n", True),
    (
        "judges:\n  - {name: a, model: m, llm_rubric: x, criteria: [{description: 'ok?', type: likert, points: 3, weight: 2, negate: true}], aggregate: all_pass}\n",
        True,
    ),
    (
        "judges:\n  - {name: a, model: m, criteria: [{description: x, type: rubric, levels: [a, b], id: r1, optional: true}], aggregate: threshold, threshold: 0.7}\n",
        True,
    ),
    ("judges:\n  - {name: a, llm_rubric: x, panel: [m1, m2], aggregate: majority}\n", True),
    (
        "judges:\n  - {name: a, llm_rubric: x, panel: {models: [m1, {model: m2, provider: vllm}], aggregate: min}}\n",
        True,
    ),
    ("judges:\n  - {name: a, model: m, llm_rubric: x, guard: zero}\n", True),
    (
        "judges:\n  - {name: a, model: m, llm_rubric: x, guard: {on_detect: flag, ask_model: true}}\n",
        True,
    ),
    (
        "judges:\n  - {name: a, model: m, llm_rubric: x, prices: {m: {input: 1, output: 2.5}}}\n",
        True,
    ),
    ("judges:\n  - {name: a, model: m, criteria: []}\n", False),
    ("judges:\n  - {name: a, model: m, criteria: [{name: x}]}\n", False),
    ("judges:\n  - {name: a, model: m, criteria: [{description: x, files: [a.py]}]}\n", False),
    ("judges:\n  - {name: a, model: m, criteria: [{description: x, bogus: 1}]}\n", False),
    ("judges:\n  - {name: a, llm_rubric: x, panel: [m1]}\n", False),
    ("judges:\n  - {name: a, llm_rubric: x, model: m, panel: [m1, m2]}\n", False),
    ("judges:\n  - {name: a, model: m, llm_rubric: x, guard: block}\n", False),
    ("judges:\n  - {name: a, model: m, llm_rubric: x, aggregate: weighted_sum}\n", False),
    (
        "judges:\n  - {name: a, model: m, llm_rubric: x, prices: {m: {input: -1, output: 2}}}\n",
        False,
    ),
]


@pytest.mark.parametrize(("text", "valid"), NEW_KEYS)
def test_the_loader_and_the_schema_agree_on_the_new_keys(
    tmp_path: Path, text: str, valid: bool
) -> None:
    from tests.unit.commands.test_schema import loader_problems, schema_accepts

    problems = loader_problems(tmp_path, text)
    assert (problems == []) is valid, problems
    assert schema_accepts(yaml.safe_load(text)) is valid
