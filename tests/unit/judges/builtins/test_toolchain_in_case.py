"""The toolchain is the environment's, never the case's (issue 29 item 3).

A task whose toolchain lives in the agent's work dir (uv's `/app/.venv`, with
`PATH=/app/.venv/bin:$PATH`): Harbor grades what it collects from /app, so the venv
the verifier would run is the agent's, and the agent edits its
`_pytest/reports.py` to turn every failure into a pass. The calc task of
test_runners (honest reward 1/3), graded by `runner: pytest` with its default
`python3`, as root and as an arbitrary UID, with Landlock and without it: the case's
PATH entry, or a dir outside whose symlink leads into the case, is never searched, so
the environment's own python3 (further on PATH) runs the tests, and the reward is the
honest one. An `executable` in the case (the author's config) is an error that says so.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.hostile import NONROOT, grade_as, remove_world_dir
from tests.toolchain import PYTEST_PACKAGES, portable_python, toolchain_python, world_dir
from tests.unit.judges.builtins.test_runners import (
    BUGGY,
    HELPERS,
    LISTED,
    TRUSTED_TESTS,
    UNTOUCHED,
)
from verifier.grading import grade, load_eval
from verifier.results import Status

AS = {"root": None, "non-root": NONROOT}
MATRIX = [
    pytest.param(who, landlock, id=f"{who}-{'landlock' if landlock else 'no-landlock'}")
    for who in AS
    for landlock in (True, False)
]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches to other UIDs: run as root")
# The agent's edit of the venv's pytest: every failed test report says passed.
HONEST_LINE = "        self.outcome = outcome\n\n        #: None or a failure representation."
FORGED_LINE = (
    '        self.outcome = "passed" if outcome == "failed" else outcome\n'
    '        longrepr = None if outcome == "failed" else longrepr\n\n'
    "        #: None or a failure representation."
)


class Arena:
    """The trusted side (runner: pytest, default python3, the test list), the
    environment's own toolchain outside the case, and cases that carry the task's venv
    (/app/.venv) with its pytest edited."""

    def __init__(self, root: Path, honest: Path) -> None:
        self.root = root
        self.honest = honest  # the environment's python3, outside the case
        self.marker = f"toolchain-arena-{secrets.token_hex(6)}"
        arguments = {
            "runner": "pytest",
            "tests": "tests.txt",
            "timeout": 120,
            "args": ["-k", f"not {self.marker}"],
        }
        self.config = self.write_config("default", arguments)
        assert (honest.parent / "python3").is_file()  # what `python3` finds on its PATH

    def write_config(self, name: str, arguments: dict[str, object]) -> Path:
        config = self.root / "config" / name
        files = {
            "eval.yaml": yaml.safe_dump(
                {
                    "judges": [
                        {
                            "name": "tests",
                            "builtin": "tests/pass_rate",
                            "timeout": 180,
                            "arguments": arguments,
                        }
                    ],
                    "reward": {"judge": "tests", "on_error": "zero"},
                }
            ),
            "tests.txt": "\n".join(LISTED) + "\n",
        }
        for file, text in files.items():
            (config / file).parent.mkdir(parents=True, exist_ok=True)
            (config / file).write_text(text)
        return config / "eval.yaml"

    def case(self, name: str) -> Path:
        """The buggy calc.py, the trusted tests, and the task's venv at .venv with the
        agent's edit of its pytest; readable by all, written by none."""
        case = self.root / "cases" / f"{name}-{secrets.token_hex(4)}"
        (case / "tests").mkdir(parents=True)
        (case / "calc.py").write_text(BUGGY)
        (case / "tests" / "test_calc.py").write_text(TRUSTED_TESTS)
        (case / "tests" / "helpers.py").write_text(HELPERS)
        venv = portable_python(case, PYTEST_PACKAGES).parent.parent
        venv.rename(case / ".venv")
        reports = next((case / ".venv").glob("lib/python*/site-packages/_pytest/reports.py"))
        text = reports.read_text()
        assert HONEST_LINE in text
        reports.write_text(text.replace(HONEST_LINE, FORGED_LINE, 1))
        for path in [case, *case.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o555 if path.is_dir() or os.access(path, os.X_OK) else 0o444)
        return case

    def path(self, first: str) -> str:
        """The environment's PATH: `first`, then its own python3, then the system's."""
        return f"{first}:{self.honest.parent}:/usr/local/bin:/usr/bin:/bin"

    def grade(
        self, case: Path, path: str, uid: int | None, landlock: bool
    ) -> tuple[float, dict[str, object]]:
        reward, judges = grade_as(
            uid, self.config, case, self.marker, landlock=landlock, env={"PATH": path}
        )
        return reward, judges["tests"]


@pytest.fixture(scope="module")
def arena() -> Iterator[Arena]:
    root = world_dir("verifier-toolchain-case-")
    try:
        with toolchain_python(PYTEST_PACKAGES) as honest:
            yield Arena(root, honest)
    finally:
        remove_world_dir(root)


def test_the_edited_venv_passes_every_test_when_it_runs_them(arena: Arena) -> None:
    """The attack is real: the case's venv, run as the task's PATH says, passes all."""
    case = arena.case("control")
    run = subprocess.run(
        [str(case / ".venv/bin/python"), "-m", "pytest", "-p", "no:cacheprovider", "tests"],
        cwd=case,
        capture_output=True,
        text=True,
        env={"PATH": arena.path(str(case / ".venv/bin"))},
    )
    assert run.returncode == 0 and "3 passed" in run.stdout, run.stdout + run.stderr


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize(("who", "landlock"), MATRIX)
@pytest.mark.parametrize("how", ["in the case", "a link into the case"])
def test_the_venv_in_the_case_is_never_the_runner(
    arena: Arena, how: str, who: str, landlock: bool
) -> None:
    case = arena.case(how.replace(" ", "-"))
    first = str(case / ".venv" / "bin")
    if how == "a link into the case":  # /opt/tools -> /app/.venv/bin, say
        link = Path(str(case) + "-tools")
        link.symlink_to(first)
        first = str(link)
    reward, tests = arena.grade(case, arena.path(first), AS[who], landlock)
    assert tests["value"] == pytest.approx(UNTOUCHED), tests["rationale"]
    assert str(tests["rationale"]).startswith("1 of 3 listed tests passed"), tests["rationale"]
    assert reward == pytest.approx(UNTOUCHED)


def test_an_executable_in_the_case_is_an_error_naming_it(arena: Arena) -> None:
    """The author's config pointing into the case: no verdict, and the error says why."""
    case = arena.case("executable")
    python = case / ".venv" / "bin" / "python3"
    config = arena.write_config(
        "in-case", {"runner": "pytest", "tests": "tests.txt", "executable": str(python)}
    )
    result = grade(load_eval(config), case).results[0]
    assert result.status is Status.ERROR
    assert result.error is not None
    assert result.error.startswith(f"the toolchain cannot run {python}: {python} lies in {case}")
    assert "install it outside" in result.error


def test_a_program_of_the_toolchain_linked_into_the_case_is_an_error(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/usr/local/bin/python3 -> /app/.venv/bin/python3: the environment's doing."""
    case = arena.case("linked-program")
    tools = Path(str(case) + "-bin")
    tools.mkdir()
    (tools / "python3").symlink_to(case / ".venv" / "bin" / "python3")
    monkeypatch.setenv("PATH", arena.path(str(tools)))
    result = grade(load_eval(arena.config), case).results[0]
    assert result.status is Status.ERROR
    assert f"{tools / 'python3'} lies in {case}" in (result.error or "")


def test_a_relative_executable_is_a_config_error(arena: Arena) -> None:
    config = arena.write_config(
        "relative", {"runner": "pytest", "tests": "tests.txt", "executable": ".venv/bin/python"}
    )
    with pytest.raises(Exception, match=r"executable: '\.venv/bin/python' is a path into the case"):
        load_eval(config)


def test_a_program_whose_interpreter_lies_in_the_case_is_an_error(tmp_path: Path) -> None:
    """A venv's script copied out of /app/.venv names /app/.venv/bin/python on its #!
    line: the kernel would run the agent's interpreter (without Landlock, as root, the
    original case is readable to the sandbox's user)."""
    from verifier.judges.builtins.toolchain import executable_problem

    case, tools = tmp_path / "app", tmp_path / "opt"
    (case / ".venv" / "bin").mkdir(parents=True)
    tools.mkdir()
    python = case / ".venv" / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    pytest_script = tools / "pytest"
    pytest_script.write_text(f"#!{python} -I\nimport pytest\n")
    for path in (python, pytest_script):
        path.chmod(0o755)
    problem = executable_problem("pytest", str(tools), (str(case),))
    assert problem is not None
    assert problem.startswith(f"{python} (the interpreter of {pytest_script}) lies in {case}")
    honest = tools / "honest"
    honest.write_text("#!/bin/sh\necho\n")
    honest.chmod(0o755)
    assert executable_problem("honest", str(tools), (str(case),)) is None
