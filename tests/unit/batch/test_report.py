"""The job report and --write-back of a batch over a Harbor job dir, on a job dir laid out
as Harbor 0.26 writes one (tests/harbor/test_harbor_native.py does the same on a real
`harbor run`); and the report's arithmetic on its own."""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verifier.batch import BatchRequest, run_batch
from verifier.batch.report import correlation, eligible_k, max_at_k, pass_at_k, task_figures
from verifier.batch.writeback import mean_metric
from verifier.errors import UsageError
from verifier.parsers import parse_reward_keys

VERIFIER = str(Path(sys.executable).with_name("verifier"))

EVAL = """\
judges:
  - name: answer
    check: |
      return outputs["files"].get("answer.txt", "").strip() == "42"
  - name: words
    score_range: [0, 10]
    check: |
      return min(10, len(outputs["files"].get("notes.md", "").split()))
reward:
  formula: weighted
  weights: {answer: 1, words: 1}
"""
MANIFEST = [
    {
        "source": "/logs/artifacts",
        "destination": "artifacts/logs/artifacts",
        "type": "directory",
        "status": "ok",
    },
    {"source": "/app", "destination": "artifacts/app", "type": "directory", "status": "ok"},
]


def harbor_trial(
    job: Path,
    task: str,
    attempt: int,
    files: dict[str, str],
    rewards: dict | None,
    exception: str | None = None,
) -> Path:
    """A finished trial as Harbor writes it: config.json, result.json, artifacts, verifier/."""
    name = f"{task}__{attempt:03d}"
    trial = job / name
    app = trial / "artifacts" / "app"
    app.mkdir(parents=True)
    (trial / "artifacts" / "logs" / "artifacts").mkdir(parents=True)
    (trial / "artifacts" / "manifest.json").write_text(json.dumps(MANIFEST))
    for relative, text in files.items():
        (app / relative).write_text(text)
    (trial / "config.json").write_text(json.dumps({"task": {"path": task}, "trial_name": name}))
    (trial / "verifier").mkdir()
    (trial / "verifier" / "test-stdout.txt").write_text("the first grading\n")
    if rewards is not None:
        (trial / "verifier" / "reward.json").write_text(json.dumps(rewards))
    result = {
        "task_name": f"org/{task}",
        "trial_name": name,
        "source": None,
        "agent_info": {"name": "oracle", "model_info": None},
        "verifier_result": None if rewards is None else {"rewards": rewards},
        "exception_info": None
        if exception is None
        else {
            "exception_type": exception,
            "exception_message": "no reward file",
            "occurred_at": "2026-01-01T00:01:30",
        },
        "verifier": {"started_at": "2026-01-01T00:01:00", "finished_at": "2026-01-01T00:01:31"},
    }
    (trial / "result.json").write_text(json.dumps(result, indent=4))
    return trial


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """Two tasks, two attempts each; one attempt's verifier failed (no reward)."""
    job = tmp_path / "jobs" / "rl"
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": "rl", "jobs_dir": "jobs"}))
    (job / "result.json").write_text(
        json.dumps(
            {
                "finished_at": "2026-01-01T00:02:00",
                "stats": {
                    "n_errored_trials": 1,
                    "evals": {
                        "oracle__adhoc": {
                            "n_trials": 3,
                            "n_errors": 1,
                            "metrics": [{"mean": 0.5}],
                            "pass_at_k": {},
                        }
                    },
                },
            }
        )
    )
    good = {"answer.txt": "42\n", "notes.md": "one two three four five\n"}
    harbor_trial(job, "same", 1, good, {"reward": 0.75})
    harbor_trial(job, "same", 2, good, None, exception="RewardFileNotFoundError")
    harbor_trial(job, "mixed", 1, good, {"reward": 0.75})
    harbor_trial(job, "mixed", 2, {"answer.txt": "41\n"}, {"reward": 0.0})
    return job


def batch(config: Path, job: Path, out: Path, **fields):
    return run_batch(BatchRequest(config, job, out, jobs=2, progress=io.StringIO(), **fields))


def test_a_batch_over_a_job_dir_writes_the_job_report(tmp_path: Path, job: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(EVAL)
    summary = batch(config, job, tmp_path / "out")
    report = json.loads((tmp_path / "out" / ".batch" / "report.json").read_text())
    assert summary.report.to_json() == report
    tasks = {task["task"]: task for task in report["per_task"]}
    assert tasks["same"] == {
        "task": "same",
        "attempts": 2,
        "mean": 0.75,
        "spread": 0.0,
        "low": 0.75,
        "high": 0.75,
        "uniform": True,
    }
    assert tasks["mixed"]["uniform"] is False and tasks["mixed"]["spread"] == 0.375
    assert report["uniform_task_share"] == 0.5
    assert report["pass_at_k"] == {"2": 0.0}  # no attempt reached 1.0
    assert report["max_at_k"] == {"2": 0.75}
    assert report["avg_at_k"] == pytest.approx((0.75 + 0.375) / 2)
    judges = {judge["judge"]: judge for judge in report["judges"]}
    # answer=true, words=5: 0.75; without answer (renormalized) 0.5: +0.25, and on the
    # 41 case 0.0 without it too (words 0): +0
    assert judges["answer"]["shift"] == pytest.approx((0.25 * 3 + 0.0) / 4)
    assert judges["answer"]["moved"] == 0.75
    assert judges["words"]["correlation"] == pytest.approx(1.0)
    assert not (job / "same__001" / "verifier" / "original").exists()  # no --write-back


def test_write_back_records_the_regrade_where_harbor_reads_it(tmp_path: Path, job: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(EVAL)
    summary = batch(
        config, job, tmp_path / "out", reward_keys=parse_reward_keys("reward"), write_back=True
    )
    assert summary.written_back.written == ("mixed__001", "mixed__002", "same__001", "same__002")
    assert summary.written_back.refused == ()
    failed = job / "same__002"
    result = json.loads((failed / "result.json").read_text())
    assert result["verifier_result"] == {"rewards": {"reward": 0.75}}
    assert result["exception_info"] is None  # the verifier's failure, superseded
    original = failed / "verifier" / "original"
    assert (
        json.loads((original / "result.json").read_text())["exception_info"]["exception_type"]
        == "RewardFileNotFoundError"
    )
    assert (original / "test-stdout.txt").read_text() == "the first grading\n"
    stdout = (failed / "verifier" / "test-stdout.txt").read_text()
    assert stdout.startswith("regraded by `verifier batch --write-back`") and "0.75" in stdout
    for name in ("reward.json", "reward.txt", "judges.json", "reward-details.json"):
        assert (failed / "verifier" / name).read_text() == (
            tmp_path / "out" / "same__002" / name
        ).read_text()
    assert not (failed / "verifier" / "ctrf.json").exists()  # no judge here read a test report
    stats = json.loads((job / "result.json").read_text())["stats"]
    evals = stats["evals"]["oracle__adhoc"]
    assert (evals["n_trials"], evals["n_errors"], stats["n_errored_trials"]) == (4, 0, 0)
    assert evals["metrics"] == [{"mean": (0.75 * 3 + 0.0) / 4}]
    assert evals["pass_at_k"] == {}  # 0.75 is not pass/fail: Harbor shows none either
    assert evals["reward_stats"] == {
        "reward": {"0.75": ["mixed__001", "same__001", "same__002"], "0.0": ["mixed__002"]}
    }
    # a second write-back keeps the first grading in original/
    batch(
        config,
        job,
        tmp_path / "out2",
        reward_keys=parse_reward_keys("reward"),
        write_back=True,
        force=True,
    )
    assert (original / "test-stdout.txt").read_text() == "the first grading\n"


def test_a_trial_not_written_back_is_named_and_the_batch_exits_12(
    tmp_path: Path, job: Path
) -> None:
    """One trial's collected work is gone, so it is not graded: the others are written
    back, it is named with why, and the exit is 12, not 0 (a job that looks regraded
    but is not)."""
    config = tmp_path / "eval.yaml"
    config.write_text(EVAL)
    shutil.rmtree(job / "mixed__002" / "artifacts" / "app")
    command = [VERIFIER, "batch", "--config", str(config), "--cases", str(job)]
    done = subprocess.run(
        [*command, "--out", str(tmp_path / "out"), "--write-back"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 12, done.stdout + done.stderr
    line = done.stdout.splitlines()[-1]
    assert line.startswith(f"batch: wrote back 3 trials into {job}; not 1: mixed__002: no reward: ")
    result = json.loads((job / "mixed__002" / "result.json").read_text())
    assert result["verifier_result"] == {"rewards": {"reward": 0.0}}  # Harbor's, as it was
    assert not (job / "mixed__002" / "verifier" / "original").exists()


def test_write_back_needs_a_finished_harbor_job(tmp_path: Path, job: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(EVAL)
    plain = tmp_path / "cases"
    (plain / "a").mkdir(parents=True)
    with pytest.raises(UsageError, match="is not a Harbor job dir"):
        batch(config, plain, tmp_path / "out", write_back=True)
    (job / "result.json").write_text(json.dumps({"finished_at": None}))
    with pytest.raises(UsageError, match="has not finished"):
        batch(config, job, tmp_path / "out", write_back=True)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (2, 1, 2, 1.0),
        (4, 1, 2, 0.5),
        (5, 0, 2, 0.0),
        (10, 3, 5, 1 - math.comb(7, 5) / math.comb(10, 5)),
    ],
)
def test_pass_at_k_is_the_unbiased_estimator(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_max_at_k_is_the_expected_best_of_k_attempts() -> None:
    # the 2-subsets of {0, 0.5, 1}: best 0.5, 1, 1
    assert max_at_k([1.0, 0.0, 0.5], 2) == pytest.approx(2.5 / 3)
    assert max_at_k([0.2, 0.4], 1) == pytest.approx(0.3)  # k=1: the mean
    assert max_at_k([0.2, 0.4, 0.9], 3) == 0.9


def test_eligible_k_are_harbors() -> None:
    assert eligible_k(1) == []
    assert eligible_k(10) == [2, 4, 5, 8, 10]


def test_correlation_and_spread() -> None:
    assert correlation([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert correlation([1, 1, 1], [0, 1, 2]) is None
    figures = task_figures("t", [0.0, 1.0])
    assert (figures.mean, figures.spread, figures.uniform) == (0.5, 0.5, False)
    assert task_figures("t", [1.0]).uniform is False  # one attempt says nothing


def test_the_mean_metric_is_harbors() -> None:
    assert mean_metric([{"reward": 1.0}, {"reward": 0.0}]) == {"mean": 0.5}
    assert mean_metric([{"reward": 1.0, "a": 1.0}, {"reward": 0.0}]) == {"a": 0.5, "reward": 0.5}
