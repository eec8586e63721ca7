"""`task init --environment DIR`: the task's environment for the agent and the verifier.

(The images themselves are built and graded in tests/integration/test_task_images.py
and in real Harbor trials in tests/harbor/test_harbor_coding.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.paths import TESTS
from verifier.errors import UsageError
from verifier.task import InitRequest, init_task

VERIFIER = str(Path(sys.executable).with_name("verifier"))
TASKS = TESTS / "harbor" / "tasks"


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def calc(tmp_path: Path) -> Path:
    """A copy of the Python task's sources, with an executable script in its context."""
    root = tmp_path / "calc-src"
    subprocess.run(["cp", "-r", str(TASKS / "calc"), str(root)], check=True)
    script = root / "environment" / "run.sh"
    script.write_text("#!/bin/sh\nexec python3 -m pytest\n")
    script.chmod(0o755)
    return root


def test_the_environment_goes_to_both_sides(tmp_path: Path, calc: Path) -> None:
    dest = init_task(
        InitRequest(
            tmp_path / "task",
            calc / "eval.yaml",
            environment=calc / "environment",
            protect=("tests/**",),
            image="localhost/v:1",
        )
    )
    source = _files(calc / "environment")
    assert _files(dest / "environment") == source
    context = {f"environment/{name}" for name in source - {"Dockerfile", ".dockerignore"}}
    assert _files(dest / "tests") == {
        "Dockerfile",
        ".dockerignore",
        "eval.yaml",
        "tests.txt",
        "protected/tests/test_calc.py",
        *context,
    }
    for name in source:
        assert (dest / "environment" / name).read_bytes() == (
            calc / "environment" / name
        ).read_bytes()
    assert os.access(dest / "environment/run.sh", os.X_OK)  # COPY keeps the mode
    assert os.access(dest / "tests/environment/run.sh", os.X_OK)
    assert (dest / "tests/.dockerignore").read_text() == (
        "environment/Dockerfile\nenvironment/.dockerignore\nenvironment/**/__pycache__\n"
    )
    dockerfile = (dest / "tests/Dockerfile").read_text()
    environment_part, verifier_part = dockerfile.split("# --- the verifier ---")
    assert "FROM debian:bookworm-slim\n" in environment_part
    assert "WORKDIR /app\nCOPY environment .\n" in environment_part
    assert "python3-pytest" in environment_part
    assert verifier_part.index("RUN rm -rf /app && mkdir -p /app") < verifier_part.index(
        "COPY --from=localhost/v:1 /opt/verifier /opt/verifier"
    )
    assert (
        'COPY ["eval.yaml", "tests.txt", "/tests/"]\nCOPY ["protected", "/tests/protected"]\n'
        in verifier_part
    )
    assert "chmod -R u=rwX,g=rX,o= /tests" in verifier_part
    assert "ENV VERIFIER_CONFIG=/tests/eval.yaml VERIFIER_CASE=/app" in verifier_part
    assert "\nSTOPSIGNAL SIGKILL\n" in verifier_part  # Harbor's stop: at once, not in 10 s
    config = tomllib.loads((dest / "task.toml").read_text())
    assert "docker_image" not in config["environment"]
    assert config["verifier"]["user"] == "root"  # tests/pass_rate runs the agent's code
    assert config["verifier"]["network_mode"] == "no-network"


def test_protect_takes_the_trusted_copies_from_the_environment(tmp_path: Path, calc: Path) -> None:
    """The files the Dockerfile's COPY puts in the work dir, laid out as in the case:
    no copy into DEST/environment first, no second init."""
    dest = init_task(
        InitRequest(
            tmp_path / "task",
            calc / "eval.yaml",
            environment=calc / "environment",
            protect=("tests/**", "calc.py"),
        )
    )
    protected = dest / "tests" / "protected"
    assert _files(protected) == {"tests/test_calc.py", "calc.py"}
    assert (protected / "calc.py").read_bytes() == (calc / "environment/calc.py").read_bytes()


def test_protect_names_what_the_dockerfile_copies_when_nothing_matches(
    tmp_path: Path, calc: Path
) -> None:
    with pytest.raises(
        UsageError,
        match=r"matches none of the files .*Dockerfile COPYs into "
        r"the agent's work dir \(calc.py, run.sh, tests/test_calc.py\)",
    ):
        init_task(
            InitRequest(
                tmp_path / "task",
                calc / "eval.yaml",
                environment=calc / "environment",
                protect=("src/**",),
            )
        )
    assert not (tmp_path / "task").exists()


def test_protect_follows_the_workdir_and_dockerignore(tmp_path: Path, calc: Path) -> None:
    (calc / "environment/Dockerfile").write_text(
        "FROM debian\nWORKDIR /srv\nCOPY tests/ /app/tests/\nCOPY . /opt/elsewhere\n"
    )
    (calc / "environment/.dockerignore").write_text("tests/test_*.py\n")
    with pytest.raises(UsageError, match=r"\(none\)"):  # the only test file is ignored
        init_task(
            InitRequest(
                tmp_path / "task",
                calc / "eval.yaml",
                environment=calc / "environment",
                protect=("tests/**",),
            )
        )


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ({}, "has no Dockerfile"),
        ({"Containerfile": "FROM debian\n"}, "rename Containerfile"),
        ({"Dockerfile": "RUN true\n"}, "no FROM instruction"),
    ],
)
def test_an_environment_without_a_usable_dockerfile(
    tmp_path: Path, calc: Path, layout: dict[str, str], message: str
) -> None:
    environment = tmp_path / "env"
    environment.mkdir()
    for name, text in layout.items():
        (environment / name).write_text(text)
    with pytest.raises(UsageError, match=message):
        init_task(InitRequest(tmp_path / "task", calc / "eval.yaml", environment=environment))


def test_an_environment_inside_eval_yamls_dir_is_not_copied_into_tests_twice(
    tmp_path: Path, calc: Path
) -> None:
    """The common layout: eval.yaml beside environment/. tests/ gets the context once,
    as tests/environment/."""
    dest = init_task(
        InitRequest(tmp_path / "task", calc / "eval.yaml", environment=calc / "environment")
    )
    assert not (dest / "tests/environment/environment").exists()
    assert (dest / "tests/environment/calc.py").is_file()


def test_the_command_line(tmp_path: Path, calc: Path) -> None:
    done = subprocess.run(
        [
            VERIFIER,
            "task",
            "init",
            str(tmp_path / "task"),
            "--config",
            str(calc / "eval.yaml"),
            "--environment",
            str(calc / "environment"),
            "--protect",
            "tests/**",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert f"verifier task test {tmp_path / 'task'}" in done.stdout
    assert "note: [verifier] network_mode = 'no-network': Harbor enforces it" in done.stdout
    for args, message in (
        (("--agent-image", "localhost/a:1"), "--environment and --agent-image"),
        (("--from-dataset",), "--environment: --from-dataset"),
    ):
        done = subprocess.run(
            [
                VERIFIER,
                "task",
                "init",
                str(tmp_path / "other"),
                "--config",
                str(calc / "eval.yaml"),
                "--environment",
                str(calc / "environment"),
                *args,
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr
