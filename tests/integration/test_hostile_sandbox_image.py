"""The hostile arena and the hostile batch (tests/unit/sandbox/test_hostile.py,
test_hostile_batch.py) in the image, on docker, podman's API and podman's command line:
as OpenShift's restricted-v2 runs it (an arbitrary UID, read-only root, no
capabilities) and as root; with a Docker secret mounted at /run/secrets; where
Landlock is missing (a seccomp profile under which landlock_* fail with ENOSYS); and
with a case bigger than the container's /tmp.

The attacks written in Python need a python3 on the commands' PATH, which the
verifier's image does not have (a task's environment brings its toolchain:
docs/image.md); an image of the verifier with its own interpreter linked as python3
stands in for such a toolchain. After grading, a script in the same container waits,
then lists every process still running (the container's PID namespace holds them
all).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import (
    BUNDLED_PYTHON,
    IMAGE,
    Engine,
    Mount,
    Result,
    RunOptions,
    shared_dir,
    shared_file,
)
from tests.unit.batch.test_hostile import BATCH, rewards
from tests.unit.sandbox.test_hostile import ATTACKS, HONEST, arena_eval

pytestmark = pytest.mark.integration

RESTRICTED_UID = 1000680000
NO_LANDLOCK_PROFILE = {
    "defaultAction": "SCMP_ACT_ALLOW",
    "syscalls": [
        {
            "names": ["landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": 38,
        }
    ],
}
AFTERWARDS = r"""
sleep 1
for p in /proc/[0-9]*; do
    case "${p#/proc/}" in 1|$$|$PPID) continue ;; esac
    line=$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)
    [ -n "$line" ] && echo "left: $line"
done
"""
WHO = {"restricted-v2 UID": RunOptions.restricted, "root": lambda: RunOptions(user="0")}


@pytest.fixture
def toolchain(image_of: Callable[[str], str]) -> str:
    """The verifier's image with a python3 for the commands (its own interpreter)."""
    return image_of(
        f"FROM {IMAGE}\nUSER 0\nRUN ln -s {BUNDLED_PYTHON} /usr/local/bin/python3\nUSER 1001:0\n"
    )


def arena(tmp_path: Path, *, out_owner: int | None) -> tuple[list[Mount], str, Path]:
    """The mounts of an arena (eval.yaml's dir at /tests, the case, the out dir, a secret
    at /run/secrets/token), its key, and the host's out dir."""
    import secrets

    key = f"ANSWER-{secrets.token_hex(16)}"
    tests, case, out = (shared_dir(tmp_path / name) for name in ("tests", "case", "out"))
    shared_file(tests / "reference.txt", key)
    shared_file(tests / "ref2.txt", "hello\n")
    shared_file(tests / "eval.yaml", arena_eval(key, Path("/tests"), Path("/logs/verifier")))
    shutil.copytree(ATTACKS, case / "attacks")
    shared_file(case / "hello.txt", "hello\n")
    (case / "key-link").symlink_to("/tests/reference.txt")
    for path in [case, *case.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o555 if path.is_dir() else 0o444)
    secret = shared_file(tmp_path / "token", key)
    out.chmod(0o777)
    if out_owner is not None:
        os.chown(out, out_owner, 0)
    mounts = [
        Mount(str(tests), "/tests", read_only=True),
        Mount(str(case), "/case", read_only=True),
        Mount(str(out), "/logs/verifier"),
        Mount(str(secret), "/run/secrets/token", read_only=True),
    ]
    return mounts, key, out


def grade_in(
    engine: Engine, image: str, mounts: list[Mount], key: str, options: RunOptions, *extra: str
) -> tuple[int, str]:
    """`verifier grade` in image as test.sh runs it (the key in its parent shell's
    environment, /tests its cwd); its exit code and everything printed."""
    options.env.update(OPENAI_API_KEY=key, HF_TOKEN=key)
    script = f"cd /tests && verifier grade {' '.join(extra)}; echo rc=$?; {AFTERWARDS}"
    result = engine.run(["sh", "-c", script], mounts=mounts, options=options, image=image)
    assert result.exit_code == 0, str(result)
    code = next(line for line in result.stdout.splitlines() if line.startswith("rc="))
    return int(code[3:]), result.output


def no_landlock(engine: Engine, tmp_path: Path) -> str:
    """The --security-opt of the ENOSYS profile: its text for dockerd (the docker CLI sends
    the file's content), its path for podman (which opens it itself)."""
    profile = shared_file(tmp_path / "no-landlock.json", json.dumps(NO_LANDLOCK_PROFILE))
    return f"seccomp={profile.read_text() if engine.name == 'docker' else profile}"


def check_honest(code: int, output: str, out: Path, key: str) -> None:
    assert code == 0, output
    judges = json.loads((out / "judges.json").read_text())["per_judge"]
    values = {name: entry["value"] for name, entry in judges.items()}
    assert values == HONEST, json.dumps(judges, indent=1)
    assert [line for line in output.splitlines() if line.startswith("left: ")] == [], output
    assert sorted(path.name for path in out.iterdir()) == [
        "judges.json",
        "reward-details.json",
        "reward.json",
        "reward.txt",
    ]
    assert key not in output + "".join(path.read_text() for path in out.iterdir())


@pytest.mark.parametrize("who", [*WHO, "root without capabilities"])
def test_no_attack_reaches_the_answer_key_in_the_image(
    engine: Engine, tmp_path: Path, toolchain: str, who: str
) -> None:
    """Root without capabilities (--cap-drop ALL) cannot switch users: its commands run as
    root itself, kept in by Landlock and the supervisor like any non-root grader's."""
    if who in WHO:
        options = WHO[who]()
    else:
        options = RunOptions(user="0", cap_drop=("ALL",), security_opt=("no-new-privileges",))
    mounts, key, out = arena(tmp_path, out_owner=RESTRICTED_UID if who != "root" else None)
    if who == "root without capabilities":
        os.chown(out, 0, 0)
    code, output = grade_in(engine, toolchain, mounts, key, options)
    check_honest(code, output, out, key)


def test_without_landlock_root_in_the_image_is_kept_out_by_the_file_modes(
    engine: Engine, tmp_path: Path, toolchain: str
) -> None:
    """Root under the ENOSYS profile, /tests and the out dir closed to other users: the
    sandbox UID cannot enter them, and every attack fails as with Landlock. (No secret
    is mounted: the engine makes /run/secrets open to everyone, which would stop it.)"""
    mounts, key, out = arena(tmp_path, out_owner=None)
    mounts = [mount for mount in mounts if not mount.target.startswith("/run/secrets")]
    (tmp_path / "tests").chmod(0o700)
    out.chmod(0o700)
    options = RunOptions(user="0", security_opt=(no_landlock(engine, tmp_path),))
    code, output = grade_in(engine, toolchain, mounts, key, options)
    check_honest(code, output, out, key)
    sandbox = json.loads((out / "judges.json").read_text())["per_judge"]["direct"]["sandbox"]
    assert "hidden by their modes" in sandbox


@pytest.mark.parametrize("who", WHO)
def test_without_landlock_the_image_stops_before_grading_unless_told(
    engine: Engine, tmp_path: Path, toolchain: str, who: str
) -> None:
    mounts, key, out = arena(tmp_path, out_owner=RESTRICTED_UID if who != "root" else None)
    options = WHO[who]()
    options.security_opt = (*options.security_opt, no_landlock(engine, tmp_path))
    code, output = grade_in(engine, toolchain, mounts, key, options)
    assert code == 10, output
    assert "the sandbox would be weak here" in output and "--weak-sandbox" in output
    assert list(out.iterdir()) == []
    options.env["VERIFIER_WEAK_SANDBOX"] = "1"
    code, output = grade_in(engine, toolchain, mounts, key, options)
    assert code == 0, output
    sandbox = json.loads((out / "judges.json").read_text())["per_judge"]["holder"]["sandbox"]
    assert "WEAK sandbox accepted (--weak-sandbox)" in sandbox


def batch_mounts(
    tmp_path: Path, command: str, cases: dict[str, dict[str, str]], out_owner: int | None
) -> tuple[list[Mount], Path]:
    tests, root, out = (shared_dir(tmp_path / name) for name in ("tests", "cases", "out"))
    shared_file(
        tests / "eval.yaml",
        "judges:\n  - name: tests\n    builtin: command_succeeds\n"
        f"    arguments: {{cmd: {json.dumps(command)}, timeout: 40}}\n",
    )
    for name, files in cases.items():
        shared_dir(root / name)
        for relative, text in files.items():
            shared_file(root / name / relative, text)
    for directory in (root, *root.iterdir()):
        directory.chmod(0o777)
        if out_owner is not None:
            os.chown(directory, out_owner, 0)
    out.chmod(0o777)
    if out_owner is not None:
        os.chown(out, out_owner, 0)
    mounts = [
        Mount(str(tests), "/tests", read_only=True),
        Mount(str(root), "/cases"),
        Mount(str(out), "/logs/verifier"),
    ]
    return mounts, out


def batch_in(
    engine: Engine, image: str, mounts: list[Mount], options: RunOptions, out: Path, *, jobs: int
) -> Result:
    """`verifier batch` of /cases in image, then what is left running; it exits 0."""
    script = (
        f"verifier batch --cases /cases --out /logs/verifier --jobs {jobs}; echo rc=$?; "
        f"{AFTERWARDS}"
    )
    result = engine.run(["sh", "-c", script], mounts=mounts, options=options, image=image)
    assert "rc=0" in result.stdout, str(result)
    return result


@pytest.mark.parametrize("who", WHO)
def test_a_case_cannot_harm_its_sibling_in_the_image(
    engine: Engine, tmp_path: Path, toolchain: str, who: str
) -> None:
    """As root the attacker also holds every process its UID may have (here 400: the
    container's nproc limit), which its sibling, under a UID of its own, never sees."""
    owner = RESTRICTED_UID if who != "root" else None
    hold = "hold" if who == "root" else ""
    mounts, out = batch_mounts(
        tmp_path,
        f"sh run.sh /cases /logs/verifier {hold}",
        {
            "attacker": {"run.sh": (BATCH / "attacker.sh").read_text()},
            "victim": {"run.sh": (BATCH / "victim.sh").read_text(), "answer.txt": "42\n"},
        },
        owner,
    )
    options = WHO[who]()
    options.ulimits = ("nofile=1024:1024", "nproc=400:400")  # one --ulimit replaces them all
    result = batch_in(engine, toolchain, mounts, options, out, jobs=2)
    assert rewards(out) == {"attacker": 0.0, "victim": 1.0}, str(result)
    if hold:  # the attack ran: it held what its UID may have
        attacker = json.loads((out / "attacker" / "judges.json").read_text())["per_judge"]
        assert "held " in attacker["tests"]["rationale"], attacker
    assert [line for line in result.output.splitlines() if line.startswith("left: ")] == []
    assert (tmp_path / "cases" / "victim" / "answer.txt").read_text() == "42\n"


def test_a_case_bigger_than_the_containers_tmp_fails_its_judge_and_a_sparse_one_does_not(
    engine: Engine, tmp_path: Path
) -> None:
    """restricted-v2 with a 64 MiB /tmp: a 900 MiB sparse file is copied for the command
    (its holes stay holes); 96 MiB of data is a fact about the case, not an OOM."""
    sparse, dense = 900 * 1024**2, 96 * 1024**2
    mounts, out = batch_mounts(
        tmp_path,
        'test "$(stat -c %s big)" = "$(cat size)"',
        {
            "sparse": {"size": str(sparse)},
            "dense": {"size": str(dense)},
        },
        RESTRICTED_UID,
    )
    with open(tmp_path / "cases" / "sparse" / "big", "wb") as handle:
        handle.truncate(sparse)
    with open(tmp_path / "cases" / "dense" / "big", "wb") as handle:
        handle.writelines(os.urandom(1024**2) for _ in range(dense // 1024**2))
    options = RunOptions.restricted()
    options.tmpfs = ("/tmp:size=64m",)
    result = batch_in(engine, IMAGE, mounts, options, out, jobs=1)
    assert rewards(out) == {"sparse": 1.0, "dense": 0.0}, str(result)
    dense_judge = json.loads((out / "dense" / "judges.json").read_text())["per_judge"]["tests"]
    assert "the case cannot be copied for the command" in dense_judge["rationale"]


def test_a_command_filling_a_tmp_bigger_than_the_containers_memory_is_stopped(
    engine: Engine, tmp_path: Path, toolchain: str
) -> None:
    """restricted-v2 with 300 MiB of memory and a 2 GiB /tmp: the command writing its HOME
    full is stopped before the container runs out of memory (the grader would be
    OOM-killed, and no reward written), and the judge beside it is graded."""
    fill = (
        'python3 -c \'import time\nwith open("fill", "wb") as f:\n    while True:\n'
        "        f.write(bytes(1 << 20)); f.flush(); time.sleep(0.01)'"
    )
    mounts, out = batch_mounts(tmp_path, fill, {"c": {}}, RESTRICTED_UID)
    shared_file(
        tmp_path / "tests" / "eval.yaml",
        "judges:\n  - name: filler\n    builtin: command_succeeds\n"
        f"    arguments: {{cmd: {json.dumps(fill)}, timeout: 60}}\n"
        "  - name: neighbour\n    builtin: command_succeeds\n"
        "    arguments: {cmd: 'sleep 1; true', timeout: 60}\n",
    )
    options = RunOptions.restricted()
    options.tmpfs = ("/tmp:size=2g",)
    options.memory = "300m"
    script = "verifier grade --case /cases/c --out /logs/verifier/c; echo rc=$?"
    result = engine.run(["sh", "-c", script], mounts=mounts, options=options, image=toolchain)
    assert result.exit_code == 0 and "rc=0" in result.stdout, str(result)
    judges = json.loads((out / "c" / "judges.json").read_text())["per_judge"]
    assert judges["neighbour"]["value"] is True
    assert "stopped: the command filled the temp space" in judges["filler"]["rationale"]


def test_a_read_only_container_without_a_tmp_stops_before_grading(
    engine: Engine, tmp_path: Path, toolchain: str
) -> None:
    """docker --read-only gives no writable /tmp (podman mounts one): where no scratch
    can be made for commands, exit 10 saying what to give the grader, no reward."""
    mounts, key, out = arena(tmp_path, out_owner=RESTRICTED_UID)
    options = RunOptions(user=f"{RESTRICTED_UID}:0", read_only=True, cap_drop=("ALL",))
    code, output = grade_in(engine, toolchain, mounts, key, options)
    if engine.name == "docker":
        assert code == 10, output
        assert "no scratch dir can be made for it" in output
        assert "give the grader a writable temp dir (TMPDIR, or --tmpfs /tmp" in output
        assert list(out.iterdir()) == []
    else:  # podman's --read-only mounts a tmpfs at /tmp itself
        check_honest(code, output, out, key)
