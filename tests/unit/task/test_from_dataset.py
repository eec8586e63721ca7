"""`verifier task init DIR --from-dataset`: one Harbor task per dataset case, as
agent-eval-harness's generate_tasks makes them, plus DIR/dataset.toml.

(tests/harbor runs two of them in real Harbor trials and checks dataset.toml and the
digests against the installed Harbor.)
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.paths import TESTS
from verifier.config.execution import Invocation
from verifier.errors import ConfigError, UsageError
from verifier.grading import grade, load_eval
from verifier.task import InitRequest
from verifier.task.from_dataset import init_dataset_tasks
from verifier.task.instruction import render_instruction
from verifier.task.manifest import content_digest

VERIFIER = str(Path(sys.executable).with_name("verifier"))
ANOVA = TESTS / "fixtures" / "anova-example"
CASE_IDS = ["task-0008", "task-0010", "task-0031", "task-0034"]


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def anova(tmp_path: Path) -> Path:
    """The example beside a file a judge could read, and editor leftovers."""
    root = tmp_path / "anova-example"
    shutil.copytree(ANOVA, root)
    (root / "rubric-notes.md").write_text("notes\n")
    return root / "eval.yaml"


def test_one_package_per_case_the_harness_way(tmp_path: Path, anova: Path) -> None:
    tasks = init_dataset_tasks(
        InitRequest(tmp_path / "tasks", anova, agent_image="localhost/agent:1")
    )
    assert [task.name for task in tasks] == CASE_IDS
    for case_id, task in zip(CASE_IDS, tasks, strict=True):
        entry = ANOVA / "dataset" / case_id
        prompt = yaml.safe_load((entry / "input.yaml").read_text())["prompt"]
        # execution.arguments "{prompt}": the input's prompt, runs of blanks made one
        # (resolve_arguments in the harness's config.py).
        expected = re.sub(r"[ \t]+", " ", prompt).strip() + "\n"
        assert (task / "instruction.md").read_text() == expected
        assert expected.startswith("# ") and len(expected) > 1000
        # The agent gets its input only; the annotated files stay on the verifier's side.
        assert _files(task / "environment") == {"input.yaml"}
        assert (task / "environment/input.yaml").read_bytes() == (entry / "input.yaml").read_bytes()
        assert _files(task / "tests") == {
            "Dockerfile",
            "eval.yaml",
            "rubric-notes.md",
            *(f"dataset/{case_id}/{name}" for name in _files(entry)),
        }
        config = tomllib.loads((task / "task.toml").read_text())
        assert config["task"]["name"] == f"anova-example/{case_id}"
        deadline = config["verifier"]["env"].pop("VERIFIER_DEADLINE")
        assert config["verifier"]["timeout_sec"] == float(deadline) + 60
        # The rubric's model is Anthropic's: its endpoint, allow-listed, and its key
        assert config["verifier"]["env"] == {
            "VERIFIER_CASE": "/app",
            "VERIFIER_CASE_ID": case_id,
            "ANTHROPIC_BASE_URL": "https://api.anthropic.com",
            "ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY}",
        }
        assert config["verifier"]["network_mode"] == "allowlist"
        assert config["verifier"]["allowed_hosts"] == ["api.anthropic.com"]
        assert config["metadata"] == {
            "verifier": "harbor-verifier",
            "eval_name": "anova-example",
            "case_id": case_id,
        }
        assert config["agent"]["timeout_sec"] == 1800.0  # execution.timeout
        assert config["environment"] == {
            "build_timeout_sec": 600.0,
            "docker_image": "localhost/agent:1",
            "workdir": "/app",
        }
        assert "steps" not in config
    manifest = tomllib.loads((tmp_path / "tasks" / "dataset.toml").read_text())
    assert manifest["dataset"]["name"] == "anova-example/anova-example"
    assert manifest["tasks"] == [
        {"name": f"anova-example/{case_id}", "digest": content_digest(task)}
        for case_id, task in zip(CASE_IDS, tasks, strict=True)
    ]


@pytest.mark.slow
def test_the_package_grades_its_case_with_its_own_entry(tmp_path: Path, anova: Path) -> None:
    (task,) = init_dataset_tasks(InitRequest(tmp_path / "tasks", anova, case_ids=["task-0031"]))
    case = tmp_path / "app"
    (case / "output").mkdir(parents=True)
    (case / "output" / "tests.json").write_text('{"passed": true}')
    config = tomllib.loads((task / "task.toml").read_text())
    grading = grade(
        load_eval(task / "tests" / "eval.yaml"),
        case,
        case_id=config["verifier"]["env"]["VERIFIER_CASE_ID"],
    )
    assert grading.dataset_entry == "dataset/task-0031"
    assert grading.task_input_source == "dataset/task-0031/input.yaml"
    assert grading.task_input_trusted
    assert grading.case_warnings == ()


def test_a_dockerfile_environment_copies_the_inputs_into_the_workdir(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    entry = suite / "data" / "c1"
    (entry / "fixtures").mkdir(parents=True)
    (suite / "eval.yaml").write_text(
        textwrap.dedent("""\
        name: My Suite!
        dataset: {path: data}
        execution:
          prompt: "Fix {{ input.bug }} in {{ input.repo }}{% if input.hint is defined %} ({{ input.hint }}){% endif %}"
        runner: {system_prompt: "You are careful."}
        judges: [{name: a, check: return True}]
    """)
    )
    (entry / "input.yaml").write_text("bug: the   crash\nrepo: parser\n")
    (entry / "annotations.yaml").write_text("oracle: fix.diff\n")
    (entry / "fix.diff").write_text("-a\n+b\n")
    (entry / "answers.yaml").write_text("q: a\n")
    (entry / "fixtures" / "data.csv").write_text("1,2\n")
    (task,) = init_dataset_tasks(
        InitRequest(tmp_path / "out", suite / "eval.yaml", name="acme", workdir="/work")
    )
    assert (task / "instruction.md").read_text() == "You are careful.\n\nFix the crash in parser\n"
    assert _files(task / "environment") == {
        "Dockerfile",
        "input.yaml",
        "answers.yaml",
        "fixtures/data.csv",
    }
    dockerfile = (task / "environment" / "Dockerfile").read_text()
    assert dockerfile.endswith(
        'WORKDIR /work\nCOPY ["answers.yaml", "/work/answers.yaml"]\n'
        'COPY ["fixtures", "/work/fixtures"]\n'
        'COPY ["input.yaml", "/work/input.yaml"]\n'
    )
    config = tomllib.loads((task / "task.toml").read_text())
    assert config["task"]["name"] == "acme/c1"
    assert "workdir" not in config["environment"]
    assert tomllib.loads((tmp_path / "out" / "dataset.toml").read_text())["dataset"]["name"] == (
        "acme/My-Suite"
    )


@pytest.mark.parametrize(
    ("invocation", "task_input", "expected"),
    [
        (Invocation(prompt="{{ input.prompt }}"), {"prompt": "do  it\tnow"}, "do it now"),
        (Invocation(arguments="--repo {repo} {flag?}"), {"repo": "r"}, "--repo r"),
        (
            Invocation(skill="rfe.create", arguments="--priority {p}"),
            {"p": 2},
            "/rfe.create --priority 2",
        ),
        (
            Invocation(skill="ci:triage", arguments="{id}", runner_type="codex"),
            {"id": 7},
            "Use the triage skill with arguments: 7",
        ),
        (Invocation(skill="ci:triage", runner_type="codex"), {}, "Use the triage skill"),
        (Invocation(), {"prompt": "from the input"}, "from the input"),
        (
            Invocation(arguments="{prompt}", system_prompt="Charter.\n"),
            {"prompt": "go"},
            "Charter.\n\ngo",
        ),
    ],
)
def test_instructions_render_as_the_harness_renders_them(
    invocation: Invocation, task_input: dict, expected: str
) -> None:
    assert render_instruction(invocation, task_input, "eval.yaml", "execution") == expected


@pytest.mark.parametrize(
    ("invocation", "message"),
    [
        (Invocation(prompt="{{ input.missing }}"), "execution.prompt: cannot be filled"),
        (Invocation(arguments="{missing}"), "execution.arguments: needs the input field"),
        (Invocation(prompt="{{ steps.plan.output }}"), "does not carry over to Harbor"),
        (Invocation(prompt="{% if %}"), "is not a valid template"),
        (Invocation(), "gives the agent no instruction"),
    ],
)
def test_an_instruction_that_cannot_be_rendered_is_a_config_error(
    invocation: Invocation, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        render_instruction(invocation, {"prompt": ""}, "eval.yaml", "execution")
    assert caught.value.source == "eval.yaml"


def test_cases_picks_some_and_unknown_ones_are_refused(tmp_path: Path, anova: Path) -> None:
    tasks = init_dataset_tasks(
        InitRequest(tmp_path / "some", anova, case_ids=["task-0034", "task-0008"])
    )
    assert [task.name for task in tasks] == ["task-0008", "task-0034"]
    manifest = tomllib.loads((tmp_path / "some" / "dataset.toml").read_text())
    assert [task["name"] for task in manifest["tasks"]] == [
        "anova-example/task-0008",
        "anova-example/task-0034",
    ]
    with pytest.raises(UsageError, match="--cases: task-9999 not in the dataset"):
        init_dataset_tasks(InitRequest(tmp_path / "none", anova, case_ids=["task-9999"]))
    assert not (tmp_path / "none").exists()


def test_what_from_dataset_refuses(tmp_path: Path, anova: Path) -> None:
    with pytest.raises(UsageError, match="with --from-dataset, --name is the org only"):
        init_dataset_tasks(InitRequest(tmp_path / "t", anova, name="a/b"))
    plain = tmp_path / "plain.yaml"
    plain.write_text("judges: [{name: a, check: return True}]\n")
    with pytest.raises(UsageError, match=r"has no dataset\.path"):
        init_dataset_tasks(InitRequest(tmp_path / "t", plain))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    with pytest.raises(UsageError, match="is not empty"):
        init_dataset_tasks(InitRequest(tmp_path / "busy", anova))
    broken = anova.parent / "dataset" / "task-0010" / "annotations.yaml"
    broken.write_text("oracle: [\n")
    with pytest.raises(ConfigError, match=r"task-0010/annotations\.yaml"):
        init_dataset_tasks(InitRequest(tmp_path / "t", anova))
    assert not (tmp_path / "t").exists()  # nothing written before every case rendered


def run_init(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VERIFIER, "task", "init", *map(str, args)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
def test_the_command_line(tmp_path: Path, anova: Path) -> None:
    done = run_init(
        tmp_path / "tasks",
        "--config",
        anova,
        "--from-dataset",
        "--cases",
        "task-0010,task-0034",
        "--name",
        "acme",
    )
    assert done.returncode == 0, done.stderr
    assert "wrote " + str(tmp_path / "tasks" / "dataset.toml") + " (2 tasks)" in done.stdout
    assert sorted(p.name for p in (tmp_path / "tasks").iterdir()) == [
        ".verifier-task-init.json",
        "dataset.toml",
        "task-0010",
        "task-0034",
    ]
    for args, message in (
        (("--cases", "task-0010"), "--cases: only with --from-dataset"),
        (("--from-dataset", "--instruction", anova), "--instruction: --from-dataset renders"),
        (("--from-dataset", "--input", anova), "--input: --from-dataset renders"),
        (("--from-dataset", "--cases", ","), "--cases: ','"),
    ):
        done = run_init(tmp_path / "other", "--config", anova, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr


def test_one_package_for_an_eval_with_a_dataset_is_worth_a_warning(
    tmp_path: Path, anova: Path
) -> None:
    done = run_init(tmp_path / "one", "--config", anova)
    assert done.returncode == 0, done.stderr
    assert "has a dataset (dataset/): this one package grades every trial without" in done.stderr
    done = run_init(tmp_path / "many", "--config", anova, "--from-dataset", "--cases", "task-0010")
    assert "this one package" not in done.stderr


def test_a_multi_step_eval_makes_a_multi_step_package_per_case(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(TESTS / "fixtures" / "two-steps", suite)
    (suite / "input.yaml").unlink()
    (suite / "eval.yaml").write_text(
        (suite / "eval.yaml")
        .read_text()
        .replace("name: two-steps\n", "name: two-steps\ndataset: {path: cases}\n")
    )
    for case_id, goal in (("c1", "41"), ("c2", "42")):
        (suite / "cases" / case_id).mkdir(parents=True)
        (suite / "cases" / case_id / "input.yaml").write_text(f"goal: {goal}\n")
    tasks = init_dataset_tasks(InitRequest(tmp_path / "tasks", suite / "eval.yaml"))
    for task, goal in zip(tasks, ("41", "42"), strict=True):
        config = tomllib.loads((task / "task.toml").read_text())
        assert config["multi_step_reward_strategy"] == "final"
        assert [step["name"] for step in config["steps"]] == ["plan", "build"]
        plan = config["steps"][0]["verifier"]
        assert plan["env"] == {
            "VERIFIER_STEP": "plan",
            "VERIFIER_DEADLINE": plan["env"]["VERIFIER_DEADLINE"],
        }
        assert plan["timeout_sec"] == float(plan["env"]["VERIFIER_DEADLINE"]) + 60
        assert config["verifier"]["env"]["VERIFIER_CASE_ID"] == task.name
        assert (task / "steps/plan/instruction.md").read_text() == (
            f"Write your plan to reach {goal} into plan.md\n"
        )
        assert not (task / "instruction.md").exists()
        assert _files(task / "environment") == {"Dockerfile", "input.yaml"}
