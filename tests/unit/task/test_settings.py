"""task.toml's [verifier] settings derived from eval.yaml (verifier.task.settings): the
timeout and deadline from the judges' timeouts, the network the judges need, the user."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from tests.paths import TESTS
from verifier.errors import ConfigError, UsageError
from verifier.task import InitRequest, init_task
from verifier.task.settings import GRADE_SLACK_S, HARBOR_SLACK_S, verifier_settings

FIXTURES = TESTS / "fixtures"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "src" / "eval.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def task_toml(tmp_path: Path, config: Path, **options) -> dict:
    dest = init_task(InitRequest(tmp_path / "task", config, **options))
    return tomllib.loads((dest / "task.toml").read_text())


COMMANDS = """\
name: t
judges:
  - name: tests
    builtin: command_succeeds
    arguments: {command: make test}
    timeout: 900
  - name: answer
    check: return True
    timeout: 45.5
"""


def test_the_deadline_is_the_judges_timeouts_and_harbors_comes_after(tmp_path: Path) -> None:
    verifier = task_toml(tmp_path, write(tmp_path, COMMANDS))["verifier"]
    deadline = 900 + 45.5 + GRADE_SLACK_S
    assert verifier["env"]["VERIFIER_DEADLINE"] == str(int(-(-deadline // 1)))
    assert verifier["timeout_sec"] == float(verifier["env"]["VERIFIER_DEADLINE"]) + HARBOR_SLACK_S
    assert verifier["timeout_sec"] > 600  # past Harbor's default, which would kill the grade


def test_a_judge_running_case_code_makes_the_grader_root(tmp_path: Path) -> None:
    assert task_toml(tmp_path, write(tmp_path, COMMANDS))["verifier"]["user"] == "root"
    checks = "name: t\njudges:\n  - name: a\n    check: return True\n"
    assert "user" not in task_toml(tmp_path / "2", write(tmp_path / "2", checks))["verifier"]


LLM = """\
name: t
judges:
  - name: quality
    llm_rubric: Is the report clear?
    model: {model}
"""


@pytest.mark.parametrize(
    ("model", "environ", "mode", "hosts", "env"),
    [
        (
            "claude-sonnet-4-5",
            {},
            "allowlist",
            ["api.anthropic.com"],
            {
                "ANTHROPIC_BASE_URL": "https://api.anthropic.com",
                "ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY}",
            },
        ),
        (
            "openai/qwen",
            {"OPENAI_BASE_URL": "http://vllm.models.svc:8000/v1"},
            "allowlist",
            ["vllm.models.svc"],
            {
                "OPENAI_BASE_URL": "http://vllm.models.svc:8000/v1",
                "OPENAI_API_KEY": "${OPENAI_API_KEY}",
            },
        ),
    ],
)
def test_llm_judges_reach_their_endpoint_and_nothing_else(
    tmp_path: Path, model: str, environ: dict, mode: str, hosts: list, env: dict
) -> None:
    settings = verifier_settings(write(tmp_path, LLM.format(model=model)), environ=environ)
    assert (settings.network.mode, list(settings.network.allowed_hosts)) == (mode, hosts)
    assert dict(settings.network.env) == env


def test_a_model_known_only_when_grading_leaves_the_network_public(tmp_path: Path) -> None:
    text = "name: t\njudges:\n  - name: q\n    llm_rubric: Is it clear?\n"
    settings = verifier_settings(write(tmp_path, text), environ={})
    assert settings.network.mode == "public"
    assert "$EVAL_JUDGE_MODEL" in settings.network.why


def test_no_judge_asking_a_model_needs_no_network_unless_asked(tmp_path: Path) -> None:
    config = write(tmp_path, COMMANDS)
    assert task_toml(tmp_path, config)["verifier"]["network_mode"] == "no-network"
    toml = task_toml(tmp_path / "2", config, verifier_network="public")
    assert toml["verifier"]["network_mode"] == "public"
    assert "allowed_hosts" not in toml["verifier"]


def two_steps(tmp_path: Path, old: str, new: str) -> Path:
    """The two-step fixture's eval.yaml with `old` replaced by `new`."""
    suite = tmp_path / "suite"
    shutil.copytree(FIXTURES / "two-steps", suite)
    (suite / "eval.yaml").write_text((suite / "eval.yaml").read_text().replace(old, new))
    return suite / "eval.yaml"


def test_each_step_gets_its_own_timeout_deadline_and_min_reward(tmp_path: Path) -> None:
    config = two_steps(
        tmp_path, "      timeout: 300\n", "      timeout: 300\n      min_reward: 0.75\n"
    )
    steps = {step["name"]: step for step in task_toml(tmp_path, config, min_reward=0.5)["steps"]}
    assert steps["plan"]["min_reward"] == 0.5  # the flag
    assert steps["build"]["min_reward"] == 0.75  # eval.yaml's own, even on the last step
    for name, step in steps.items():
        deadline = float(step["verifier"]["env"]["VERIFIER_DEADLINE"])
        assert step["verifier"]["timeout_sec"] == deadline + HARBOR_SLACK_S, name
    # plan grades 2 judges, build (the final step) 4 more and the unscoped one
    assert float(steps["plan"]["verifier"]["env"]["VERIFIER_DEADLINE"]) < float(
        steps["build"]["verifier"]["env"]["VERIFIER_DEADLINE"]
    )


def test_a_bad_min_reward_is_refused(tmp_path: Path) -> None:
    config = two_steps(tmp_path, "    - id: plan\n", "    - id: plan\n      min_reward: 2\n")
    with pytest.raises(ConfigError, match=r"execution.steps\[0\] \(plan\).min_reward.*\[0, 1\]"):
        init_task(InitRequest(tmp_path / "task", config))
    with pytest.raises(UsageError, match=r"--min-reward: .* has no execution.steps"):
        init_task(InitRequest(tmp_path / "other", write(tmp_path, COMMANDS), min_reward=0.5))
