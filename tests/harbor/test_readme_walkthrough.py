"""The README's "Walkthrough: a coding task", run as written: every `$ ` command of its
console blocks, in order, in one bash session in a fresh dir that holds the `calc/`
repo it starts from; each must exit 0 and print exactly the output shown under it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.harbor.runner import (
    HARBOR_VENV,
    REPO,
    VERIFIER_IMAGE,
    podman,
    remove_trial_images,
    require_harbor,
    warm_cache,
)

pytestmark = pytest.mark.harbor

SECTION = "## Walkthrough: a coding task"
CALC = Path(__file__).resolve().parent / "tasks" / "calc" / "environment"
TIMEOUT_S = 1800
WALKTHROUGH_IMAGE = "localhost/calc-env"  # the environment's image, which it collects the tests in


def walkthrough_steps(readme: str) -> list[tuple[str, list[str]]]:
    """[(command, expected output lines)] of the section's console blocks."""
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    for block in section.split("```console\n")[1:]:
        lines = block.split("\n```", 1)[0].splitlines()
        index = 0
        while index < len(lines):
            line = lines[index]
            assert line.startswith("$ "), f"output before any command: {line!r}"
            command = [line[2:]]
            index += 1
            if "<<'EOF'" in line:
                while lines[index] != "EOF":
                    command.append(lines[index])
                    index += 1
                command.append(lines[index])
                index += 1
            expected = []
            while index < len(lines) and not lines[index].startswith("$ "):
                expected.append(lines[index])
                index += 1
            steps.append(("\n".join(command), expected))
    return steps


def test_the_walkthrough_has_its_steps() -> None:
    steps = walkthrough_steps((REPO / "README.md").read_text())
    commands = [command.split()[0] for command, _ in steps]
    assert commands.count("verifier") == 2 and commands.count("harbor") == 2, commands
    assert all(
        expected
        or command.startswith(
            ("export", "mkdir", "cp", "cat >", "echo", "podman build", "harbor lint", "harbor run")
        )
        for command, expected in steps
    )


def test_the_walkthrough_and_the_coding_trials_grade_with_the_recommended_gate() -> None:
    """What docs/builtins.md recommends is what the README's walkthrough and the Harbor
    trials of tests/harbor/test_harbor_coding.py use: the same judges and reward,
    comments aside."""
    readme = (REPO / "README.md").read_text()
    recommended = (REPO / "docs" / "builtins.md").read_text()
    recommended = recommended.split("## The recommended gate for a coding task", 1)[1]
    recommended = recommended.split("```yaml\n", 1)[1].split("\n```", 1)[0]
    walkthrough = next(
        command
        for command, _ in walkthrough_steps(readme)
        if command.startswith("cat > calc-task/eval.yaml")
    )
    walkthrough = walkthrough.split("\n", 1)[1].rsplit("\nEOF", 1)[0]
    trials = (CALC.parent / "eval.yaml").read_text()
    gates = [yaml.safe_load(text) for text in (recommended, walkthrough, trials)]
    assert all(
        {key: gate[key] for key in ("judges", "reward")}
        == {key: gates[0][key] for key in ("judges", "reward")}
        for gate in gates
    )


def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    require_harbor()
    steps = walkthrough_steps((REPO / "README.md").read_text())
    work = tmp_path / "walkthrough"
    (work / "calc").mkdir(parents=True)
    shutil.copy(CALC / "calc.py", work / "calc" / "calc.py")
    shutil.copytree(CALC / "tests", work / "calc" / "tests")
    script = ["set -u"]
    for index, (command, _) in enumerate(steps):
        script += ["{", command, f"}} > .out-{index} 2>&1", f"echo $? > .rc-{index}"]
    path = [str(HARBOR_VENV / "bin"), str(Path(sys.executable).parent), os.environ["PATH"]]
    env = {**os.environ, "PATH": os.pathsep.join(path), "VERIFIER_IMAGE": VERIFIER_IMAGE}
    # The toolchain's layer (the same RUN line as the walkthrough's Dockerfile) built
    # with the host's network first: builds here may have none of their own.
    warm_cache(CALC, "localhost/walkthrough-warm")
    try:
        subprocess.run(
            ["bash", "-c", "\n".join(script)], cwd=work, env=env, check=True, timeout=TIMEOUT_S
        )
        for index, (command, expected) in enumerate(steps):
            output = (work / f".out-{index}").read_text()
            code = int((work / f".rc-{index}").read_text())
            assert code == 0, f"{command}\nexited {code}:\n{output}"
            assert output.splitlines() == expected, f"{command}\nprinted:\n{output}"
    finally:
        remove_trial_images(work / "jobs")
        podman("rmi", "--force", "localhost/walkthrough-warm", WALKTHROUGH_IMAGE, check=False)
