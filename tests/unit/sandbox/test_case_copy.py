"""Each command's private copy of the case: what it keeps, what it leaves out, and its
bounds (sparse files stay sparse; a case bigger than the temp space is a fact about the
case: the command's judge fails, the grader goes on), as root and as another UID."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.hostile import NONROOT, give, run_grader
from verifier.sandbox.case_copy import MAX_COPY_DEPTH, CaseCopyError, copy_case

AS = {"root": None, "non-root": NONROOT}
SPARSE_BYTES = 900 * 1024**2
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches to other UIDs: run as root")


def test_the_copy_keeps_modes_times_and_links_and_leaves_fifos_out(tmp_path: Path) -> None:
    case = tmp_path / "case"
    (case / "sub" / "deeper").mkdir(parents=True)
    (case / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (case / "run.sh").chmod(0o755)
    (case / "sub" / "readonly.txt").write_text("r")
    (case / "sub" / "readonly.txt").chmod(0o444)
    os.utime(case / "sub" / "readonly.txt", ns=(1_000_000_000, 2_000_000_000))
    (case / "link").symlink_to("sub/readonly.txt")
    (case / "outside").symlink_to("/etc/passwd")
    os.mkfifo(case / "pipe")
    (case / "setuid").write_text("x")
    (case / "setuid").chmod(0o4755)
    (case / "sub" / "deeper").chmod(0o555)
    target = tmp_path / "copy"
    copy_case(str(case), str(target))
    assert os.stat(target / "run.sh").st_mode & 0o777 == 0o755
    assert os.stat(target / "sub" / "readonly.txt").st_mode & 0o777 == 0o444
    assert os.stat(target / "sub" / "readonly.txt").st_mtime_ns == 2_000_000_000
    assert os.readlink(target / "link") == "sub/readonly.txt"
    assert os.readlink(target / "outside") == "/etc/passwd"  # a link, never followed
    assert not (target / "pipe").exists()
    assert os.stat(target / "setuid").st_mode & 0o7777 == 0o755
    assert os.stat(target / "sub" / "deeper").st_mode & 0o777 == 0o755  # its owner may write


def test_a_sparse_file_stays_sparse_and_only_its_data_counts(tmp_path: Path) -> None:
    case = tmp_path / "case"
    case.mkdir()
    with open(case / "big", "wb") as handle:
        handle.seek(100 * 1024**2)
        handle.write(b"data in the middle")
        handle.truncate(SPARSE_BYTES)
    copy_case(str(case), str(tmp_path / "copy"))
    copied = os.stat(tmp_path / "copy" / "big")
    assert copied.st_size == SPARSE_BYTES
    assert copied.st_blocks * 512 < 1024**2
    with open(tmp_path / "copy" / "big", "rb") as handle:
        handle.seek(100 * 1024**2)
        assert handle.read(18) == b"data in the middle"


def test_a_case_nested_too_deep_is_a_fact(tmp_path: Path) -> None:
    deep = tmp_path / "case"
    path = deep
    for _ in range(MAX_COPY_DEPTH + 1):
        path = path / "d"
    path.mkdir(parents=True)
    with pytest.raises(CaseCopyError, match=f"nested deeper than {MAX_COPY_DEPTH} levels"):
        copy_case(str(deep), str(tmp_path / "copy"))


def grade_big_case(
    root: Path, uid: int | None, big: int, sparse: bool, tmp_mib: int
) -> tuple[subprocess.CompletedProcess[str], dict[str, object], Path]:
    """Grade a case holding one big file (sparse or written out) with a command judge
    that checks the file's size in its copy, the temp dir a tmpfs of tmp_mib MiB."""
    tmp, tests, case, out = root / "tmp", root / "tests", root / "case", root / "out"
    for directory in (tmp, tests, case, out):
        directory.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={tmp_mib}m,mode=1777", "tmpfs", str(tmp)], check=True
    )
    with open(case / "big", "wb") as handle:
        if sparse:
            handle.truncate(big)
        else:
            chunk = os.urandom(1024**2)
            handle.writelines(chunk for _ in range(big // len(chunk)))
    (tests / "eval.yaml").write_text(
        "judges:\n  - name: sees_it\n    builtin: command_succeeds\n"
        f"    arguments: {{cmd: 'test $(stat -c %s big) = {big}'}}\n"
        "  - name: other\n    check: 'return True'\n"
    )
    give(uid, tests, case, out)
    completed = run_grader(
        uid,
        ["grade", "--config", str(tests / "eval.yaml"), "--case", str(case), "--out", str(out)],
        env={"TMPDIR": str(tmp)},
    )
    judges = (
        json.loads((out / "judges.json").read_text())["per_judge"]
        if (out / "judges.json").exists()
        else {}
    )
    return completed, judges, tmp


@needs_root
@pytest.mark.parametrize("who", AS)
def test_a_900_mib_sparse_file_is_copied_on_a_64_mib_tmpfs(root_dir: Path, who: str) -> None:
    completed, judges, tmp = grade_big_case(root_dir, AS[who], SPARSE_BYTES, True, 64)
    assert completed.returncode == 0, completed.stderr
    assert judges["sees_it"]["value"] is True, judges["sees_it"]
    assert not any(tmp.rglob("big"))  # the copy is gone with its command


@needs_root
@pytest.mark.parametrize("who", AS)
def test_a_case_bigger_than_the_temp_space_fails_its_command_judge(
    root_dir: Path, who: str
) -> None:
    completed, judges, tmp = grade_big_case(root_dir, AS[who], 96 * 1024**2, False, 64)
    assert completed.returncode == 0, completed.stderr
    assert (judges["sees_it"]["status"], judges["sees_it"]["value"]) == ("ok", False)
    rationale = judges["sees_it"]["rationale"]
    assert rationale.startswith(
        "the case cannot be copied for the command: the case holds more than"
    ), rationale
    assert f"the free space of {tmp}" in rationale
    assert judges["other"]["value"] is True
    assert not any(tmp.rglob("big"))


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("who", AS)
def test_a_command_filling_the_temp_space_is_stopped_and_its_neighbour_is_not(
    root_dir: Path, who: str
) -> None:
    """What a command writes in its copy and HOME shares the temp filesystem (on a tmpfs,
    the container's memory) with every other command and the grader: past the margin
    the command holding most of it is stopped, its judge fails with the fact, and the
    judge running beside it is graded as usual."""
    uid = AS[who]
    tmp, tests, case, out = (root_dir / name for name in ("tmp", "tests", "case", "out"))
    for directory in (tmp, tests, case, out):
        directory.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=128m,mode=1777", "tmpfs", str(tmp)], check=True
    )
    (case / "answer.txt").write_text("42\n")
    fill = 'python3 -c \'import time\nwith open("fill", "wb") as f:\n    while True:\n        f.write(bytes(1 << 20)); f.flush(); time.sleep(0.02)\''
    (tests / "eval.yaml").write_text(
        "judges:\n"
        f"  - name: filler\n    builtin: command_succeeds\n    arguments: {{cmd: {json.dumps(fill)}, timeout: 30}}\n"
        "  - name: neighbour\n    builtin: command_succeeds\n"
        "    arguments: {cmd: 'sleep 1; test \"$(cat answer.txt)\" = 42', timeout: 30}\n"
    )
    give(uid, tests, case, out)
    completed = run_grader(
        uid,
        ["grade", "--config", str(tests / "eval.yaml"), "--case", str(case), "--out", str(out)],
        env={"TMPDIR": str(tmp)},
    )
    assert completed.returncode == 0, completed.stderr
    judges = json.loads((out / "judges.json").read_text())["per_judge"]
    assert judges["neighbour"]["value"] is True, judges["neighbour"]
    filler = judges["filler"]
    assert filler["value"] is False
    assert "stopped: the command filled the temp space" in filler["rationale"], filler
    assert not any(tmp.rglob("fill"))


def test_the_graders_dirs_inside_the_case_are_left_out_of_its_copy(tmp_path: Path) -> None:
    """--out (or the agent logs) inside the case dir: the command's copy holds neither."""
    from tests.hostile import VERIFIER_SELF

    case, tests = tmp_path / "case", tmp_path / "tests"
    (case / "logs").mkdir(parents=True)
    tests.mkdir()
    (case / "logs" / "trajectory.json").write_text("{}")
    (case / "kept.txt").write_text("x")
    (tests / "eval.yaml").write_text(
        "judges:\n  - name: copy\n    builtin: command_succeeds\n"
        "    arguments: {cmd: 'test -f kept.txt && test ! -e out && test ! -e logs'}\n"
    )
    completed = subprocess.run(
        [
            VERIFIER_SELF,
            "grade",
            "--config",
            str(tests / "eval.yaml"),
            "--case",
            str(case),
            "--out",
            str(case / "out"),
            "--agent-logs",
            str(case / "logs"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    judges = json.loads((case / "out" / "judges.json").read_text())["per_judge"]
    assert judges["copy"]["value"] is True, judges["copy"]


@needs_root
@pytest.mark.parametrize("who", AS)
def test_a_read_only_case_not_the_graders_lets_its_tests_write_their_report(
    root_dir: Path, who: str
) -> None:
    """A non-root grader over a read-only volume (Kubernetes, OpenShift): the command's
    copy is its own, so the test runner can write its report there."""
    tests, case, out = root_dir / "tests", root_dir / "case", root_dir / "out"
    for directory in (tests, case, out):
        directory.mkdir()
    (case / "run_tests.sh").write_text(
        "cat > report.xml <<'EOF'\n<testsuite><testcase name='a'/>"
        "<testcase name='b'><failure/></testcase></testsuite>\nEOF\n"
    )
    case.chmod(0o555)
    (case / "run_tests.sh").chmod(0o444)
    (tests / "eval.yaml").write_text(
        "judges:\n  - name: tests\n    builtin: tests/pass_rate\n"
        "    arguments: {command: sh run_tests.sh, report: report.xml}\n"
    )
    give(AS[who], tests, out)
    completed = run_grader(
        AS[who],
        ["grade", "--config", str(tests / "eval.yaml"), "--case", str(case), "--out", str(out)],
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads((out / "reward.json").read_text())["tests"] == 0.5
    assert sorted(path.name for path in case.iterdir()) == ["run_tests.sh"]
