"""Real Harbor trials where Harbor is the reader: pass@k, a deadline inside Harbor's
timeout, a regrade written back, the job report, and `harbor view` showing it.

One Harbor job (oracle agent, podman, two attempts per task) of three tasks made by
`init_task` from one pass/fail eval.yaml (`reward.judge` on a boolean), graded with
`VERIFIER_REWARD_JSON=reward` and `VERIFIER_DEADLINE=20` under Harbor's
`[verifier] timeout_sec = 80` (the deadline and the margin `task init` leaves for
Harbor's own execs on a loaded node):

- passes:   answer.txt holds 42; reward 1
- fails:    answer.txt holds 41; reward 0
- overruns: answer 42, and its `slow` judge sleeps past every timeout (100 s): without
            the deadline Harbor would kill the verifier at 80 s and the trial would
            have no reward; with it the judge is stopped, the reward written in time

Then `verifier batch --write-back` regrades the job dir with an eval.yaml that also
accepts 41, and Harbor's records (the trials' result.json and verifier/, the job's
stats) and its viewer's API say the new rewards. What the trials need:
tests/harbor/runner.py.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.harbor.runner import (
    HARBOR,
    HARBOR_VENV,
    REPO,
    VERIFIER_IMAGE,
    WORKDIR,
    Trial,
    agent_image,
    harbor,
    remove_trial_images,
    require_harbor,
    run_as_root,
    run_job,
)
from tests.viewer import viewer_accepts
from verifier.engine.parent import reward_margin_s
from verifier.task import InitRequest, init_task
from verifier.task.settings import HARBOR_SLACK_S

pytestmark = pytest.mark.harbor

EVAL_YAML = """\
name: harbor-native
judges:
  - name: answer
    check: |
      return outputs["files"].get("answer.txt", "").strip() == "42"
  - name: slow
    timeout: 100
    check: |
      import time
      if "slow" in outputs["files"].get("mode.txt", ""):
          time.sleep(100)
      return True
reward:
  judge: answer
"""
REGRADE_YAML = EVAL_YAML.replace('== "42"', 'in ("41", "42")')
DEADLINE_S = 20
HARBOR_TIMEOUT_S = DEADLINE_S + HARBOR_SLACK_S  # what `verifier check` asks of it
SOLUTIONS = {
    "passes": {"answer.txt": "42\n"},
    "fails": {"answer.txt": "41\n"},
    "overruns": {"answer.txt": "42\n", "mode.txt": "slow\n"},
}
ATTEMPTS = 2


def solve_sh(files: dict[str, str]) -> str:
    lines = ["#!/bin/bash", "set -euo pipefail", f"mkdir -p {WORKDIR}", f"cd {WORKDIR}"]
    lines += [
        f"printf '%s\\n' {shlex.quote(text.rstrip())} > {name}" for name, text in files.items()
    ]
    return "\n".join(lines) + "\n"


def harbor_native_task(dest: Path, config: Path, image: str, as_root: bool, solve: str) -> None:
    """A package from init_task, whose [verifier] grades with the reward alone and a
    deadline below Harbor's timeout (what the README tells an RL user to set): here a
    shorter timeout and deadline than task init derives, so that the overrun is quick."""
    init_task(
        InitRequest(
            dest,
            config,
            image=VERIFIER_IMAGE,
            agent_image=image,
            name=f"harbor-verifier-tests/{dest.name}",
            workdir=WORKDIR,
            verifier_env={"VERIFIER_REWARD_JSON": "reward"},
            verifier_network="public",
        )
    )  # no egress sidecar image here
    (dest / "solution" / "solve.sh").write_text(solve)
    toml = dest / "task.toml"
    derived = tomllib.loads(toml.read_text())["verifier"]
    text = toml.read_text()
    for old, new in (
        (
            f"\ntimeout_sec = {derived['timeout_sec']!r}\n",
            f"\ntimeout_sec = {HARBOR_TIMEOUT_S}\n",
        ),
        (
            f'VERIFIER_DEADLINE = "{derived["env"]["VERIFIER_DEADLINE"]}"',
            f'VERIFIER_DEADLINE = "{DEADLINE_S}"',
        ),
    ):
        assert text.count(old) == 1, text
        text = text.replace(old, new)
    toml.write_text(text)
    written = tomllib.loads(text)["verifier"]
    assert written["timeout_sec"] == HARBOR_TIMEOUT_S
    assert written["env"]["VERIFIER_DEADLINE"] == str(DEADLINE_S)
    assert written["env"]["VERIFIER_REWARD_JSON"] == "reward"
    if as_root:
        run_as_root(dest)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_harbor()
    root = tmp_path_factory.mktemp("harbor-native")
    source = root / "source"
    source.mkdir()
    (source / "eval.yaml").write_text(EVAL_YAML)
    (root / "regrade.yaml").write_text(REGRADE_YAML)
    image, as_root = agent_image()
    tasks = root / "tasks"
    for name, files in SOLUTIONS.items():
        harbor_native_task(tasks / name, source / "eval.yaml", image, as_root, solve_sh(files))
    checked = subprocess.run(
        [sys.executable, "-m", "verifier", "check", str(tasks / "overruns"), "--strict"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    jobs = root / "jobs"
    try:
        run_job(tasks, jobs, "native", attempts=ATTEMPTS)
        trials = [
            Trial(path, json.loads((path / "result.json").read_text()))
            for path in sorted((jobs / "native").iterdir())
            if path.is_dir() and (path / "result.json").is_file()
        ]
        yield {
            "root": root,
            "jobs": jobs,
            "dir": jobs / "native",
            "trials": trials,
            "check": checked,
        }
    finally:
        remove_trial_images(jobs)


def task_of(trial: Trial) -> str:
    return Path(trial.result["config"]["task"]["path"]).name


def job_stats(job_dir: Path) -> dict[str, Any]:
    (stats,) = json.loads((job_dir / "result.json").read_text())["stats"]["evals"].values()
    return stats


def test_check_warns_that_the_judges_can_outlast_the_deadline(job: dict[str, Any]) -> None:
    """The package as the test sets it up: the deadline fits Harbor's timeout, the
    judges' timeouts do not fit the deadline, which is what the deadline is for."""
    checked = job["check"]
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "the judges' timeouts add up to 160s" in checked.stderr
    assert f"more than the deadline of {DEADLINE_S}s" in checked.stderr
    assert "not at least" not in checked.stderr  # 20 leaves Harbor's 80 the margin


def test_every_trial_has_the_reward_alone(job: dict[str, Any]) -> None:
    trials = job["trials"]
    assert len(trials) == ATTEMPTS * len(SOLUTIONS)
    for trial in trials:
        assert trial.result["exception_info"] is None, trial.result["exception_info"]
        expected = 0.0 if task_of(trial) == "fails" else 1.0
        assert trial.rewards == {"reward": expected}, trial.directory
        judges = json.loads((trial.directory / "verifier" / "judges.json").read_text())
        assert set(judges["per_judge"]) == {"answer", "slow"}  # the judges stay in judges.json
        details = json.loads((trial.directory / "verifier" / "reward-details.json").read_text())
        assert next(iter(details)) == "reward" and viewer_accepts(details)


def test_harbor_computes_pass_at_k_from_the_reward_alone(job: dict[str, Any]) -> None:
    stats = job_stats(job["dir"])
    assert stats["n_trials"] == 6 and stats["n_errors"] == 0
    assert stats["pass_at_k"] == {"2": pytest.approx(2 / 3)}  # passes 1, fails 0, overruns 1
    assert stats["metrics"] == [{"mean": pytest.approx(4 / 6)}]


def test_judges_that_overrun_still_give_a_reward_within_harbors_timeout(
    job: dict[str, Any],
) -> None:
    overruns = [trial for trial in job["trials"] if task_of(trial) == "overruns"]
    assert len(overruns) == ATTEMPTS
    for trial in overruns:
        # Harbor's timeout (its verify step: test.sh) did not strike: no
        # VerifierTimeoutError, a reward. (result.json's verifier timing also counts the
        # container's start and the artifacts' upload, which the timeout does not.)
        assert trial.result["exception_info"] is None
        assert trial.rewards == {"reward": 1.0}
        judges = json.loads((trial.directory / "verifier" / "judges.json").read_text())
        slow = judges["per_judge"]["slow"]
        assert slow["status"] == "timeout"
        assert f"the grade's deadline (--deadline {DEADLINE_S}s" in slow["error"]
        # from its start to the deadline, which counts from the grader's start
        assert DEADLINE_S / 2 < slow["duration_s"] < DEADLINE_S - reward_margin_s(DEADLINE_S)


@pytest.fixture(scope="module")
def regraded(job: dict[str, Any]) -> dict[str, Any]:
    """`verifier batch --write-back` over the job dir with the eval.yaml accepting 41."""
    out = job["root"] / "regrade-out"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifier",
            "batch",
            "--config",
            str(job["root"] / "regrade.yaml"),
            "--cases",
            str(job["dir"]),
            "--out",
            str(out),
            "--reward-keys",
            "reward",
            "--deadline",
            str(DEADLINE_S),
            "--write-back",
            "-j",
            "2",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return {"out": out, "stdout": completed.stdout}


def test_the_regrade_is_written_back_into_the_trials(
    job: dict[str, Any], regraded: dict[str, Any]
) -> None:
    assert f"wrote back 6 trials into {job['dir']}" in regraded["stdout"]
    for trial in job["trials"]:
        result = json.loads((trial.directory / "result.json").read_text())
        assert result["verifier_result"] == {"rewards": {"reward": 1.0}}
        verifier = trial.directory / "verifier"
        assert json.loads((verifier / "reward.json").read_text()) == {"reward": 1.0}
        original = verifier / "original"
        assert json.loads((original / "reward.json").read_text()) == trial.rewards
        assert (original / "test-stdout.txt").is_file()
        assert (
            "regraded by `verifier batch --write-back`"
            in (verifier / "test-stdout.txt").read_text()
        )
        assert json.loads((original / "result.json").read_text()) == trial.result
    stats = job_stats(job["dir"])
    assert stats["pass_at_k"] == {"2": 1.0}
    assert stats["metrics"] == [{"mean": 1.0}]
    assert stats["reward_stats"] == {
        "reward": {"1.0": sorted(t.directory.name for t in job["trials"])}
    }


def test_the_job_report_says_where_grpo_gets_no_signal(
    job: dict[str, Any], regraded: dict[str, Any]
) -> None:
    report = json.loads((regraded["out"] / ".batch" / "report.json").read_text())
    assert report["trials"] == 6 and report["tasks"] == 3
    assert report["mean_reward"] == 1.0
    assert report["uniform_task_share"] == 1.0  # every task: both attempts 1.0
    assert report["pass_at_k"] == {"2": 1.0} and report["max_at_k"] == {"2": 1.0}
    assert {task["task"] for task in report["per_task"]} == set(SOLUTIONS)
    influence = {judge["judge"]: judge for judge in report["judges"]}
    assert influence["answer"]["shift"] == 1.0  # without it (reward.judge) the reward is 0
    assert influence["slow"]["shift"] == 0.0 and influence["slow"]["moved"] == 0.0
    assert "report: trials=6 tasks=3 mean_reward=1.0000 uniform_tasks=1.000" in regraded["stdout"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_harbor_view_shows_the_written_back_rewards(
    job: dict[str, Any], regraded: dict[str, Any]
) -> None:
    port = free_port()
    server = subprocess.Popen(
        [
            str(HARBOR),
            "view",
            str(job["jobs"]),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--jobs",
            "--no-build",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={
            "PATH": f"{HARBOR_VENV / 'bin'}:/usr/bin:/bin",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        },
    )
    base = f"http://127.0.0.1:{port}/api"

    def get(path: str) -> Any:
        with urllib.request.urlopen(f"{base}{path}", timeout=10) as response:  # noqa: S310 (http://127.0.0.1)
            return json.load(response)

    try:
        for _ in range(300):
            try:
                get("/health")
                break
            except OSError:
                time.sleep(0.2)
        fails = next(trial for trial in job["trials"] if task_of(trial) == "fails")
        name = fails.directory.name
        shown = get(f"/jobs/native/trials/{name}")
        assert shown["verifier_result"]["rewards"] == {"reward": 1.0}
        output = get(f"/jobs/native/trials/{name}/verifier-output")
        assert output["reward"] == {"reward": 1.0}
        assert next(iter(output["reward_details"])) == "reward"  # the viewer lists it first
        (listed,) = [entry for entry in get("/jobs")["items"] if entry["name"] == "native"]
        (metrics,) = [summary["metrics"] for summary in listed["evals"].values()]
        assert metrics == [{"mean": 1.0}]
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert harbor("--version").returncode == 0
