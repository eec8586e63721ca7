"""Real Harbor trials of imported tasks: Harbor-format tasks of our own
(tests/harbor/native/, in the shape published Terminal-Bench tasks have: shared mode,
their test.sh installing its runner at test time), imported with `verifier task
import`, graded by their own test.sh, unchanged, in a separate verifier.

One job with Harbor's oracle agent (each task's solution), one with its `nop` agent
(nothing done): the rewards are what the tasks' own test.sh gives natively (checked by
running them natively with Harbor: 1.0 for every one-value solution), reward.json holds
`reward` alone (Harbor's pass@k) for a task whose test.sh writes one value and its own
keys for one that writes several, and the packages pass `harbor lint`. primes imported
with `--hardened-runner` too (its tests in the verifier's hardened runner, hidden from
the code under test) gets the same rewards, reward.json `reward` alone. A hostile
solution of the loopback-server task, whose code the tests run, plants the reward
files, rewrites the trusted tests and the script, and leaves a process behind that
keeps writing the reward after the tests: it gets its honest reward, 0.
"""

from __future__ import annotations

import json
import shutil
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
from verifier.task.importer import ImportOptions, import_task

pytestmark = pytest.mark.harbor

NATIVE = Path(__file__).resolve().parent / "native"
# The reward each task's own test.sh gives (checked natively): solved, and untouched.
EXPECTED: dict[str, tuple[Any, Any]] = {
    "primes": (1.0, 0.0),  # Python, an output file checked by pytest
    "primes-hardened": (1.0, 0.0),  # the same, --hardened-runner: no test.sh runs
    "echo-server": (1.0, 0.0),  # a server on loopback, a CTRF report, reward.json
    "go-sum": (1.0, 0.0),  # a Go repair graded by go test, with the image's ENV
    "c-words": (1.0, 0.5),  # C, built into /tmp, the share of cases right
    "git-answer": (1.0, 0.0),  # git, and an answer key only root may read
    "root-key": (1.0, 0.0),  # test.sh as root: useradd, su, a setuid-root helper's key
    "entry-service": (1.0, 0.0),  # a loopback service the environment's ENTRYPOINT starts
    # shell, a reward.json of two keys: their mean is the reward, the keys Harbor's
    "multi-key": (
        {"reward": 0.75, "accuracy": 1.0, "style": 0.5},
        {"reward": 0.0, "accuracy": 0.0, "style": 0.0},
    ),
}
HOSTILE_SERVER = r"""
import os, time
PLANTED = {"/logs/verifier/reward.json": '{"reward": 1}', "/logs/verifier/reward.txt": "1\n",
           "/tests/test_server.py": "def test_ok():\n    pass\n",
           "/tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"}
def plant():
    for path, text in PLANTED.items():
        try:
            with open(path, "w") as handle:
                handle.write(text)
        except OSError:
            pass
plant()
if os.fork() == 0:  # left behind: writes the reward again and again, after the tests too
    os.setsid()
    for _ in range(6000):
        plant()
        time.sleep(0.005)
    os._exit(0)
# and it never serves: the tests fail
"""


HARDENED = {"primes-hardened": "primes"}  # imported with --hardened-runner, from


def _import(task: str, dest: Path) -> Path:
    import_task(
        NATIVE / HARDENED.get(task, task),
        dest,
        ImportOptions(
            image=VERIFIER_IMAGE,
            verifier_network=VERIFIER_NETWORK,
            hardened_runner=task in HARDENED,
        ),
    )
    return dest


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """{(task, agent): trial} for every native task with the oracle and nop agents, and
    the hostile server with the oracle; and the packages."""
    require_harbor()
    root = tmp_path_factory.mktemp("imported")
    dataset = root / "dataset"
    packages = {task: _import(task, dataset / task) for task in EXPECTED}
    hostile = _import("echo-server", dataset / "echo-server-hostile")
    (hostile / "solution" / "solve.sh").write_text(
        "#!/bin/bash\ncat > /app/server.py <<'PY'\n" + HOSTILE_SERVER + "PY\n"
    )
    for task, package in packages.items():  # the toolchains' layers, with the host's network
        warm_cache(package / "tests", f"localhost/import-warm-{task}")
    jobs = root / "jobs"
    try:
        oracle = run_job(dataset, jobs, "import-oracle", concurrent=3)
        shutil.rmtree(hostile)  # nop: the tasks as they are
        nop = run_job(dataset, jobs, "import-nop", concurrent=3, agent="nop")
        trials = {(task, "oracle"): trial for task, trial in oracle.items()}
        trials.update({(task, "nop"): trial for task, trial in nop.items()})
        yield trials, packages
    finally:
        remove_trial_images(jobs)
        for task in EXPECTED:
            podman("rmi", "--force", f"localhost/import-warm-{task}", check=False)


@pytest.mark.parametrize("agent", ["oracle", "nop"])
@pytest.mark.parametrize("task", sorted(EXPECTED))
def test_an_imported_task_gets_what_its_own_test_sh_gives(
    imported: Any, task: str, agent: str
) -> None:
    trials, _ = imported
    trial = trials[task, agent]
    stdout = (trial.directory / "verifier" / "test-stdout.txt").read_text()[-3000:]
    assert trial.result["exception_info"] is None, (trial.result["exception_info"], stdout)
    assert trial.result["verifier_environment_mode"] == "separate"
    expected = EXPECTED[task][0 if agent == "oracle" else 1]
    # reward.json: the keys the native test.sh wrote: the one key `reward` for a task that
    # wrote one value, so Harbor's pass@k works; the task's own keys for a multi-key one
    wanted = expected if isinstance(expected, dict) else {"reward": expected}
    assert trial.rewards == wanted, stdout
    judges = json.loads((trial.directory / "verifier" / "judges.json").read_text())
    tests = judges["per_judge"]["tests"]
    assert tests["judge_type"] == "builtin" and tests["status"] == "ok", tests
    if task in HARDENED:  # the listed tests, by the ids pytest gives them in /tests
        assert judges["per_judge"]["no_tamper"]["value"] is True
        assert "test_outputs.py::test_the_primes_in_order" in tests["rationale"], tests


def test_the_ctrf_report_of_the_tasks_tests_reaches_harbors_viewer(imported: Any) -> None:
    trials, _ = imported
    verifier = trials["echo-server", "oracle"].directory / "verifier"
    ctrf = json.loads((verifier / "ctrf.json").read_text())
    names = sorted(test["name"] for test in ctrf["results"]["tests"])
    assert names == ["test_server.py::test_one_line", "test_server.py::test_several_lines"]
    assert {test["status"] for test in ctrf["results"]["tests"]} == {"passed"}


def test_a_hostile_server_gets_its_honest_reward(imported: Any) -> None:
    """It planted reward.txt (the task's tests write reward.json only), tried to rewrite
    /tests (read-only) and left a process behind (killed with the script)."""
    trials, _ = imported
    trial = trials["echo-server-hostile", "oracle"]
    assert trial.result["exception_info"] is None, trial.result["exception_info"]
    assert trial.rewards == {"reward": 0.0}
    judges = json.loads((trial.directory / "verifier" / "judges.json").read_text())
    rationale = judges["per_judge"]["tests"]["rationale"]
    assert "reward.txt is there, and the task's tests never write it" in rationale, rationale


def test_the_imported_packages_pass_harbor_lint(imported: Any) -> None:
    _, packages = imported
    done = harbor("lint", *map(str, packages.values()))
    assert done.returncode == 0, done.stdout + done.stderr
