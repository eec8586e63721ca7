"""`verifier task init` from the command line: renders a package, refuses to clobber one."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.paths import REPO

VERIFIER = str(Path(sys.executable).with_name("verifier"))
EXAMPLE = REPO / "examples" / "eval.yaml"


def init(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VERIFIER, "task", "init", *args], capture_output=True, text=True, timeout=60
    )


def test_task_init_renders_a_separate_verifier_package(tmp_path: Path) -> None:
    dest = tmp_path / "fix-bug"
    completed = init(
        str(dest),
        "--config",
        str(EXAMPLE),
        "--image",
        "quay.io/org/verifier:1.0",
        "--agent-image",
        "quay.io/org/agent:2",
        "--name",
        "org/fix-bug",
        "--workdir",
        "/work",
    )
    assert completed.returncode == 0, completed.stderr
    task = tomllib.loads((dest / "task.toml").read_text())
    assert task["artifacts"] == ["/work"]
    assert task["task"]["name"] == "org/fix-bug"
    assert task["verifier"]["env"]["VERIFIER_CASE"] == "/work"
    assert task["verifier"]["environment_mode"] == "separate"
    assert task["environment"]["docker_image"] == "quay.io/org/agent:2"
    dockerfile = (dest / "tests" / "Dockerfile").read_text()
    assert "ARG VERIFIER_IMAGE=quay.io/org/verifier:1.0" in dockerfile
    assert (dest / "tests" / "eval.yaml").read_text() == EXAMPLE.read_text()


def test_task_init_warns_about_an_invalid_eval_yaml_but_writes_the_package(
    tmp_path: Path,
) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text("judges:\n  - {name: a, chek: 'return True'}\n")
    completed = init(str(tmp_path / "task"), "--config", str(config))
    assert completed.returncode == 0
    assert "judges[0] (a).chek: unknown judge key (did you mean 'check'?)" in completed.stderr
    assert "every trial of this task will record a verifier error" in completed.stderr
    assert (tmp_path / "task" / "tests" / "eval.yaml").read_text() == config.read_text()


def test_task_init_only_warns_about_a_model_left_to_the_environment(tmp_path: Path) -> None:
    """task.toml's [verifier] env may set $EVAL_JUDGE_MODEL: no verifier error is promised."""
    config = tmp_path / "eval.yaml"
    config.write_text("judges:\n  - {name: q, llm_rubric: 'Is it clear?'}\n")
    environ = {name: value for name, value in os.environ.items() if name != "EVAL_JUDGE_MODEL"}
    completed = subprocess.run(
        [VERIFIER, "task", "init", str(tmp_path / "task"), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )
    assert completed.returncode == 0
    assert "judges[0] (q).model: no model here: set $EVAL_JUDGE_MODEL" in completed.stderr
    assert "verifier error" not in completed.stderr


def test_task_init_refuses_a_non_empty_dir_without_force(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    completed = init(str(tmp_path), "--config", str(EXAMPLE))
    assert completed.returncode == 2
    assert "is not empty: pass --force" in completed.stderr
    assert init(str(tmp_path), "--config", str(EXAMPLE), "--force").returncode == 0
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_task_init_warns_when_a_weighted_reward_drops_errored_judges(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(
        "judges:\n  - {name: a, check: 'return 1', score_range: [0, 1]}\n"
        "reward: {weights: {a: 1}}\n"
    )
    completed = init(str(tmp_path / "task"), "--config", str(config))
    assert completed.returncode == 0
    assert "reward.on_error is drop" in completed.stderr
    config.write_text(config.read_text().replace("{a: 1}}", "{a: 1}, on_error: zero}"))
    again = init(str(tmp_path / "task"), "--config", str(config), "--force")
    assert "on_error" not in again.stderr


def test_task_init_reward_keys_go_into_the_verifiers_env(tmp_path: Path) -> None:
    """`--reward-keys reward`: the package's reward.json holds the reward alone (Harbor's
    pass@k); a name that is no judge of eval.yaml writes no package."""
    env = {key: value for key, value in os.environ.items() if key != "VERIFIER_REWARD_JSON"}
    for keys, expected in (
        ("reward", "reward"),
        ("has_report,length_score", "has_report,length_score"),
    ):
        dest = tmp_path / f"task-{len(keys)}"
        completed = subprocess.run(
            [VERIFIER, "task", "init", str(dest), "--config", str(EXAMPLE), "--reward-keys", keys],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert completed.returncode == 0, completed.stderr
        verifier = tomllib.loads((dest / "task.toml").read_text())["verifier"]
        assert verifier["env"]["VERIFIER_REWARD_JSON"] == expected
    plain = tmp_path / "plain"
    assert init(str(plain), "--config", str(EXAMPLE)).returncode == 0
    assert "VERIFIER_REWARD_JSON" not in (plain / "task.toml").read_text()
    refused = init(str(tmp_path / "typo"), "--config", str(EXAMPLE), "--reward-keys", "nosuch")
    assert refused.returncode == 2 and "'nosuch' is not a judge" in refused.stderr
    assert not (tmp_path / "typo").exists()
