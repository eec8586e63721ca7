"""`verifier batch --calibrate`: the agreement statistics against values scipy and sklearn
compute (transcribed: neither is a dependency), and real batches over a small labelled set
against a local server: a labels file and dataset annotations, the report's model and
prompt hash, --min-agreement's exit code, and label mistakes refused before grading."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.llm_servers import FakeLLM, Received, Reply, client_environment
from verifier.batch import summary_paths
from verifier.errors import EXIT_CONFIG, EXIT_DISAGREES
from verifier.judges.llm.calibration import cohen_kappa, ranks, spearman

VERIFIER = str(Path(sys.executable).with_name("verifier"))

# scipy.stats.spearmanr(a, b).statistic (scipy 1.17.1)
SPEARMAN = [
    ([1, 2, 3, 4, 5], [2, 4, 6, 8, 10], 0.9999999999999999),
    ([1, 2, 2, 3, 5, 5, 4], [1, 3, 2, 3, 4, 5, 5], 0.8888888888888891),
    ([1, 2, 3, 4], [4, 3, 2, 1], -1.0),
    ([4, 3, 5, 2, 4, 1, 3, 5, 2, 4], [4, 2, 5, 3, 5, 1, 3, 4, 2, 3], 0.8417721518987342),
]
# sklearn.metrics.cohen_kappa_score(a, b) (scikit-learn 1.9.1)
KAPPA = [
    ([1, 1, 0, 0, 1, 0, 1, 1, 0, 1], [1, 0, 0, 0, 1, 1, 1, 1, 0, 1], 0.5833333333333333),
    ([1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0], 1.0),
    ([1, 0, 1, 0], [0, 1, 0, 1], -1.0),
    ([1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1], [1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 1], 0.25),
]


@pytest.mark.parametrize(("labels", "values", "expected"), SPEARMAN)
def test_spearman_as_scipy_computes_it(labels: list, values: list, expected: float) -> None:
    agreement = spearman([float(v) for v in labels], [float(v) for v in values])
    assert agreement.value == pytest.approx(expected, abs=1e-12)
    assert agreement.pairs == len(labels) and agreement.measure == "spearman"


@pytest.mark.parametrize(("labels", "values", "expected"), KAPPA)
def test_kappa_as_sklearn_computes_it(labels: list, values: list, expected: float) -> None:
    agreement = cohen_kappa([bool(v) for v in labels], [bool(v) for v in values])
    assert agreement.value == pytest.approx(expected, abs=1e-12)
    tp, fp, fn, tn = agreement.confusion
    assert tp + fp + fn + tn == len(labels)


def test_ties_share_their_average_rank() -> None:
    assert ranks([10.0, 20.0, 20.0, 5.0]) == [2.0, 3.5, 3.5, 1.0]


def test_what_cannot_be_computed_is_undefined_not_a_number() -> None:
    assert spearman([3.0], [3.0]).value is None
    constant = spearman([2.0, 2.0, 2.0], [1.0, 2.0, 3.0])
    assert constant.value is None and constant.reason == "the labels are all the same"
    one_verdict = cohen_kappa([True, True], [True, True])
    assert one_verdict.value is None and "all one verdict" in one_verdict.reason
    assert spearman([1.0, 3.0], [2.0, 3.0]).mean_abs_error == 0.5


# --- batches over a labelled set ---------------------------------------------------

# Eight reports: the model's score is the digit in the report; the human labels differ
# on two of them. The pass/fail judge passes reports whose digit is at least 3.
SCORES = [1, 2, 2, 3, 4, 4, 5, 5]
HUMAN = [1, 1, 2, 3, 5, 4, 4, 5]
EVAL = """
name: calibrated
outputs: [report.md]
judges:
  - name: quality
    llm_rubric: RUBRIC
    score_range: [1, 5]
    model: openai/gpt-4o
  - name: fixed
    llm_rubric: Is it fixed?
    feedback_type: bool
    model: openai/gpt-4o
  - name: has_report
    builtin: file_exists
    arguments: {path: report.md}
"""


def grading_server(server: FakeLLM) -> None:
    def route(request: Received) -> Reply:
        digit = int(re.search(r"score-me (\d)", request.user).group(1))
        if "passed" in json.dumps(request.body.get("tools")):
            return server.grade(passed=digit >= 3)
        return server.grade(score=digit)

    server.route = route


def labelled_set(root: Path, rubric: str = "How good is it?") -> Path:
    for index, score in enumerate(SCORES):
        case = root / "cases" / f"case-{index}"
        case.mkdir(parents=True, exist_ok=True)
        (case / "report.md").write_text(f"report score-me {score}")
    (root / "eval.yaml").write_text(textwrap.dedent(EVAL).replace("RUBRIC", rubric))
    return root / "cases"


def batch(root: Path, server: FakeLLM, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    completed = subprocess.run(
        [
            VERIFIER,
            "batch",
            "--config",
            str(root / "eval.yaml"),
            "--cases",
            str(root / "cases"),
            "--out",
            str(root / "out"),
            "-j",
            "2",
            "--force",
            *args,
        ],
        capture_output=True,
        text=True,
        env=client_environment(server),
        timeout=120,
    )
    path = summary_paths(root / "out", None)[0]
    return completed, json.loads(path.read_text()) if path.exists() else {}


def labels_file(root: Path) -> Path:
    labels = {f"case-{i}": {"quality": HUMAN[i], "fixed": HUMAN[i] >= 3} for i in range(8)}
    labels["case-7"]["fixed"] = False  # one pass/fail label disagrees
    labels["not-in-this-batch"] = {"quality": 3}
    path = root / "labels.json"
    path.write_text(json.dumps(labels))
    return path


def by_judge(summary: dict) -> dict:
    return {row["judge"]: row for row in summary["calibration"]["judges"]}


def test_a_labelled_set_reports_each_judges_agreement(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    grading_server(openai_server)
    labelled_set(tmp_path)
    completed, summary = batch(tmp_path, openai_server, "--labels", str(labels_file(tmp_path)))
    assert completed.returncode == 0, completed.stderr
    rows = by_judge(summary)
    assert set(rows) == {"quality", "fixed"}  # has_report has no labels
    quality = rows["quality"]
    expected = spearman([float(v) for v in HUMAN], [float(v) for v in SCORES]).value
    assert quality["measure"] == "spearman" and quality["agreement"] == round(expected, 4)
    assert quality["pairs"] == 8 and quality["missing"] == 0
    assert quality["mean_abs_error"] == 0.375  # three off by one
    assert quality["model"] == "gpt-4o" and quality["provider"] == "openai"
    assert re.fullmatch(r"[0-9a-f]{64}", quality["prompt_sha256"])
    fixed = rows["fixed"]
    passed = [s >= 3 for s in SCORES]
    human = [h >= 3 for h in HUMAN[:7]] + [False]
    assert fixed["measure"] == "cohen_kappa"
    assert fixed["agreement"] == round(cohen_kappa(human, passed).value, 4)
    assert fixed["confusion"] == {"tp": 4, "fp": 1, "fn": 0, "tn": 3}
    assert summary["calibration"]["labelled_cases_not_in_batch"] == 1
    assert (
        f"calibration: quality spearman={expected:.3f} (pairs=8 missing=0, model gpt-4o, prompt {quality['prompt_sha256'][:12]})"
        in completed.stdout
    )


def test_min_agreement_fails_the_run_below_it(tmp_path: Path, openai_server: FakeLLM) -> None:
    grading_server(openai_server)
    labelled_set(tmp_path)
    labels = str(labels_file(tmp_path))
    completed, summary = batch(
        tmp_path, openai_server, "--labels", labels, "--min-agreement", "0.8"
    )
    assert completed.returncode == EXIT_DISAGREES, completed.stdout  # kappa is below 0.8
    assert summary["calibration"]["passed"] is False
    assert "calibration: fixed cohen_kappa=" in completed.stdout and "BELOW 0.8" in completed.stdout
    assert summary["graded"] == 8  # the rewards are written all the same
    ok, passed = batch(tmp_path, openai_server, "--labels", labels, "--min-agreement", "0.4")
    assert ok.returncode == 0 and passed["calibration"]["passed"] is True


def test_a_changed_prompt_shows_as_another_prompt_hash(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    grading_server(openai_server)
    labelled_set(tmp_path)
    labels = str(labels_file(tmp_path))
    _, first = batch(tmp_path, openai_server, "--labels", labels)
    _, same = batch(tmp_path, openai_server, "--labels", labels)
    labelled_set(tmp_path, rubric="How good is it, really?")
    _, changed = batch(tmp_path, openai_server, "--labels", labels)
    hashes = [by_judge(s)["quality"]["prompt_sha256"] for s in (first, same, changed)]
    assert hashes[0] == hashes[1] != hashes[2]


def test_labels_from_the_dataset_annotations(tmp_path: Path, openai_server: FakeLLM) -> None:
    grading_server(openai_server)
    labelled_set(tmp_path)
    text = (tmp_path / "eval.yaml").read_text() + "dataset:\n  path: dataset\n"
    (tmp_path / "eval.yaml").write_text(text)
    for index in range(8):
        entry = tmp_path / "dataset" / f"case-{index}"
        entry.mkdir(parents=True)
        label = "" if index == 0 else f"labels: {{quality: {HUMAN[index]}}}\n"
        (entry / "annotations.yaml").write_text(f"note: case {index}\n{label}")
    completed, summary = batch(tmp_path, openai_server, "--calibrate")
    assert completed.returncode == 0, completed.stderr
    (row,) = summary["calibration"]["judges"]
    expected = spearman([float(v) for v in HUMAN[1:]], [float(v) for v in SCORES[1:]]).value
    assert row["judge"] == "quality" and row["pairs"] == 7
    assert row["agreement"] == round(expected, 4)
    assert summary["calibration"]["labels"] == "dataset annotations (labels)"


def test_a_labelled_case_without_a_value_is_missing_not_a_pair(
    tmp_path: Path, openai_server: FakeLLM
) -> None:
    def route(request: Received) -> Reply:
        if "score-me 5" in request.user:
            return openai_server.error(400, "refused")
        digit = int(re.search(r"score-me (\d)", request.user).group(1))
        return openai_server.grade(score=digit, passed=True)

    openai_server.route = route
    labelled_set(tmp_path)
    _, summary = batch(tmp_path, openai_server, "--labels", str(labels_file(tmp_path)))
    quality = by_judge(summary)["quality"]
    assert quality["pairs"] == 6 and quality["missing"] == 2 and quality["labelled"] == 8


@pytest.mark.parametrize(
    ("labels", "problem"),
    [
        ({"case-0": {"qualty": 3}}, "case-0: no judge named 'qualty'"),
        ({"case-0": {"quality": "good"}}, "case-0.quality: 'good' is not a number"),
        ({"case-0": {"quality": 9}}, "case-0.quality: 9 is outside the judge's scale [1, 5]"),
        ({"case-0": {"fixed": "maybe"}}, "case-0.fixed: 'maybe' is not true or false"),
        ({"case-0": 3}, "case-0: must map judge names to labels"),
    ],
)
def test_label_mistakes_are_refused_before_grading(
    tmp_path: Path, openai_server: FakeLLM, labels: dict, problem: str
) -> None:
    labelled_set(tmp_path)
    path = tmp_path / "labels.yaml"
    path.write_text(json.dumps(labels))
    completed, summary = batch(tmp_path, openai_server, "--labels", str(path))
    assert completed.returncode == EXIT_CONFIG and problem in completed.stderr, completed.stderr
    assert summary == {} and openai_server.received == []


@pytest.mark.parametrize("value", ["1.5", "-2", "high"])
def test_min_agreement_off_its_range_is_a_usage_error(
    tmp_path: Path, openai_server: FakeLLM, value: str
) -> None:
    labelled_set(tmp_path)
    completed, summary = batch(tmp_path, openai_server, "--min-agreement", value)
    assert completed.returncode == EXIT_CONFIG and "--min-agreement" in completed.stderr
    assert summary == {}
