"""`verifier task import` packages built for real, with podman and docker: the verifier's
image of an imported task is its environment with what its test.sh installs at test
time done at build time, the environment's variables saved for the script (its ENV,
not the build's arguments), the task's tests in /grading (root's alone), the verifier's
own /tests/test.sh, and a working dir that exists once the work dir is emptied; and
`verifier task test` grades one with its own test.sh.

The tasks are tests/harbor/native/ (Harbor-format tasks of our own, in the shape
published ones have); tests/harbor grades them in real Harbor trials.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import IMAGE, Engine
from verifier.task.importer import ImportOptions, import_task

pytestmark = pytest.mark.integration

NATIVE = Path(__file__).resolve().parents[1] / "harbor" / "native"
VERIFIER = str(Path(sys.executable).with_name("verifier"))


@pytest.fixture(params=["podman-cli", "docker"])
def cli(request: pytest.FixtureRequest) -> str:
    fixture = {"podman-cli": "podman_cli_engine", "docker": "docker_engine"}[request.param]
    engine: Engine = request.getfixturevalue(fixture)
    return "podman" if engine.name == "podman-cli" else "docker"


def built(
    cli: str, task: str, tmp_path: Path, source: Path | None = None, hardened: bool = False
) -> str:
    dest = tmp_path / task
    options = ImportOptions(image=IMAGE, hardened_runner=hardened)
    import_task(source or NATIVE / task, dest, options)
    tag = f"localhost/hv-import-test:{uuid.uuid4().hex[:12]}"
    pull = ["--pull=never"] if cli == "podman" else []
    network = ["--network", "host"]  # the builds install from Debian's mirror
    done = subprocess.run(
        [cli, "build", *pull, *network, "-t", tag, str(dest / "tests")],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return tag


def task_tested(dest: Path, cli: str) -> subprocess.CompletedProcess[str]:
    """`verifier task test` of the package: with podman it must pass (untouched 0,
    solution 1); with docker its result is the caller's to check."""
    done = subprocess.run(
        [VERIFIER, "task", "test", str(dest), "--engine", cli, "--build-network", "host"],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    if cli == "podman":
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[-3:] == [
            "untouched environment: reward 0",
            "solution: reward 1",
            "task test: ok (solution 1 = expected 1, untouched 0 < 1)",
        ]
    return done


def inside(cli: str, tag: str, script: str, user: str = "root") -> str:
    done = subprocess.run(
        [cli, "run", "--rm", "--network", "none", "--user", user, tag, "bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_an_imported_python_task_has_its_test_runner_installed_at_build_time(
    cli: str, tmp_path: Path
) -> None:
    tag = built(cli, "primes", tmp_path)
    try:
        # test.sh's `apt-get install python3-pytest` ran when the image was built.
        assert inside(cli, tag, "python3 -m pytest --version 2>&1").startswith("pytest ")
        listing = inside(
            cli,
            tag,
            "pwd; stat -c '%a %U %n' /grading /grading/eval.yaml /grading/task-tests/test.sh"
            " /tests /tests/test.sh; ls -A /app | wc -l",
        )
        assert listing.splitlines() == [
            "/app",  # the working dir exists: Harbor runs every command there
            "750 root /grading",
            "640 root /grading/eval.yaml",
            "750 root /grading/task-tests/test.sh",
            "755 root /tests",
            "750 root /tests/test.sh",
            "0",  # the case is only what Harbor copies in
        ]
        # The verifier's user (1001:0) reads the config; another user cannot.
        inside(cli, tag, "test -r /grading/eval.yaml", user="1001:0")
        inside(cli, tag, "! test -r /grading/eval.yaml && ! ls /grading", user="65534:65534")
    finally:
        subprocess.run([cli, "rmi", "--force", tag], capture_output=True, check=False)


def test_the_environments_variables_are_saved_for_the_script(cli: str, tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(NATIVE / "go-sum", source)  # its ENV, on a base without Go (quicker)
    (source / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nARG BUILD_ONLY=x\nENV GOFLAGS=-count=1 SUM_CHECK=strict\n"
        "WORKDIR /app\nCOPY sum/ /app/sum/\n"
    )
    tag = built(cli, "go-sum", tmp_path, source)
    try:
        saved = inside(cli, tag, "cat /grading/image.env").splitlines()
        assert "SUM_CHECK=strict" in saved and "GOFLAGS=-count=1" in saved
        assert any(line.startswith("PATH=") for line in saved)
        assert not any(line.startswith(("HOSTNAME=", "HOME=", "BUILD_ONLY=")) for line in saved)
    finally:
        subprocess.run([cli, "rmi", "--force", tag], capture_output=True, check=False)


def test_task_test_grades_an_imported_task_with_podman_and_says_why_not_with_docker(
    cli: str, tmp_path: Path
) -> None:
    """Its own test.sh grades it (untouched 0, solution 1) where user namespaces are
    allowed (podman); docker's default seccomp profile refuses them: a clear error."""
    dest = tmp_path / "primes"
    import_task(NATIVE / "primes", dest, ImportOptions(image=IMAGE, verifier_network="public"))
    done = task_tested(dest, cli)
    if cli == "docker":
        assert done.returncode == 9, done.stdout + done.stderr
        assert "the script cannot be run here: user namespaces are refused here" in done.stderr


def test_task_test_grades_a_task_imported_with_the_hardened_runner(
    cli: str, tmp_path: Path
) -> None:
    """primes' test.sh only runs pytest over /tests/test_outputs.py: with
    --hardened-runner its tests run in the hardened runner (the case at /app, a view),
    the untouched environment 0 and the solution 1; the image holds the trusted list and
    the work dir's manifest as the environment has it (the agent's files are what differ
    from it). With docker, whose seccomp profile refuses user namespaces, the judge
    errors, saying why."""
    dest = tmp_path / "primes"
    import_task(NATIVE / "primes", dest, ImportOptions(image=IMAGE, hardened_runner=True))
    done = task_tested(dest, cli)
    if cli == "docker":
        assert done.returncode == 9, done.stdout + done.stderr
        assert "user namespaces are refused here" in done.stderr
    tag = built(cli, "primes", tmp_path / "again", hardened=True)
    try:
        listing = inside(cli, tag, "cat /grading/workdir.sha256; cat /grading/tests.txt")
        assert listing.splitlines()[-2:] == [
            "test_outputs.py::test_the_file_exists",
            "test_outputs.py::test_the_primes_in_order",
        ]
        assert listing.splitlines()[0].endswith("  ./numbers.txt")
    finally:
        subprocess.run([cli, "rmi", "--force", tag], capture_output=True, check=False)


@pytest.mark.parametrize(
    "task",
    [
        "root-key",  # test.sh as root: useradd, su, a setuid-root helper reading a root-only key
        "entry-service",  # a loopback service the environment's ENTRYPOINT starts
    ],
)
def test_task_test_grades_a_task_whose_tests_need_root_or_its_entrypoint(
    podman_cli_engine: Engine, task: str, tmp_path: Path
) -> None:
    """Its own test.sh, run as root of its own user namespace after the environment's
    ENTRYPOINT, grades it as Harbor does natively: solution 1, untouched 0."""
    dest = tmp_path / task
    import_task(NATIVE / task, dest, ImportOptions(image=IMAGE))
    task_tested(dest, "podman")
