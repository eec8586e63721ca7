"""Hostile cases in a batch, and the grader's own processes: one case cannot harm another
or the grader, as root and as an arbitrary non-root UID.

A batch of two cases graded side by side (--jobs 2): the victim's honest tests, and an
attacker that reads the victim's solution, chmods its case and out dir away, writes and
removes them and, as root, holds every process its UID may have (as non-root, cases
share the grader's UID and its process count: docs/security.md says what that leaves).
A case that writes a pickle and garbage into every pipe of its ancestors, as the
batch's channel once was pickle. A judge that holds every process of the grader's
own UID must not keep the grader from forking; a grader that cannot fork at all
stops with exit 11.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.hostile import NONROOT, REPO, give, idle_uid, leftovers, run_grader

BATCH = REPO / "tests" / "fixtures" / "hostile" / "batch"
AS = {"root": None, "non-root": NONROOT}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches to other UIDs: run as root")


def batch_of(
    root: Path, uid: int | None, cases: dict[str, dict[str, str]], command: str
) -> tuple[Path, Path, Path]:
    """eval.yaml (one command judge), the cases dir, the out dir."""
    tests, cases_dir, out = root / "tests", root / "cases", root / "out"
    for directory in (tests, cases_dir, out):
        directory.mkdir()
    (tests / "eval.yaml").write_text(
        "judges:\n  - name: tests\n    builtin: command_succeeds\n"
        f"    arguments: {{cmd: {json.dumps(command)}, timeout: 40}}\n"
    )
    for name, files in cases.items():
        (cases_dir / name).mkdir()
        for relative, text in files.items():
            (cases_dir / name / relative).write_text(text)
    give(uid, tests, cases_dir, out)
    return tests / "eval.yaml", cases_dir, out


def run_batch(
    uid: int | None,
    config: Path,
    cases: Path,
    out: Path,
    *extra: str,
    landlock: bool = True,
    nproc: int | None = None,
) -> subprocess.CompletedProcess[str]:
    arguments = [
        "batch",
        "--config",
        str(config),
        "--cases",
        str(cases),
        "--out",
        str(out),
        "--jobs",
        "2",
        *extra,
    ]
    return run_grader(uid, arguments, landlock=landlock, nproc=nproc)


def rewards(out: Path) -> dict[str, float | None]:
    summary = json.loads((out / ".batch" / "summary.json").read_text())
    return {row["case"]: row["reward"] for row in summary["cases"]}


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("who", AS)
def test_a_case_cannot_harm_its_sibling_in_a_batch(root_dir: Path, who: str) -> None:
    uid = AS[who]
    victim, attacker = (BATCH / "victim.sh").read_text(), (BATCH / "attacker.sh").read_text()
    hold = "hold" if uid is None else ""
    config, cases, out = batch_of(
        root_dir,
        uid,
        {
            "attacker": {"run.sh": attacker},
            "victim": {"run.sh": victim, "answer.txt": "42\n"},
        },
        f"sh run.sh {root_dir / 'cases'} {root_dir / 'out'} {hold}",
    )
    completed = run_batch(uid, config, cases, out, nproc=400)
    assert completed.returncode == 0, completed.stderr
    assert rewards(out) == {"attacker": 0.0, "victim": 1.0}, completed.stderr
    assert (cases / "victim" / "answer.txt").read_text() == "42\n"
    assert json.loads((out / "victim" / "reward.json").read_text())["reward"] == 1.0
    attacked = json.loads((out / "attacker" / "judges.json").read_text())["per_judge"]["tests"]
    assert "42" not in attacked["rationale"]  # it could not read the victim's solution
    if uid is None:
        assert "held" in attacked["rationale"]
    assert leftovers(str(root_dir)) == []


@needs_root
@pytest.mark.parametrize("landlock", [True, False], ids=["Landlock", "no Landlock, weak"])
def test_a_case_cannot_reach_the_batch_parent_through_its_pipes(
    root_dir: Path, landlock: bool
) -> None:
    """As non-root, where the case's command runs as the grader's UID (without Landlock
    too, the weaker sandbox accepted): the parent and its workers are not dumpable, so
    their pipes cannot be opened; and what reaches a pipe is JSON frames or nothing."""
    marker = root_dir / "pickle-ran"
    inject = (BATCH / "inject.py").read_text()
    config, cases, out = batch_of(
        root_dir,
        NONROOT,
        {f"case{index}": {"inject.py": inject} for index in range(4)},
        f"python3 inject.py {marker}",
    )
    root_dir.chmod(0o777)
    started = time.monotonic()
    extra = () if landlock else ("--weak-sandbox",)
    completed = run_batch(NONROOT, config, cases, out, *extra, landlock=landlock)
    assert completed.returncode == 0, completed.stderr
    assert time.monotonic() - started < 60
    assert rewards(out) == {f"case{index}": 0.0 for index in range(4)}
    assert not marker.exists()


@needs_root
@pytest.mark.parametrize("who", AS)
def test_a_case_cannot_change_the_limits_or_scheduling_of_the_batch(
    root_dir: Path, who: str
) -> None:
    """As the grader's UID, prlimit, renice and the like aimed at the workers, the batch
    parent or the other case's command would cost them their outputs (a file size limit
    of 0): the attacker's command reaches none of them, and both cases keep their
    rewards."""
    attack = (REPO / "tests" / "fixtures" / "hostile" / "attacks" / "grader_limits.py").read_text()
    victim = "import time\ntime.sleep(3)\nprint('kept-out', end='')\n"
    config, cases, out = batch_of(
        root_dir,
        AS[who],
        {"attacker": {"run.py": attack}, "victim": {"run.py": victim}},
        "python3 run.py",
    )
    config.write_text(
        "judges:\n  - name: tests\n    builtin: command_output_matches\n"
        "    arguments: {cmd: python3 run.py, expected: kept-out, timeout: 40}\n"
    )
    completed = run_batch(AS[who], config, cases, out)
    assert completed.returncode == 0, completed.stderr
    assert rewards(out) == {"attacker": 1.0, "victim": 1.0}, (
        out / "attacker" / "judges.json"
    ).read_text()
    assert leftovers(str(root_dir)) == []
    assert leftovers("run.py") == []


@pytest.mark.slow
@needs_root
def test_a_judge_holding_every_process_of_the_grader_uid_leaves_the_grader_a_reserve(
    root_dir: Path,
) -> None:
    """As non-root, the grader's commands share its UID's process limit: each command's
    RLIMIT_NPROC is lowered so that the grader can still fork its judges."""
    tests, case, out = root_dir / "tests", root_dir / "case", root_dir / "out"
    for directory in (tests, case, out):
        directory.mkdir()
    (case / "attacker.sh").write_text((BATCH / "attacker.sh").read_text())
    (tests / "eval.yaml").write_text(
        "judges:\n"
        "  - name: bomb\n    builtin: command_succeeds\n"
        "    arguments: {cmd: sh attacker.sh /nowhere /nowhere hold, timeout: 30}\n"
        + "".join(
            f"  - name: after{index}\n    check: |\n      import time\n"
            "      time.sleep(0.5)\n      return True\n"
            for index in range(4)
        )
    )
    give(NONROOT, tests, case, out)
    completed = run_grader(
        NONROOT,
        ["grade", "--config", str(tests / "eval.yaml"), "--case", str(case), "--out", str(out)],
        nproc=300,
    )
    assert completed.returncode == 0, completed.stderr
    values = {
        name: entry["value"]
        for name, entry in json.loads((out / "judges.json").read_text())["per_judge"].items()
    }
    assert values == {"bomb": False, **{f"after{index}": True for index in range(4)}}
    bomb = json.loads((out / "judges.json").read_text())["per_judge"]["bomb"]["rationale"]
    held = int(bomb.split("held ")[1].split()[0])
    assert 100 < held < 300 - 60, bomb  # the ceiling: its limit less the grader's reserve


@pytest.mark.slow
@needs_root
def test_a_grader_that_cannot_fork_stops_with_exit_11_and_no_reward(root_dir: Path) -> None:
    tests, case, out = root_dir / "tests", root_dir / "case", root_dir / "out"
    for directory in (tests, case, out):
        directory.mkdir()
    (tests / "eval.yaml").write_text("judges:\n  - {name: a, check: 'return True'}\n")
    uid = idle_uid()
    give(uid, tests, case, out)
    started = time.monotonic()
    completed = run_grader(
        uid,
        ["grade", "--config", str(tests / "eval.yaml"), "--case", str(case), "--out", str(out)],
        nproc=1,
    )
    assert completed.returncode == 11, completed.stderr
    assert time.monotonic() - started < 30
    assert completed.stderr.startswith("verifier: error: cannot start a judge's process")
    assert completed.stderr.count("\n") == 1, completed.stderr
    assert list(out.iterdir()) == []


GARBAGE_JUDGE = """\
import fcntl, os, stat, struct
if os.path.basename(outputs["case_dir"]) == "c1":
    for fd in range(3, 256):
        try:
            writable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
            if writable and stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, struct.pack("!Q", 1 << 40) + b"\\x80\\x04 no frame at all")
        except OSError:
            pass
return True
"""


def test_garbage_in_a_workers_pipe_is_that_cases_error_row_and_nothing_hangs(
    root_dir: Path,
) -> None:
    """An author's judge runs in a fork of the worker, holding the worker's end of its
    pipe to the parent (a command never does): garbage it writes there makes its case an
    error row, the worker is replaced, and every other case is graded."""
    tests, cases, out = root_dir / "tests", root_dir / "cases", root_dir / "out"
    for directory in (tests, cases, out):
        directory.mkdir()
    for index in range(4):
        (cases / f"c{index}").mkdir()
    judge = "".join(f"      {line}\n" for line in GARBAGE_JUDGE.splitlines())
    (tests / "eval.yaml").write_text(f"judges:\n  - name: j\n    check: |\n{judge}")
    started = time.monotonic()
    completed = run_grader(
        None,
        [
            "batch",
            "--config",
            str(tests / "eval.yaml"),
            "--cases",
            str(cases),
            "--out",
            str(out),
            "--jobs",
            "2",
        ],
    )
    assert completed.returncode == 0, completed.stderr
    assert time.monotonic() - started < 60
    summary = {
        row["case"]: row
        for row in json.loads((out / ".batch" / "summary.json").read_text())["cases"]
    }
    assert {name: row["reward"] for name, row in summary.items()} == {
        "c0": 1.0,
        "c1": None,
        "c2": 1.0,
        "c3": 1.0,
    }, {name: row["error"] for name, row in summary.items()}
    assert summary["c1"]["error"].startswith("internal error: the worker sent a frame of"), summary[
        "c1"
    ]
