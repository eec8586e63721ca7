"""`verifier task import --hardened-runner`: which test.sh it takes (pytest over /tests
files, its installs moved to build time, the reward from pytest's exit code) and which
it leaves to test.sh (saying why); the trusted list read from the sources, checked
against pytest's own collection; and the package it writes. The package built and
graded for real: tests/integration/test_task_import_images.py."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.unit.task.test_importer import TEST_SH, harbor_task
from tests.unit.task.test_test_script import UV_SCRIPT  # Harbor's template: uv, then uvx pytest
from verifier.errors import UsageError
from verifier.grading import load_eval
from verifier.task.hardened_runner import RUNNER_VENV, HardenedPlan, collect_ids, plan_hardened
from verifier.task.importer import ImportOptions, import_task
from verifier.task.test_script import plan_script

TESTS = """\
import pytest


def helper():
    pass


def test_plain():
    assert True


@pytest.mark.parametrize("n", [1, -2, 3.5])
def test_numbers(n):
    assert n


@pytest.mark.parametrize("word,flag", [("a b", True), ("c", None)])
def test_pairs(word, flag):
    assert word


@pytest.mark.parametrize("x", [0, 1])
@pytest.mark.parametrize("y", ["p", "q"])
def test_stacked(x, y):
    assert y


@pytest.mark.parametrize("v", [pytest.param(1, id="one"), pytest.param(2, marks=pytest.mark.slow)])
def test_params(v):
    assert v


@pytest.mark.parametrize("v", [10, 20], ids=["ten", "twenty"])
def test_ids(v):
    assert v


class TestGroup:
    def test_method(self):
        assert True

    def not_a_test(self):
        pass


@pytest.fixture
def test_fixture_named_like_a_test():
    return 1
"""


def _plan(tmp_path: Path, test_sh: str, files: dict[str, str]) -> HardenedPlan | str:
    tests = tmp_path / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    (tests / "test.sh").write_text(test_sh)
    for name, text in files.items():
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text(text)
    others = [path for path in tests.rglob("*") if path.is_file() and path.name != "test.sh"]
    plan = plan_script(tests / "test.sh", others)
    return plan_hardened(tests / "test.sh", tests, plan, "/app")


def test_pytest_over_tests_files_after_the_installs_is_taken(tmp_path: Path) -> None:
    plan = _plan(tmp_path, TEST_SH, {"test_outputs.py": "def test_it():\n    assert True\n"})
    assert plan == HardenedPlan("python3", ("test_outputs.py",), ("test_outputs.py::test_it",), ())


def test_harbors_uvx_template_gets_a_venv_of_its_own_at_build_time(tmp_path: Path) -> None:
    plan = _plan(tmp_path, UV_SCRIPT, {"test_outputs.py": "def test_it():\n    assert True\n"})
    assert isinstance(plan, HardenedPlan), plan
    assert plan.executable == f"{RUNNER_VENV}/bin/python"
    assert plan.build == (
        f"uv venv {RUNNER_VENV} --python 3.13",
        f"uv pip install --python {RUNNER_VENV}/bin/python pytest pytest==8.4.1 "
        "pytest-json-ctrf==0.3.5",
    )


@pytest.mark.parametrize(
    ("test_sh", "files", "why"),
    [
        (TEST_SH, {"test_outputs.py": "x = 1\n", "expected.json": "{}"}, "is not a Python file"),
        (TEST_SH, {"test_outputs.py": "P = '/tests/x'\n"}, "names /tests"),
        (
            TEST_SH.replace("-rA", "-rA -k slow"),
            {"test_outputs.py": "def test_a():\n    pass\n"},
            "option -k changes what runs",
        ),
        (
            TEST_SH + "python3 /tests/check.py\n",
            {"test_outputs.py": "def test_a():\n    pass\n"},
            "is not part of a pytest run",
        ),
        (
            TEST_SH.replace("echo 1 >", "cat /app/score >"),
            {"test_outputs.py": "def test_a():\n    pass\n"},
            "is not part of a pytest run",
        ),
        (
            TEST_SH.replace("/tests/test_outputs.py", "/app/tests/test_x.py"),
            {"test_outputs.py": "def test_a():\n    pass\n"},
            "is not a file in /tests",
        ),
        (
            "#!/bin/bash\nbash /tests/run.sh\n",
            {"test_outputs.py": "def test_a():\n    pass\n"},
            "is not part of a pytest run",
        ),
        (
            "#!/bin/bash\ncd /app\nuv run pytest /tests/test_outputs.py\n",
            {"test_outputs.py": "def test_a():\n    pass\n"},
            "the case's own project",
        ),
        (
            TEST_SH,
            {"test_outputs.py": "import pytest\n@pytest.fixture(params=[1, 2])\ndef f(): pass\n"},
            "a fixture with params",
        ),
        (
            TEST_SH,
            {
                "test_outputs.py": "import pytest\nV = [1]\n"
                "@pytest.mark.parametrize('v', V)\ndef test_a(v): pass\n"
            },
            "values only a run can name",
        ),
    ],
)
def test_a_script_that_does_more_stays_the_judge_and_says_why(
    tmp_path: Path, test_sh: str, files: dict[str, str], why: str
) -> None:
    plan = _plan(tmp_path, test_sh, files)
    assert isinstance(plan, str) and why in plan, plan


def test_the_listed_ids_are_pytests_own(tmp_path: Path) -> None:
    """Read from the source without running it, and the same as pytest collects."""
    (tmp_path / "test_outputs.py").write_text(TESTS)
    ids = collect_ids(tmp_path / "test_outputs.py", "test_outputs.py")
    assert isinstance(ids, list)
    collected = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"),
            *("--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path / "test_outputs.py")),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    pytests = [line for line in collected.stdout.splitlines() if "::" in line]
    assert sorted(ids) == sorted(pytests) and len(ids) == 15


# Test files whose tests pytest collects but a reading of their top-level defs misses
# (or lists ones pytest does not collect): a failing test left off the trusted list would
# raise the reward above test.sh's (the runner ignores unlisted tests).
UNSEEN = {
    "imported": "from helpers_mod import test_imported\n",
    "in an if": "import sys\n\nif sys:\n\n    def test_in_an_if():\n        assert False\n",
    "in a try": "try:\n    def test_in_a_try():\n        assert False\nexcept Exception:\n    pass\n",
    "assigned": "def _check():\n    assert False\n\n\ntest_alias = _check\n",
    "assigned in a class": (
        "def _check(self):\n    assert False\n\n\nclass TestA:\n    test_alias = _check\n"
    ),
    "a loop variable": "for test_loop in [lambda: None]:\n    pass\n",
    "globals()": "def _check():\n    assert False\n\n\nglobals()['test_made'] = _check\n",
    "global": (
        "def _make():\n    global test_made\n\n    def test_made():\n        assert False\n\n\n"
        "_make()\n"
    ),
    "defined twice": (
        "def test_twice():\n    assert True\n\n\ndef test_twice():\n    assert False\n"
    ),
    "a class decorator": (
        "def _more(cls):\n    cls.test_added = lambda self: None\n    return cls\n\n\n"
        "@_more\nclass TestDecorated:\n    def test_seen(self):\n        assert True\n"
    ),
    "a class pytest skips": (
        "class TestInit:\n    def __init__(self):\n        pass\n\n"
        "    def test_never(self):\n        assert True\n"
    ),
    "a class switched off": (
        "class TestOff:\n    __test__ = False\n\n    def test_off(self):\n        assert True\n"
    ),
}


@pytest.mark.parametrize("shape", list(UNSEEN))
def test_the_listed_ids_are_pytests_own_or_the_file_is_refused(tmp_path: Path, shape: str) -> None:
    """A test pytest collects that the lister does not see (or one it lists that pytest
    does not collect): import refuses the file, never lists a subset."""
    (tmp_path / "helpers_mod.py").write_text("def test_imported():\n    assert False\n")
    (tmp_path / "test_outputs.py").write_text("def test_plain():\n    pass\n\n\n" + UNSEEN[shape])
    ids = collect_ids(tmp_path / "test_outputs.py", "test_outputs.py")
    collected = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"),
            *("--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path / "test_outputs.py")),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    pytests = [line for line in collected.stdout.splitlines() if "::" in line]
    assert isinstance(ids, str) or ids == pytests, (ids, pytests)


def _importable(tmp_path: Path, test_sh: str = TEST_SH) -> Path:
    source = harbor_task(tmp_path / "src", test_sh=test_sh)
    (source / "tests" / "test_outputs.py").write_text(TESTS)
    return source


def test_import_with_the_flag_writes_the_recommended_gate(tmp_path: Path) -> None:
    imported = import_task(
        _importable(tmp_path), tmp_path / "pkg", ImportOptions(hardened_runner=True)
    )
    tests = tmp_path / "pkg" / "tests"
    document = yaml.safe_load((tests / "eval.yaml").read_text())
    guard, runner = document["judges"]
    assert guard == {
        "name": "no_tamper",
        "builtin": "guard/no_tamper",
        "arguments": {"reference": "workdir.sha256"},
        "timeout": 30.0,
    }
    assert runner["builtin"] == "tests/all_passed"
    assert runner["arguments"] == {
        "runner": "pytest",
        "executable": "python3",
        "test_dir": "task-tests",
        "case_at": "/app/repo",
        "tests": "tests.txt",
        "timeout": runner["timeout"] - 10.0,
    }
    assert document["reward"] == {"judge": "tests", "gate": True, "on_error": "fail"}
    listed = (tests / "tests.txt").read_text().splitlines()
    assert listed[0] == "test_outputs.py::test_plain" and len(listed) == 15
    loaded = load_eval(tests / "eval.yaml")  # loads as it is (a local check)
    assert [judge.name for judge in loaded.config.judges] == ["no_tamper", "tests"]
    toml = tomllib.loads((tmp_path / "pkg" / "task.toml").read_text())
    assert toml["verifier"]["env"]["VERIFIER_REWARD_JSON"] == "reward"  # {reward} alone
    dockerfile = (tests / "Dockerfile").read_text()
    assert "RUN python3 -c 'import pytest' ||" in dockerfile
    assert "xargs -0 -r sha256sum > /grading/workdir.sha256" in dockerfile
    assert dockerfile.index("sha256sum") < dockerfile.index("RUN rm -rf /app/repo")
    assert '"tests.txt"' in dockerfile  # copied into /grading with eval.yaml
    assert (tests / "task-tests" / "test.sh").read_text() == TEST_SH  # kept as it was
    assert imported.suggestion is None


def test_import_without_the_flag_suggests_it_where_it_could(tmp_path: Path) -> None:
    imported = import_task(_importable(tmp_path), tmp_path / "pkg")
    assert imported.suggestion is not None and "--hardened-runner" in imported.suggestion
    document = yaml.safe_load((tmp_path / "pkg" / "tests" / "eval.yaml").read_text())
    assert [judge["builtin"] for judge in document["judges"]] == ["tests/script"]
    assert not (tmp_path / "pkg" / "tests" / "tests.txt").exists()


def test_the_flag_on_a_task_it_cannot_take_stops_naming_why(tmp_path: Path) -> None:
    source = _importable(tmp_path, TEST_SH + "python3 /tests/extra_check.py\n")
    with pytest.raises(UsageError, match=r"--hardened-runner: .*test.sh:7: .*not part of a pytest"):
        import_task(source, tmp_path / "pkg", ImportOptions(hardened_runner=True))
    assert not (tmp_path / "pkg").exists()
    assert import_task(source, tmp_path / "pkg2").suggestion is None


def test_the_command_line_takes_the_flag(tmp_path: Path) -> None:
    source = _importable(tmp_path)
    verifier = str(Path(sys.executable).with_name("verifier"))
    done = subprocess.run(
        [verifier, "task", "import", str(source), str(tmp_path / "pkg"), "--hardened-runner"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pkg" / "tests" / "tests.txt").is_file()
    plain = subprocess.run(
        [verifier, "task", "import", str(source), str(tmp_path / "plain")],
        capture_output=True,
        text=True,
    )
    assert "suggestion: tests/test.sh only runs pytest over 15 tests" in plain.stdout
