"""What the hostile-agent tests share: the grader run as root or as an arbitrary non-root
UID (as OpenShift's restricted-v2 runs it), with or without Landlock, in dirs any UID
can reach, and a look at the processes left behind.

A non-root grader needs a Python and a copy of the verifier it can read: the
test's own interpreter may live under /root (pyenv), so `world_verifier` copies the
package and its dependencies to a world-readable dir and picks an interpreter of the
same version that any UID may run.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.toolchain import copy_packages, world_dir

REPO = Path(__file__).resolve().parent.parent
VERIFIER_SELF = str(Path(sys.executable).with_name("verifier"))  # this interpreter's, as is
NO_LANDLOCK = REPO / "tests" / "no_landlock.py"
NONROOT = 1000680000  # an OpenShift-style arbitrary UID, in group 0
_DEPENDENCIES = ("yaml", "_yaml", "jinja2", "markupsafe", "attr", "attrs")


def remove_world_dir(path: Path) -> None:
    """Remove a world_dir: unmount what is mounted beneath it, give back the modes an
    attack took away, delete it."""
    with open("/proc/self/mounts", encoding="utf-8") as handle:
        mounted = [line.split()[1] for line in handle]
    for point in sorted((point for point in mounted if point.startswith(f"{path}/")), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)
    subprocess.run(["chmod", "-R", "u+rwx", str(path)], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def _world_runnable(path: str) -> bool:
    """Whether any UID may run path: it and every dir on the way are open to others."""
    real = os.path.realpath(path)
    parts = Path(real).parents
    return os.stat(real).st_mode & stat.S_IXOTH != 0 and all(
        os.stat(parent).st_mode & stat.S_IXOTH for parent in parts
    )


@functools.cache
def world_verifier() -> tuple[str, Mapping[str, str]]:
    """(python, environment) with which any UID can run `python -m verifier`."""
    candidates = [
        os.path.realpath(sys.executable),
        f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}",
    ]
    python = next(
        (path for path in candidates if os.path.exists(path) and _world_runnable(path)), None
    )
    if python is None:
        raise RuntimeError(f"no Python {sys.version_info[:2]} that any UID may run")
    root = world_dir("verifier-world-")
    atexit.register(shutil.rmtree, root, True)
    shutil.copytree(
        REPO / "verifier", root / "verifier", ignore=shutil.ignore_patterns("__pycache__")
    )
    copy_packages(_DEPENDENCIES, root)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return python, {"PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}


def grader_command(
    uid: int | None, *arguments: str, landlock: bool = True, nproc: int | None = None
) -> list[str]:
    """`verifier ARGUMENTS...` as root (uid None: this process's UID) or as uid (group 0,
    no other groups), where Landlock is missing unless `landlock`, with RLIMIT_NPROC
    `nproc` when given."""
    python, _ = world_verifier()
    command = [python, "-m", "verifier", *arguments]
    if not landlock:
        command = [python, str(NO_LANDLOCK), *command]
    if uid is not None:
        command = ["setpriv", f"--reuid={uid}", "--regid=0", "--clear-groups", *command]
    if nproc is not None:
        command = ["prlimit", f"--nproc={nproc}:{nproc}", *command]
    return command


def run_grader(
    uid: int | None,
    arguments: Sequence[str],
    *,
    landlock: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 180,
    nproc: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """The grader run to the end: its exit code, stdout and stderr."""
    _, environment = world_verifier()
    full = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": "/tmp",
        **environment,
        **(env or {}),
    }
    return subprocess.run(
        grader_command(uid, *arguments, landlock=landlock, nproc=nproc),
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd,
        timeout=timeout,
    )


def grade_as(
    uid: int | None,
    config: Path,
    case: Path,
    marker: str,
    *,
    landlock: bool = True,
    env: Mapping[str, str] | None = None,
) -> tuple[float, dict[str, Any]]:
    """`verifier grade` of case as uid (without Landlock: `--weak-sandbox` too), into
    `<case>-out`: (reward, judges.json's per_judge), once it exited 0 and left no process
    whose command line holds marker."""
    out = Path(str(case) + "-out")
    out.mkdir()
    give(uid, out)
    arguments = ["grade", "--config", str(config), "--case", str(case), "--out", str(out)]
    if not landlock:
        arguments.append("--weak-sandbox")
    completed = run_grader(uid, arguments, landlock=landlock, env=env)
    assert completed.returncode == 0, completed.stderr
    assert leftovers(marker) == []
    reward = json.loads((out / "reward.json").read_text())["reward"]
    return reward, json.loads((out / "judges.json").read_text())["per_judge"]


def idle_uid(start: int = NONROOT + 1) -> int:
    """An arbitrary UID that owns no process on this machine: RLIMIT_NPROC counts a UID's
    processes machine-wide (zombies under a PID 1 that never reaps them included), so a
    test of that limit needs a UID of its own."""
    owners = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                owners.add(entry.stat().st_uid)
            except OSError:
                continue
    return next(uid for uid in range(start, start + 10_000) if uid not in owners)


def give(uid: int | None, *paths: Path) -> None:
    """Hand paths (recursively) to uid, group 0 (uid None: leave them as they are)."""
    if uid is None:
        return
    for top in paths:
        for path in [top, *top.rglob("*")]:
            os.lchown(path, uid, 0)


def leftovers(marker: str) -> list[str]:
    """Processes whose command line mentions marker (ps, as an operator would look)."""
    listing = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in listing.splitlines()[1:] if marker in line and "ps -eo" not in line]


# Code under test, appended to a module the tests import: each failed report turns into a
# pass as it returns from pytest's makereport hook.
TRACE_FLIP = """

import sys


def _calls(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "pytest_runtest_makereport":
        return _returns
    return None


def _returns(frame, event, arg):
    if event == "return" and getattr(arg, "outcome", None) == "failed":
        arg.outcome, arg.longrepr = "passed", None
    return _returns


sys.settrace(_calls)
"""
