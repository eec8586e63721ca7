"""Every command the README shows keeps working.

The README's shell blocks (tests/readme.py reads them) hold four kinds of command, and
each is held here or by the test that runs it for real: `verifier ...` runs here, on
the bundled examples/, and must print exactly the output shown under it; `make X`
names a target that does what the README says; `podman run` / `docker run` grade the
bundled example in tests/integration/test_image.py, which reads them from the README,
so here their mounts must name files that exist; `oc apply -k DIR` applies an overlay
that tests/integration/test_kubernetes.py renders and validates. A command of another
kind fails here until a test holds it. The walkthrough's console blocks are run by
tests/harbor/test_readme_walkthrough.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.readme import REPO, Command, readme_commands

COMMANDS = readme_commands()
VERIFIER = Path(sys.executable).with_name("verifier")
RAN_HERE = ("verifier", "mkdir", "pip")
HELD_ELSEWHERE = ("make", "podman", "docker", "oc")


def commands_of(*programs: str) -> list[Command]:
    return [command for command in COMMANDS if command.argv[0] in programs]


def ids(commands: list[Command]) -> list[str]:
    return [command.text[:60] for command in commands]


def test_every_readme_command_is_held_by_a_test() -> None:
    unheld = [c.text for c in COMMANDS if c.argv[0] not in RAN_HERE + HELD_ELSEWHERE]
    assert unheld == [], "README commands no test keeps working"
    assert len(commands_of("verifier")) >= 3


def test_the_readme_starts_with_the_two_commands() -> None:
    assert [command.argv for command in COMMANDS[:2]] == [("make", "demo"), ("make", "test")]


@pytest.fixture(scope="module")
def examples_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh dir holding a copy of examples/, where the README's commands run in order."""
    work = tmp_path_factory.mktemp("readme")
    shutil.copytree(REPO / "examples", work / "examples")
    return work


@pytest.mark.parametrize(
    "command", commands_of("verifier", "mkdir"), ids=ids(commands_of("verifier", "mkdir"))
)
def test_the_command_runs_on_the_examples_and_prints_what_is_shown(
    command: Command, examples_dir: Path
) -> None:
    program = str(VERIFIER) if command.argv[0] == "verifier" else command.argv[0]
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("VERIFIER_")
    }
    completed = subprocess.run(
        [program, *command.argv[1:]],
        cwd=examples_dir,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    if command.output:
        assert tuple(completed.stdout.splitlines()) == command.output


def test_pip_install_gives_the_verifier_command() -> None:
    assert [command.argv for command in commands_of("pip")] == [("pip", "install", ".")]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["verifier"].startswith("verifier")


def make_database() -> str:
    """make's rules as it reads the Makefile, without building anything: the target
    asked for does not exist, and no recipe runs."""
    completed = subprocess.run(
        ["make", "--print-data-base", "--question", ".no-such-target"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return completed.stdout


def recipe_of(database: str, target: str) -> str:
    """The prerequisites line and the recipe of a target in make's database."""
    match = re.search(
        rf"^{re.escape(target)}:(?: [^\n]*)?\n(.*?)(?=\n\n)",
        database,
        flags=re.MULTILINE | re.DOTALL,
    )
    assert match, f"make has no target {target}"
    return match.group(0)


@pytest.fixture(scope="module")
def database() -> str:
    if shutil.which("make") is None:
        pytest.fail("make is not installed: the README's two commands need it")
    return make_database()


def test_every_make_target_the_readme_names_exists(database: str) -> None:
    for command in commands_of("make"):
        for target in command.argv[1:]:
            recipe_of(database, target)


def test_make_demo_builds_the_image_and_grades_both_examples(database: str) -> None:
    demo = recipe_of(database, "demo")
    assert demo.startswith("demo: image")
    assert "case-pass case-fail" in demo and "examples/$$case:/case:ro" in demo
    assert "examples/eval.yaml:/tests/eval.yaml:ro" in demo


def test_make_test_runs_lint_the_image_and_every_test_and_ci_runs_it(database: str) -> None:
    prerequisites = [
        line
        for line in recipe_of(database, "test").splitlines()
        if line.startswith("test: ") and "=" not in line
    ]
    assert prerequisites, "make test lists no prerequisites"
    assert {"lint", "image"} <= set(prerequisites[0].split()[1:])
    recipe = recipe_of(database, "test")
    if "scripts/test_beside.sh $(VENV)/bin/pytest" in recipe:  # the trials beside the rest
        beside = (REPO / "scripts" / "test_beside.sh").read_text()
        assert '"$pytest" tests -m harbor ' in beside
        assert '"$pytest" tests -m "not harbor" "$@"' in beside
    else:
        assert "$(VENV)/bin/pytest $(TESTS)" in recipe
    assert re.search(r"^TESTS \?= tests$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert (REPO / ".ci" / "run").read_text().rstrip().endswith("exec make test")


@pytest.mark.parametrize(
    "command", commands_of("podman", "docker"), ids=ids(commands_of("podman", "docker"))
)
def test_the_container_commands_grade_the_bundled_example(command: Command) -> None:
    assert command.argv[1] == "run" and command.argv[-1] == "localhost/harbor-verifier:latest"
    mounts = [command.argv[index + 1] for index, word in enumerate(command.argv) if word == "-v"]
    sources = {mount.split(":")[1]: mount.split(":")[0] for mount in mounts}
    assert set(sources) == {"/case", "/tests/eval.yaml", "/logs/verifier"}
    assert (REPO / sources["/case"]).is_dir() and (REPO / sources["/tests/eval.yaml"]).is_file()
    assert "IMAGE ?= localhost/harbor-verifier:latest" in (REPO / "Makefile").read_text()


@pytest.mark.parametrize("command", commands_of("oc"), ids=ids(commands_of("oc")))
def test_the_cluster_commands_apply_an_overlay_of_the_repo(command: Command) -> None:
    assert command.argv[1:3] == ("apply", "-k")
    assert (REPO / command.argv[3] / "kustomization.yaml").is_file()
