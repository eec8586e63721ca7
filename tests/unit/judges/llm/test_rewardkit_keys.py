"""rewardkit's judge keys as eval.yaml keys of an LLM judge, against the local servers of
both wire formats: `reasoning_effort` (OpenAI's field; Anthropic's thinking budget,
which takes no temperature nor a forced tool), `reference` (a reference solution after
the material), `files` (the case files the judge grades) and `mode: individual` (a
request per criterion, in `grade` and in `verifier batch`). Without them a request is
exactly what it was."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm_judging import model_for
from tests.llm_servers import FakeLLM, Received, Reply, client_environment, serve
from verifier.batch import summary_paths
from verifier.case import read_case
from verifier.errors import ConfigError
from verifier.grading import load_eval
from verifier.judges.base import JudgeContext
from verifier.judges.llm.judge import LLMJudgeError
from verifier.judges.llm.providers import THINKING_BUDGETS

pytestmark = pytest.mark.usefixtures("llm_env")

VERIFIER = str(Path(sys.executable).with_name("verifier"))
THREE = """
- name: review
  model: MODEL
  criteria:
    - {name: names_bug, description: Does it name the bug?}
    - {name: clarity, description: How clear is it?, type: likert, points: 5}
    - {name: severity, description: How severe is it (0 to 10)?, type: numeric, min: 0, max: 10}
"""
ANSWERS = {"names_bug": True, "clarity": 4, "severity": 5}


def judge(server: FakeLLM, extra: str = "") -> str:
    return THREE.replace("MODEL", model_for(server)) + extra


def verdicts(**entries: object) -> dict:
    return {name: {"rationale": f"because {name}", "score": s} for name, s in entries.items()}


def asked(received: Received) -> list[str]:
    """The criteria a request asks for, from its answer schema."""
    tools = received.body["tools"][0]
    schema = tools["function"]["parameters"] if "function" in tools else tools["input_schema"]
    return list(schema["properties"]["criteria"]["properties"])


def answer_by_criteria(server: FakeLLM, answers: dict) -> None:
    """Each request answered with the verdicts of the criteria it asks."""

    def route(received: Received) -> Reply:
        return server.grade(criteria=verdicts(**{n: answers[n] for n in asked(received)}))

    server.route = route


# --- reasoning_effort -----------------------------------------------------------------


def test_reasoning_effort_is_sent_as_each_wire_format_takes_it(
    llm_server: FakeLLM, judge_of
) -> None:
    llm_server.queue(llm_server.grade(criteria=verdicts(**ANSWERS)))
    verdict = judge_of(llm_server, judge(llm_server, "  reasoning_effort: high\n"))()
    assert verdict.value == pytest.approx((1 + 0.75 + 0.5) / 3)
    (request,) = llm_server.received
    body = request.body
    if llm_server.style == "openai":
        assert body["reasoning_effort"] == "high" and body["temperature"] == 0.0
        assert body["tool_choice"]["function"]["name"] == "submit_grade"
    else:  # a thinking budget, on top of the answer's; no temperature, no forced tool
        assert body["thinking"] == {"type": "enabled", "budget_tokens": THINKING_BUDGETS["high"]}
        assert body["max_tokens"] == 1024 + 4096
        assert "temperature" not in body and body["tool_choice"] == {"type": "auto"}


@pytest.fixture
def anthropic_server() -> Iterator[FakeLLM]:
    yield from serve("anthropic")


def test_an_answer_after_thinking_is_read(anthropic_server: FakeLLM, judge_of) -> None:
    """Anthropic's reply with a thinking block before the tool call."""
    tool = anthropic_server.grade(criteria=verdicts(**ANSWERS)).body["content"]
    thought = {"type": "thinking", "thinking": "The report names it.", "signature": "sig"}
    body = {**anthropic_server.grade().body, "content": [thought, *tool]}
    anthropic_server.queue(Reply(body=body))
    verdict = judge_of(anthropic_server, judge(anthropic_server, "  reasoning_effort: low\n"))()
    assert verdict.value == pytest.approx((1 + 0.75 + 0.5) / 3)


def test_without_the_new_keys_a_request_is_as_it_was(llm_server: FakeLLM, judge_of) -> None:
    llm_server.queue(llm_server.grade(criteria=verdicts(**ANSWERS)))
    judge_of(llm_server, judge(llm_server))()
    (request,) = llm_server.received
    expected = {"model", "messages", "tools", "tool_choice", "temperature"}
    expected |= {"max_tokens"} if llm_server.style == "openai" else {"max_tokens", "system"}
    assert set(request.body) == expected
    assert "Reference solution" not in request.user


# --- reference -------------------------------------------------------------------------


def test_a_reference_solution_follows_the_material(
    openai_server: FakeLLM, judge_of, write_config
) -> None:
    reference = write_config("", name="unused.yaml").parent / "solution"
    reference.mkdir()
    (reference / "calc.py").write_text("def subtract(a, b): return a - b\n")
    (reference / "NOTES.md").write_text("Both bugs were in calc.py.\n")
    (reference / ".hidden").write_text("not shown\n")
    (reference / "sub").mkdir()
    (reference / "sub" / "deep.py").write_text("not shown either\n")
    openai_server.queue(openai_server.grade(criteria=verdicts(**ANSWERS)))
    judge_of(openai_server, judge(openai_server, "  reference: solution\n"))()
    user = openai_server.received[0].user
    head, solution = user.split("## Reference solution", 1)
    assert "## Material to grade" in head and "The bug is fixed." in head
    assert "Compare the agent's work against it" in solution
    assert solution.index('file="solution/NOTES.md"') < solution.index('file="solution/calc.py"')
    assert "return a - b" in solution and "not shown" not in user


def test_a_reference_that_cannot_be_read_is_a_load_error(
    openai_server: FakeLLM, judge_of, write_config
) -> None:
    directory = write_config("", name="unused.yaml").parent
    (directory / "solution.bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match=r"review\)\.reference: .*solution\.bin cannot be read"):
        judge_of(openai_server, judge(openai_server, "  reference: solution.bin\n"))


# --- files ------------------------------------------------------------------------------


def test_files_select_the_case_files_the_judge_grades(
    openai_server: FakeLLM, write_config, make_case, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/app/... is the case (rewardkit's workspace); a dir is the files directly in it; a
    listed file the case lacks is said to be missing. No outputs: the record holds the
    whole case."""
    for name, value in openai_server.env.items():
        monkeypatch.setenv(name, value)
    openai_server.queue(openai_server.grade(criteria=verdicts(**ANSWERS)))
    case = make_case(
        {
            "report.md": "The bug is fixed.\n",
            "docs/a.md": "doc a\n",
            "docs/sub/b.md": "doc b, one level down\n",
            "other.md": "not listed\n",
        }
    )
    extra = "  files: [/app/report.md, docs, gone.md]\n"
    config = write_config("judges:\n" + textwrap.indent(judge(openai_server, extra), "  "))
    loaded = load_eval(config)
    record = read_case(case, loaded.config.outputs, loaded.config.annotations).record
    loaded.judges[0].call(JudgeContext(record))
    user = openai_server.received[0].user
    assert "The bug is fixed." in user and "doc a" in user
    assert "doc b" not in user and "not listed" not in user
    assert "[file: gone.md] (not in the case)" in user


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("  files: [notes.md]\n", "'notes.md' is not among eval.yaml's outputs"),
        (
            "  prompt: 'Grade {{ outputs.files[\"report.md\"] }}'\n  files: [report.md]\n",
            "places the case's material itself",
        ),
        ("  files: [../x]\n", "'../x' leads outside the case"),
        ("  mode: individual\n", None),
    ],
)
def test_files_the_record_cannot_hold_are_load_errors(
    openai_server: FakeLLM, judge_of, extra: str, message: str | None
) -> None:
    entry = judge(openai_server, extra)
    if message is None:  # individual without criteria
        entry = f"- name: plain\n  model: {model_for(openai_server)}\n  llm_rubric: Is it good?\n"
        entry += extra
        message = "mode: individual asks each criterion apart; this judge has none"
    with pytest.raises(ConfigError, match=message):
        judge_of(openai_server, entry)


# --- mode: individual ------------------------------------------------------------------


def test_individual_mode_asks_each_criterion_in_its_own_request(
    llm_server: FakeLLM, judge_of
) -> None:
    answer_by_criteria(llm_server, ANSWERS)
    verdict = judge_of(llm_server, judge(llm_server, "  mode: individual\n  samples: 2\n"))()
    assert sorted(asked(request)[0] for request in llm_server.received) == sorted(
        [*ANSWERS, *ANSWERS]
    )
    assert all(len(asked(request)) == 1 for request in llm_server.received)
    (one,) = [r for r in llm_server.received if asked(r) == ["clarity"]][:1]
    assert "`clarity` (an integer from 1 (worst) to 5 (best))" in one.system
    assert "names_bug" not in one.system
    assert verdict.value == pytest.approx((1 + 0.75 + 0.5) / 3)
    assert (
        verdict.details["attempts"] == 6
        and verdict.details["sample_values"] == [pytest.approx((1 + 0.75 + 0.5) / 3)] * 2
    )
    assert [row["name"] for row in verdict.details["criteria"]] == list(ANSWERS)


def test_individual_mode_a_criterion_without_a_verdict_fails_its_sample(
    openai_server: FakeLLM, judge_of
) -> None:
    def route(received: Received) -> Reply:
        (name,) = asked(received)
        if name == "severity":
            return openai_server.grade(criteria={})
        return openai_server.grade(criteria=verdicts(**{name: ANSWERS[name]}))

    openai_server.route = route
    with pytest.raises(LLMJudgeError, match="criterion 'severity': criterion 'severity': the"):
        judge_of(openai_server, judge(openai_server, "  mode: individual\n"))()


def test_individual_mode_in_a_batch(tmp_path: Path, openai_server: FakeLLM) -> None:
    """The batch's LLM stage asks every criterion of every case apart and concludes each
    judge from its requests: the summary counts them."""
    answer_by_criteria(openai_server, ANSWERS)
    for index in range(2):
        (tmp_path / "cases" / f"case-{index}").mkdir(parents=True)
        (tmp_path / "cases" / f"case-{index}" / "report.md").write_text(f"Fixed {index}.\n")
    (tmp_path / "eval.yaml").write_text(
        "judges:\n" + textwrap.indent(judge(openai_server, "  mode: individual\n"), "  ")
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [
            *(VERIFIER, "batch", "--config", str(tmp_path / "eval.yaml")),
            *("--cases", str(tmp_path / "cases"), "--out", str(out), "-j", "2"),
        ],
        capture_output=True,
        text=True,
        env={**client_environment(openai_server), "OPENAI_API_KEY": "sk-x"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(summary_paths(out, None)[0].read_text())
    # two cases (their reports differ: no answer comes from the cache), three criteria
    assert summary["llm"]["requests"] == 6 and summary["llm"]["cache_hits"] == 0
    assert summary["graded"] == 2
    for index in range(2):
        reward = json.loads((out / f"case-{index}" / "reward.json").read_text())
        assert reward["review"] == pytest.approx((1 + 0.75 + 0.5) / 3)
