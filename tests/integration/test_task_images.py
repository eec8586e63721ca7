"""`verifier task init --environment` packages built and graded for real, with podman
and docker: `verifier task test` passes a good package and fails (exit 9, one line
saying why) a task that rewards doing nothing or whose solution fails; the verifier's
image starts with an empty work dir (the case is what Harbor copies in, never merged
with the environment's own files) and a /tests only root and group 0 can read.

A small environment without a toolchain to install keeps the builds offline and quick;
tests/harbor runs the Python and Go tasks in real Harbor trials.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import IMAGE, Engine
from verifier.task import InitRequest, init_task

pytestmark = pytest.mark.integration

VERIFIER = str(Path(sys.executable).with_name("verifier"))
DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY . .\n"
EVAL = """\
name: answer
judges:
  - name: answer
    builtin: file_contains
    arguments: {path: answer.txt, text: "42"}
  - name: cleaned_up
    description: the agent removed leftover.txt
    check: return "leftover.txt" not in outputs["files"]
reward:
  weights: {answer: 1, cleaned_up: 1}
  gate: false
  on_error: zero
"""
SOLVED = "#!/bin/bash\nset -e\ncd /app\necho 42 > answer.txt\nrm leftover.txt\n"


@pytest.fixture(params=["podman-cli", "docker"])
def cli(request: pytest.FixtureRequest) -> str:
    """The engine's command: podman (its CLI) or docker."""
    fixture = {"podman-cli": "podman_cli_engine", "docker": "docker_engine"}[request.param]
    engine: Engine = request.getfixturevalue(fixture)
    return "podman" if engine.name == "podman-cli" else "docker"


def package(tmp_path: Path, solve: str = SOLVED) -> Path:
    source = tmp_path / "source"
    (source / "environment").mkdir(parents=True)
    (source / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (source / "environment" / "answer.txt").write_text("41\n")
    (source / "environment" / "leftover.txt").write_text("remove me\n")
    (source / "eval.yaml").write_text(EVAL)
    dest = init_task(
        InitRequest(
            tmp_path / "task",
            source / "eval.yaml",
            environment=source / "environment",
            image=IMAGE,
            name="it/answer",
        )
    )
    (dest / "solution" / "solve.sh").write_text(solve)
    return dest


def task_test(cli: str, dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VERIFIER, "task", "test", str(dest), "--engine", cli],
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_task_test_passes_a_package_whose_solution_earns_its_reward(
    cli: str, tmp_path: Path
) -> None:
    done = task_test(cli, package(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-3:] == [
        "untouched environment: reward 0",
        "solution: reward 1",
        "task test: ok (solution 1 = expected 1, untouched 0 < 1)",
    ]


@pytest.mark.parametrize(
    ("solve", "why", "judges"),
    [
        (
            "#!/bin/bash\ntrue\n",
            "task test: FAILED: the solution gets 0, not the expected 1",
            ["  answer: false", "    answer.txt does not contain '42'", "  cleaned_up: false"],
        ),
        (
            "#!/bin/bash\ncd /app\necho 42 > answer.txt\n",
            "task test: FAILED: the solution gets 0.5, not the expected 1",
            ["  answer: true", "    answer.txt contains '42'", "  cleaned_up: false"],
        ),
        ("#!/bin/bash\necho oops >&2\nexit 3\n", "solve.sh exits 3: oops", []),
    ],
)
def test_task_test_fails_a_package_that_does_not_teach(
    cli: str, tmp_path: Path, solve: str, why: str, judges: list[str]
) -> None:
    done = task_test(cli, package(tmp_path, solve))
    assert done.returncode == 9, done.stdout + done.stderr
    assert why in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[1:] == judges  # each judge's value and rationale


def test_task_test_runs_the_verifier_as_harbor_does(cli: str, tmp_path: Path) -> None:
    """The case is copied into a container of the verifier's image (not mounted) and
    test.sh exec'd in the image's working dir: a verifier image whose WORKDIR is gone
    fails task test as it fails Harbor's artifact upload ("chdir to cwd")."""
    dest = package(tmp_path)
    verifier = dest / "tests" / "Dockerfile"  # the environment's part ends in /app/repo
    verifier.write_text(verifier.read_text().replace("WORKDIR /app\n", "WORKDIR /app/repo\n", 1))
    assert task_test(cli, dest).returncode == 0  # WORKDIR set again after emptying /app
    lines = verifier.read_text().splitlines()
    lines.remove("WORKDIR /app")  # as packages had it before: the environment's stays
    verifier.write_text("\n".join(lines) + "\n")
    done = task_test(cli, dest)
    assert done.returncode == 9, done.stdout + done.stderr
    assert done.stderr.startswith("task test: FAILED: untouched: Harbor's "), done.stderr
    assert "in the verifier's container failed" in done.stderr
    assert "/app/repo" in done.stderr and "no such file or directory" in done.stderr


def test_an_untouched_environment_that_already_scores_fails(cli: str, tmp_path: Path) -> None:
    dest = package(tmp_path)
    done = subprocess.run(
        [VERIFIER, "task", "test", str(dest), "--engine", cli, "--expect", "0"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 9
    assert "the solution gets 1, not the expected 0" in done.stderr


def test_the_verifier_image_starts_with_an_empty_workdir_and_a_closed_tests(
    cli: str, tmp_path: Path
) -> None:
    dest = package(tmp_path)
    tag = f"localhost/hv-task-image-test:{uuid.uuid4().hex[:12]}"
    pull = ["--pull=never"] if cli == "podman" else []
    built = subprocess.run(
        [cli, "build", *pull, "-t", tag, str(dest / "tests")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    try:
        probe = subprocess.run(
            [
                cli,
                "run",
                "--rm",
                "--network",
                "none",
                tag,
                "sh",
                "-c",
                "ls -A /app; stat -c '%U %G %a' /tests /tests/eval.yaml; "
                "id -u; cat /tests/eval.yaml >/dev/null && echo readable",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert probe.returncode == 0, probe.stderr
        # nothing in /app; /tests root's and group 0's; the image's user 1001 (group 0) reads
        assert probe.stdout.splitlines() == ["root root 750", "root root 640", "1001", "readable"]
        other = subprocess.run(
            [
                cli,
                "run",
                "--rm",
                "--network",
                "none",
                "--user",
                "65534:65534",
                tag,
                "cat",
                "/tests/eval.yaml",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert other.returncode != 0 and "Permission denied" in other.stderr
    finally:
        subprocess.run([cli, "rmi", "--force", tag], capture_output=True, timeout=120)


def test_a_toolchain_in_the_work_dir_of_the_built_image_fails(cli: str, tmp_path: Path) -> None:
    """The case takes the work dir's place when the tests run: a venv there, on PATH, is
    the agent's (verifier.task.workdir_toolchain). `task init` refuses such a Dockerfile; one
    edited afterwards, or a base image that does it, is caught in the built image."""
    dest = package(tmp_path)
    dockerfile = dest / "environment" / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text()
        + "RUN mkdir -p /app/.venv/bin && ln -s /bin/sh /app/.venv/bin/python3\n"
        + "ENV PATH=/app/.venv/bin:$PATH\n"
    )
    done = task_test(cli, dest)
    assert done.returncode == 9, done.stdout + done.stderr
    assert done.stderr.startswith(
        "task test: FAILED: the environment's toolchain: /app/.venv/bin (an ENV PATH entry) "
        "is in the agent's work dir /app"
    ), done.stderr
    assert "UV_PROJECT_ENVIRONMENT=/opt/venv" in done.stderr
