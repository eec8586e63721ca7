"""A judge bigger than the container: the verifier's own limit strikes first.

In a container with `--memory 512m`, a judge that touches 900 MiB would be killed by
the kernel (SIGKILL, no word why) before the verifier's default 2048 MiB per judge
applies; the verifier reads the container's cgroup limit and stops the judge itself,
with an error record naming the limit, while the other judges and the reward stand.
Run as OpenShift's restricted-v2 runs the image, on podman and on docker (cgroup v1
here: memory.limit_in_bytes; a v2 host gives memory.max, read the same way).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import (
    IMAGE,
    RESTRICTED_USER,
    shared_dir,
    shared_file,
    unavailable,
)

pytestmark = pytest.mark.integration

EVAL = """\
judges:
  - name: hog
    check: |
      data = bytearray(900 * 1024 * 1024)
      for i in range(0, len(data), 4096):
          data[i] = 1
      return True
  - name: piped
    description: the same from a process the judge starts
    check: |
      import subprocess, sys
      code = "b = bytearray(900 << 20)\\nfor i in range(0, len(b), 4096): b[i] = 1"
      subprocess.run([sys.executable, "-c", code], check=True)
      return True
  - name: fine
    check: return True
reward:
  formula: weighted
  weights: {fine: 1}
"""


@pytest.mark.parametrize("cli", ["podman", "docker"])
def test_a_judge_over_the_containers_memory_is_an_error_record_naming_the_limit(
    cli: str, built_image: str, tmp_path: Path
) -> None:
    if shutil.which(cli) is None:
        unavailable("podman-cli" if cli == "podman" else cli, f"{cli} is not installed")
    tests = shared_dir(tmp_path / "tests")
    shared_file(tests / "eval.yaml", EVAL)
    case = shared_dir(tmp_path / "case")
    shared_file(case / "a.txt", "x")
    out = shared_dir(tmp_path / "out")
    out.chmod(0o777)
    user, _ = RESTRICTED_USER.split(":")
    command = [
        cli,
        "run",
        "--rm",
        "--network",
        "none",
        "--memory",
        "512m",
        "--user",
        RESTRICTED_USER,
        "--read-only",
        "--tmpfs",
        "/tmp",
        "--cap-drop",
        "ALL",
        "-v",
        f"{tests}:/tests:ro",
        "-v",
        f"{case}:/case:ro",
        "-v",
        f"{out}:/logs/verifier",
        IMAGE,
        "grade",
    ]
    graded = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    judges = json.loads((out / "judges.json").read_text())["per_judge"]
    hog = judges["hog"]
    assert hog["status"] == "error"
    assert "exceeded the memory limit of " in hog["error"]
    assert "the container's memory limit, 512 MiB (cgroup), less " in hog["error"]
    assert "SIGKILL" not in hog["error"]
    piped = judges["piped"]  # its child got MemoryError: the judge's command failed
    assert piped["status"] == "error" and "SIGKILL" not in piped["error"], piped
    assert judges["fine"]["status"] == "ok"
    assert json.loads((out / "reward.json").read_text())["reward"] == 1.0
    assert (out / "reward.json").stat().st_uid == int(user)
