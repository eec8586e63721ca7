"""The agent's trail (Harbor's ATIF trajectory, agent-eval-harness events) in the record.

tests/fixtures/atif/trajectory.json was built with Harbor's own pydantic models
(harbor.models.trajectories, ATIF-v1.8), so it is what a Harbor agent writes.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from verifier.case import check_case_dir, read_case

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "atif" / "trajectory.json"
MakeCase = Callable[..., Path]


def record_of(case: Path) -> tuple[dict, tuple[str, ...]]:
    reading = read_case(check_case_dir(case), (), {})
    return reading.record, reading.warnings


@pytest.mark.parametrize("where", ["trajectory.json", "agent/trajectory.json",
                                   "logs/agent/trajectory.json"])  # fmt: skip
def test_an_atif_trajectory_gives_turns_tool_calls_and_cost(
    make_case: MakeCase, where: str
) -> None:
    case = make_case({"report.md": "done"})
    (case / where).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURE, case / where)
    record, warnings = record_of(case)
    assert warnings == ()
    assert [call["name"] for call in record["tool_calls"]] == ["Read", "Edit", "Bash"]
    assert record["tool_calls"][2] == {
        "name": "Bash", "arguments": {"command": "pytest -q"}, "input": {"command": "pytest -q"},
        "turn": 2, "result": None, "subagent": False,
    }  # fmt: skip
    assert record["tool_calls"][0]["result"] == "def parse(s): ..."  # the step's observation
    assert record["cost_usd"] == 0.035 and record["num_turns"] == 3
    trajectory = record["trajectory"]
    assert trajectory["turns"][-1] == "Fixed: empty input now returns an empty AST."
    assert (trajectory["input_tokens"], trajectory["output_tokens"]) == (4300, 230)


def test_without_final_metrics_the_steps_are_summed(make_case: MakeCase) -> None:
    document = json.loads(FIXTURE.read_text())
    del document["final_metrics"]
    record, _ = record_of(make_case({"trajectory.json": json.dumps(document)}))
    assert record["cost_usd"] == pytest.approx(0.035)
    assert record["trajectory"]["input_tokens"] == 4300


def test_agent_eval_harness_events_json(make_case: MakeCase) -> None:
    events = [
        {"type": "system", "subtype": "init", "model": "m"},
        {"type": "assistant", "text": "Looking.", "tools": [{"name": "Grep", "id": "t1",
                                                            "input": {"pattern": "x"}}]},
        {"type": "assistant", "text": "sub", "parent_tool_use_id": "t1",
         "tools": [{"name": "Read", "id": "t2", "input": {}}]},
        {"type": "tool_result", "tool_use_id": "t1", "content": "no match", "is_error": True},
        {"type": "result", "cost_usd": 0.42, "num_turns": 2},
    ]  # fmt: skip
    record, _ = record_of(make_case({"events.json": json.dumps(events)}))
    assert record["tool_calls"] == [{"name": "Grep", "arguments": {"pattern": "x"},
                                     "input": {"pattern": "x"}, "turn": 1,
                                     "result": {"error": "no match"}, "subagent": False}]  # fmt: skip
    assert (record["cost_usd"], record["num_turns"]) == (0.42, 1)
    everything = record["trajectory"]["tool_calls"]  # the subagent's calls too, marked
    assert [(call["name"], call["subagent"]) for call in everything] == [
        ("Grep", False), ("Read", True),
    ]  # fmt: skip


def test_a_claude_code_stream_in_events_jsonl(make_case: MakeCase) -> None:
    lines = [
        {"type": "assistant", "message": {"content": [
            {"type": "text", "text": "Reading docs."},
            {"type": "tool_use", "id": "t1", "name": "WebFetch", "input": {"url": "u"}}]}},
        "not json at all",
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "<html>"}]}},
        {"type": "result", "total_cost_usd": 1.5, "num_turns": 1},
    ]  # fmt: skip
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    record, _ = record_of(make_case({"events.jsonl": text}))
    assert record["tool_calls"] == [{"name": "WebFetch", "arguments": {"url": "u"},
                                     "input": {"url": "u"}, "turn": 1, "result": "<html>",
                                     "subagent": False}]  # fmt: skip
    assert record["cost_usd"] == 1.5


@pytest.mark.parametrize(
    ("content", "warning"),
    [
        ("{not json", "trajectory.json: not a trajectory"),
        ('{"steps": 3}', "trajectory.json: not a trajectory"),
        ("[" * 100_000 + "]" * 100_000, "trajectory.json: not a trajectory"),
    ],
)
def test_an_unusable_trajectory_is_a_warning_not_an_error(
    make_case: MakeCase, content: str, warning: str
) -> None:
    record, warnings = record_of(make_case({"trajectory.json": content, "x.txt": "x"}))
    assert record["trajectory"] is None and record["tool_calls"] == []
    assert record["cost_usd"] is None
    assert any(w.startswith(warning) for w in warnings)


def test_a_looping_or_piped_trajectory_is_a_fact(make_case: MakeCase) -> None:
    case = make_case({"x.txt": "x"})
    (case / "trajectory.json").symlink_to("trajectory.json")
    os.mkfifo(case / "events.json")
    record, warnings = record_of(case)
    assert record["trajectory"] is None
    assert "trajectory.json: is a symlink loop; no trajectory read" in warnings
