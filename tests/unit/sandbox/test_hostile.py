"""Hostile agents against the sandbox: the answer key, the grader's files and its other
judges stay out of reach of code from the case, as root and as an arbitrary non-root UID,
with Landlock and without it.

The arena (tests/fixtures/hostile/attacks) is a case whose scripts each try one way to
the answer key (eval.yaml's dir holds reference.txt, and eval.yaml itself the expected
text): by name, through other processes' /proc entries, links, inherited descriptors,
new namespaces, the grader's memory, io_uring, the copies of judges running beside
them; one tries to cost the grader its reward (writing, chmod-ing and truncating its
files, an ACL, a rewriter left behind), one plants the oracle in the case for a later
judge. Each attack is a `command_output_matches` whose expected text is the key: its
honest value is false, and any attack that works makes it true. The grader runs the way
Harbor's test.sh does: a shell with the API key in its environment is its parent, and
its cwd is eval.yaml's dir.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from tests.hostile import NONROOT, REPO, give, leftovers, run_grader

ATTACKS = REPO / "tests" / "fixtures" / "hostile" / "attacks"
AS = {"root": None, "non-root": NONROOT}
HONEST = {  # every judge's value when no attack works
    "holder": True,
    "copies": False,
    "direct": False,
    "proc": False,
    "links": False,
    "fds": False,
    "namespaces": False,
    "memory": False,
    "uring": False,
    "secrets": False,
    "plant": False,
    "tamper": False,
    "chmod_tricks": False,
    "nested_listener": False,
    "own_modes": True,
    "planted_used": False,
    "config_intact": True,
}

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches to other UIDs: run as root")


def arena_eval(secret: str, tests: Path, out: Path) -> str:
    def attack(name: str, command: str) -> str:
        return (
            f"  - name: {name}\n    builtin: command_output_matches\n"
            f"    arguments: {{cmd: {json.dumps(command)}, expected: {secret}, timeout: 30}}\n"
        )

    return (
        "judges:\n"
        "  - name: holder\n    builtin: command_succeeds\n"
        "    arguments: {cmd: sh attacks/holder.sh, provide: {key.txt: reference.txt}, timeout: 30}\n"
        + attack("copies", "sleep 1; sh attacks/copies.sh")
        + attack("direct", f"sh attacks/direct.sh {tests}")
        + attack("proc", f"sh attacks/proc.sh {tests}")
        + attack("links", f"sh attacks/links.sh {tests}")
        + attack("fds", f"sh attacks/fds.sh {tests}")
        + attack("namespaces", f"sh attacks/namespaces.sh {tests}")
        + attack("memory", "python3 attacks/memory.py")
        + attack("uring", f"python3 attacks/uring.py {tests}/reference.txt")
        + attack("secrets", "sh attacks/secrets.sh")
        + "  - name: plant\n    builtin: command_output_matches\n"
        f"    arguments: {{cmd: sh attacks/plant.sh {tests}, expected: planted}}\n"
        "  - name: tamper\n    builtin: command_succeeds\n"
        f"    arguments: {{cmd: sh attacks/tamper.sh {tests} {out}, timeout: 30}}\n"
        "  - name: chmod_tricks\n    builtin: command_output_matches\n"
        f"    arguments: {{cmd: python3 attacks/chmod_tricks.py {tests} {out}, "
        "expected: chmod-worked}\n"
        "  - name: nested_listener\n    builtin: command_output_matches\n"
        f"    arguments: {{cmd: python3 attacks/nested_listener.py {tests} {out}, "
        "expected: chmod-worked}\n"
        "  - name: own_modes\n    builtin: command_succeeds\n"
        "    arguments: {cmd: sh attacks/own_modes.sh}\n"
        "  - name: planted_used\n    builtin: files_equal\n"
        "    arguments: {path1: answer.txt, reference: reference.txt}\n"
        "  - name: config_intact\n    builtin: files_equal\n"
        "    arguments: {path1: hello.txt, reference: ref2.txt}\n"
    )


def make_arena(root: Path, uid: int | None) -> dict[str, Path | str]:
    """eval.yaml's dir, a read-only case holding the attacks, an out dir; the key."""
    secret = f"ANSWER-{secrets.token_hex(16)}"
    tests, case, out = root / "tests", root / "case", root / "out"
    tests.mkdir()
    out.mkdir()
    (tests / "reference.txt").write_text(secret)
    (tests / "ref2.txt").write_text("hello\n")
    (tests / "eval.yaml").write_text(arena_eval(secret, tests, out))
    shutil.copytree(ATTACKS, case / "attacks")
    (case / "hello.txt").write_text("hello\n")
    (case / "key-link").symlink_to(tests / "reference.txt")
    give(uid, tests, out)
    for path in [case, *case.rglob("*")]:  # read-only, and not the grader's
        if not path.is_symlink():
            path.chmod(0o555 if path.is_dir() else 0o444)
    return {"tests": tests, "case": case, "out": out, "secret": secret}


def grade_arena(
    arena: dict[str, Path | str], uid: int | None, *extra: str, landlock: bool = True
) -> subprocess.CompletedProcess[str]:
    """`verifier grade` as test.sh runs it: a shell holding the key in its environment
    is its parent, eval.yaml's dir its cwd."""
    tests, case, out = arena["tests"], arena["case"], arena["out"]
    return run_grader(
        uid,
        ["grade", "--config", f"{tests}/eval.yaml", "--case", str(case), "--out", str(out), *extra],
        landlock=landlock,
        env={"OPENAI_API_KEY": str(arena["secret"]), "HF_TOKEN": str(arena["secret"])},
        cwd=Path(str(tests)),
    )


def judged(out: Path) -> dict[str, object]:
    per_judge = json.loads((out / "judges.json").read_text())["per_judge"]
    return {name: entry["value"] for name, entry in per_judge.items()}


def check_honest(arena: dict[str, Path | str], completed: subprocess.CompletedProcess[str]) -> None:
    out, secret = Path(str(arena["out"])), str(arena["secret"])
    assert completed.returncode == 0, completed.stderr
    time.sleep(0.5)  # a surviving rewriter would have struck by now
    values = judged(out)
    assert values == HONEST, json.dumps(json.loads((out / "judges.json").read_text()), indent=1)
    assert out.stat().st_mode & 0o700 == 0o700
    assert sorted(path.name for path in out.iterdir()) == [
        "judges.json",
        "reward-details.json",
        "reward.json",
        "reward.txt",
    ]
    reward = json.loads((out / "reward.json").read_text())
    assert reward["tamper"] == 0.0 and reward["holder"] == 1.0
    tests = Path(str(arena["tests"]))
    assert stat.S_IMODE(tests.stat().st_mode) == 0o755
    assert (tests / "ref2.txt").read_text() == "hello\n"
    assert leftovers(str(out)) == []
    written = (
        completed.stdout + completed.stderr + "".join(path.read_text() for path in out.iterdir())
    )
    assert secret not in written


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("who", AS)
def test_no_attack_reaches_the_answer_key_or_the_grader(root_dir: Path, who: str) -> None:
    arena = make_arena(root_dir, AS[who])
    completed = grade_arena(arena, AS[who])
    check_honest(arena, completed)
    sandbox = json.loads((Path(str(arena["out"])) / "judges.json").read_text())
    confinement = sandbox["per_judge"]["direct"]["sandbox"]
    assert "the grader's files hidden" in confinement
    if who == "non-root":
        assert "chmod, chown, ACLs and truncate only beneath its dirs" in confinement


@pytest.mark.slow
@needs_root
def test_without_landlock_the_file_modes_hide_the_grader_from_the_sandbox_uid(
    root_dir: Path,
) -> None:
    """As root on a kernel without Landlock: eval.yaml's dir and the out dir closed to
    other users (0700) keep every attack out, each command under a UID of its own."""
    arena = make_arena(root_dir, None)
    for key in ("tests", "out"):
        Path(str(arena[key])).chmod(0o700)
    completed = grade_arena(arena, None, landlock=False)
    Path(str(arena["tests"])).chmod(0o755)
    check_honest(arena, completed)
    confinement = json.loads((Path(str(arena["out"])) / "judges.json").read_text())
    assert "hidden by their modes" in confinement["per_judge"]["direct"]["sandbox"]


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("who", AS)
def test_without_landlock_a_grade_that_runs_case_code_stops_before_grading(
    root_dir: Path, who: str
) -> None:
    """Where nothing can hide the grader's files (no Landlock; as root, a world-readable
    eval.yaml dir), no command runs and no reward is written (exit 10), unless the weaker
    sandbox is accepted, which judges.json then records."""
    arena = make_arena(root_dir, AS[who])
    out = Path(str(arena["out"]))
    (out / "reward.json").write_text('{"reward": 1.0}')  # an earlier run's
    give(AS[who], out)
    completed = grade_arena(arena, AS[who], landlock=False)
    assert completed.returncode == 10, completed.stderr
    assert completed.stderr.count("\n") == 1, completed.stderr
    assert "judge holder runs code from the case, and the sandbox would be weak here" in (
        completed.stderr
    )
    assert "--weak-sandbox" in completed.stderr
    assert list(out.iterdir()) == []  # no reward, and the earlier one is gone
    assert not (Path(str(arena["case"])) / "answer.txt").exists()
    accepted = grade_arena(arena, AS[who], "--weak-sandbox", landlock=False)
    assert accepted.returncode == 0, accepted.stderr
    sandbox = json.loads((out / "judges.json").read_text())["per_judge"]["holder"]
    assert "WEAK sandbox accepted (--weak-sandbox)" in sandbox["sandbox"]


def imported_before_the_package(python: str, env: dict[str, str], where: Path) -> set[str]:
    """The modules `python -m` imports before any package's code runs (runpy and what
    it imports): found by running a probe package that lists them."""
    probe = where / "probe_before"
    probe.mkdir()
    (probe / "__init__.py").write_text("import sys\nprint(' '.join(sorted(sys.modules)))\n")
    (probe / "__main__.py").write_text("")
    listed = subprocess.run(
        [python, "-m", "probe_before"],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    shutil.rmtree(probe)
    return {name.partition(".")[0] for name in listed.split()}


@pytest.mark.slow
def test_python_m_verifier_from_the_case_imports_nothing_of_it(root_dir: Path) -> None:
    """`python -m verifier` started in the case dir: every module of the standard library
    planted there (a urllib/ package too, whose daemon would rewrite reward.json) stays
    unimported, as root and as another UID; all but those Python itself imports before
    any package runs (runpy's: docs/security.md, Start-up, says to use `python -I -m verifier`)."""
    import sys

    from tests.hostile import world_verifier

    python, environment = world_verifier()
    before = imported_before_the_package(python, dict(environment), root_dir)
    assert "urllib" not in before and "typing" not in before
    for who, uid in AS.items():
        if uid is not None and os.geteuid() != 0:
            continue
        base = root_dir / who
        case, out = base / "case", base / "out"
        case.mkdir(parents=True)
        out.mkdir()
        marker = base / "imported"
        plant = textwrap.dedent(f"""
            import os, subprocess
            open({str(marker)!r}, "a").write(__name__ + "\\n")
            subprocess.Popen(["sh", "-c", "while :; do echo '{{\\"reward\\": 1.0}}' > {out}/reward.json; sleep 0.05; done"], start_new_session=True)
        """)
        names = {name for name in sys.stdlib_module_names if name not in before}
        for name in names:
            if not name.startswith("_") or name in ("_collections_abc", "_sitebuiltins"):
                (case / f"{name}.py").write_text(plant)
        (case / "urllib.py").unlink()
        (case / "urllib").mkdir()
        (case / "urllib" / "__init__.py").write_text(plant)
        (base / "eval.yaml").write_text(
            "judges:\n  - {name: a, check: 'return False'}\n"
            "  - {name: b, builtin: file_exists, arguments: {path: nothing}}\n"
        )
        give(uid, base)
        base.chmod(0o777)
        completed = run_grader(
            uid,
            ["grade", "--config", str(base / "eval.yaml"), "--case", str(case), "--out", str(out)],
            cwd=case,
        )
        assert completed.returncode == 0, (who, completed.stderr)
        time.sleep(0.3)
        assert not marker.exists(), (who, marker.read_text())
        assert json.loads((out / "reward.json").read_text())["reward"] == 0.0, who


def test_an_out_dir_of_slash_is_refused_where_commands_run(tmp_path: Path) -> None:
    """Everything beneath a hidden path is hidden: / would leave commands nothing."""
    from tests.hostile import VERIFIER_SELF

    (tmp_path / "case").mkdir()
    (tmp_path / "eval.yaml").write_text(
        "judges:\n  - {name: a, builtin: command_succeeds, arguments: {cmd: 'true'}}\n"
    )
    completed = subprocess.run(
        [
            VERIFIER_SELF,
            "grade",
            "--config",
            str(tmp_path / "eval.yaml"),
            "--case",
            str(tmp_path / "case"),
            "--out",
            "/",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2, completed.stderr
    assert "one of them is /, which would hide every file from it" in completed.stderr


@needs_root
@pytest.mark.parametrize("who", AS)
def test_the_grader_keeps_its_limits_and_its_scheduling(root_dir: Path, who: str) -> None:
    """A command of the grader's UID may not prlimit, renice, reschedule, pin or idle the
    I/O of the grader's processes, their groups or the whole UID, through either ABI
    (Landlock governs none of it, at any ABI): a file size limit of 0 on `verifier grade`
    would cost the reward files (exit 4, no reward). Its own processes it still may."""
    tests, case, out = root_dir / "tests", root_dir / "case", root_dir / "out"
    tests.mkdir()
    out.mkdir()
    (case / "attacks").mkdir(parents=True)
    shutil.copy(ATTACKS / "grader_limits.py", case / "attacks")
    (case / "answer.txt").write_text("right\n")
    (tests / "reference.txt").write_text("right\n")
    command = "python3 attacks/grader_limits.py"
    (tests / "eval.yaml").write_text(
        "judges:\n"
        "  - name: limits\n    builtin: command_output_matches\n"
        f"    arguments: {{cmd: {command}, expected: kept-out, timeout: 30}}\n"
        "  - name: own\n    builtin: command_succeeds\n"
        f"    arguments: {{cmd: {command} own, timeout: 30}}\n"
        "  - name: answer\n    builtin: files_equal\n"
        "    arguments: {path1: answer.txt, reference: reference.txt}\n"
    )
    give(AS[who], tests, out, case)
    completed = run_grader(
        AS[who],
        ["grade", "--config", f"{tests}/eval.yaml", "--case", str(case), "--out", str(out)],
        cwd=tests,
    )
    assert completed.returncode == 0, completed.stderr
    per_judge = json.loads((out / "judges.json").read_text())["per_judge"]
    assert judged(out) == {"limits": True, "own": True, "answer": True}, per_judge
    assert json.loads((out / "reward.json").read_text())["reward"] == 1.0
    assert leftovers("grader_limits.py") == []


@needs_root
@pytest.mark.parametrize("who", AS)
def test_a_leased_file_does_not_stall_the_judge(root_dir: Path, who: str) -> None:
    """truncate(2) of a file the command holds a lease on blocks whoever runs it until
    the lease is broken (45 s): as the grader's UID, the supervisor in the judge's
    process answers the command's truncate without blocking, so the judge keeps
    watching the command and stops it at its timeout (5 s)."""
    tests, case, out = root_dir / "tests", root_dir / "case", root_dir / "out"
    tests.mkdir()
    out.mkdir()
    (case / "attacks").mkdir(parents=True)
    shutil.copy(ATTACKS / "lease_truncate.py", case / "attacks")
    (tests / "eval.yaml").write_text(
        "judges:\n  - name: lease\n    builtin: command_succeeds\n"
        "    arguments: {cmd: python3 attacks/lease_truncate.py, timeout: 5}\n"
    )
    give(AS[who], tests, out, case)
    started = time.monotonic()
    completed = run_grader(
        AS[who],
        ["grade", "--config", f"{tests}/eval.yaml", "--case", str(case), "--out", str(out)],
        cwd=tests,
    )
    assert completed.returncode == 0, completed.stderr
    assert time.monotonic() - started < 30
    lease = json.loads((out / "judges.json").read_text())["per_judge"]["lease"]
    assert (lease["value"], lease["rationale"]) == (False, "timed out after 5s"), lease
    assert leftovers("lease_truncate.py") == []
