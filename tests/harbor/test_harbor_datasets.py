"""Real Harbor trials (oracle agent, podman) of packages agent-eval-harness evals make:

- two tasks `verifier task init --from-dataset` makes from the harness's anova example,
  unchanged, run by one `harbor run -p DIR`: Harbor gives each agent its case's input
  in /app, each verifier grades with that case's annotations, and its LLM judge asks a
  local Anthropic-style server (reached from the verifier's container) with that
  case's own oracle and instruction;
- one two-step task (schema 1.4 [[steps]]): each step's verifier grades that step's
  judges on the workdir as the step left it, the final one composes the reward and
  reads the agent's ATIF trajectory from the trial's artifacts.

Each reward (each step's too) equals `verifier grade` on the host for the same files,
and `verifier batch` over the job dirs gives the same rewards again. The generated
packages pass `harbor lint`; DIR/dataset.toml is what `harbor dataset init` writes for
them, with Harbor's own digests. What the trials need: tests/harbor/runner.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.harbor.runner import (
    HARBOR_VENV,
    VERIFIER_IMAGE,
    VERIFIER_NETWORK,
    Trial,
    agent_image_with_workdir,
    harbor,
    host_grade,
    podman,
    remove_trial_images,
    require_harbor,
    run_as_root,
    run_job,
)
from tests.llm_servers import FakeLLM, Received, Reply
from verifier.task import InitRequest, init_task
from verifier.task.from_dataset import init_dataset_tasks

pytestmark = pytest.mark.harbor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ANOVA = FIXTURES / "anova-example"
ATIF = FIXTURES / "atif" / "trajectory.json"
SCORES = {"task-0010": 4, "task-0031": 2}  # what the server answers for each case
API_KEY = "sk-ant-issue10-test-0123456789"
FENCE = re.compile(r"<case-material-([0-9a-f]+)>\n(.*?)\n</case-material-\1>", re.DOTALL)

TWO_STEPS = FIXTURES / "two-steps"
PLAN = "one two three four five\n"
TRAJECTORY_ARTIFACT = "/logs/agent/trajectory.json"
AGENT_IMAGE = "localhost/issue10-agent-workdir:latest"


class Run(NamedTuple):
    trials: dict[str, Trial]
    host: dict[str, dict[str, float]]  # task (or task/step) -> `verifier grade` on the host
    jobs: Path
    root: Path
    configs: dict[str, Path]  # job name -> the eval.yaml batch grades it with
    server: FakeLLM
    mixups: list[str]


def _route(server: FakeLLM, mixups: list[str]) -> Any:
    """Answer each request by what it grades, noting every request that carries another
    case's material, or its own where it does not belong."""

    def route(request: Received) -> Reply:
        user = request.user
        fenced = "\n".join(body for _, body in FENCE.findall(user))
        if "Did the agent say it fixed the crash?" in user:
            if "Fixed: empty input now returns an empty AST." not in fenced:
                mixups.append("two steps: the conversation is not the fenced trajectory")
            return server.grade(passed=True, rationale="it says so")
        (case_id,) = [cid for cid in SCORES if _entry(cid, "instruction.txt").strip() in user]
        outside = FENCE.sub("", user)
        for other in SCORES:
            if (_entry(other, "oracle.diff").strip() in outside) != (other == case_id):
                mixups.append(f"{case_id}: oracle of {other}")
            if (f"agent's fix for {other}" in fenced) != (other == case_id):
                mixups.append(f"{case_id}: solution of {other}")
        return server.grade(score=SCORES[case_id], rationale=f"graded {case_id}")

    return route


def _entry(case_id: str, name: str) -> str:
    return (ANOVA / "dataset" / case_id / name).read_text()


def _solve_sh(*lines: str) -> str:
    return (
        "\n".join(["#!/bin/bash", "set -euo pipefail", "mkdir -p /app", "cd /app", *lines]) + "\n"
    )


def _heredoc(path: str, text: str) -> str:
    assert "HARBOR_EOF" not in text
    return f"cat > {path} <<'HARBOR_EOF'\n{text.rstrip()}\nHARBOR_EOF"


def _with_llm(task: Path, port: int) -> None:
    """The verifier reaches the test's server on the host, through podman's gateway:
    task init pinned the model's endpoint and passes its key from the host; point them
    at the server."""
    toml = task / "task.toml"
    text = toml.read_text()
    for old, new in (
        (
            'ANTHROPIC_BASE_URL = "https://api.anthropic.com"',
            f'ANTHROPIC_BASE_URL = "http://host.containers.internal:{port}"',
        ),
        (
            'ANTHROPIC_API_KEY = "${ANTHROPIC_API_KEY}"',
            f'ANTHROPIC_API_KEY = "{API_KEY}", VERIFIER_LLM_RETRIES = "0"',
        ),
    ):
        assert text.count(old) == 1, text
        text = text.replace(old, new)
    toml.write_text(text)


def _dataset_tasks(root: Path, image: str, as_root: bool, port: int) -> dict[str, dict[str, str]]:
    """The two anova tasks; what each solution leaves in /app (besides input.yaml)."""
    suite = root / "anova-example"
    shutil.copytree(ANOVA, suite)
    tasks = init_dataset_tasks(
        InitRequest(
            root / "tasks",
            suite / "eval.yaml",
            image=VERIFIER_IMAGE,
            agent_image=image,
            name="issue10-anova",
            case_ids=list(SCORES),
            verifier_network=VERIFIER_NETWORK,
        )
    )
    left: dict[str, dict[str, str]] = {}
    for task in tasks:
        case_id = task.name
        first_line = _entry(case_id, "instruction.txt").splitlines()[0]
        files = {"output/solution.diff": f"# agent's fix for {case_id}\n"}
        # The gate passes only when Harbor gave the agent its case's input in /app.
        (task / "solution" / "solve.sh").write_text(
            _solve_sh(
                "mkdir -p output",
                _heredoc("output/solution.diff", files["output/solution.diff"]),
                f"if grep -qF {json.dumps(first_line)} /app/input.yaml; then",
                "  echo '{\"passed\": true}' > output/tests.json",
                'else echo \'{"passed": false, "skipped": "no input"}\' > output/tests.json; fi',
            )
        )
        files["output/tests.json"] = '{"passed": true}\n'
        files["input.yaml"] = _entry(case_id, "input.yaml")
        left[case_id] = files
        _with_llm(task, port)
        if as_root:
            run_as_root(task)
    return left


def _two_step_task(root: Path, image: str, as_root: bool, port: int) -> Path:
    suite = root / "two-steps"
    shutil.copytree(TWO_STEPS, suite)
    task = init_task(
        InitRequest(
            root / "issue10-two-steps",
            suite / "eval.yaml",
            image=VERIFIER_IMAGE,
            agent_image=image,
            name="issue10/two-steps",
            verifier_network=VERIFIER_NETWORK,
        )
    )
    (task / "steps" / "plan" / "solution" / "solve.sh").write_text(
        _solve_sh(_heredoc("plan.md", PLAN))
    )
    # The final step's agent leaves its trajectory where Harbor's agents leave theirs.
    (task / "steps" / "build" / "solution" / "solve.sh").write_text(
        _solve_sh(
            "echo 42 > answer.txt",
            _heredoc("/logs/agent/trajectory.json", ATIF.read_text()),
        )
    )
    toml = task / "task.toml"
    toml.write_text(
        toml.read_text().replace(
            'artifacts = ["/app"]', f'artifacts = ["/app", "{TRAJECTORY_ARTIFACT}"]'
        )
        + '\n[metadata.harbor.lint]\nignore = ["artifact-log-overlap"]\n'
    )
    _with_llm(task, port)
    if as_root:
        run_as_root(task)
    return task


def _write(case: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (case / relative).parent.mkdir(parents=True, exist_ok=True)
        (case / relative).write_text(text)
    return case


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    require_harbor()
    root = tmp_path_factory.mktemp("issue10-harbor")
    mixups: list[str] = []
    server = FakeLLM("anthropic", host="0.0.0.0")  # noqa: S104 (reached from Harbor's containers)
    server.route = _route(server, mixups)
    server.start()
    image, as_root = agent_image_with_workdir(root, AGENT_IMAGE)
    jobs = root / "issue10-jobs"
    jobs.mkdir()
    env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": API_KEY}
    try:
        left = _dataset_tasks(root, image, as_root, server.port)
        two_steps = _two_step_task(root, image, as_root, server.port)
        host = {}
        for case_id, files in left.items():
            host[case_id] = host_grade(
                root / "tasks" / case_id / "tests" / "eval.yaml",
                _write(root / "host" / case_id, files),
                root / "host-out" / case_id,
                "--case-id",
                case_id,
                env=env,
            )
        logs = _write(root / "host-logs", {"trajectory.json": ATIF.read_text()})
        steps = {
            "plan": ({"plan.md": PLAN}, root / "no-logs"),
            "build": ({"plan.md": PLAN, "answer.txt": "42\n"}, logs),
        }
        for step, (files, agent_logs) in steps.items():
            host[f"issue10-two-steps/{step}"] = host_grade(
                two_steps / "tests" / "eval.yaml",
                _write(root / "host" / step, files),
                root / "host-out" / step,
                "--step",
                step,
                "--agent-logs",
                str(agent_logs),
                env=env,
            )
        trials = run_job(root / "tasks", jobs, "issue10-dataset")
        trials.update(run_job(two_steps, jobs, "issue10-two-steps", concurrent=1))
        configs = {
            "issue10-dataset": root / "anova-example" / "eval.yaml",
            "issue10-two-steps": root / "two-steps" / "eval.yaml",
        }
        yield Run(trials, host, jobs, root, configs, server, mixups)
    finally:
        server.stop()
        remove_trial_images(jobs)
        podman("rmi", "--force", AGENT_IMAGE, check=False)


def test_the_generated_packages_pass_harbor_lint(run: Run) -> None:
    tasks = [run.root / "tasks" / case_id for case_id in SCORES]
    lint = harbor("lint", *map(str, tasks), str(run.root / "issue10-two-steps"))
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_dataset_toml_is_what_harbor_dataset_init_writes(tmp_path: Path) -> None:
    require_harbor()
    init_dataset_tasks(InitRequest(tmp_path / "tasks", ANOVA / "eval.yaml", name="issue10-anova"))
    ours = tmp_path / "tasks" / "dataset.toml"
    theirs = tmp_path / "harbor-init"
    shutil.copytree(tmp_path / "tasks", theirs, ignore=shutil.ignore_patterns("dataset.toml"))
    done = harbor("dataset", "init", "issue10-anova/anova-example", "-o", str(theirs))
    assert done.returncode == 0, done.stdout + done.stderr
    mine, harbors = (tomllib.loads(path.read_text()) for path in (ours, theirs / "dataset.toml"))
    assert mine["tasks"] == harbors["tasks"]  # names and Harbor's own content digests
    assert [task["name"] for task in mine["tasks"]] == [
        f"issue10-anova/{case_id}"
        for case_id in ("task-0008", "task-0010", "task-0031", "task-0034")
    ]
    assert {key: mine["dataset"][key] for key in ("name", "version")} == {
        key: harbors["dataset"][key] for key in ("name", "version")
    }
    parsed = subprocess.run(
        [
            str(HARBOR_VENV / "bin" / "python"),
            "-c",
            "import sys; from harbor.models.dataset.manifest import DatasetManifest as M; "
            "print(M.from_toml_file(sys.argv[1]).task_count)",
            str(ours),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert parsed.stdout.strip() == "4", parsed.stderr


def test_each_dataset_trial_is_graded_with_its_own_case(run: Run) -> None:
    assert run.mixups == []
    for case_id, score in SCORES.items():
        trial = run.trials[case_id]
        assert trial.result["exception_info"] is None, trial.result["exception_info"]
        assert trial.rewards == run.host[case_id]
        assert trial.rewards["solution_quality"] == score
        assert trial.rewards["tests_pass"] == 1.0  # the agent found its input in /app
        assert trial.rewards["reward"] == (score - 1) / 4
        judges = json.loads((trial.directory / "verifier" / "judges.json").read_text())
        assert judges["dataset"] == {"case_id": case_id, "entry": f"dataset/{case_id}"}
        assert judges["task_input"] == {"source": f"dataset/{case_id}/input.yaml", "trusted": True}
        assert judges["per_judge"]["solution_quality"]["rationale"] == f"graded {case_id}"


def test_each_step_is_graded_as_that_step_left_the_workdir(run: Run) -> None:
    assert run.mixups == []
    trial = run.trials["issue10-two-steps"]
    assert trial.result["exception_info"] is None, trial.result["exception_info"]
    steps = {step["step_name"]: step for step in trial.result["step_results"]}
    assert list(steps) == ["plan", "build"]
    for name, step in steps.items():
        assert step["verifier_result"]["rewards"] == run.host[f"issue10-two-steps/{name}"]
    assert steps["plan"]["verifier_result"]["rewards"] == {
        "reward": 0.5,
        "has_plan": 1.0,
        "plan_words": 5.0,
    }
    build = steps["build"]["verifier_result"]["rewards"]
    assert build["agent_turns"] == 3.0 and build["reported"] == 1.0  # the ATIF trajectory
    assert trial.rewards == build  # multi_step_reward_strategy = final
    judges = json.loads((trial.directory / "steps/build/verifier/judges.json").read_text())
    assert judges["step"] == "build"
    assert judges["per_judge"]["agent_turns"]["rationale"] == "/logs/agent/trajectory.json"


def test_batch_over_the_jobs_gives_the_trials_rewards(run: Run) -> None:
    for job, config in run.configs.items():
        out = run.root / "batch" / job
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "verifier",
                "batch",
                "--config",
                str(config),
                "--cases",
                str(run.jobs / job),
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            check=False,
            env={
                "PATH": "/usr/bin:/bin",
                "ANTHROPIC_BASE_URL": run.server.url,
                "ANTHROPIC_API_KEY": API_KEY,
            },
        )
        assert done.returncode == 0, done.stderr
        rows = {
            row["case"]: row
            for row in json.loads((out / ".batch" / "summary.json").read_text())["cases"]
        }
        for task, trial in run.trials.items():
            if trial.directory.parent.name != job:
                continue
            if task == "issue10-two-steps":
                for step in trial.result["step_results"]:
                    name = f"{trial.directory.name}/steps/{step['step_name']}"
                    assert rows[name]["reward"] == step["verifier_result"]["rewards"]["reward"]
            else:
                assert rows[trial.directory.name]["reward"] == trial.rewards["reward"], rows
