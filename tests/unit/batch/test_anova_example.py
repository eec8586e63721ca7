"""agent-eval-harness's worked example, unchanged: its eval.yaml and dataset graded by
`verifier batch`, its LLM judge answered by a local Anthropic-style server.

The example's judge prompt reads `{{ outputs.annotation_instruction_content }}` and
`{{ outputs.annotation_oracle_content }}`: each request must carry that case's own
instruction and oracle (its dataset entry's files, trusted: outside the case-material
fences) and that case's solution (the agent's: inside them), and no other case's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm_servers import FakeLLM, Received, Reply, serve
from tests.paths import FIXTURES

VERIFIER = str(Path(sys.executable).with_name("verifier"))
EXAMPLE = FIXTURES / "anova-example"
# The score each case's answer gets: different per case, so a mixed-up request shows.
SCORES = {"task-0008": 5, "task-0010": 4, "task-0031": 2, "task-0034": 3}
FENCE = re.compile(r"<case-material-([0-9a-f]+)>\n(.*?)\n</case-material-\1>", re.DOTALL)


@pytest.fixture
def anthropic_server() -> Iterator[FakeLLM]:
    yield from serve("anthropic")


def entry_file(case_id: str, name: str) -> str:
    return (EXAMPLE / "dataset" / case_id / name).read_text()


def make_cases(root: Path) -> Path:
    """One case dir per dataset entry, named by its id: the agent's diff (a marked
    copy of the entry's oracle) and the test result the example's gate reads."""
    for case_id in SCORES:
        output = root / case_id / "output"
        output.mkdir(parents=True)
        (output / "solution.diff").write_text(f"# agent's fix for {case_id}\n")
        passed = case_id != "task-0031"  # its tests fail: the gate zeroes it
        (output / "tests.json").write_text(json.dumps({"passed": passed}))
    return root


def test_each_request_carries_its_own_cases_instruction_and_oracle(
    tmp_path: Path, anthropic_server: FakeLLM
) -> None:
    config_dir = tmp_path / "anova-example"
    shutil.copytree(EXAMPLE, config_dir)
    cases = make_cases(tmp_path / "cases")
    mixups: list[str] = []

    def route(request: Received) -> Reply:
        user = request.user
        (case_id,) = [cid for cid in SCORES if entry_file(cid, "instruction.txt").strip() in user]
        fenced = "\n".join(body for _, body in FENCE.findall(user))
        outside = FENCE.sub("", user)
        for other in SCORES:
            oracle = entry_file(other, "oracle.diff").strip()
            if (oracle in outside) != (other == case_id):
                mixups.append(f"{case_id}: oracle of {other}")
            if f"agent's fix for {other}" in fenced and other != case_id:
                mixups.append(f"{case_id}: solution of {other}")
        if f"agent's fix for {case_id}" not in fenced or "oracle.diff" in fenced:
            mixups.append(f"{case_id}: its solution is not fenced as the agent's")
        return anthropic_server.grade(score=SCORES[case_id], rationale=f"graded {case_id}")

    anthropic_server.route = route
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("VERIFIER_", "ANTHROPIC_", "OPENAI_", "EVAL_"))
    }
    env.update(anthropic_server.env, ANTHROPIC_API_KEY="sk-ant-test-key-0123456789")
    done = subprocess.run(
        [
            VERIFIER,
            "batch",
            "--config",
            str(config_dir / "eval.yaml"),
            "--cases",
            str(cases),
            "--out",
            str(tmp_path / "out"),
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert mixups == []
    assert len(anthropic_server.received) == 4
    assert {r.body["model"] for r in anthropic_server.received} == {"claude-sonnet-4-6"}
    for case_id, score in SCORES.items():
        out = tmp_path / "out" / case_id
        judges = json.loads((out / "judges.json").read_text())
        quality = judges["per_judge"]["solution_quality"]
        assert (quality["value"], quality["rationale"]) == (score, f"graded {case_id}")
        assert judges["dataset"] == {"case_id": case_id, "entry": f"dataset/{case_id}"}
        assert judges["task_input"] == {
            "source": f"dataset/{case_id}/input.yaml",
            "trusted": True,
        }
        expected = 0.0 if case_id == "task-0031" else (score - 1) / 4
        assert json.loads((out / "reward.json").read_text())["reward"] == expected
