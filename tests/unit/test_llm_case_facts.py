"""What the case causes an LLM judge is its lowest value, never an error; material is
budgeted in tokens against the model's context.

An error could be dropped from the reward (`on_error: drop`) or skip a gate, so a
policy would learn to cause one: a case whose material overflows the model's context
(the endpoint's 400), or a template lookup into an output file the agent did not
write, scores false (or the low end of score_range) with the fact as the rationale.
Real local servers of both wire formats (tests/llm_servers.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.llm_judging import model_for
from tests.llm_servers import FakeLLM
from tests.unit import test_llm_judges
from verifier.grading import grade, load_eval
from verifier.judges.base import JudgeAnswer
from verifier.judges.llm.prompt import PromptPlan
from verifier.judges.llm.scale import AnswerScale
from verifier.judges.llm.template import compile_template
from verifier.judges.llm.tokens import context_tokens, estimate_tokens, is_context_overflow
from verifier.results import Status

OVERFLOWS = {
    "openai": "This model's maximum context length is 32768 tokens. However, your messages "
    "resulted in 41234 tokens. Please reduce the length of the messages.",
    "anthropic": "prompt is too long: 210345 tokens > 200000 maximum",
}
# The fast VERIFIER_LLM_* settings (judge_of(server, yaml) is tests/unit/conftest.py's).
pytestmark = pytest.mark.usefixtures("llm_env")
rubric = test_llm_judges.rubric
CJK = "日本語の報告書です。" * 8_000  # 80,000 characters, under the 100,000-character cap


@pytest.mark.parametrize("extra", ["feedback_type: bool", "score_range: [1, 5]"])
def test_a_context_overflow_is_the_judges_lowest_value(
    llm_server: FakeLLM, judge_of: Callable[..., Callable[[], object]], extra: str
) -> None:
    llm_server.queue(llm_server.error(400, OVERFLOWS[llm_server.style]))
    verdict = judge_of(llm_server, rubric(llm_server, extra))()
    assert isinstance(verdict, JudgeAnswer)
    assert verdict.value == (False if "bool" in extra else 1.0)
    assert "refused the prompt for its length" in verdict.rationale
    assert verdict.rationale.endswith(": counted as the lowest value")
    assert len(llm_server.received) == 1  # not retried, and no other sample asked


def test_an_overflow_fails_the_gate_under_the_default_on_error(
    openai_server: FakeLLM, write_config: Callable[..., Path], make_case: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """It was an error: dropped beside the other judge, the reward was 1.0."""
    for name, value in openai_server.env.items():
        monkeypatch.setenv(name, value)
    openai_server.queue(openai_server.error(400, OVERFLOWS["openai"]))
    config = write_config("judges:\n  - {name: report, builtin: file_exists, arguments: "
                          "{path: report.md}}\n" + rubric(openai_server, "feedback_type: bool").replace("\n- ", "\n  - ")
                          .replace("\n  ", "\n    ").replace("\n    - ", "\n  - "))  # fmt: skip
    grading = grade(load_eval(config), make_case({"report.md": CJK * 3}))
    quality = next(result for result in grading.results if result.name == "quality")
    assert (quality.status, quality.value) == (Status.OK, False)
    assert grading.reward == 0.0 and grading.composition.gate_failed == ("quality",)


def test_a_template_reading_a_file_the_agent_did_not_write_is_the_lowest_value(
    llm_server: FakeLLM, judge_of: Callable[..., Callable[[], object]]
) -> None:
    judge = f"""
- name: q
  model: {model_for(llm_server)}
  score_range: [1, 5]
  prompt: "Grade the summary: {{{{ outputs.files['summary.md'] }}}}"
"""
    verdict = judge_of(llm_server, judge, files={"report.md": "no summary written"})()
    assert isinstance(verdict, JudgeAnswer) and verdict.value == 1.0
    assert verdict.rationale == (
        "the prompt template looks up what the case does not hold ('dict object' has no "
        "attribute 'summary.md'): counted as the lowest value"
    )
    assert llm_server.received == []  # nothing was sent


def test_a_template_typo_in_the_authors_material_is_still_an_error(
    openai_server: FakeLLM, judge_of: Callable[..., Callable[[], object]]
) -> None:
    """`outputs.reprot_content` and `annotations.missing` are the author's: the record's
    keys and the annotations do not depend on the case."""
    from verifier.judges.llm.judge import LLMJudgeError

    for lookup in ("outputs.reprot_content", "annotations.missing", "arguments.nothing"):
        judge = f"""
- name: q
  model: {model_for(openai_server)}
  score_range: [1, 5]
  prompt: "Grade: {{{{ {lookup} }}}}"
"""
        with pytest.raises(LLMJudgeError, match="has no attribute"):
            judge_of(openai_server, judge)()


def test_a_batch_scores_a_missing_output_file_lowest_without_a_request(
    openai_server: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import subprocess
    import sys

    config = tmp_path / "eval.yaml"
    config.write_text(f"""judges:
  - name: q
    model: {model_for(openai_server)}
    feedback_type: bool
    prompt: "Grade: {{{{ outputs.files['summary.md'] }}}}"
""")
    (tmp_path / "cases" / "c1").mkdir(parents=True)
    done = subprocess.run(
        [str(Path(sys.executable).with_name("verifier")), "batch", "--config", str(config),
         "--cases", str(tmp_path / "cases"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, check=False,
        env={**__import__("os").environ, **openai_server.env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    judges = json.loads((tmp_path / "out" / "c1" / "judges.json").read_text())
    assert judges["per_judge"]["q"]["value"] is False and judges["reward"] == 0.0
    assert openai_server.received == []


# --- the token budget ---------------------------------------------------------------


def plan(window: int | None, answer: int = 1024) -> PromptPlan:
    return PromptPlan(compile_template("Grade it."), True, (), AnswerScale("pass_fail"), "json",
                      100_000, context_tokens=window, answer_tokens=answer)  # fmt: skip


def test_80000_cjk_characters_are_cut_to_fit_a_32k_context() -> None:
    prompt = plan(32_768).build({"stdout": CJK, "files": {}}, {})
    assert prompt.truncated and prompt.tokens <= 32_768 - 1024 - 400
    assert estimate_tokens(prompt.system + prompt.user) <= prompt.tokens + 1
    # The same characters in ASCII fit (about 27k tokens), and nothing is cut.
    ascii_prompt = plan(32_768).build({"stdout": "x" * 80_000, "files": {}}, {})
    assert not ascii_prompt.truncated
    # Without a token budget only the character cap applies.
    assert not plan(None).build({"stdout": CJK, "files": {}}, {}).truncated


def test_the_cut_keeps_the_head_and_the_tail_of_the_material() -> None:
    text = "始" + CJK + "終"
    user = plan(16_384).build({"stdout": text, "files": {}}, {}).user
    assert "始" in user and "終" in user and "characters cut here" in user


@pytest.mark.parametrize(
    ("model", "override", "window"),
    [("gpt-4o-mini", None, 128_000), ("claude-sonnet-4-5", None, 200_000),
     ("meta-llama/Llama-3.1-8B-Instruct", None, 131_072), ("Qwen/Qwen3-8B", None, 32_768),
     ("o3-mini", None, 200_000), ("my-finetune", None, 32_768), ("gpt-4o", 8_192, 8_192)],
)  # fmt: skip
def test_the_context_of_a_model_comes_from_its_family_or_the_override(
    model: str, override: int | None, window: int
) -> None:
    assert context_tokens(model, override) == window


def test_a_judges_context_tokens_key_and_the_environment_set_the_budget(
    openai_server: FakeLLM, judge_of: Callable[..., Callable[[], object]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    judge = judge_of(
        openai_server, rubric(openai_server, "feedback_type: bool") + "  context_tokens: 8192\n"
    )
    assert judge.func.plan.context_tokens == 8192
    assert (
        judge_of(
            openai_server, rubric(openai_server, "feedback_type: bool")
        ).func.plan.context_tokens
        == 32_768
    )
    monkeypatch.setenv("VERIFIER_LLM_CONTEXT_TOKENS", "65536")
    assert (
        judge_of(
            openai_server, rubric(openai_server, "feedback_type: bool")
        ).func.plan.context_tokens
        == 65536
    )


@pytest.mark.parametrize(
    ("status", "message", "overflow"),
    [(400, OVERFLOWS["openai"], True), (400, OVERFLOWS["anthropic"], True),
     (400, "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096", True),
     (400, "the request exceeds the available context size, try increasing it", True),
     (413, "Request Entity Too Large", True), (400, "temperature is not supported", False),
     (500, "maximum context length", False), (401, "bad key", False)],
)  # fmt: skip
def test_an_overflow_is_told_from_other_refusals(status: int, message: str, overflow: bool) -> None:
    assert is_context_overflow(status, message) is overflow
