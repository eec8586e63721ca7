"""`panel:` several models grade a case and one rule combines them, against the local
servers of both wire formats (a panel may mix them): each rule, an even panel's tie,
members that fail, criteria judged by a panel, and what judges.json records."""

from __future__ import annotations

import pytest

from tests.llm_servers import FakeLLM, Received, Reply
from verifier.errors import ConfigError
from verifier.grading import load_eval
from verifier.judges.llm import panel
from verifier.judges.llm.judge import LLMJudgeError

pytestmark = pytest.mark.usefixtures("llm_env")


def by_model(server: FakeLLM, **replies: Reply) -> None:
    """The server answers each model with its reply."""

    def route(request: Received) -> Reply:
        return replies[request.body["model"]]

    server.route = route


def panel_judge(models: str, extra: str = "score_range: [1, 5]") -> str:
    return f"""
- name: quality
  llm_rubric: Is the report clear?
  panel: {models}
  {extra}
"""


def test_each_model_is_asked_and_the_median_taken(llm_server: FakeLLM, judge_of) -> None:
    by_model(
        llm_server,
        a=llm_server.grade(score=2, rationale="weak"),
        b=llm_server.grade(score=4, rationale="good"),
        c=llm_server.grade(score=5, rationale="great"),
    )
    style = llm_server.style
    verdict = judge_of(llm_server, panel_judge(f"[{style}/a, {style}/b, {style}/c]"))()
    assert sorted(r.body["model"] for r in llm_server.received) == ["a", "b", "c"]
    assert verdict.value == 4.0 and verdict.rationale == "b: good"
    details = verdict.details
    assert details["panel_aggregate"] == "median" and details["member_values"] == [2.0, 4.0, 5.0]
    assert details["agreement"] == 0.3333 and details["spread"] == 3.0
    assert [m["model"] for m in details["panel"]] == ["a", "b", "c"]
    assert [m["value"] for m in details["panel"]] == [2.0, 4.0, 5.0]
    assert details["panel"][0]["usage"] == {"input_tokens": 321, "output_tokens": 12}
    assert details["model"] == "a, b, c" and details["attempts"] == 3


def test_a_panel_mixes_the_two_wire_formats(judge_of, monkeypatch: pytest.MonkeyPatch) -> None:
    openai, anthropic = FakeLLM("openai").start(), FakeLLM("anthropic").start()
    try:
        openai.default = openai.grade(passed=True)
        anthropic.default = anthropic.grade(passed=False)
        for name, value in {**openai.env, **anthropic.env}.items():
            monkeypatch.setenv(name, value)
        judge = panel_judge("[openai/gpt-x, anthropic/claude-y]", "feedback_type: bool")
        verdict = judge_of(None, judge)()
    finally:
        openai.stop()
        anthropic.stop()
    assert verdict.value is False  # 1 of 2: an even split is not a majority
    assert verdict.details["panel_aggregate"] == "majority"
    assert [m["provider"] for m in verdict.details["panel"]] == ["openai", "anthropic"]
    assert verdict.details["provider"] == "openai, anthropic"


@pytest.mark.parametrize(
    ("rule", "scores", "value"),
    [
        ("median", (1, 2, 4, 5), 2.0),  # an even panel on an integer scale: the lower median
        ("mean", (1, 2, 4, 5), 3.0),
        ("min", (3, 2, 4, 5), 2.0),
        ("majority", (4, 2, 4, 5), 4.0),
        ("majority", (2, 4, 5, 3), 2.0),  # no majority: the lowest of the tied
    ],
)
def test_the_panel_rules(
    openai_server: FakeLLM, judge_of, rule: str, scores: tuple, value: float
) -> None:
    by_model(
        openai_server,
        **{m: openai_server.grade(score=s) for m, s in zip("abcd", scores, strict=True)},
    )
    judge = panel_judge(
        "[openai/a, openai/b, openai/c, openai/d]", f"score_range: [1, 5]\n  aggregate: {rule}"
    )
    assert judge_of(openai_server, judge)().value == value


def test_an_even_panel_on_a_fractional_scale_takes_the_middle(
    openai_server: FakeLLM, judge_of
) -> None:
    by_model(openai_server, a=openai_server.grade(score=0.2), b=openai_server.grade(score=0.5))
    judge = panel_judge("[openai/a, openai/b]", "score_range: [0, 1]")
    assert judge_of(openai_server, judge)().value == pytest.approx(0.35)


def test_a_failing_minority_is_recorded_and_left_out(openai_server: FakeLLM, judge_of) -> None:
    by_model(
        openai_server,
        a=openai_server.grade(score=4),
        b=openai_server.grade(score=5),
        c=openai_server.error(401, "bad key"),
    )
    verdict = judge_of(openai_server, panel_judge("[openai/a, openai/b, openai/c]"))()
    assert verdict.value == 4.0  # median_low of 4, 5
    (failed,) = [m for m in verdict.details["panel"] if m["value"] is None]
    assert failed["model"] == "c" and "HTTP 401: bad key" in failed["error"]


def test_a_failing_majority_is_an_error(openai_server: FakeLLM, judge_of) -> None:
    by_model(
        openai_server,
        a=openai_server.grade(score=4),
        b=openai_server.text("no idea"),
        c=openai_server.error(401, "bad key"),
    )
    with pytest.raises(LLMJudgeError, match=r"panel: 1 of 3 models gave a value") as caught:
        judge_of(openai_server, panel_judge("[openai/a, openai/b, openai/c]"))()
    assert "model b: no score found" in str(caught.value)
    assert len(caught.value.details["panel"]) == 3


def test_min_needs_every_member(openai_server: FakeLLM, judge_of) -> None:
    by_model(
        openai_server,
        a=openai_server.grade(score=4),
        b=openai_server.grade(score=5),
        c=openai_server.text("no idea"),
    )
    judge = panel_judge("[openai/a, openai/b, openai/c]", "score_range: [1, 5]\n  aggregate: min")
    with pytest.raises(LLMJudgeError, match=r"min needs every model"):
        judge_of(openai_server, judge)()


def test_each_member_asks_its_samples(openai_server: FakeLLM, judge_of) -> None:
    replies = {"a": [3, 3, 5], "b": [1, 2, 2]}

    def route(request: Received) -> Reply:
        return openai_server.grade(score=replies[request.body["model"]].pop())

    openai_server.route = route
    judge = panel_judge("[openai/a, openai/b]", "score_range: [1, 5]\n  samples: 3")
    verdict = judge_of(openai_server, judge)()
    assert len(openai_server.received) == 6
    assert [m["value"] for m in verdict.details["panel"]] == [3.0, 2.0]
    # in request order, which the threads' arrival at the server need not follow
    assert sorted(verdict.details["panel"][0]["sample_values"]) == [3.0, 3.0, 5.0]
    assert verdict.value == 2.0  # median_low of 3, 2


def test_a_panel_grades_criteria_per_criterion(openai_server: FakeLLM, judge_of) -> None:
    def answer(fixed: bool, clarity: int) -> Reply:
        entries = {
            "fixed": {"rationale": "r", "score": fixed},
            "clarity": {"rationale": "r", "score": clarity},
        }
        return openai_server.grade(criteria=entries)

    by_model(openai_server, a=answer(True, 5), b=answer(True, 1), c=answer(False, 3))
    judge = """
- name: quality
  panel: [openai/a, openai/b, openai/c]
  criteria:
    - {name: fixed, description: 'Is it fixed?'}
    - {name: clarity, description: 'How clear?', type: likert}
"""
    verdict = judge_of(openai_server, judge)()
    rows = {row["name"]: row for row in verdict.details["criteria"]}
    assert rows["fixed"]["value"] == 1.0  # 2 of 3 say yes
    assert rows["clarity"]["value"] == 0.5  # the median of 1.0, 0.0, 0.5
    assert verdict.value == 0.75
    assert verdict.details["member_values"] == [1.0, 0.5, 0.25]


PANEL_MISTAKES = [
    ("panel: [openai/a]", "panel: must list 2 to 9 models"),
    ("panel: [openai/a, openai/b]\n    model: openai/c", "set model or panel, not both"),
    ("panel: [openai/a, openai/b]\n    aggregate: all-pass", "'all-pass' is a criteria rule"),
    (
        "panel: [openai/a, openai/b]\n    feedback_type: bool\n    aggregate: mean",
        "mean of pass/fail answers is a fraction",
    ),
    ("panel: {models: [openai/a, openai/b], aggregate: average}", "'average' must be one of"),
    ("panel: [openai/a, {model: b, provider: azure}]", "panel[1].provider: 'azure' must be one of"),
    ("aggregate: median", "combines criteria or a panel's models, and this judge has neither"),
]


@pytest.mark.parametrize(("judge", "problem"), PANEL_MISTAKES)
def test_panel_mistakes_are_load_errors(write_config, judge: str, problem: str) -> None:
    text = f"name: t\njudges:\n  - name: j\n    llm_rubric: ok?\n    {judge}\n"
    with pytest.raises(ConfigError) as caught:
        load_eval(write_config(text))
    assert problem in caught.value.message, caught.value.message


def test_the_combining_rules_on_known_values() -> None:
    assert panel.combine([1.0, 2.0, 4.0, 5.0], "median", discrete=False) == 3.0
    assert panel.combine([1.0, 2.0, 4.0, 5.0], "median", discrete=True) == 2.0
    assert panel.combine([3.0, 3.0, 1.0], "majority", discrete=True) == 3.0
    assert panel.combine([0.5, 0.25], "mean", discrete=False) == 0.375
    assert panel.combine_pass_fail([True, True, False], "majority") is True
    assert panel.combine_pass_fail([True, False], "median") is False
    assert panel.combine_pass_fail([True, True, False], "min") is False
    assert panel.enough_members("median", 2, 3) and not panel.enough_members("median", 1, 2)
    assert not panel.enough_members("min", 2, 3)
