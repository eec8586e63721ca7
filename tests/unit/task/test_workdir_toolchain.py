"""The toolchain is the environment's, never the case's: `task init --environment` and
`task import` refuse an environment whose toolchain lives in the agent's work dir (the
case takes that dir's place when the tests run), naming the path and the fix; `task
test` reads the same from the built image (IMAGE_PROBE's output)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.task.test_importer import harbor_task
from verifier.errors import UsageError
from verifier.task import InitRequest, init_task
from verifier.task.dockerfile import parse_dockerfile
from verifier.task.importer import import_task
from verifier.task.workdir_toolchain import (
    IMAGE_PROBE,
    context_findings,
    probe_findings,
    toolchain_in_workdir,
)

VERIFIER = str(Path(sys.executable).with_name("verifier"))


def _found(text: str, workdir: str = "/app", case_paths: tuple[str, ...] = ()) -> list[str]:
    dockerfile = parse_dockerfile(text, "Dockerfile")
    return [finding.path for finding in toolchain_in_workdir(dockerfile, workdir, case_paths)]


@pytest.mark.parametrize(
    ("dockerfile", "found"),
    [
        # uv's usual layout: the project's .venv in the work dir, on PATH.
        (
            "FROM python:3.12\nWORKDIR /app\nCOPY . .\nRUN uv sync --frozen\n"
            "ENV PATH=/app/.venv/bin:$PATH\n",
            ["/app/.venv/bin", "/app/.venv"],
        ),
        ('FROM python:3.12\nENV PATH="/app/.venv/bin:${PATH}"\n', ["/app/.venv/bin"]),
        ("FROM debian\nENV PATH /app/tools/bin:$PATH\n", ["/app/tools/bin"]),  # the old form
        ("FROM python:3.12\nWORKDIR /app\nRUN pip install uv && uv sync\n", ["/app/.venv"]),
        ("FROM python:3.12\nWORKDIR /app\nRUN <<EOF\nset -e\nuv venv\nEOF\n", ["/app/.venv"]),
        (
            "FROM python:3.12\nRUN mkdir -p /app && cd /app && python3 -m venv --copies env\n",
            ["/app/env"],
        ),
        ("FROM python:3.12\nENV VIRTUAL_ENV=/app/venv\n", ["/app/venv"]),
        ("FROM python:3\nWORKDIR /app/src\nRUN virtualenv ../venv\n", ["/app/venv"]),
        (
            "FROM python:3\nWORKDIR /app\nENV POETRY_VIRTUALENVS_IN_PROJECT=1\n"
            "RUN poetry install\n",
            ["/app/.venv"],
        ),
        ("FROM python:3\nWORKDIR /app\nRUN pdm install\n", ["/app/.venv"]),
        (
            "FROM node:20\nWORKDIR /app\nCOPY package.json .\nRUN npm ci\n",
            ["/app/node_modules/.bin"],
        ),
        ("FROM node:20\nWORKDIR /app/web\nRUN yarn\n", ["/app/web/node_modules/.bin"]),
        ("FROM golang:1.22\nENV GOPATH=/app/go\n", ["/app/go"]),
        ("FROM golang:1.22\nARG BIN=/app/bin\nENV GOBIN=$BIN\n", ["/app/bin"]),
        # Built in one stage, copied into the work dir by the final one.
        (
            "FROM python:3.12 AS build\nRUN python -m venv /opt/env\n"
            "FROM python:3.12\nCOPY --from=build /opt/env /app/env\n",
            ["/app/env"],
        ),
        # A final stage FROM an earlier one inherits what it made and its ENV.
        (
            "FROM python:3 AS base\nWORKDIR /app\nRUN uv venv\nFROM base\nRUN echo\n",
            ["/app/.venv"],
        ),
    ],
)
def test_a_toolchain_in_the_work_dir_is_found(dockerfile: str, found: list[str]) -> None:
    assert _found(dockerfile) == found


@pytest.mark.parametrize(
    "dockerfile",
    [
        "FROM debian:bookworm-slim\nWORKDIR /app\nRUN apt-get install -y python3-pytest\n"
        "COPY . .\n",
        # uv's documented way out: the project env outside the work dir.
        "FROM python:3.12\nENV UV_PROJECT_ENVIRONMENT=/opt/venv PATH=/opt/venv/bin:$PATH\n"
        "WORKDIR /app\nCOPY . .\nRUN uv sync --frozen\n",
        "FROM python:3.12\nWORKDIR /app\nRUN UV_PROJECT_ENVIRONMENT=/opt/venv uv sync\n",
        "FROM python:3.12\nRUN python3 -m venv /opt/venv\nENV PATH=/opt/venv/bin:$PATH\n"
        "WORKDIR /app\n",
        "FROM node:20\nWORKDIR /app\nRUN npm install -g jest && npm run build\n",
        "FROM node:20\nWORKDIR /app\nRUN npm install --prefix /opt/node\n",
        "FROM golang:1.22\nENV GOPATH=/go\nWORKDIR /app\nRUN go install ./...\n",
        # A venv in the work dir of another stage that never reaches the final one.
        "FROM python:3.12 AS build\nWORKDIR /app\nRUN uv sync\nFROM python:3.12\nWORKDIR /app\n",
        # Poetry's default venv is in its cache, outside.
        "FROM python:3\nWORKDIR /app\nRUN poetry install\n",
        # A work dir that only begins like /app.
        "FROM python:3\nENV PATH=/application/bin:$PATH\n",
    ],
)
def test_a_toolchain_outside_the_work_dir_is_not(dockerfile: str) -> None:
    assert _found(dockerfile) == []


def test_a_venv_or_node_bin_among_the_files_copied_into_the_work_dir_is_found() -> None:
    paths = ["calc.py", ".venv/pyvenv.cfg", ".venv/bin/python", "web/node_modules/.bin/jest"]
    assert [f.path for f in context_findings(paths, "/app")] == [
        "/app/.venv",
        "/app/web/node_modules/.bin",
    ]
    assert context_findings(["calc.py", "tests/test_calc.py"], "/app") == []


def test_the_message_names_the_path_what_says_so_and_the_fix() -> None:
    dockerfile = parse_dockerfile("FROM python:3.12\nENV PATH=/app/.venv/bin:$PATH\n", "x")
    [finding] = toolchain_in_workdir(dockerfile, "/app")
    assert finding.message("/app") == (
        "/app/.venv/bin (an ENV PATH entry) is in the agent's work dir /app: the case takes "
        "its place when the tests run, so the agent would control the tests' toolchain; "
        "install the venv outside /app, e.g. ENV UV_PROJECT_ENVIRONMENT=/opt/venv "
        "VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH (uv sync), or python -m venv /opt/venv"
    )


def _environment(root: Path, dockerfile: str) -> Path:
    root.mkdir(parents=True)
    (root / "Dockerfile").write_text(dockerfile)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    return root


def _eval_yaml(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    config = root / "eval.yaml"
    config.write_text(
        "judges:\n  - name: tests\n    builtin: tests/pass_rate\n    arguments: {runner: pytest}\n"
    )
    return config


UV_LAYOUT = (
    "FROM python:3.12-slim\nWORKDIR /app\nCOPY . .\nRUN pip install uv && uv sync\n"
    "ENV PATH=/app/.venv/bin:$PATH\n"
)


def test_task_init_refuses_a_toolchain_in_the_work_dir_before_writing(tmp_path: Path) -> None:
    environment = _environment(tmp_path / "env", UV_LAYOUT)
    with pytest.raises(UsageError, match=r"--environment .*/env: /app/\.venv/bin \(an ENV PATH"):
        init_task(
            InitRequest(
                tmp_path / "task", _eval_yaml(tmp_path / "grading"), environment=environment
            )
        )
    assert not (tmp_path / "task").exists()


def test_task_init_takes_the_same_environment_with_its_venv_outside(tmp_path: Path) -> None:
    fixed = UV_LAYOUT.replace("ENV PATH=/app/.venv/bin:$PATH\n", "").replace(
        "WORKDIR /app\n",
        "ENV UV_PROJECT_ENVIRONMENT=/opt/venv PATH=/opt/venv/bin:$PATH\nWORKDIR /app\n",
    )
    environment = _environment(tmp_path / "env", fixed)
    init_task(
        InitRequest(tmp_path / "task", _eval_yaml(tmp_path / "grading"), environment=environment)
    )
    assert (tmp_path / "task/tests/Dockerfile").is_file()


def test_task_init_refuses_a_venv_its_context_copies_in(tmp_path: Path) -> None:
    environment = _environment(tmp_path / "env", "FROM python:3.12\nWORKDIR /app\nCOPY . .\n")
    (environment / ".venv/bin").mkdir(parents=True)
    (environment / ".venv/pyvenv.cfg").write_text("home = /usr/local/bin\n")
    with pytest.raises(UsageError, match=r"/app/\.venv \(a venv copied from the build context"):
        init_task(
            InitRequest(
                tmp_path / "task", _eval_yaml(tmp_path / "grading"), environment=environment
            )
        )
    # left out of the build by its .dockerignore, it is not in the image
    (environment / ".dockerignore").write_text(".venv\n")
    init_task(
        InitRequest(tmp_path / "task", _eval_yaml(tmp_path / "grading"), environment=environment)
    )


def test_the_command_exits_2_with_one_line(tmp_path: Path) -> None:
    environment = _environment(tmp_path / "env", UV_LAYOUT)
    config = _eval_yaml(tmp_path / "grading")
    run = subprocess.run(
        [
            VERIFIER,
            "task",
            "init",
            str(tmp_path / "task"),
            "--config",
            str(config),
            "--environment",
            str(environment),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2, run.stderr
    [line] = run.stderr.strip().splitlines()
    assert "/app/.venv/bin (an ENV PATH entry) is in the agent's work dir /app" in line
    assert "UV_PROJECT_ENVIRONMENT=/opt/venv" in line
    assert "Traceback" not in run.stderr


def test_task_import_refuses_a_task_whose_toolchain_is_in_its_work_dir(tmp_path: Path) -> None:
    source = harbor_task(tmp_path / "src")
    (source / "environment/Dockerfile").write_text(
        "FROM node:20\nWORKDIR /app/repo\nCOPY data.txt .\nRUN npm ci\n"
    )
    with pytest.raises(UsageError, match=r"environment/Dockerfile: /app/repo/node_modules/\.bin"):
        import_task(source, tmp_path / "pkg")
    assert not (tmp_path / "pkg").exists()


def test_the_built_image_is_read_the_same_way() -> None:
    output = (
        "HOME=/root\nPATH=/app/.venv/bin:/usr/local/bin:/usr/bin\n"
        "\tprogram\tpython3\t/app/.venv/bin/python3\t/usr/local/bin/python3.12\n"
    )
    assert [f.path for f in probe_findings(output, "/app")] == [
        "/app/.venv/bin",
        "/app/.venv/bin/python3",
    ]
    # the PATH clean, a link that leads into the work dir
    output = "PATH=/usr/local/bin:/usr/bin\n\tprogram\tgo\t/usr/local/bin/go\t/app/go/bin/go\n"
    [finding] = probe_findings(output, "/app")
    assert (finding.path, finding.kind) == ("/app/go/bin/go", "go")
    clean = (
        "PATH=/usr/local/bin:/usr/bin\n\tprogram\tpython3\t/usr/bin/python3\t/usr/bin/python3.11\n"
    )
    assert probe_findings(clean, "/app") == []


def test_the_probe_runs_in_sh_and_reports_where_programs_resolve(tmp_path: Path) -> None:
    venv = tmp_path / "app/.venv/bin"
    venv.mkdir(parents=True)
    (venv / "python3").symlink_to(sys.executable)
    run = subprocess.run(
        ["sh", "-c", IMAGE_PROBE],
        env={"PATH": f"{venv}:/usr/bin:/bin", "VIRTUAL_ENV": str(venv.parent)},
        capture_output=True,
        text=True,
        check=True,
    )
    paths = [f.path for f in probe_findings(run.stdout, str(tmp_path / "app"))]
    assert paths == [str(venv), str(venv.parent), str(venv / "python3")]
