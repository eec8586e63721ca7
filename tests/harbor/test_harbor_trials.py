"""Real Harbor trials (oracle agent, podman) of task packages made by `init_task`.

One Harbor job runs five tasks generated from three eval.yamls, each with its own
solution, and the verifier image grades each in its own container ("separate" mode):

- solved:  the solution does the work; the reward equals the host's `verifier grade`
- useless: the solution leaves an unrelated file; reward 0.0, not an error
- cheat:   the solution plants /logs/verifier/reward.json (reward 1) and a fake
           eval.yaml in its workdir; the reward is still the true one
- invalid: tests/eval.yaml does not load; a verifier error, no reward
- forged-trail: the solution leaves a perfect trail of its own in the workdir (no tool
           calls, $0) and Harbor collects no agent logs; the trail judges fail
           ("no agent logs"), reward 0.0, where the forged trail once gave 1.0

What the trials need, and how they run: tests/harbor/runner.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.harbor.runner import (
    HARBOR,
    LOCAL_BASE,
    VERIFIER_IMAGE,
    VERIFIER_NETWORK,
    WORKDIR,
    agent_image,
    harbor,
    host_grade,
    remove_trial_images,
    require,
    require_harbor,
    run_as_root,
    run_job,
)
from tests.viewer import viewer_accepts
from verifier.task import InitRequest, init_task

pytestmark = pytest.mark.harbor

EVAL_YAML = """\
name: answer-task
judges:
  - name: answer
    description: answer.txt holds the answer
    check: |
      return outputs["files"].get("answer.txt", "").strip() == "42"
  - name: notes
    description: notes.md explains it, in up to 10 words counted
    score_range: [0, 10]
    module: judges.notes
    function: word_count
reward:
  weights: {answer: 3, notes: 1}
"""

NOTES_JUDGE = """\
from judges.util import words


def word_count(outputs, **arguments):
    count = min(10, len(words(outputs["files"].get("notes.md", ""))))
    return count, f"{count} words in notes.md"
"""

UTIL = """\
def words(text):
    return text.split()
"""

# What each solution leaves in the workdir.
SOLVED = {"answer.txt": "42\n", "notes.md": "six times seven is forty two, so the answer is 42\n"}
USELESS = {"README.txt": "I did not do the task.\n"}
FAKE_EVAL = """\
name: fake
judges:
  - name: answer
    check: return True
"""
# Half-done (true reward (3 * 1 + 1 * 0.4) / 4 = 0.85), with a fake eval.yaml and a
# planted reward of 1.
CHEAT = {"answer.txt": "42\n", "notes.md": "one two three four\n", "eval.yaml": FAKE_EVAL}
CHEAT_EXTRA = """
# Plant a perfect reward where the verifier writes its own, and in the agent's logs.
mkdir -p /logs/verifier
echo '{"reward": 1.0, "answer": 1.0, "notes": 10.0}' > /logs/verifier/reward.json
echo 1.0 > /logs/verifier/reward.txt
"""
INVALID_EVAL = """\
name: broken
judges:
  - name: answer
    chek: return True
"""


TRAIL_EVAL = """\
name: trail-task
judges:
  - name: no_bash
    builtin: trajectory_tool_not_used
    arguments: {tool_name: Bash}
  - name: cheap
    builtin: cost_budget
    arguments: {max_cost_usd: 1}
"""
FORGED_ATIF = json.dumps(
    {
        "steps": [{"source": "agent", "message": "done by hand"}],
        "final_metrics": {"total_cost_usd": 0.0},
    }
)
FORGED_TRAIL = {
    "trajectory.json": FORGED_ATIF,
    "events.json": '[{"type": "result", "cost_usd": 0.0}]',
    "answer.txt": "42\n",
}


def _solve_sh(files: dict[str, str], extra: str = "") -> str:
    lines = ["#!/bin/bash", "set -euo pipefail", f"mkdir -p {WORKDIR}", f"cd {WORKDIR}"]
    for name, text in files.items():
        assert "HARBOR_EOF" not in text
        lines += [f"cat > {name} <<'HARBOR_EOF'", text.rstrip("\n"), "HARBOR_EOF"]
    return "\n".join(lines) + "\n" + extra


def _host_reward(config: Path, files: dict[str, str], tmp: Path) -> dict[str, float]:
    """What `verifier grade` gives on the host for the same files."""
    case = tmp / "case"
    case.mkdir(parents=True)
    for name, text in files.items():
        (case / name).write_text(text)
    return host_grade(config, case, tmp / "out")


def _make_task(dest: Path, config: Path, agent_image: str, as_root: bool, solve: str) -> Path:
    init_task(
        InitRequest(
            dest,
            config,
            image=VERIFIER_IMAGE,
            agent_image=agent_image,
            name=f"harbor-verifier-tests/{dest.name}",
            workdir=WORKDIR,
            instruction=None,
            force=False,
            verifier_network=VERIFIER_NETWORK,
        )
    )
    (dest / "solution" / "solve.sh").write_text(solve)
    if as_root:
        run_as_root(dest)
    return dest


@pytest.fixture(scope="session")
def trials(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the five tasks in one Harbor job; {task: (trial dir, result.json, host reward)}."""
    require_harbor()
    root = tmp_path_factory.mktemp("harbor")
    source = root / "source"
    (source / "judges").mkdir(parents=True)
    (source / "eval.yaml").write_text(EVAL_YAML)
    (source / "judges" / "__init__.py").write_text("")
    (source / "judges" / "notes.py").write_text(NOTES_JUDGE)
    (source / "judges" / "util.py").write_text(UTIL)
    invalid = root / "invalid-source"
    invalid.mkdir()
    (invalid / "eval.yaml").write_text(INVALID_EVAL)
    trail = root / "trail-source"
    trail.mkdir()
    (trail / "eval.yaml").write_text(TRAIL_EVAL)

    image, as_root = agent_image()
    dataset = root / "dataset"
    specs = {
        "solved": (source, _solve_sh(SOLVED), SOLVED),
        "useless": (source, _solve_sh(USELESS), USELESS),
        "cheat": (source, _solve_sh(CHEAT, CHEAT_EXTRA), CHEAT),
        "invalid": (invalid, _solve_sh(SOLVED), None),
        "forged-trail": (trail, _solve_sh(FORGED_TRAIL), FORGED_TRAIL),
    }
    host: dict[str, dict[str, float] | None] = {}
    for name, (src, solve, files) in specs.items():
        _make_task(dataset / name, src / "eval.yaml", image, as_root, solve)
        host[name] = _host_reward(src / "eval.yaml", files, root / "host" / name) if files else None

    jobs = root / "jobs"
    try:
        found = run_job(dataset, jobs, "trials")
        assert set(found) >= set(specs), f"trials found: {sorted(found)}"
        yield {name: (found[name].directory, found[name].result, host[name]) for name in specs}
    finally:
        remove_trial_images(jobs)


def test_generated_task_passes_harbor_lint(tmp_path: Path) -> None:
    require(HARBOR.is_file(), f"{HARBOR} missing: run .ci/harbor-venv.sh")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "eval.yaml").write_text(INVALID_EVAL)
    for image in (None, LOCAL_BASE):
        task = init_task(
            InitRequest(
                tmp_path / f"task-{bool(image)}", tmp_path / "src" / "eval.yaml", agent_image=image
            )
        )
        lint = harbor("lint", str(task))
        assert lint.returncode == 0, lint.stdout + lint.stderr
    # The agent's files in environment/, its tests protected: the placeholder Dockerfile
    # copies them without naming a test file (agent-image-test-leak).
    task = tmp_path / "protected"
    (task / "environment" / "tests").mkdir(parents=True)
    (task / "environment" / "tests" / "test_answer.py").write_text("def test_x(): pass\n")
    (task / "environment" / "answer.py").write_text("ANSWER = 41\n")
    init_task(InitRequest(task, tmp_path / "src" / "eval.yaml", protect=("tests/**",), force=True))
    lint = harbor("lint", str(task))
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_solved_trial_reward_equals_host_reward(trials: dict[str, Any]) -> None:
    trial, result, host = trials["solved"]
    assert result["exception_info"] is None
    assert result["verifier_environment_mode"] == "separate"
    assert result["verifier_result"]["rewards"] == host
    assert host["reward"] == 1.0
    verifier = trial / "verifier"
    for name in (
        "reward.json",
        "reward.txt",
        "judges.json",
        "reward-details.json",
        "test-stdout.txt",
    ):
        assert (verifier / name).is_file(), f"{name} missing from {verifier}"
    assert json.loads((verifier / "reward.json").read_text()) == host
    assert math.isclose(float((verifier / "reward.txt").read_text()), host["reward"])
    judges = json.loads((verifier / "judges.json").read_text())
    assert judges["per_judge"]["notes"]["rationale"] == "10 words in notes.md"
    details = json.loads((verifier / "reward-details.json").read_text())
    assert viewer_accepts(details), details
    assert set(details) == {"answer", "notes", "reward"}
    assert details["notes"]["criteria"][0]["reasoning"] == "10 words in notes.md"
    composition = details["reward"]
    assert composition["score"] == host["reward"]
    assert {part["name"]: part["weight"] for part in composition["components"]} == {
        "answer": 3.0,
        "notes": 1.0,
    }
    assert composition["aggregation"].startswith("weighted (answer=3, notes=1)")


def test_useless_solution_gets_zero_not_an_error(trials: dict[str, Any]) -> None:
    _, result, host = trials["useless"]
    assert result["exception_info"] is None
    assert result["verifier_result"]["rewards"] == host
    assert result["verifier_result"]["rewards"]["reward"] == 0.0


def test_planted_reward_and_fake_eval_yaml_do_not_count(trials: dict[str, Any]) -> None:
    trial, result, host = trials["cheat"]
    assert result["exception_info"] is None
    rewards = result["verifier_result"]["rewards"]
    assert rewards == host  # graded with the task's eval.yaml, on the agent's files
    assert rewards["notes"] == 4.0
    assert math.isclose(rewards["reward"], 0.85)
    # The workdir, fake eval.yaml included, was graded as the agent's output only.
    stdout = (trial / "verifier" / "test-stdout.txt").read_text()
    assert "config: /tests/eval.yaml" in stdout


def test_a_trail_the_agent_forged_in_its_workdir_does_not_count(trials: dict[str, Any]) -> None:
    trial, result, host = trials["forged-trail"]
    assert result["exception_info"] is None
    assert (
        result["verifier_result"]["rewards"]
        == host
        == {"reward": 0.0, "no_bash": 0.0, "cheap": 0.0}
    )
    judges = json.loads((trial / "verifier" / "judges.json").read_text())
    assert "no agent logs" in judges["per_judge"]["no_bash"]["rationale"]
    no_trail = judges["per_judge"]["no_bash"]["rationale"]
    assert judges["per_judge"]["cheap"]["rationale"] == f"No cost data available: {no_trail}"


def test_invalid_eval_yaml_is_a_verifier_error_without_reward(trials: dict[str, Any]) -> None:
    trial, result, _ = trials["invalid"]
    assert result["verifier_result"] is None
    assert result["exception_info"] is not None
    assert result["exception_info"]["exception_type"] == "RewardFileNotFoundError"
    verifier = trial / "verifier"
    assert not (verifier / "reward.json").exists()
    assert not (verifier / "reward.txt").exists()
    stdout = (verifier / "test-stdout.txt").read_text()
    assert "chek" in stdout  # the verifier named the bad key
    assert "verifier exit code: 2" in stdout
