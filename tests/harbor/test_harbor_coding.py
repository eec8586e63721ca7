"""Real Harbor trials of coding tasks graded with the task's own toolchain.

Two tasks from tests/harbor/tasks/, each packaged with `verifier task init
--environment DIR --protect ...` and exactly the recommended gate (docs/builtins.md, "The
recommended gate for a coding task", and its hardened runners): the
listed tests (tests.txt) run by the verifier's hardened runner, their pass rate the
reward unless a guard fails:

- calc: a Python repo with two bugs and three pytest tests (pytest from Debian's
  python3-pytest in the environment), `runner: pytest`;
- gocalc: a Go module with two bugs and four tests, in an image built from Debian's
  golang-go that has no Python at all, `runner: go`.

Every solution below is one task of a single Harbor job (oracle agent, podman): the
verifier's image of each is the task's environment with the verifier layer on top.
An honest solution gets its exact pass rate; an agent that rewrites or pads the
trusted tests, or plants something that changes how they run, gets no more than the
honest reward of the code it left: either a guard fails (0) or the runner keeps the
trick out (the honest pass rate, or 0 for a run the code under test tampered with).
The same cases are then graded again by the package's verifier image as an arbitrary
non-root user over a read-only case.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harbor.runner import (
    VERIFIER_IMAGE,
    VERIFIER_NETWORK,
    harbor,
    podman,
    remove_trial_images,
    require_harbor,
    run_job,
    warm_cache,
)
from tests.hostile import TRACE_FLIP
from verifier.task import InitRequest, init_task

pytestmark = pytest.mark.harbor

TASKS = Path(__file__).resolve().parent / "tasks"
RESTRICTED = [
    "--user",
    "1000680000:0",
    "--read-only",
    "--tmpfs",
    "/tmp",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
]


def _file(path: str, text: str) -> str:
    assert "HARBOR_EOF" not in text
    return f"mkdir -p $(dirname {path})\ncat > {path} <<'HARBOR_EOF'\n{text.rstrip()}\nHARBOR_EOF"


# --- the Python task ------------------------------------------------------------------

FIX_SUBTRACT = "sed -i '/def subtract/,/return/ s/a + b/a - b/' calc.py"
FIX_MULTIPLY = "sed -i '/def multiply/,/return/ s/a + b/a * b/' calc.py"
PADDING = (
    'python3 -c \'print("\\n".join(f"def test_pad_{i}():\\n    pass\\n" for i in range(997)))\''
)
PASS_EVERYTHING = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
FAKE_REPORT = (
    '<testsuites><testsuite name="pytest" tests="3">'
    '<testcase classname="tests.test_calc" name="test_add"/>'
    '<testcase classname="tests.test_calc" name="test_subtract"/>'
    '<testcase classname="tests.test_calc" name="test_multiply"/></testsuite></testsuites>'
)
FAKE_PYTEST = f"""\
import sys


def main(args=None, plugins=None):
    open("report.xml", "w").write('{FAKE_REPORT}')
    return 0
"""
PLUGIN_METADATA = "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n"
# The code under test turns every report into a pass when the tests import it.
PATCH_REPORTS = """
import _pytest.reports

_made = _pytest.reports.TestReport.from_item_and_call.__func__


def _passed(cls, item, call):
    report = _made(cls, item, call)
    report.outcome, report.longrepr = "passed", None
    return report


_pytest.reports.TestReport.from_item_and_call = classmethod(_passed)
"""
BUGGY_CALC = (TASKS / "calc" / "environment" / "calc.py").read_text()
# The fixed module as unchecked-hash byte code (Python loads it without looking at the
# source), and the buggy source put back.
PLANT_BYTECODE = [
    "cp calc.py /tmp/calc.py",
    FIX_SUBTRACT,
    FIX_MULTIPLY,
    'python3 -c \'import importlib.util as u, py_compile as c; c.compile("calc.py", '
    'cfile=u.cache_from_source("calc.py"), invalidation_mode=c.PycInvalidationMode.UNCHECKED_HASH)\'',
    "cp /tmp/calc.py calc.py",
]

PYTHON = {  # case: (solve.sh lines, expected reward)
    "good": ([FIX_SUBTRACT, FIX_MULTIPLY], 1.0),
    "partial": ([FIX_SUBTRACT], 2 / 3),
    "untouched": (["true"], 1 / 3),
    # 997 passing tests in a file of its own: not the listed tests, not counted
    "padding": ([FIX_SUBTRACT, f"{PADDING} > test_padding.py"], 2 / 3),
    # ... and among the trusted tests: they are no longer the trusted tests
    "padding-in-tests": ([FIX_SUBTRACT, f"{PADDING} > tests/test_padding.py"], 0.0),
    # What the guards catch: the tests changed, a conftest.py, a sitecustomize.
    "weakened": (["sed -i 's/assert .*/assert True/' tests/test_calc.py"], 0.0),
    "conftest": ([_file("tests/conftest.py", PASS_EVERYTHING)], 0.0),
    "sitecustomize": (
        [
            _file("evil_plugin.py", PASS_EVERYTHING),
            _file(
                "sitecustomize/__init__.py",
                "import os\nos.environ['PYTEST_ADDOPTS'] = '-p evil_plugin'\n",
            ),
        ],
        0.0,
    ),
    # What the runner keeps out: each passes every test under a plain `python3 -m
    # pytest`, and gets here what the (untouched) code earns; a plugin's hooks outside
    # the tests are also no_tamper's (0).
    "shadow": (
        [
            _file("pytest/__init__.py", FAKE_PYTEST),
            _file("pytest/__main__.py", "import pytest\nraise SystemExit(pytest.main())\n"),
        ],
        1 / 3,
    ),
    "plugin": (
        [
            _file("evil_plugin.py", PASS_EVERYTHING),
            _file("evil-1.0.dist-info/METADATA", PLUGIN_METADATA),
            _file("evil-1.0.dist-info/entry_points.txt", "[pytest11]\nevil = evil_plugin\n"),
        ],
        0.0,
    ),
    "ini": (
        [
            _file("evil_plugin.py", PASS_EVERYTHING),
            _file("pytest.ini", "[pytest]\naddopts = -p evil_plugin\n"),
        ],
        0.0,
    ),
    "bytecode": (PLANT_BYTECODE, 1 / 3),
    # the code under test patches pytest's reports: the launcher's pins void the run
    "patched-reports": ([_file("calc.py", BUGGY_CALC + PATCH_REPORTS)], 0.0),
    # ... or installs a trace function that turns failed reports into passes: no_tamper
    "tracer": ([_file("calc.py", BUGGY_CALC + TRACE_FLIP)], 0.0),
}

# --- the Go task ----------------------------------------------------------------------

GO_FIX_SUBTRACT = "sed -i 's/^func Subtract(a, b int) int { return a + b }/func Subtract(a, b int) int { return a - b }/' calc/calc.go"
GO_FIX_MULTIPLY = "sed -i 's/^func Multiply(a, b int) int { return a + b }/func Multiply(a, b int) int { return a * b }/' calc/calc.go"
GO_PADDING = 'package padding\n\nimport "testing"\n\n' + "".join(
    f"func TestPad{i}(t *testing.T) {{}}\n" for i in range(100)
)
FAKE_MAIN = """\
package calc

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	for _, name := range []string{"TestAdd", "TestSubtract", "TestMultiply", "TestNegate"} {
		fmt.Printf("=== RUN   %s\\n--- PASS: %s (0.00s)\\n", name, name)
	}
	fmt.Println("PASS")
	os.Exit(0)
}
"""
FAKE_INIT = FAKE_MAIN.replace('\t"testing"\n', "").replace(
    "func TestMain(m *testing.M) {", "func init() {"
)
GO = {
    "good": ([GO_FIX_SUBTRACT, GO_FIX_MULTIPLY], 1.0),
    "partial": ([GO_FIX_SUBTRACT], 0.75),
    "untouched": (["true"], 0.5),
    # another package's tests: not listed, not counted (the tests judge: 0.75), but an
    # added _test.go is code in a test binary, which the guard refuses
    "padding": ([GO_FIX_SUBTRACT, _file("padding/padding_test.go", GO_PADDING)], 0.0),
    "weakened": (["sed -i 's/t.Fatal(.*)/return/' calc/calc_test.go"], 0.0),
    "testmain": ([_file("calc/zz_main_test.go", FAKE_MAIN)], 0.0),
    # Go 1.19 (Debian's): an init() in the code prints a passing run and exits before
    # any test runs; no test file changed, so only no_tamper sees it
    "init-exit": ([_file("calc/zz_init.go", FAKE_INIT)], 0.0),
}

KINDS = {  # task: (cases, honest reward of the code an attack leaves, --protect)
    "calc": (PYTHON, 1 / 3, ("tests/**",)),
    "gocalc": (GO, 0.5, ("**/*_test.go", "go.mod")),
}
# What the tests judge itself said, where the reward alone does not show who decided.
JUDGED = {  # (task, case, judge): (its value, words of its rationale)
    ("gocalc", "padding", "tests"): (0.75, "100 tests of the report not listed, ignored"),
    ("calc", "patched-reports", "tests"): (0.0, "the code under test tampered with"),
    ("calc", "tracer", "no_tamper"): (False, "calc.py:"),
    ("gocalc", "init-exit", "no_tamper"): (False, "calc/zz_init.go:"),
}


def _package(dest: Path, task: str, case: str, lines: list[str]) -> Path:
    instruction = dest.parent.parent / f"{task}-instruction.md"
    instruction.write_text(f"Fix the bugs in the {task} repository in /app: make its tests pass.\n")
    init_task(
        InitRequest(
            dest,
            TASKS / task / "eval.yaml",
            environment=TASKS / task / "environment",
            image=VERIFIER_IMAGE,
            name=f"coding/{task}-{case}",
            instruction=instruction,
            protect=KINDS[task][2],
            verifier_network=VERIFIER_NETWORK,
        )
    )
    (dest / "solution" / "solve.sh").write_text(
        "\n".join(["#!/bin/bash", "set -euo pipefail", "cd /app", *lines]) + "\n"
    )
    return dest


@pytest.fixture(scope="module")
def coding(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every case of both tasks in one Harbor job: {(task, case): (trial, package)}."""
    require_harbor()
    root = tmp_path_factory.mktemp("coding")
    dataset = root / "dataset"
    packages = {}
    for task, (cases, _, _) in KINDS.items():
        for case, (lines, _) in cases.items():
            packages[task, case] = _package(dataset / f"{task}-{case}", task, case, lines)
    # The environments' images first, with the host's network (Debian's packages: a
    # build container may have none): every trial's build then takes those layers from
    # the cache.
    for task in KINDS:
        warm_cache(packages[task, "good"] / "tests", f"localhost/coding-warm-{task}")
    jobs = root / "jobs"
    try:
        found = run_job(dataset, jobs, "coding", concurrent=3)
        yield {key: (found[package.name], package) for key, package in packages.items()}
    finally:
        remove_trial_images(jobs)
        for task in KINDS:
            podman("rmi", "--force", f"localhost/coding-warm-{task}", check=False)


CASES = [(task, case) for task, (cases, _, _) in KINDS.items() for case in cases]


@pytest.mark.parametrize(("task", "case"), CASES)
def test_each_solution_gets_its_pass_rate_and_no_trick_more(
    coding: Any, task: str, case: str
) -> None:
    trial, _ = coding[task, case]
    cases, honest, _ = KINDS[task]
    expected = cases[case][1]
    assert trial.result["exception_info"] is None, trial.result["exception_info"]
    assert trial.result["verifier_environment_mode"] == "separate"
    rewards = trial.rewards
    assert rewards is not None
    assert math.isclose(rewards["reward"], expected, abs_tol=1e-9), (
        trial.directory / "verifier" / "test-stdout.txt"
    ).read_text()[-3000:]
    if case not in ("good", "partial", "padding"):
        assert rewards["reward"] <= honest
    for (judged_task, judged_case, name), (value, words) in JUDGED.items():
        if (judged_task, judged_case) != (task, case):
            continue
        judges = json.loads((trial.directory / "verifier" / "judges.json").read_text())
        judge = judges["per_judge"][name]
        assert judge["value"] == value or math.isclose(judge["value"], value, abs_tol=1e-9)
        assert words in judge["rationale"], judge


def test_the_verifier_ran_on_the_tasks_own_toolchain(coding: Any) -> None:
    """pytest from the Python environment; go in an image without Python."""
    python_trial, _ = coding["calc", "good"]
    judges = json.loads((python_trial.directory / "verifier" / "judges.json").read_text())
    assert "3 of 3 listed tests passed" in judges["per_judge"]["tests"]["rationale"]
    _, go_package = coding["gocalc", "good"]
    tag = "localhost/coding-probe-gocalc"
    podman("build", "--pull=never", "-q", "-t", tag, str(go_package / "tests"))
    try:
        probe = podman(
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "",
            tag,
            "sh",
            "-c",
            "command -v go; command -v python3 python || echo no python; ls -A /app",
            check=False,
        )
    finally:
        podman("rmi", "--force", tag, check=False)
    assert probe.stdout.split() == ["/usr/bin/go", "no", "python"], probe.stdout + probe.stderr


@pytest.mark.parametrize("task", sorted(KINDS))
def test_task_test_passes_the_packages(coding: Any, task: str) -> None:
    """What task authors run before publishing, on the same packages: the good fix gets
    1.0 and the untouched repo its honest pass rate."""
    _, package = coding[task, "good"]
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("verifier")),
            "task",
            "test",
            str(package),
            "--engine",
            "podman",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    untouched = KINDS[task][0]["untouched"][1]
    assert f"untouched environment: reward {untouched:.4g}" in done.stdout
    assert "solution: reward 1\n" in done.stdout


def test_the_packages_pass_harbor_lint(coding: Any) -> None:
    for task in KINDS:
        _, package = coding[task, "good"]
        lint = harbor("lint", str(package))
        assert lint.returncode == 0, lint.stdout + lint.stderr


def test_the_same_cases_graded_as_a_non_root_user_over_a_read_only_case(
    coding: Any, tmp_path: Path
) -> None:
    regraded = {}
    for task in KINDS:
        _, package = coding[task, "good"]
        tag = f"localhost/coding-regrade-{task}"
        podman("build", "--pull=never", "-q", "-t", tag, str(package / "tests"))
        try:
            for (kind, case), (trial, _) in coding.items():
                if kind != task:
                    continue
                case_dir = trial.directory / "artifacts" / "app"
                out = tmp_path / f"{task}-{case}"
                out.mkdir()
                out.chmod(0o777)
                subprocess.run(["chmod", "-R", "a+rX", str(case_dir)], check=True)
                podman(
                    "run",
                    "--rm",
                    "--network",
                    "none",
                    *RESTRICTED,
                    "-v",
                    f"{case_dir}:/app:ro",
                    "-v",
                    f"{out}:/logs/verifier",
                    tag,
                )
                regraded[kind, case] = json.loads((out / "reward.json").read_text())["reward"]
        finally:
            podman("rmi", "--force", tag, check=False)
    expected = {(task, case): KINDS[task][0][case][1] for task, case in CASES}
    assert regraded == pytest.approx(expected)
