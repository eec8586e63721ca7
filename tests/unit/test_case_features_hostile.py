"""The features that read the case, attacked the way an agent (or a rollout loop reusing
names) would: batch resume, the LLM answer cache, datasets and multi-step layouts.

Each test sets the trap and asserts the honest reward: a stale reward never counts for
other work under the same name, a cache the agent could write is refused, a case
cannot choose its dataset entry or its step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.unit.batch.test_run import batch, make_corpus, rows, write_kind
from verifier.batch import BatchRequest, Case, discover_cases, run_batch
from verifier.batch.grader import case_fingerprint
from verifier.errors import UsageError

VERIFIER = str(Path(sys.executable).with_name("verifier"))


# --- batch resume ----------------------------------------------------------------------


def test_a_case_dir_holding_new_work_is_graded_again_not_given_its_old_reward(
    tmp_path: Path,
) -> None:
    """An RL loop writes each step's rollouts under the same names: the failing rollout
    now in pass-0000 must not keep the 1.0 the passing one before it earned."""
    config, cases, _ = make_corpus(tmp_path, 12)
    out = tmp_path / "out"
    first = batch(config, cases, out)
    assert rows(first)["pass-0000"].reward == 1.0
    (cases / "pass-0000" / "report.md").unlink()
    write_kind(cases / "pass-0000", "fail")  # a new rollout, failing
    second = batch(config, cases, out)
    assert rows(second)["pass-0000"].resumed is False
    assert rows(second)["pass-0000"].reward < 1.0
    assert json.loads((out / "pass-0000" / "reward.json").read_text())["reward"] < 1.0
    assert second.count(resumed=True) == 11 - 2  # the two boom cases' judges errored


def test_resume_notices_a_rewrite_with_the_same_size_and_time(tmp_path: Path) -> None:
    """Same bytes count, mtime set back with touch -d: the inode's change time moved."""
    case = tmp_path / "case"
    case.mkdir()
    report = case / "report.md"
    report.write_text("The bug is fixed.")
    stamp = report.stat()
    before = case_fingerprint(Case("case", case, "case"))
    time.sleep(0.01)
    report.write_text("Not fixed at all!")
    os.utime(report, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert case_fingerprint(Case("case", case, "case")) != before


def test_a_harbor_trajectory_rewritten_since_is_graded_again(tmp_path: Path) -> None:
    case, logs = tmp_path / "case", tmp_path / "logs"
    case.mkdir()
    logs.mkdir()
    (logs / "trajectory.json").write_text('{"steps": []}')
    entry = Case("case", case, "case", agent_logs=logs)
    before = case_fingerprint(entry)
    (logs / "trajectory.json").write_text('{"steps": [1]}')
    assert case_fingerprint(entry) != before
    assert case_fingerprint(entry) == case_fingerprint(entry)


# --- the LLM answer cache -------------------------------------------------------------

LLM_EVAL = """judges:
  - name: q
    llm_rubric: Is it fixed?
    model: openai/judge-model
    feedback_type: bool
"""


def test_grade_refuses_an_answer_cache_inside_the_case(tmp_path: Path) -> None:
    """Its keys are a hash of the prompt, which an agent that knows its own material can
    compute: a cache it can write, it could fill with passing answers."""
    config = tmp_path / "eval.yaml"
    config.write_text(LLM_EVAL)
    case = tmp_path / "case"
    (case / ".cache").mkdir(parents=True)
    done = subprocess.run(
        [
            VERIFIER,
            "grade",
            "--config",
            str(config),
            "--case",
            str(case),
            "--out",
            str(tmp_path / "out"),
            "--llm-cache",
            str(case / ".cache"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "lies inside the case dir" in done.stderr and "plant passing answers" in done.stderr
    assert not (tmp_path / "out" / "reward.json").exists()


def test_batch_refuses_an_answer_cache_inside_one_of_its_cases(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(LLM_EVAL)
    cases = tmp_path / "cases"
    (cases / "c1" / "cache").mkdir(parents=True)
    with pytest.raises(UsageError, match="lies inside the case dir"):
        run_batch(
            BatchRequest(config, cases, tmp_path / "out", jobs=1, llm_cache=cases / "c1" / "cache")
        )
    # The out dir (never a case) and a hidden dir beside the cases are not a case's.
    for allowed in (cases / "out" / ".llm-cache", cases / ".llm-cache"):
        from verifier.batch.run import refuse_cache_in_a_case

        refuse_cache_in_a_case(allowed, cases, cases / "out")


# --- datasets and steps ---------------------------------------------------------------


def test_a_case_cannot_name_its_dataset_entry_or_its_step(tmp_path: Path) -> None:
    """Which entry and which step a case is graded as come from the harness's layout
    (the dir name, the trial's config.json, Harbor's steps/ dir), never from files the
    agent left: a case holding a config.json, a steps/ dir, a manifest.json naming
    another entry is one plain case named after its dir."""
    cases = tmp_path / "cases"
    case = cases / "task-0001"
    (case / "steps" / "final" / "artifacts").mkdir(parents=True)
    (case / "config.json").write_text(json.dumps({"job_name": "j", "task": {"path": "x/gold"}}))
    (case / "artifacts").mkdir()
    (case / "artifacts" / "manifest.json").write_text(
        json.dumps([{"source": "/app", "destination": "artifacts/../../gold", "type": "directory"}])
    )
    found = discover_cases(cases)
    assert [(c.name, c.case_dir, c.case_id, c.step) for c in found] == [
        ("task-0001", case, "task-0001", None)
    ]
