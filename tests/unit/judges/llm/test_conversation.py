"""The agent's trajectory as an LLM judge's conversation and rubric material.

Harbor's ATIF trajectory.json, from the trial's agent logs (`--agent-logs`, default
/logs/agent, where a task that declares /logs/agent/trajectory.json an artifact puts
it), or from the case when eval.yaml says `trajectory: case`, is the conversation;
stdout.log is the fallback. It is the
agent's material: fenced like all case text. Real `verifier grade` and `verifier
batch` processes against a local OpenAI-style server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.llm_servers import FakeLLM
from tests.paths import TESTS
from verifier.judges.llm.conversation import conversation_of, conversation_source
from verifier.trajectory import parse_trajectory

VERIFIER = str(Path(sys.executable).with_name("verifier"))
ATIF = TESTS / "fixtures" / "atif" / "trajectory.json"
FENCE = re.compile(r"<case-material-([0-9a-f]+)>\n(.*?)\n</case-material-\1>", re.DOTALL)

EVAL = """\
models:
  judge: openai/grader
judges:
  - name: quality
    llm_rubric: Did the agent fix the crash?
    score_range: [1, 5]
  - name: turns
    check: |
      t = outputs["trajectory"]
      if t is None:
          return False, outputs["trajectory_problem"]
      return True, f"{t['source']} turns={outputs['num_turns']} calls={len(outputs['tool_calls'])}"
"""


def test_the_trajectory_is_the_conversation_with_its_tool_calls() -> None:
    record = {"trajectory": _trajectory(), "stdout": "plain stdout"}
    text = conversation_of(record)
    assert text.startswith("I'll read the parser first.\n[tool call] Read {")
    assert "Adding a guard and a test.\n[tool call] Edit {" in text
    assert text.endswith("Fixed: empty input now returns an empty AST.")
    assert "Fix the parser crash" not in text  # the user's step is not the agent's
    assert conversation_source(record) == "trajectory.json"
    # Without a trajectory, stdout.log; an explicit conversation wins over both.
    assert conversation_of({"trajectory": None, "stdout": "plain stdout"}) == "plain stdout"
    assert conversation_source({"trajectory": None, "stdout": "x"}) == "stdout.log"
    assert conversation_of({**record, "conversation": "given"}) == "given"
    assert conversation_source({**record, "conversation": "given"}) is None


def _trajectory() -> dict:
    return parse_trajectory(ATIF.read_text(), "trajectory.json").to_json()


def grade(
    tmp_path: Path, server: FakeLLM, case: Path, *args: str, head: str = "", **env: str
) -> tuple[dict, str]:
    config = tmp_path / "suite" / "eval.yaml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(head + EVAL)
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("VERIFIER_", "OPENAI_"))
    }
    environment.update(server.env, OPENAI_API_KEY="sk-test-0123456789abcdef", **env)
    server.queue(server.grade(score=4))
    out = tmp_path / "out"
    done = subprocess.run(
        [VERIFIER, "grade", "--config", str(config), "--case", str(case), "--out", str(out), *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads((out / "judges.json").read_text()), server.received[-1].user


def test_an_llm_judge_grades_the_trajectory_fenced(tmp_path: Path, openai_server: FakeLLM) -> None:
    case = tmp_path / "case"
    case.mkdir()
    shutil.copy(ATIF, case / "trajectory.json")
    (case / "stdout.log").write_text("build output: 3 tests passed\n")
    (case / "report.md").write_text("Fixed.\n")
    judges, user = grade(
        tmp_path,
        openai_server,
        case,
        "--agent-logs",
        str(tmp_path / "none"),
        head="trajectory: case\n",
    )
    fenced = [body for _, body in FENCE.findall(user)]
    conversation = next(body for body in fenced if body.startswith("I'll read the parser"))
    assert "[tool call] Bash" in conversation
    assert "I'll read the parser" not in FENCE.sub("", user)  # only inside a fence
    # The trajectory is shown once, as the conversation; stdout.log is now a file.
    assert "[file: trajectory.json]" not in user
    assert any(body.startswith("[file: stdout.log]") for body in fenced)
    assert judges["per_judge"]["turns"]["rationale"] == "trajectory.json turns=3 calls=3"


def test_harbors_agent_logs_come_first(tmp_path: Path, openai_server: FakeLLM) -> None:
    logs = tmp_path / "agent-logs"
    logs.mkdir()
    shutil.copy(ATIF, logs / "trajectory.json")
    case = tmp_path / "case"
    case.mkdir()
    (case / "trajectory.json").write_text(
        json.dumps(
            {
                "steps": [
                    {"source": "agent", "message": "a trajectory the agent wrote itself"},
                ]
            }
        )
    )
    judges, user = grade(tmp_path, openai_server, case, VERIFIER_AGENT_LOGS=str(logs))
    assert judges["per_judge"]["turns"]["rationale"] == f"{logs}/trajectory.json turns=3 calls=3"
    assert "I'll read the parser first." in user
    # The case's own trajectory.json is then one of the agent's files.
    assert "[file: trajectory.json]" in user
    # An unusable one there is a warning and no trajectory: the case's forgeable one is
    # never used in its place (the conversation is then stdout.log's, here none).
    (logs / "trajectory.json").write_text("{not json")
    judges, user = grade(tmp_path, openai_server, case, "--agent-logs", str(logs))
    turns = judges["per_judge"]["turns"]
    assert turns["value"] is False
    assert turns["rationale"].startswith(f"{logs}/trajectory.json: not a trajectory")
    assert turns["rationale"] in judges["case_warnings"]
    assert "a trajectory the agent wrote itself" not in FENCE.sub("", user)


def test_batch_reads_the_agent_logs_a_harbor_trial_collected(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text("judges:\n  - name: turns" + EVAL.split("  - name: turns")[1])
    job = tmp_path / "job"
    trial = job / "task__Xyz"
    (trial / "artifacts" / "app").mkdir(parents=True)
    (trial / "artifacts" / "logs" / "agent").mkdir(parents=True)
    shutil.copy(ATIF, trial / "artifacts" / "logs" / "agent" / "trajectory.json")
    (trial / "artifacts" / "manifest.json").write_text(
        json.dumps(
            [
                {"source": "/app", "destination": "artifacts/app", "type": "directory"},
                {
                    "source": "/logs/agent/trajectory.json",
                    "destination": "artifacts/logs/agent/trajectory.json",
                    "type": "file",
                },
            ]
        )
    )
    (job / "config.json").write_text(json.dumps({"job_name": "job"}))
    done = subprocess.run(
        [
            VERIFIER,
            "batch",
            "--config",
            str(config),
            "--cases",
            str(job),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    judges = json.loads((tmp_path / "out" / "task__Xyz" / "judges.json").read_text())
    logs = trial / "artifacts" / "logs" / "agent"
    assert judges["per_judge"]["turns"]["rationale"] == f"{logs}/trajectory.json turns=3 calls=3"
