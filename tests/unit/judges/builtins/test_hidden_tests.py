"""The trusted tests of `runner: pytest` with `test_dir`, hidden from the code under test.

The task: tests beside eval.yaml (task-tests/, as `verifier task import
--hardened-runner` writes them) that compare the code's answer with a secret they hold.
The honest code does not know it (reward 0.5: one of two listed tests). The hostile
code looks for the tests where the code under test can reach files: it opens the
files in $VERIFIER_PROVIDED (and walks it), every file its process holds open
(/proc/self/fd) and, with `case_at`, the dirs around its view; whatever holds the
secret, it answers with. Graded by `verifier grade` as root and as an arbitrary UID,
with Landlock and without it: the secret is nowhere (the files are empty stand-ins and
the sources came on stdin), and the reward is the honest one. The same attack under a
hand-written pytest handed the tests as files (`provide:`) finds the secret: 1.0.

And what hiding keeps: a failing test's traceback shows its source lines and pytest's
rewritten assert message; the ids are relative to test_dir.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.hostile import NONROOT, grade_as, idle_uid, remove_world_dir
from tests.toolchain import PYTEST_PACKAGES, toolchain_python, world_dir
from verifier.judges.builtins.runners import LAUNCHER, handed_input

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches to other UIDs: run as root")
SECRET = f"s3cr3t-{secrets.token_hex(8)}"
TESTS = f"""\
from helpers import double
from calc import answer, twice

SECRET = "{SECRET}"


def test_the_answer():
    assert answer() == SECRET


def test_twice():
    assert twice(4) == double(4)
"""
HELPERS = "def double(value):\n    return value * 2\n"
HONEST = """\
def answer():
    return "no idea"


def twice(value):
    return value + value
"""
# Looks for the tests' secret in every file the code under test can reach.
HOSTILE = """\
import os
import re

FOUND = re.compile(r"s3cr3t-[0-9a-f]{16}")


def _read(path):
    if not os.path.isfile(path):  # a pipe would wait for its writer
        return ""
    try:
        with open(path, "rb") as handle:
            return handle.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return ""


def _places():
    provided = os.environ.get("VERIFIER_PROVIDED", "")
    for top in filter(None, [provided, os.path.dirname(provided), "/srv"]):
        for dirpath, _, files in os.walk(top):
            for name in files:
                yield os.path.join(dirpath, name)
    for fd in os.listdir("/proc/self/fd"):
        yield "/proc/self/fd/" + fd


def answer():
    for path in _places():
        found = FOUND.search(_read(path))
        if found:
            return found.group(0)
    return "no idea"
""" + HONEST.split("\n\n\n", 1)[1]
LISTED = ["test_outputs.py::test_the_answer", "test_outputs.py::test_twice"]


class Task:
    """eval.yaml with the tests in task-tests/, a toolchain any UID can run, under a dir
    any UID can read."""

    def __init__(self, root: Path, python: Path) -> None:
        self.root = root
        self.python = python
        self.marker = f"hidden-tests-{secrets.token_hex(6)}"
        config = root / "config"
        (config / "task-tests").mkdir(parents=True)
        (config / "task-tests" / "test_outputs.py").write_text(TESTS)
        (config / "task-tests" / "helpers.py").write_text(HELPERS)
        self.config = config / "eval.yaml"

    def gate(self, *, case_at: str | None = None, by_hand: bool = False) -> Path:
        """eval.yaml: the hardened runner over test_dir (or a hand-written pytest handed
        the tests as files), the listed tests' pass rate the reward."""
        marker = ["-k", f"not {self.marker}"]  # names the run in ps
        if by_hand:
            command = (
                f'cp -r "$VERIFIER_PROVIDED/tests" ./tests && {self.python} -m pytest -q '
                f"--rootdir . -p no:cacheprovider --junitxml=report.xml -k 'not {self.marker}' tests"
            )
            arguments = {
                "command": command,
                "report": "report.xml",
                "provide": {
                    "tests/test_outputs.py": "task-tests/test_outputs.py",
                    "tests/helpers.py": "task-tests/helpers.py",
                },
                "tests": [f"tests/{test.split('::')[0]}::{test.split('::')[1]}" for test in LISTED],
            }
        else:
            arguments = {
                "runner": "pytest",
                "executable": str(self.python),
                "test_dir": "task-tests",
                "tests": LISTED,
                "args": marker,
                **({"case_at": case_at} if case_at else {}),
            }
        document = {
            "judges": [{"name": "tests", "builtin": "tests/pass_rate", "arguments": arguments}],
            "reward": {"judge": "tests", "on_error": "fail"},
        }
        path = self.config.with_name(f"eval-{secrets.token_hex(4)}.yaml")
        path.write_text(yaml.safe_dump(document))
        for entry in [self.root, *self.root.rglob("*")]:
            entry.chmod(0o755 if entry.is_dir() else 0o644)
        return path

    def case(self, calc: str) -> Path:
        case = self.root / "cases" / secrets.token_hex(4)
        case.mkdir(parents=True)
        (case / "calc.py").write_text(calc)
        for path in [case.parent, case, *case.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        return case


@pytest.fixture(scope="module")
def task() -> Iterator[Task]:
    root = world_dir("verifier-hidden-")
    try:
        with toolchain_python(PYTEST_PACKAGES) as python:
            yield Task(root, python)
    finally:
        remove_world_dir(root)


WHO = {"root": lambda: None, "an arbitrary UID": idle_uid}


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("landlock", [True, False], ids=["landlock", "no-landlock"])
@pytest.mark.parametrize("who", list(WHO))
def test_code_under_test_that_reads_the_trusted_tests_finds_nothing(
    task: Task, who: str, landlock: bool
) -> None:
    uid = WHO[who]()
    config = task.gate()
    honest, _ = grade_as(uid, config, task.case(HONEST), task.marker, landlock=landlock)
    reward, judges = grade_as(uid, config, task.case(HOSTILE), task.marker, landlock=landlock)
    assert honest == 0.5
    assert reward == 0.5, judges["tests"]["rationale"]
    assert "failed: test_outputs.py::test_the_answer" in judges["tests"]["rationale"]


@pytest.mark.slow
@needs_root
def test_with_the_case_shown_where_the_tests_expect_it_they_stay_hidden(task: Task) -> None:
    """case_at /srv: the tests find the case there (a view, in a mount namespace of its
    own), and the code walking the file system around it finds no secret either."""
    config = task.gate(case_at="/srv")
    reward, judges = grade_as(NONROOT, config, task.case(HOSTILE), task.marker)
    assert reward == 0.5, judges["tests"]["rationale"]


@pytest.mark.slow
@needs_root
def test_the_same_attack_finds_the_tests_a_hand_written_pytest_is_handed(task: Task) -> None:
    """Why they are hidden: handed as files, the tests give their secret away."""
    config = task.gate(by_hand=True)
    reward, judges = grade_as(NONROOT, config, task.case(HOSTILE), task.marker)
    assert reward == 1.0, judges["tests"]["rationale"]


FAILING = """\
def test_sum():
    value = 2 + 2
    assert value == 5, "two and two"
"""


def test_a_hidden_tests_failure_shows_its_source_and_the_rewritten_assert(tmp_path: Path) -> None:
    """The launcher itself, run as the sandbox runs it, its tests' files empty stand-ins
    and their sources on stdin: the trace has the test's lines and pytest's message."""
    provided, results, case = tmp_path / "provided", tmp_path / "results", tmp_path / "case"
    for path in (provided / "tests", results, case):
        path.mkdir(parents=True)
    (provided / LAUNCHER.name).write_bytes(LAUNCHER.read_bytes())
    (provided / "tests" / "test_sum.py").write_text("")
    source = tmp_path / "test_sum.py"
    source.write_text(FAILING)
    bootstrap = (
        "import os, runpy; runpy.run_path(os.path.join(os.environ['VERIFIER_PROVIDED'], "
        f"'{LAUNCHER.name}'), run_name='__main__')"
    )
    done = subprocess.run(
        [
            "python3",
            "-I",
            "-c",
            bootstrap,
            "--tests",
            "tests",
            "--report",
            "ctrf.json",
            "--",
            "test_sum.py",
        ],
        input=handed_input(b"key", {"test_sum.py": source}),
        cwd=case,
        env={**os.environ, "VERIFIER_PROVIDED": str(provided), "VERIFIER_RESULTS": str(results)},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout.decode() + done.stderr.decode()
    [test] = json.loads((results / "ctrf.json").read_text())["results"]["tests"]
    assert test["name"] == "test_sum.py::test_sum" and test["status"] == "failed"
    assert test["message"] == "AssertionError: two and two\nassert 4 == 5"
    assert '>       assert value == 5, "two and two"' in test["trace"]
    assert "    value = 2 + 2" in test["trace"]
    assert (provided / "tests" / "test_sum.py").read_text() == ""
    assert not list(tmp_path.rglob("*.pyc")), "no byte code of the tests is written"


# What would turn each failure into a pass, if pytest loaded it as a plugin.
CONFTEST = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


@pytest.mark.slow
@needs_root
def test_a_conftest_the_agent_plants_in_the_repo_is_not_on_the_tests_way(task: Task) -> None:
    """The tests' rootdir and confcutdir are test_dir: the repo's conftest.py is never
    loaded (loaded, the launcher would void the run: 0), so the honest reward stands."""
    case = task.case(HONEST)
    (case / "conftest.py").write_text(CONFTEST)
    (case / "conftest.py").chmod(0o644)
    reward, judges = grade_as(NONROOT, task.gate(), case, task.marker)
    assert reward == 0.5, judges["tests"]["rationale"]
