"""Hostile agents against the image: as OpenShift's restricted-v2 runs it (an arbitrary
UID, read-only root, no capabilities) and as root the way Harbor execs /tests/test.sh.

The attacks are tests/unit/sandbox/test_hostile_commands.py's ATTACK, written as a case would hold it.
After grading, a script inside the same container waits, then lists every process
still running (the container's PID namespace holds them all) and shows reward.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import Engine, Mount, RunOptions, shared_dir, shared_file
from tests.unit.sandbox.test_hostile_commands import ATTACK, KEY, SHORT_TOKEN, hostile_eval

pytestmark = pytest.mark.integration

EVAL = hostile_eval("/logs/verifier")

# Grades, waits for a rewriter to strike, then reports what is left.
AFTERWARDS = r"""
sleep 1
echo "reward: $(cat /logs/verifier/reward.json | tr -d ' \n')"
for p in /proc/[0-9]*; do
    case "${p#/proc/}" in 1|$$|$PPID) continue ;; esac
    line=$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)
    case "$line" in ''|'sleep infinity '|*'sleep infinity'*) ;; *) echo "left: $line" ;; esac
done
"""


def hostile_mounts(tmp_path: Path) -> list[Mount]:
    case = shared_dir(tmp_path / "case")
    shared_file(case / "attack.sh", ATTACK)
    (case / "attack.sh").chmod(0o755)
    out = shared_dir(tmp_path / "out")
    out.chmod(0o777)
    config = shared_file(tmp_path / "eval.yaml", EVAL)
    return [
        Mount(str(case), "/case", read_only=True),
        Mount(str(out), "/logs/verifier"),
        Mount(str(config), "/tests/eval.yaml", read_only=True),
    ]


def check(output: str, out: Path) -> None:
    lines = output.splitlines()
    assert 'reward: {"reward":0.0,"tests_pass":0.0,"leaky_author_judge":1.0}' in lines, output
    assert [line for line in lines if line.startswith("left: ")] == [], output
    assert "author judge chatter: [redacted]" in output
    judges = json.loads((out / "judges.json").read_text())["per_judge"]
    assert (judges["tests_pass"]["status"], judges["tests_pass"]["value"]) == ("ok", False)
    assert "wrote into" not in judges["tests_pass"]["rationale"]
    written = output + "".join(path.read_text() for path in out.iterdir())
    assert KEY not in written and SHORT_TOKEN not in written


@pytest.mark.parametrize(
    "options",
    [RunOptions.restricted(), RunOptions(user="0")],
    ids=["restricted-v2 UID", "root"],
)
def test_attacks_in_the_image_get_the_honest_reward_and_leave_nothing(
    engine: Engine, tmp_path: Path, options: RunOptions
) -> None:
    mounts = hostile_mounts(tmp_path)
    options.env.update(OPENAI_API_KEY=KEY, HF_TOKEN=SHORT_TOKEN)
    script = f"verifier grade; echo rc=$?; {AFTERWARDS}"
    result = engine.run(["sh", "-c", script], mounts=mounts, options=options)
    assert result.exit_code == 0, str(result)
    assert "rc=0" in result.stdout, str(result)
    check(result.output, Path(mounts[1].source))


def test_attacks_through_harbors_exec_of_test_sh_as_root(engine: Engine, tmp_path: Path) -> None:
    """Harbor keeps the container alive with `sleep infinity` and execs test.sh as root."""
    mounts = hostile_mounts(tmp_path)
    container = engine.start(["sh", "-c", "sleep infinity"], mounts=mounts)
    try:
        exec_script = (
            f"export OPENAI_API_KEY={KEY} HF_TOKEN={SHORT_TOKEN}; "
            f"(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1; {AFTERWARDS}"
        )
        result = engine.exec(container, ["bash", "-c", exec_script], user="0")
    finally:
        engine.remove(container)
    assert result.exit_code == 0, str(result)
    out = Path(mounts[1].source)
    stdout_txt = (out / "test-stdout.txt").read_text()
    assert "verifier exit code: 0" in stdout_txt, stdout_txt
    check(result.output + stdout_txt, out)
