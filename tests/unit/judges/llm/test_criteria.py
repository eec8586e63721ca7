"""`criteria:` many rubric points in one request, against the local servers of both wire
formats: what the prompt and the schema ask, each aggregation rule, rewardkit's shapes
as written, and every way one criterion's verdict can be missing or wrong."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from tests.llm_judging import model_for
from tests.llm_servers import FakeLLM
from verifier.errors import ConfigError
from verifier.grading import grade, load_eval
from verifier.judges.llm.criteria import aggregate
from verifier.judges.llm.judge import LLMJudgeError
from verifier.judges.llm.spec import CriterionSpec
from verifier.output import reward_details
from verifier.results import Status

pytestmark = pytest.mark.usefixtures("llm_env")

THREE = """
- name: review
  llm_rubric: Grade the bug report.
  model: MODEL
  criteria:
    - name: says_what_broke
      description: Does the report say what was broken?
    - name: clarity
      description: How clear is the report?
      type: likert
      points: 5
      weight: 2
    - name: coverage
      description: How much of the fix does it explain, in tenths?
      type: numeric
      min: 0
      max: 10
"""


def three(server: FakeLLM, extra: str = "") -> str:
    return THREE.replace("MODEL", model_for(server)) + extra


def verdicts(**entries: object) -> dict:
    """criteria={name: {rationale, score}} as a model answers."""
    return {
        name: {"rationale": f"because {name}", "score": score} for name, score in entries.items()
    }


def tool_schema(server: FakeLLM) -> dict:
    tool = server.received[0].body["tools"][0]
    return tool["function"]["parameters"] if server.style == "openai" else tool["input_schema"]


def test_every_criterion_is_graded_in_one_request(llm_server: FakeLLM, judge_of) -> None:
    llm_server.queue(
        llm_server.grade(criteria=verdicts(says_what_broke=True, clarity=4, coverage=5))
    )
    verdict = judge_of(llm_server, three(llm_server))()
    (request,) = llm_server.received
    assert "`clarity` (an integer from 1 (worst) to 5 (best)): How clear" in request.system
    assert "`coverage` (a number from 0 to 10)" in request.system
    assert "`says_what_broke` (true for yes, false for no)" in request.system
    schema = tool_schema(llm_server)["properties"]["criteria"]
    assert schema["required"] == ["says_what_broke", "clarity", "coverage"]
    assert schema["properties"]["clarity"]["properties"]["score"]["type"] == "integer"
    assert schema["properties"]["says_what_broke"]["properties"]["score"]["type"] == "boolean"
    # weighted mean of 1.0 (w 1), 0.75 (w 2), 0.5 (w 1) on the default [0, 1] scale
    assert verdict.value == pytest.approx((1.0 + 2 * 0.75 + 0.5) / 4)
    rows = {row["name"]: row for row in verdict.details["criteria"]}
    assert rows["clarity"] == {
        "name": "clarity",
        "type": "likert",
        "verdict": 4.0,
        "value": 0.75,
        "weight": 2.0,
        "passed": False,
        "rationale": "because clarity",
    }
    assert rows["says_what_broke"]["passed"] is True and rows["coverage"]["value"] == 0.5
    assert verdict.details["aggregate"] == {"rule": "weighted-mean"}
    assert verdict.rationale.splitlines() == [
        "says_what_broke: yes - because says_what_broke",
        "clarity: 4 - because clarity",
        "coverage: 5 - because coverage",
    ]


@pytest.mark.parametrize(
    ("rule", "answers", "value"),
    [
        ("all-pass", {"a": True, "b": 5}, 1.0),
        ("all-pass", {"a": True, "b": 4}, 0.0),
        ("any-pass", {"a": False, "b": 5}, 1.0),
        ("any-pass", {"a": False, "b": 3}, 0.0),
        ("threshold\n  threshold: 0.7", {"a": True, "b": 2}, 0.0),  # mean (1 + .25) / 2
        ("threshold\n  threshold: 0.7", {"a": True, "b": 3}, 1.0),  # mean 0.75
        ("all_pass", {"a": True, "b": 5}, 1.0),  # rewardkit's spelling
    ],
)
def test_the_aggregation_rules(
    openai_server: FakeLLM, judge_of, rule: str, answers: dict, value: float
) -> None:
    openai_server.queue(openai_server.grade(criteria=verdicts(**answers)))
    judge = f"""
- name: j
  model: openai/m
  aggregate: {rule}
  criteria:
    - {{name: a, description: 'Is there a test?'}}
    - {{name: b, description: 'How good is it?', type: likert}}
"""
    assert judge_of(openai_server, judge)().value == value


def test_a_required_criterion_that_fails_gives_the_lowest_value(
    openai_server: FakeLLM, judge_of
) -> None:
    openai_server.queue(openai_server.grade(criteria=verdicts(safe=False, style=5)))
    judge = """
- name: j
  model: openai/m
  score_range: [1, 5]
  criteria:
    - {name: safe, description: 'Is it free of secrets?', required: true}
    - {name: style, description: 'How readable?', type: likert}
"""
    verdict = judge_of(openai_server, judge)()
    assert verdict.value == 1.0  # the bottom of [1, 5], whatever style got
    assert verdict.details["criteria"][0]["required"] is True


def test_negate_inverts_a_criterion(openai_server: FakeLLM, judge_of) -> None:
    openai_server.queue(openai_server.grade(criteria=verdicts(jargon=True, padding=4)))
    judge = """
- name: j
  model: openai/m
  criteria:
    - {name: jargon, description: 'Is it full of jargon?', negate: true}
    - {name: padding, description: 'How padded is it?', type: likert, negate: true}
"""
    verdict = judge_of(openai_server, judge)()
    assert verdict.value == pytest.approx((0.0 + 0.25) / 2)
    assert [row["negate"] for row in verdict.details["criteria"]] == [True, True]


REWARDKIT = """
- name: quality
  model: openai/m
  aggregate: required_pass
  criteria:
    - description: Is the code correct?
      type: binary
    - description: Is the code idiomatic?
      type: likert
      points: 3
      weight: 0.5
      optional: true
    - description: Share of edge cases handled
      type: numeric
      min: 0
      max: 1
      annotations: {source: imported-rubric, importance: high}
    - description: Documentation
      type: rubric
      levels: [none, partial, complete]
      id: doc-1
"""


def test_a_rewardkit_judge_moves_across_as_written(openai_server: FakeLLM, judge_of) -> None:
    """rewardkit's [[criterion]] tables as YAML: names from the descriptions, its types,
    optional, annotations, id and its aggregation names."""
    openai_server.queue(
        openai_server.grade(
            criteria=verdicts(
                is_the_code_correct=True,
                is_the_code_idiomatic=1,
                share_of_edge_cases_handled=1,
                documentation=2,
            )
        )
    )
    verdict = judge_of(openai_server, REWARDKIT)()
    assert verdict.value == 1.0  # the optional likert at 1 of 3 does not count
    system = openai_server.received[0].system
    assert (
        "`documentation` (an integer from 0 to 2, where 0 = none; 1 = partial; 2 = complete)"
        in system
    )
    rows = verdict.details["criteria"]
    assert [row["name"] for row in rows] == [
        "is_the_code_correct",
        "is_the_code_idiomatic",
        "share_of_edge_cases_handled",
        "documentation",
    ]
    assert rows[1]["optional"] is True and rows[3]["id"] == "doc-1"


def test_a_missing_verdict_is_an_error_naming_the_criterion(llm_server: FakeLLM, judge_of) -> None:
    llm_server.queue(llm_server.grade(criteria=verdicts(says_what_broke=True, clarity=4)))
    with pytest.raises(LLMJudgeError, match="criterion 'coverage': the answer has no verdict"):
        judge_of(llm_server, three(llm_server))()


INVALID_VERDICTS = [
    (
        {"says_what_broke": True, "clarity": 7, "coverage": 1},
        r"criterion 'clarity': answered 7, outside 1..5",
    ),
    (
        {"says_what_broke": True, "clarity": 3.5, "coverage": 1},
        "criterion 'clarity': answered 3.5, not a whole number",
    ),
    (
        {"says_what_broke": "maybe", "clarity": 3, "coverage": 1},
        "criterion 'says_what_broke': answered 'maybe', not yes or no",
    ),
    (
        {"says_what_broke": True, "clarity": 3, "coverage": 11},
        "criterion 'coverage': answered 11, outside 0..10",
    ),
    (
        {"says_what_broke": True, "clarity": None, "coverage": 1},
        "criterion 'clarity': answered None, not a number",
    ),
]


@pytest.mark.parametrize(("answers", "problem"), INVALID_VERDICTS)
def test_an_invalid_verdict_is_an_error_naming_the_criterion(
    openai_server: FakeLLM, judge_of, answers: dict, problem: str
) -> None:
    openai_server.queue(openai_server.grade(criteria=verdicts(**answers)))
    with pytest.raises(LLMJudgeError, match=problem) as caught:
        judge_of(openai_server, three(openai_server))()
    assert caught.value.details["answers"]  # what the model said is kept


def test_an_unusable_minority_of_samples_is_recorded_and_the_rest_reduced(
    openai_server: FakeLLM, judge_of
) -> None:
    openai_server.queue(
        openai_server.grade(criteria=verdicts(says_what_broke=True, clarity=5, coverage=10)),
        openai_server.grade(criteria=verdicts(says_what_broke=True, clarity=3)),  # no coverage
        openai_server.grade(criteria=verdicts(says_what_broke=False, clarity=3, coverage=4)),
    )
    verdict = judge_of(openai_server, three(openai_server, "  samples: 3\n"))()
    assert verdict.details["failed_samples"] == [
        "criterion 'coverage': the answer has no verdict for it (it has 'says_what_broke', 'clarity')"
    ]
    rows = {row["name"]: row for row in verdict.details["criteria"]}
    # two usable samples: each criterion's lower median (discrete) or median (numeric)
    assert rows["says_what_broke"]["verdict"] is False  # a 1-1 split fails
    assert rows["clarity"]["value"] == 0.5  # median_low of 1.0, 0.5
    assert rows["coverage"]["value"] == pytest.approx(0.7)  # median of 1.0, 0.4
    assert verdict.value == pytest.approx((0 + 2 * 0.5 + 0.7) / 4)
    assert len(verdict.details["sample_values"]) == 2


def test_criteria_in_a_text_answer(openai_server: FakeLLM, judge_of) -> None:
    answer = {"criteria": verdicts(says_what_broke=True, clarity=5, coverage=10)}
    openai_server.queue(openai_server.text(f"Here:\n```json\n{json.dumps(answer)}\n```"))
    assert judge_of(openai_server, three(openai_server))().value == 1.0


def test_a_pass_fail_criteria_judge(openai_server: FakeLLM, judge_of) -> None:
    openai_server.queue(
        openai_server.grade(criteria=verdicts(says_what_broke=True, clarity=5, coverage=10))
    )
    verdict = judge_of(openai_server, three(openai_server, "  feedback_type: bool\n"))()
    assert verdict.value is True and verdict.details["aggregate"] == {"rule": "all-pass"}


def test_the_value_lands_on_the_declared_scale(openai_server: FakeLLM, judge_of) -> None:
    openai_server.queue(
        openai_server.grade(criteria=verdicts(says_what_broke=True, clarity=3, coverage=0))
    )
    verdict = judge_of(openai_server, three(openai_server, "  score_range: [1, 5]\n"))()
    assert verdict.value == pytest.approx(1 + 4 * (1.0 + 2 * 0.5 + 0.0) / 4)


def test_judges_json_and_reward_details_show_every_criterion(
    openai_server: FakeLLM, write_config, make_case, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in openai_server.env.items():
        monkeypatch.setenv(name, value)
    openai_server.default = openai_server.grade(
        criteria=verdicts(says_what_broke=True, clarity=4, coverage=5)
    )
    judges = "\n".join("  " + line for line in three(openai_server).strip().splitlines())
    config = write_config(f"name: t\noutputs: [report.md]\njudges:\n{judges}\n")
    grading = grade(load_eval(config), make_case({"report.md": "fixed"}))
    (result,) = grading.results
    assert result.status is Status.OK and len(result.details["criteria"]) == 3
    row = reward_details(grading)["review"]
    assert [c["name"] for c in row["criteria"]] == ["says_what_broke", "clarity", "coverage"]
    assert row["criteria"][1] == {
        "name": "clarity",
        "value": 0.75,
        "weight": 2.0,
        "raw": 4.0,
        "reasoning": "because clarity",
    }
    assert grading.reward == pytest.approx(result.value)  # [0, 1]: normalized as it is


def test_the_aggregate_of_known_values() -> None:
    criteria = [
        CriterionSpec("a", "A", weight=3.0),
        CriterionSpec("b", "B", weight=1.0),
        CriterionSpec("c", "C", optional=True),
    ]
    assert aggregate(criteria, [1.0, 0.0, 0.0], "weighted-mean", 0.5) == 0.6  # 3 of 5
    assert aggregate(criteria, [1.0, 0.0, 0.0], "threshold", 0.6) == 1.0
    assert aggregate(criteria, [1.0, 0.0, 0.0], "threshold", 0.61) == 0.0
    assert aggregate(criteria, [1.0, 1.0, 0.0], "required-pass", 0.5) == 1.0
    assert aggregate(criteria, [1.0, 0.0, 1.0], "required-pass", 0.5) == 0.0
    assert aggregate(criteria, [0.0, 0.0, 1.0], "any-pass", 0.5) == 1.0
    required = [attrs.evolve(criteria[0], required=True), criteria[1]]
    assert aggregate(required, [0.9, 1.0], "any-pass", 0.5) == 0.0


LOAD_MISTAKES = [
    (
        "- {description: x, files: [/app/main.py]}",
        "",
        "criteria[0].files: per-criterion files are not read",
    ),
    (
        "- {description: x}\n- {description: x}",
        "",
        "criteria[1].name: duplicate criterion name 'x'",
    ),
    (
        "- {description: x, points: 3}",
        "",
        "criteria[0].points: is for likert criteria; this one is binary",
    ),
    (
        "- {description: x, type: likert, points: 1}",
        "",
        "criteria[0].points: 1 must be a finite number >= 2",
    ),
    (
        "- {description: x, type: numeric, min: 2, max: 1}",
        "",
        "criteria[0].max: 1 must be greater than min",
    ),
    (
        "- {description: x, type: rubric, levels: [only]}",
        "",
        "criteria[0].levels: must list 2 to 10",
    ),
    (
        "- {description: x, name: 'has space'}",
        "",
        "criteria[0].name: 'has space' must be 1-64 letters",
    ),
    ("- {description: x, weight: -1}", "", "criteria[0].weight: -1 must be a finite number >= 0"),
    (
        "- {description: x, wieght: 2}",
        "",
        "criteria[0].wieght: unknown criterion key (did you mean 'weight'?)",
    ),
    (
        "- {description: x, required: true, optional: true}",
        "",
        "a criterion is required or optional, not both",
    ),
    ("- {description: x, weight: 0}", "", "weighted-mean needs a criterion with a weight above 0"),
    ("- {description: x}", "aggregate: weighted-sum", "weighted-sum is not supported"),
    ("- {description: x}", "aggregate: median", "'median' is a panel rule"),
    ("- {description: x}", "threshold: 0.5", "threshold: is read only with aggregate: threshold"),
    (
        "- {description: x}",
        "feedback_type: bool\n  aggregate: weighted-mean",
        "weighted-mean gives a fraction and this judge is pass/fail",
    ),
    (
        "- {description: x}",
        "feedback_type: int\n  score_range: [1, 5]",
        "gives a fraction and this judge's values are whole",
    ),
    ("[]", "", "criteria: must be a non-empty list"),
]


@pytest.mark.parametrize(("criteria", "extra", "problem"), LOAD_MISTAKES)
def test_criteria_mistakes_are_load_errors(
    write_config, criteria: str, extra: str, problem: str
) -> None:
    body = "\n".join("      " + line for line in criteria.splitlines())
    text = (
        f"name: t\njudges:\n  - name: j\n    model: openai/m\n    {extra}\n    criteria:\n{body}\n"
    )
    if criteria == "[]":
        text = "name: t\njudges:\n  - name: j\n    model: openai/m\n    criteria: []\n"
    with pytest.raises(ConfigError) as caught:
        load_eval(
            write_config(
                text.replace("\n  aggregate", "\n    aggregate").replace(
                    "\n  score_range", "\n    score_range"
                )
            )
        )
    assert problem in caught.value.message, caught.value.message


def test_a_criteria_judge_needs_no_prompt(openai_server: FakeLLM, judge_of, tmp_path: Path) -> None:
    openai_server.queue(openai_server.grade(criteria=verdicts(fixed=True)))
    judge = "- name: j\n  model: openai/m\n  criteria: [{name: fixed, description: 'Is it fixed?'}]"
    assert judge_of(openai_server, judge)().value == 1.0
    user = openai_server.received[0].user
    assert user.startswith("Grade the agent's work against each criterion.")
    assert "The bug is fixed." in user  # the material is appended
