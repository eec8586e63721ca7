"""`tests/script` against code under test that keeps the script's own reward from being
the one read, through the real grader, as root and as an arbitrary UID.

The task's test.sh runs the agent's `solution.py` and then writes reward.txt: 0 when its
check fails, as it does here. The code under test writes a reward of 1 first, then
tries to keep the script's 0 from replacing it: it kills the script (SIGKILL to its
parent, or to every process it may signal), makes bash end with SIGINT's exit before
the write, or makes the file unwritable to the script (chmod, fchmod, a symlink to a
read-only file, the dir closed). Each time the reward is the honest 0 (the script's
own, or none), and nothing the code started is left running.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.hostile import NONROOT, give, leftovers, remove_world_dir, run_grader
from tests.toolchain import world_dir

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches to other UIDs: run as root")
AS = {"root": None, "non-root": NONROOT}

# What the code under test does at import, after planting its reward (REWARD: the path).
ATTACKS = {
    "kills the script": "os.kill(os.getppid(), signal.SIGKILL)",
    "kills all it may": "os.kill(-1, signal.SIGKILL)",
    "makes bash exit on SIGINT": (
        "os.kill(os.getppid(), signal.SIGINT)\n"
        "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
        "os.kill(os.getpid(), signal.SIGINT)"
    ),
    "chmods the reward": "os.chmod(REWARD, 0o444)",
    "fchmods the reward": ("fd = os.open(REWARD, os.O_WRONLY)\nos.fchmod(fd, 0o444)\nos.close(fd)"),
    "links it to a read-only file": (
        "os.rename(REWARD, REWARD + '.kept')\nos.chmod(REWARD + '.kept', 0o444)\n"
        "os.symlink('reward.txt.kept', REWARD)"
    ),
    "closes the dir": "os.chmod(os.path.dirname(REWARD), 0o600)",
}


class Views:
    """The paths test.sh expects, outside /tmp (the script gets a private /tmp)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name in ("tests", "app", "logs"):
            (root / name).mkdir()
        root.chmod(0o755)


@pytest.fixture(scope="module")
def views() -> Iterator[Views]:
    root = Path(tempfile.mkdtemp(prefix="verifier-script-views-", dir="/var/tmp"))
    try:
        yield Views(root)
    finally:
        remove_world_dir(root)


def _test_sh(views: Views) -> str:
    logs = views.root / "logs"
    return (
        "#!/bin/bash\n"
        f"cd {views.root / 'app'}\n"
        'python3 -c "import solution; assert solution.answer() == 42"\n'
        f"if [ $? -eq 0 ]; then echo 1 > {logs}/reward.txt; else echo 0 > {logs}/reward.txt; fi\n"
    )


def _solution(views: Views, attack: str, marker: str) -> str:
    return (
        "import os, signal, subprocess, sys\n"
        f"REWARD = {str(views.root / 'logs' / 'reward.txt')!r}\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        "with open(REWARD, 'w') as handle:\n"
        "    handle.write('1\\n')\n"
        f"{attack}\n"
        "def answer():\n"
        "    return 0\n"
    )


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("who", AS)
@pytest.mark.parametrize("attack", ATTACKS)
def test_the_code_under_test_cannot_keep_the_scripts_reward_from_being_read(
    views: Views, attack: str, who: str
) -> None:
    root = world_dir("verifier-script-hostile-")
    marker = f"script-hostile-{secrets.token_hex(6)}"
    try:
        config = root / "config"
        (config / "task-tests").mkdir(parents=True)
        script = config / "task-tests" / "test.sh"
        script.write_text(_test_sh(views))
        script.chmod(0o755)
        arguments = {
            "tests": "task-tests",
            "case_at": str(views.root / "app"),
            "tests_at": str(views.root / "tests"),
            "logs_at": str(views.root / "logs"),
            "reward_files": ["reward.txt"],
            "timeout": 60,
        }
        judge = {"name": "tests", "builtin": "tests/script", "timeout": 90, "arguments": arguments}
        eval_yaml = {"judges": [judge], "reward": {"judge": "tests", "on_error": "zero"}}
        (config / "eval.yaml").write_text(yaml.safe_dump(eval_yaml))
        config.chmod(0o700)
        case = root / "case"
        case.mkdir()
        (case / "solution.py").write_text(_solution(views, ATTACKS[attack], marker))
        out = root / "out"
        out.mkdir()
        give(AS[who], config, out)
        arguments_ = ["grade", "--config", str(config / "eval.yaml"), "--case", str(case)]
        completed = run_grader(AS[who], [*arguments_, "--out", str(out)])
        assert completed.returncode == 0, completed.stderr
        result = json.loads((out / "judges.json").read_text())["per_judge"]["tests"]
        assert result["status"] == "ok", result
        assert result["value"] == 0.0, result["rationale"]
        assert json.loads((out / "reward.json").read_text())["reward"] == 0.0
        assert leftovers(marker) == []
    finally:
        remove_world_dir(root)
