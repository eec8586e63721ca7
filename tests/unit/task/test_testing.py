"""verifier.task.testing's reading of a package (what `task test` runs; the runs
themselves are in tests/integration/test_task_images.py and tests/harbor)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.paths import TESTS
from verifier.errors import UsageError
from verifier.task import InitRequest, init_task
from verifier.task.testing import read_package, resolve_env, reward_matches

FIXTURES = TESTS / "fixtures"
COMMAND = "name: t\njudges:\n  - name: a\n    builtin: command_succeeds\n    arguments: {command: 'true'}\n"


def test_a_package_reads_as_harbor_would_run_it(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "eval.yaml").write_text(COMMAND)
    dest = init_task(
        InitRequest(
            tmp_path / "task",
            tmp_path / "src" / "eval.yaml",
            workdir="/work",
            agent_image="localhost/a:1",
            name="o/t",
        )
    )
    package = read_package(dest)
    assert (package.name, package.workdir, package.agent_image) == ("o/t", "/work", "localhost/a:1")
    assert package.verifier_user == "root" and package.verifier_network is False
    [step] = package.steps
    assert step.name is None and step.solution == dest / "solution"
    assert step.verifier_env["VERIFIER_CASE"] == "/work"


def test_a_multi_step_package_runs_each_steps_solution(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(FIXTURES / "two-steps", suite)
    dest = init_task(InitRequest(tmp_path / "task", suite / "eval.yaml", verifier_network="public"))
    package = read_package(dest)
    assert [step.name for step in package.steps] == ["plan", "build"]
    assert package.steps[1].solution == dest / "steps/build/solution"
    assert package.steps[1].verifier_env["VERIFIER_STEP"] == "build"
    assert package.steps[1].agent_timeout_s == 300.0
    assert package.verifier_network is True


def test_verifier_env_is_filled_from_the_host_as_harbor_does() -> None:
    env = {"A": "${KEY}", "B": "${UNSET:-fallback}", "C": "literal ${KEY}"}
    assert resolve_env(env, {"KEY": "k"}, "task.toml") == {
        "A": "k",
        "B": "fallback",
        "C": "literal ${KEY}",
    }
    with pytest.raises(
        UsageError, match=r"task.toml: \[verifier\] env A needs \$KEY, which is unset"
    ):
        resolve_env(env, {}, "task.toml")


def test_a_dir_without_task_toml_is_no_package(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no task\.toml"):
        read_package(tmp_path)


@pytest.mark.parametrize(
    ("reward", "expect", "matches"),
    [
        (2 / 3, 0.6667, True),  # a 2-of-3 solution: it printed "gets 0.6667, not 0.6667"
        (1 / 3, 0.3333, True),
        (2 / 3, 0.667, False),
        (2 / 3, 0.6666, False),
        (1.0, 1.0, True),
        (0.99, 1.0, False),
        (0.0, 0.0, True),
        (0.5, 0.5001, False),
    ],
)
def test_expect_is_compared_to_the_digits_task_test_prints(
    reward: float, expect: float, matches: bool
) -> None:
    assert reward_matches(reward, expect) is matches
