"""`verifier grade` end to end with LLM judges: a real process against real local servers.

The quality judge is an `llm_rubric` on a [1, 5] scale, graded through a vLLM-style
(OpenAI-compatible) endpoint and through an Anthropic-style one; failures become
explained error records; API keys never reach stdout, stderr or any output file;
`--no-llm` skips the LLM judges without a request.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.llm_servers import FakeLLM, Received, Reply, client_environment

VERIFIER = str(Path(sys.executable).with_name("verifier"))
OPENAI_KEY = "sk-e2e-openai-0123456789abcdefghijklmn"
ANTHROPIC_KEY = "sk-ant-e2e-anthropic-0123456789abcdefghij"
FAST = {
    "VERIFIER_LLM_REQUEST_TIMEOUT": "2",
    "VERIFIER_LLM_BACKOFF": "0.01",
    "VERIFIER_LLM_MAX_WAIT": "0.2",
    "VERIFIER_LLM_RETRIES": "1",
}


def eval_yaml(model: str, extra_judges: str = "") -> str:
    return textwrap.dedent(f"""
        name: llm-e2e
        outputs:
          - path: report.md
        models:
          judge: {model}
        judges:
          - name: has_report
            builtin: file_exists
            arguments: {{path: report.md}}
          - name: quality
            llm_rubric: |
              Score the report from 1 to 5: does it say what was broken and how it was fixed?
            score_range: [1, 5]
        """) + textwrap.indent(textwrap.dedent(extra_judges), "  ")


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "tests").mkdir()
    case = tmp_path / "case"
    case.mkdir()
    (case / "report.md").write_text("The parser crashed on empty input; fixed with a guard.\n")
    (case / "stdout.log").write_text("I read the parser, added a guard and a test.\n")
    return {"config": tmp_path / "tests" / "eval.yaml", "case": case, "out": tmp_path / "out"}


def grade(
    layout: dict[str, Path], server: FakeLLM, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = client_environment(server)
    environment.update(FAST)
    environment.update(OPENAI_API_KEY=OPENAI_KEY, ANTHROPIC_API_KEY=ANTHROPIC_KEY)
    environment.update(env or {})
    return subprocess.run(
        [
            VERIFIER,
            "grade",
            "--config",
            str(layout["config"]),
            "--case",
            str(layout["case"]),
            "--out",
            str(layout["out"]),
            *args,
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )


def per_judge(layout: dict[str, Path]) -> dict[str, dict]:
    return json.loads((layout["out"] / "judges.json").read_text())["per_judge"]


def test_llm_rubric_1_to_5_grades_a_case(llm_server: FakeLLM, layout: dict[str, Path]) -> None:
    layout["config"].write_text(eval_yaml(f"{llm_server.style}/grader-model"))
    llm_server.queue(llm_server.grade(score=4, rationale="Says what broke and how."))
    completed = grade(layout, llm_server)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[0] == "reward=0.7500  [has_report=1.0, quality=4.0]"
    assert json.loads((layout["out"] / "reward.json").read_text()) == {
        "reward": 0.75,
        "has_report": 1.0,
        "quality": 4.0,
    }
    quality = per_judge(layout)["quality"]
    assert quality["status"] == "ok" and quality["judge_type"] == "llm"
    assert quality["rationale"] == "Says what broke and how."
    assert quality["model"] == "grader-model" and quality["provider"] == llm_server.style
    assert quality["usage"] == {"input_tokens": 321, "output_tokens": 12}
    assert quality["latency_s"] >= 0 and quality["truncated"] is False
    (request,) = llm_server.received
    assert "fixed with a guard" in request.user and "added a guard and a test" in request.user
    assert "from 1 (worst) to 5 (best)" in request.system
    details = json.loads((layout["out"] / "reward-details.json").read_text())
    assert details["quality"]["judge"] == {"model": "grader-model"}


def test_failures_are_explained_error_records(
    openai_server: FakeLLM, layout: dict[str, Path]
) -> None:
    layout["config"].write_text(
        eval_yaml(
            "openai/m",
            """
            - name: wild
              llm_rubric: Rate it.
              score_range: [1, 5]
            - name: down
              llm_rubric: Judge it.
              feedback_type: bool
            """,
        )
    )
    replies = {
        "Score the report": openai_server.grade(score=3),
        "Rate it.": openai_server.grade(score=11),
        "Judge it.": openai_server.error(503, "overloaded"),
    }  # judges run concurrently: reply by rubric, not by order
    openai_server.route = lambda request: next(
        reply for text, reply in replies.items() if text in request.user
    )
    completed = grade(layout, openai_server)
    assert completed.returncode == 0, completed.stderr
    judges = per_judge(layout)
    assert judges["quality"]["value"] == 3.0
    assert judges["wild"]["status"] == "error" and judges["wild"]["value"] is None
    assert "answered 11, outside its score_range [1, 5]" in judges["wild"]["error"]
    assert judges["down"]["status"] == "error"
    assert "HTTP 503: overloaded (gave up after 2 attempts)" in judges["down"]["error"]
    assert judges["down"]["attempts"] == 2
    assert "warning: judge down: error:" in completed.stderr


def test_api_keys_never_appear_in_any_output(
    openai_server: FakeLLM, layout: dict[str, Path]
) -> None:
    layout["config"].write_text(
        eval_yaml(
            "openai/m",
            """
            - name: echo
              llm_rubric: Echo.
              feedback_type: bool
            - name: refused
              llm_rubric: Refused.
              feedback_type: bool
            """,
        )
    )
    echoed = f"Bearer {OPENAI_KEY} (also {ANTHROPIC_KEY})"

    def route(request: Received) -> Reply:
        if "Echo." in request.user:  # a proxy that leaks the key into the answer
            return openai_server.grade(passed=True, rationale=f"header was {echoed}")
        if "Refused." in request.user:  # an error body that echoes the request's header
            return openai_server.error(401, f"invalid api key {echoed}")
        return openai_server.grade(score=5, rationale=f"key {OPENAI_KEY}")

    openai_server.route = route
    completed = grade(layout, openai_server, "--debug")
    assert completed.returncode == 0, completed.stderr
    assert any(OPENAI_KEY in r.headers.get("authorization", "") for r in openai_server.received)
    written = {path.name: path.read_text() for path in layout["out"].iterdir()}
    assert set(written) >= {"judges.json", "reward.json", "reward.txt", "reward-details.json"}
    for where, text in {"stdout": completed.stdout, "stderr": completed.stderr, **written}.items():
        assert OPENAI_KEY not in text, where
        assert ANTHROPIC_KEY not in text, where
    judges = per_judge(layout)
    assert "[redacted]" in judges["echo"]["rationale"]
    assert "[redacted]" in judges["refused"]["error"]


@pytest.mark.parametrize("switch", [["--no-llm"], []])
def test_no_llm_skips_llm_judges(
    openai_server: FakeLLM, layout: dict[str, Path], switch: list[str]
) -> None:
    layout["config"].write_text(eval_yaml("openai/m"))
    env = {} if switch else {"VERIFIER_NO_LLM": "1"}
    completed = grade(layout, openai_server, *switch, env=env)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[0] == "reward=1.0000  [has_report=1.0, quality=skipped]"
    quality = per_judge(layout)["quality"]
    assert (quality["status"], quality["value"], quality["error"]) == ("skipped", None, None)
    assert openai_server.received == []


@pytest.mark.slow
def test_hanging_endpoint_ends_before_the_judge_timeout_with_a_reason(
    openai_server: FakeLLM, layout: dict[str, Path]
) -> None:
    config = eval_yaml("openai/m").replace("score_range", "timeout: 2\n    score_range")
    layout["config"].write_text(config)
    openai_server.default = openai_server.hang()
    completed = grade(layout, openai_server, env={"VERIFIER_LLM_REQUEST_TIMEOUT": "0.5"})
    assert completed.returncode == 0, completed.stderr
    quality = per_judge(layout)["quality"]
    assert quality["status"] == "error"
    assert "no response within 0.5s (request timeout)" in quality["error"]


def test_llm_cache_is_opt_in_and_a_regrade_sends_nothing(
    llm_server: FakeLLM, layout: dict[str, Path], tmp_path: Path
) -> None:
    layout["config"].write_text(eval_yaml(f"{llm_server.style}/m"))
    llm_server.default = llm_server.grade(score=4)
    assert grade(layout, llm_server).returncode == 0  # no cache unless asked
    cache = tmp_path / "answers"
    for _ in range(2):
        completed = grade(layout, llm_server, "--llm-cache", str(cache))
        assert completed.returncode == 0, completed.stderr
    assert len(llm_server.received) == 2  # the uncached run and the first cached one
    assert per_judge(layout)["quality"]["cached"] is True
    entries = list(cache.rglob("*.json"))
    assert len(entries) == 1
    assert OPENAI_KEY not in entries[0].read_text() and ANTHROPIC_KEY not in entries[0].read_text()
    env = {"VERIFIER_LLM_CACHE": str(cache), "VERIFIER_NO_LLM_CACHE": "1"}
    assert grade(layout, llm_server, env=env).returncode == 0
    assert len(llm_server.received) == 3 and per_judge(layout)["quality"]["cached"] is False


def test_an_unusable_llm_cache_dir_is_exit_4(
    openai_server: FakeLLM, layout: dict[str, Path], tmp_path: Path
) -> None:
    layout["config"].write_text(eval_yaml("openai/m"))
    (tmp_path / "file").write_text("x")
    completed = grade(layout, openai_server, "--llm-cache", str(tmp_path / "file" / "cache"))
    assert completed.returncode == 4
    assert "the LLM answer cache cannot be created" in completed.stderr
    assert not (layout["out"] / "reward.json").exists()


def test_criteria_a_panel_and_the_guard_through_grade(
    openai_server: FakeLLM, layout: dict[str, Path]
) -> None:
    """One judge with every new key, graded by the real command in its judge process: two
    models answer each criterion in one request each; judges.json, reward-details.json and
    reward.json carry the verdicts, the members, the guard and the cost."""
    layout["config"].write_text(
        textwrap.dedent("""
        name: llm-e2e
        outputs: [report.md]
        judges:
          - name: review
            llm_rubric: Grade the report.
            panel: [openai/gpt-4o, openai/gpt-4o-mini]
            guard: flag
            criteria:
              - {name: fixed, description: 'Does it say how it was fixed?'}
              - {name: clarity, description: 'How clear is it?', type: likert, weight: 3}
        """)
    )

    def route(request: Received) -> Reply:
        clarity = 5 if request.body["model"] == "gpt-4o" else 3
        entries = {
            "fixed": {"rationale": "it does", "score": True},
            "clarity": {"rationale": "fine", "score": clarity},
        }
        return openai_server.grade(criteria=entries)

    openai_server.route = route
    completed = grade(layout, openai_server)
    assert completed.returncode == 0, completed.stderr
    assert len(openai_server.received) == 2
    review = per_judge(layout)["review"]
    assert review["status"] == "ok" and review["panel_aggregate"] == "median"
    # per criterion over the two members: fixed 1.0; clarity the lower median of 1.0 and
    # 0.5 (a Likert criterion's scale is its points: an even panel stays on one)
    assert review["value"] == pytest.approx((1.0 + 3 * 0.5) / 4)
    assert [m["model"] for m in review["panel"]] == ["gpt-4o", "gpt-4o-mini"]
    assert review["guard"] == {"flagged": False, "on_detect": "flag", "findings": []}
    expected_cost = (321 * 2.5 + 12 * 10 + 321 * 0.15 + 12 * 0.6) / 1e6
    assert review["cost_usd"] == pytest.approx(expected_cost)
    details = json.loads((layout["out"] / "reward-details.json").read_text())
    assert [c["name"] for c in details["review"]["criteria"]] == ["fixed", "clarity"]
    assert json.loads((layout["out"] / "reward.json").read_text())["review"] == review["value"]
