"""reward-details.json: each judge's row with the weight it really has in the reward, and
the composition row (a rewardkit group) that `harbor view` shows, for every reward mode.

Real eval.yaml files and cases graded by grading.grade and written by write_outputs.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.viewer import viewer_accepts
from verifier.grading import grade, load_eval
from verifier.output import write_outputs
from verifier.parsers import parse_reward_keys

JUDGES = """\
judges:
  - {name: gate, check: 'return outputs["files"].get("ok.txt") is not None'}
  - {name: a, score_range: [0, 10], check: 'return 8'}
  - {name: b, score_range: [0, 10], check: 'return 2'}
  - {name: c, score_range: [0, 10], check: 'return 5'}
"""


@pytest.fixture
def details(tmp_path: Path) -> Callable[..., dict]:
    def write(reward: str, files: dict[str, str] | None = None) -> dict:
        config = tmp_path / "eval.yaml"
        config.write_text(JUDGES + textwrap.dedent(reward))
        case = tmp_path / "case"
        case.mkdir(exist_ok=True)
        for name, text in (files if files is not None else {"ok.txt": "yes"}).items():
            (case / name).write_text(text)
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        write_outputs(out, grade(load_eval(config), case), durable=False)
        document = json.loads((out / "reward-details.json").read_text())
        assert viewer_accepts(document), document
        return document

    return write


def weights(document: dict) -> dict[str, float]:
    """The weights as the judges' rows say them, and as the composition row does."""
    rows = {
        name: row["criteria"][0]["weight"] for name, row in document.items() if name != "reward"
    }
    group = {part["name"]: part["weight"] for part in document["reward"]["components"]}
    assert rows == group
    return rows


def test_weighted_declared_weights_and_zero_for_the_rest(details: Callable[..., dict]) -> None:
    document = details("reward: {weights: {a: 3, b: 1}}\n")
    assert weights(document) == {"gate": 0.0, "a": 3.0, "b": 1.0, "c": 0.0}
    group = document["reward"]
    assert group["kind"] == "group" and group["threshold"] is None
    assert group["score"] == pytest.approx((3 * 0.8 + 1 * 0.2) / 4)
    assert group["aggregation"] == "weighted (a=3, b=1), gate on, normalized: a, b"
    assert group["mode"] == "weighted"
    assert group["gate"] == {"enabled": True, "passed": True, "failed_judges": []}
    (a,) = [part for part in group["components"] if part["name"] == "a"]
    assert a["detail"] == {
        "kind": "check",
        "score": 0.8,
        "criteria": [{"name": "a", "value": 0.8, "weight": 3.0, "raw": 8}],
    }
    assert document["a"]["score"] == 0.8


def test_the_default_mean_weighs_each_number_once_and_gates_none(
    details: Callable[..., dict],
) -> None:
    document = details("")
    assert weights(document) == {"gate": 0.0, "a": 1.0, "b": 1.0, "c": 1.0}
    assert document["reward"]["score"] == pytest.approx(0.5)
    assert document["reward"]["aggregation"].startswith("default (boolean judges gate")


def test_a_failed_gate_says_why_the_reward_is_zero(details: Callable[..., dict]) -> None:
    document = details("reward: {weights: {a: 1}}\n", files={})
    assert document["reward"]["score"] == 0.0
    assert document["reward"]["aggregation"].endswith("; gate failed: gate, so 0")
    assert document["reward"]["gate"]["failed_judges"] == ["gate"]


def test_a_single_judge_and_an_expression(details: Callable[..., dict]) -> None:
    document = details("reward: {judge: c, normalize: true}\n")
    assert weights(document) == {"gate": 0.0, "a": 0.0, "b": 0.0, "c": 1.0}
    assert document["reward"]["aggregation"].startswith("judge c (normalized")
    document = details("reward: {formula: 'max(a, b) * c'}\n")
    assert weights(document) == {"gate": 0.0, "a": 1.0, "b": 1.0, "c": 1.0}
    assert document["reward"]["score"] == pytest.approx(0.8 * 0.5)
    assert document["reward"]["aggregation"].startswith("expression 'max(a, b) * c'")


def test_a_value_that_is_not_finite_is_refused_before_reward_json_is_written() -> None:
    from verifier.errors import VerifierError
    from verifier.output import reward_json
    from verifier.results import Composition, Grading, JudgeResult, Status

    grading = Grading(
        config_name="e",
        results=(JudgeResult("j", "check", Status.OK, value=float("nan")),),
        composition=Composition(1.0, "default", True, (), {}),
    )
    with pytest.raises(VerifierError, match=r"reward.json: j is not a finite number"):
        reward_json(grading)
    assert reward_json(grading, keys=parse_reward_keys("reward")) == {"reward": 1.0}
