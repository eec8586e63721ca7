"""Hostile agents: code from the case, run by a command judge, tries to reach the grader.

Each attack is a script the agent leaves in its case, run by `command_succeeds` the
way a task runs the agent's tests. It fails its tests (exits 1), so the honest
reward is 0.0; the attack tries to turn that into 1.0 through the grader: writing a
fake result into a judge's pipe, rewriting reward.json after grading, stealing the
grader's API keys, killing the judge, leaving processes behind. Here as root (CI
runs as root): the command runs as an unprivileged user in a copy of the case. The
same attacks run in the image as an OpenShift-style UID in tests/integration.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

VERIFIER = str(Path(sys.executable).with_name("verifier"))
KEY = "sk-hostile-test-0123456789abcdefghij"
SHORT_TOKEN = "hf7Qz"

ATTACK = r"""#!/bin/sh
# Fails its tests (exit 1) and tries to be graded 1.0 anyway. Its ancestors past the
# shells that run it are the judge's process and the grader.
out="$1"
p=$$
while [ "$p" -gt 1 ]; do
    p=$(cut -d' ' -f4 /proc/$p/stat)
    [ "$(cat /proc/$p/comm)" = sh ] && continue
    targets="$targets $p"
    tr '\0' '\n' < /proc/$p/environ 2>&1
    for fd in /proc/$p/fd/*; do
        printf '{"status": "ok", "value": true}\n' > "$fd" 2>/dev/null && echo "wrote into $p $fd"
    done
done
setsid sh -c "while :; do printf '{\"reward\": 1.0}' > '$out/reward.json'; printf 1.0 > '$out/reward.txt'; sleep 0.05; done" >/dev/null 2>&1 </dev/null &
kill -9 $targets 2>&1
exit 1
"""


def leftovers(marker: str) -> list[str]:
    """Processes whose command line mentions marker (ps, as an operator would look)."""
    listing = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in listing.splitlines()[1:] if marker in line and "ps -eo" not in line]


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, Path]:
    tests, case, out = tmp_path / "tests", tmp_path / "case", tmp_path / "out"
    tests.mkdir()
    case.mkdir()
    (case / "attack.sh").write_text(ATTACK)
    (case / "attack.sh").chmod(0o755)
    (tests / "eval.yaml").write_text(hostile_eval(out))
    return {"config": tests / "eval.yaml", "case": case, "out": out}


def hostile_eval(out: Path | str) -> str:
    """The attack as the agent's tests, and an author's judge that leaks secrets."""
    return textwrap.dedent(f"""
        judges:
          - name: tests_pass
            builtin: command_succeeds
            arguments: {{command: "sh attack.sh {out}", timeout: 20}}
          - name: leaky_author_judge
            check: |
              import os
              print("author judge chatter:", os.environ.get("OPENAI_API_KEY"))
              return True, "saw " + os.environ.get("HF_TOKEN", "")
        reward:
          formula: weighted
          weights: {{tests_pass: 1}}
    """)


def grade_dir(root: Path, config_text: str) -> subprocess.CompletedProcess[str]:
    """`verifier grade` of an empty case under root with config_text, into root/out."""
    config = root / "eval.yaml"
    config.write_text(config_text)
    (root / "case").mkdir()
    return subprocess.run(
        [
            VERIFIER,
            "grade",
            "--config",
            str(config),
            "--case",
            str(root / "case"),
            "--out",
            str(root / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def grade(paths: dict[str, Path], *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": KEY, "HF_TOKEN": SHORT_TOKEN}
    return subprocess.run(
        [
            VERIFIER,
            "grade",
            "--config",
            str(paths["config"]),
            "--case",
            str(paths["case"]),
            "--out",
            str(paths["out"]),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_attacks_get_the_honest_reward_and_leave_nothing(hostile: dict[str, Path]) -> None:
    completed = grade(hostile)
    assert completed.returncode == 0, completed.stderr
    time.sleep(0.5)  # a surviving rewriter would have struck by now
    reward = json.loads((hostile["out"] / "reward.json").read_text())
    assert reward == {"reward": 0.0, "tests_pass": 0.0, "leaky_author_judge": 1.0}
    assert (hostile["out"] / "reward.txt").read_text() == "0.0\n"
    assert leftovers(str(hostile["out"])) == []
    judges = json.loads((hostile["out"] / "judges.json").read_text())
    tests_pass = judges["per_judge"]["tests_pass"]
    assert (tests_pass["status"], tests_pass["value"]) == ("ok", False)
    assert "wrote into" not in tests_pass["rationale"]
    everything = (
        completed.stdout
        + completed.stderr
        + "".join(path.read_text() for path in hostile["out"].iterdir())
    )
    assert KEY not in everything and SHORT_TOKEN not in everything
    assert "author judge chatter: [redacted]" in completed.stderr
    assert judges["per_judge"]["leaky_author_judge"]["rationale"] == "saw [redacted]"


def test_a_command_cannot_kill_its_judge_and_a_judge_that_dies_errors(
    hostile: dict[str, Path],
) -> None:
    """As root the command runs as another UID: killing the judge's process is refused.
    (As the grader's own UID, Landlock's signal scoping or the supervisor refuses it:
    tests/unit/sandbox/test_signals.py, and the image tests.)
    An author's judge that dies without a result is an error, as before."""
    hostile["config"].write_text(
        "judges:\n  - name: t\n    check: |\n      import os, signal\n"
        "      os.kill(os.getpid(), signal.SIGKILL)\n      return True\n"
        "  - name: c\n    builtin: command_succeeds\n"
        "    arguments: {command: 'kill -9 $(cut -d\" \" -f4 /proc/$PPID/stat)'}\n"
    )
    completed = grade(hostile)
    assert completed.returncode == 0, completed.stderr
    judges = json.loads((hostile["out"] / "judges.json").read_text())["per_judge"]
    assert judges["t"]["status"] == "error" and "killed by SIGKILL" in judges["t"]["error"]
    assert (judges["c"]["status"], judges["c"]["value"]) == ("ok", False)
    assert "Operation not permitted" in judges["c"]["rationale"]


def test_an_author_judge_that_detaches_a_process_leaves_nothing(tmp_path: Path) -> None:
    marker = f"detached-{os.getpid()}-{time.monotonic_ns()}"
    completed = grade_dir(
        tmp_path,
        "judges:\n  - name: d\n    check: |\n      import subprocess\n"
        f"      subprocess.Popen(['sh', '-c', 'sleep 30; echo {marker}'], start_new_session=True)\n"
        "      return True\n",
    )
    assert completed.returncode == 0, completed.stderr
    assert leftovers(marker) == []


def test_a_judge_that_forks_and_returns_twice_is_an_error(tmp_path: Path) -> None:
    completed = grade_dir(
        tmp_path,
        "judges:\n  - name: twice\n    check: |\n      import os\n      os.fork()\n"
        "      return True\n  - name: fine\n    check: 'return 3'\n    score_range: [1, 5]\n",
    )
    assert completed.returncode == 0, completed.stderr
    judges = json.loads((tmp_path / "out" / "judges.json").read_text())["per_judge"]
    assert judges["twice"]["status"] == "error"
    assert judges["twice"]["error"] == "the judge forked: it returned in more than one process"
    assert judges["fine"]["value"] == 3.0


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_grading_within_a_second_leaving_nothing(
    tmp_path: Path, signum: signal.Signals, code: int
) -> None:
    marker = f"hang-{signum.name}-{os.getpid()}-{time.monotonic_ns()}"
    config = tmp_path / "eval.yaml"
    config.write_text(
        "judges:\n"
        f"  - name: hangs\n    check: |\n      import time\n      time.sleep(60)  # {marker}\n"
        "      return True\n"
        "  - name: command\n    builtin: command_succeeds\n"
        f"    arguments: {{command: 'setsid sh -c \"sleep 60 # {marker}\"; sleep 60', timeout: 120}}\n"
    )
    (tmp_path / "case").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "reward.json").write_text('{"reward": 1.0}')  # an earlier run's
    process = subprocess.Popen(
        [
            VERIFIER,
            "grade",
            "--config",
            str(config),
            "--case",
            str(tmp_path / "case"),
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while len(leftovers(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(leftovers(marker)) >= 2, "the judges did not start"
    sent = time.monotonic()
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert time.monotonic() - sent < 1.0
    assert process.returncode == code, stderr
    assert "no reward written" in stderr
    assert not (out / "reward.json").exists()
    assert leftovers(marker) == []
