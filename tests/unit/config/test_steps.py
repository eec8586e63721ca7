"""Multi-step evals: `execution.steps`, a judge's `step:`, `verifier grade --step`, the
schema-1.4 `[[steps]]` package `task init` makes, and `verifier batch` over the
per-step artifacts of a Harbor job.

(tests/harbor runs the package in a real two-step Harbor trial.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from tests.paths import TESTS
from verifier.errors import ConfigError
from verifier.grading import load_eval
from verifier.task import InitRequest, init_task

VERIFIER = str(Path(sys.executable).with_name("verifier"))

FIXTURE = TESTS / "fixtures" / "two-steps"
TWO_STEPS = (FIXTURE / "eval.yaml").read_text()


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def verifier(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`verifier ARGS`, LLM judges skipped (their own tests grade them)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    environment["VERIFIER_NO_LLM"] = "1"
    return subprocess.run(
        [VERIFIER, *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        env={**environment, **(env or {})},
    )


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "suite"))


def graded(config: Path, case: Path, out: Path, *args: str, **env: str) -> dict:
    done = verifier("grade", "--config", config, "--case", case, "--out", out, *args, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads((out / "judges.json").read_text())


def test_each_step_grades_its_own_judges(tmp_path: Path, suite: Path) -> None:
    case = write(tmp_path / "case", {"plan.md": "one two three four\n", "answer.txt": "42\n"})
    config = suite / "eval.yaml"
    plan = graded(config, case, tmp_path / "plan", "--step", "plan")
    assert set(plan["per_judge"]) == {"has_plan", "plan_words"}
    assert plan["step"] == "plan"
    # An earlier step is composed the default way: gates, then the mean of the numbers.
    assert plan["composition"]["mode"] == "default"
    assert plan["reward"] == 0.4
    # The final step: its own judges and the unscoped ones, composed by the reward block.
    build = graded(config, case, tmp_path / "build", VERIFIER_STEP="build")
    assert set(build["per_judge"]) == {"answer", "kept_plan", "agent_turns", "reported"}
    # answer 2 x 1.0, kept_plan 1 x 1.0, agent_turns 1 x 0.0 (no trajectory)
    assert build["composition"]["mode"] == "weighted" and build["reward"] == 0.75
    assert build["step"] == "build"
    # Without a step: every judge, on the case as it is, by the reward block.
    whole = graded(config, case, tmp_path / "whole")
    assert set(whole["per_judge"]) == set(plan["per_judge"]) | set(build["per_judge"])
    assert "step" not in whole and whole["reward"] == 0.75


def test_a_step_without_judges_is_unjudged_and_zero(tmp_path: Path) -> None:
    config = write(tmp_path / "suite", {"eval.yaml": TWO_STEPS.replace("    step: plan\n", "")})
    config = config / "eval.yaml"
    case = write(tmp_path / "case", {"answer.txt": "42\n"})
    judges = graded(config, case, tmp_path / "out", "--step", "plan")
    assert judges["per_judge"] == {} and judges["reward"] == 0.0
    assert judges["composition"]["warnings"] == [
        "no judge grades step 'plan': the step is unjudged, its reward 0.0"
    ]


@pytest.mark.parametrize(
    ("config_text", "message"),
    [
        (TWO_STEPS, "--step 'deploy': not a step of"),
        ("judges: [{name: a, check: return True}]\n", "it has no execution.steps"),
    ],
)
def test_a_step_eval_yaml_does_not_define_is_a_usage_error(
    tmp_path: Path, config_text: str, message: str
) -> None:
    config = write(tmp_path / "suite", {"eval.yaml": config_text}) / "eval.yaml"
    (tmp_path / "case").mkdir()
    done = verifier(
        "grade",
        "--config",
        config,
        "--case",
        tmp_path / "case",
        "--out",
        tmp_path / "out",
        "--step",
        "deploy",
    )
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "reward.json").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("- id: plan", "- id: ../plan"), "execution.steps[0].id: '../plan' must be a step name"),
        (("- id: build", "- id: plan"), "execution.steps[1].id: 'plan' is the id of an earlier"),
        (('      prompt: "Carry out', '      note: "Carry out'), "must set a prompt or a skill"),
        (("  mode: case", "  mode: batch"), "execution.mode: must be 'case' with execution.steps"),
        (("  mode: case", "  prompt: hi"), "execution.steps: cannot be combined"),
        (
            ("    step: build", "    step: biuld"),
            "judges[3] (kept_plan).step: 'biuld' is not a step of execution.steps (plan, build) "
            "(did you mean 'build'?)",
        ),
        (("      timeout: 300", "      timeout: -1"), "timeout: -1 must be a positive number"),
    ],
)
def test_bad_steps_are_load_errors(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    config = write(tmp_path, {"eval.yaml": TWO_STEPS.replace(*change)}) / "eval.yaml"
    with pytest.raises(ConfigError) as caught:
        load_eval(config)
    problems = getattr(caught.value, "problems", (caught.value,))
    assert any(message in problem.message for problem in problems), problems


def test_a_judge_step_without_steps_is_a_load_error(tmp_path: Path) -> None:
    config = (
        write(
            tmp_path,
            {
                "eval.yaml": textwrap.dedent("""\
        judges:
          - {name: a, step: plan, check: return True}
    """)
            },
        )
        / "eval.yaml"
    )
    with pytest.raises(ConfigError, match=r"judges\[0\] \(a\)\.step: names step 'plan', but"):
        load_eval(config)


def test_what_only_an_earlier_step_grades_is_worth_a_warning(tmp_path: Path) -> None:
    text = TWO_STEPS.replace("{answer: 2, kept_plan: 1,", "{answer: 2, plan_words: 1,")
    config = write(tmp_path / "a", {"eval.yaml": text}) / "eval.yaml"
    (warning,) = load_eval(config).config.warnings
    assert "reward.weights: plan_words is graded in step 'plan', but the reward is " in warning
    text = TWO_STEPS.replace("  - name: answer\n", "  - name: answer\n    step: plan\n")
    text = text.replace("    step: build\n", "    step: plan\n")
    config = write(tmp_path / "b", {"eval.yaml": text}) / "eval.yaml"
    warnings = load_eval(config).config.warnings
    assert any("no judge is graded in the final step 'build'" in w for w in warnings)


def test_the_package_has_a_step_per_step(tmp_path: Path, suite: Path) -> None:
    task = init_task(
        InitRequest(tmp_path / "task", suite / "eval.yaml", agent_image="localhost/agent:1")
    )
    config = tomllib.loads((task / "task.toml").read_text())
    assert config["schema_version"] == "1.4"
    assert config["multi_step_reward_strategy"] == "final"
    # Each step's verifier has its own time (Harbor reads the step's): its judges' 60 s
    # each plus 30 s to write is the deadline, 60 s more Harbor's timeout (task/settings.py).
    assert config["steps"] == [
        {
            "name": "plan",
            "verifier": {
                "timeout_sec": 210.0,
                "env": {"VERIFIER_STEP": "plan", "VERIFIER_DEADLINE": "150"},
            },
        },
        {
            "name": "build",
            "agent": {"timeout_sec": 300.0},
            "verifier": {
                "timeout_sec": 330.0,
                "env": {"VERIFIER_STEP": "build", "VERIFIER_DEADLINE": "270"},
            },
        },
    ]
    # The final step's LLM judge (Anthropic) reaches its endpoint, and only that host.
    assert config["verifier"]["env"] == {
        "VERIFIER_CASE": "/app",
        "ANTHROPIC_BASE_URL": "https://api.anthropic.com",
        "ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY}",
    }
    assert config["verifier"]["allowed_hosts"] == ["api.anthropic.com"]
    assert (
        task / "steps/plan/instruction.md"
    ).read_text() == "Write your plan to reach 42 into plan.md\n"
    assert (task / "steps/build/instruction.md").read_text().startswith("Carry out plan.md")
    for step in ("plan", "build"):
        assert os.access(task / "steps" / step / "solution/solve.sh", os.X_OK)
    assert not (task / "instruction.md").exists() and not (task / "solution").exists()
    assert (task / "tests/eval.yaml").read_text() == TWO_STEPS
    instruction = tmp_path / "instruction.md"
    instruction.write_text("x")
    with pytest.raises(Exception, match="each step's instruction is rendered from its prompt"):
        init_task(InitRequest(tmp_path / "other", suite / "eval.yaml", instruction=instruction))


MANIFEST = [{"source": "/app", "destination": "artifacts/app", "type": "directory"}]


AFTER = {  # the work dir after each step of a two-step trial
    "plan": {"plan.md": "one two three\n"},
    "build": {"plan.md": "one two three\n", "answer.txt": "41\n"},
}


def two_step_job(job: Path) -> Path:
    """A Harbor job dir holding one finished two-step trial; the trial's dir."""
    trial = job / "two-steps__Abc"
    for step, files in AFTER.items():
        artifacts = trial / "steps" / step / "artifacts"
        write(artifacts / "app", files)
        (artifacts / "manifest.json").write_text(json.dumps(MANIFEST))
    write(job, {"config.json": json.dumps({"job_name": "job"})})
    return trial


def test_batch_grades_each_step_of_a_harbor_trial(tmp_path: Path, suite: Path) -> None:
    job = tmp_path / "job"
    trial = two_step_job(job)
    done = verifier(
        "batch", "--config", suite / "eval.yaml", "--cases", job, "--out", tmp_path / "out"
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / ".batch" / "summary.json").read_text())
    rows = {row["case"]: row for row in summary["cases"]}
    assert set(rows) == {"two-steps__Abc/steps/plan", "two-steps__Abc/steps/build"}
    for step in AFTER:
        out = tmp_path / "out" / "two-steps__Abc" / "steps" / step
        judges = json.loads((out / "judges.json").read_text())
        assert judges["step"] == step
        single = graded(
            suite / "eval.yaml",
            trial / "steps" / step / "artifacts" / "app",
            tmp_path / "single" / step,
            "--step",
            step,
        )
        assert (
            judges["reward"] == single["reward"] == rows[f"two-steps__Abc/steps/{step}"]["reward"]
        )
    assert rows["two-steps__Abc/steps/plan"]["reward"] == 0.3
    assert rows["two-steps__Abc/steps/build"]["reward"] == 0.25  # kept_plan only: 1 / (2 + 1 + 1)


def test_write_back_says_it_writes_no_multi_step_trial_and_exits_12(
    tmp_path: Path, suite: Path
) -> None:
    """Which step's reward is a multi-step trial's is the task's reward strategy, which
    the trial dir does not record: the trial is left as Harbor wrote it, named once
    with why, and the batch exits 12."""
    job = tmp_path / "job"
    trial = two_step_job(job)
    write(job, {"result.json": json.dumps({"finished_at": "2026-01-01T00:02:00"})})
    write(trial, {"result.json": json.dumps({"trial_name": trial.name})})
    done = verifier(
        "batch",
        "--config",
        suite / "eval.yaml",
        "--cases",
        job,
        "--out",
        tmp_path / "out",
        "--write-back",
    )
    assert done.returncode == 12, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"batch: wrote back 0 trials into {job}; not 1: two-steps__Abc: a multi-step trial: "
        "--write-back writes single-step trials only (which step's reward is the trial's "
        "is the task's multi_step_reward_strategy, which the trial dir does not record); "
        "its steps' regrade is in OUT/<trial>/steps/"
    )
    assert json.loads((trial / "result.json").read_text()) == {"trial_name": trial.name}
    assert (tmp_path / "out" / "two-steps__Abc" / "steps" / "build" / "reward.json").is_file()
