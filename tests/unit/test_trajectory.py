"""The agent's trail (Harbor's ATIF trajectory, agent-eval-harness events) in the record.

tests/fixtures/atif/trajectory.json was built with Harbor's own pydantic models
(harbor.models.trajectories, ATIF-v1.8), so it is what a Harbor agent writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from verifier.case import check_case_dir, read_case
from verifier.errors import ConfigError
from verifier.trajectory import parse_trajectory

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "atif" / "trajectory.json"
MakeCase = Callable[..., Path]


def record_of(case: Path) -> tuple[dict, tuple[str, ...]]:
    """The record with the case's own trail, as eval.yaml's `trajectory: case` reads it."""
    reading = read_case(check_case_dir(case), (), {}, trajectory_from="case")
    return reading.record, reading.warnings


@pytest.mark.parametrize(
    "where", ["trajectory.json", "agent/trajectory.json", "logs/agent/trajectory.json"]
)
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
        "name": "Bash",
        "arguments": {"command": "pytest -q"},
        "input": {"command": "pytest -q"},
        "turn": 2,
        "result": None,
        "subagent": False,
    }
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


def _atif(*metrics: object, final: dict | None = None) -> str:
    """An ATIF trail of one agent step per metrics (None: a step without metrics)."""
    steps = [
        {"step_id": index, "source": "agent", "message": "m", "metrics": step}
        for index, step in enumerate(metrics, 1)
    ]
    document: dict = {"steps": [{k: v for k, v in s.items() if v is not None} for s in steps]}
    if final is not None:
        document["final_metrics"] = final
    return json.dumps(document)


HUGE = int("9" * 400)  # JSON reads it as a Python int no float holds
NO_TOTAL = "the trajectory gives no final_metrics.total_cost_usd, and "


@pytest.mark.parametrize(
    ("trail", "problem"),
    [
        # every step carries metrics, but not one says what it cost: it was $0.00 here
        (
            _atif({"prompt_tokens": 10}, {"prompt_tokens": 20}),
            NO_TOTAL + "2 of the 2 agent steps with metrics give no cost_usd that is a "
            "finite number >= 0",
        ),
        # one step's cost left out: the others' sum would be too little
        (
            _atif({"cost_usd": 0.5}, {"prompt_tokens": 20}, None),
            NO_TOTAL + "1 of the 2 agent steps with metrics give no cost_usd that is a "
            "finite number >= 0",
        ),
        (
            _atif({"cost_usd": HUGE}),
            NO_TOTAL + "1 of the 1 agent steps with metrics give no cost_usd that is a "
            "finite number >= 0",
        ),
        (
            _atif("lots", {"cost_usd": 0.1}),
            NO_TOTAL + "1 of the 2 agent steps with metrics give no cost_usd that is a "
            "finite number >= 0",
        ),
        (
            _atif({"cost_usd": 1e308}, {"cost_usd": 1e308}),
            "the agent steps' cost_usd add up past any finite number",
        ),
        (
            _atif(None, None),
            "the trajectory gives no final_metrics.total_cost_usd and no metrics",
        ),
        # a broken total is never replaced by the steps' own figures
        (
            _atif({"cost_usd": 0.1}, final={"total_cost_usd": HUGE}),
            "final_metrics.total_cost_usd is 99999999999999999999999999999999... "
            "(400 characters), not a finite number >= 0",
        ),
        (
            _atif({"cost_usd": 0.1}, final={"total_cost_usd": float("inf")}),
            "final_metrics.total_cost_usd is Infinity, not a finite number >= 0",
        ),
        (
            _atif({"cost_usd": 0.1}, final={"total_cost_usd": float("nan")}),
            "final_metrics.total_cost_usd is NaN, not a finite number >= 0",
        ),
        (
            _atif(final={"total_cost_usd": "0.01"}),
            'final_metrics.total_cost_usd is "0.01", not a finite number >= 0',
        ),
        (
            _atif(final={"total_cost_usd": -25.0}),
            "final_metrics.total_cost_usd is -25.0, not a finite number >= 0",
        ),
        (
            _atif(final={"total_cost_usd": True}),
            "final_metrics.total_cost_usd is true, not a finite number >= 0",
        ),
    ],
)
def test_a_cost_the_trail_does_not_give_is_unknown_with_the_fact(
    make_case: MakeCase, trail: str, problem: str
) -> None:
    record, warnings = record_of(make_case({"trajectory.json": trail}))
    assert warnings == ()  # the trail reads: only its cost is unknown
    assert (record["cost_usd"], record["trajectory"]["cost_problem"]) == (None, problem)


def test_the_token_counts_follow_the_same_rules() -> None:
    partial = _atif({"prompt_tokens": 10, "completion_tokens": 1}, {"prompt_tokens": 20})
    read = parse_trajectory(partial, "trajectory.json")
    assert (read.input_tokens, read.output_tokens) == (30, None)  # one step does not say: not 1
    broken = _atif({"prompt_tokens": 10}, final={"total_prompt_tokens": float("nan")})
    assert parse_trajectory(broken, "trajectory.json").input_tokens is None


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        (
            [{"type": "assistant", "text": "done"}],
            "the events hold no `result` event, which gives the run's cost",
        ),
        (
            [{"type": "result", "cost_usd": 0.01}, {"type": "result"}],
            "the last `result` event's cost is absent, not a finite number >= 0",
        ),
        (
            [{"type": "result", "cost_usd": 0.01}, {"type": "result", "cost_usd": HUGE}],
            "the last `result` event's cost is 99999999999999999999999999999999... "
            "(400 characters), not a finite number >= 0",
        ),
    ],
)
def test_an_event_logs_cost_is_its_last_result_events(
    make_case: MakeCase, events: list, problem: str
) -> None:
    record, _ = record_of(make_case({"events.json": json.dumps(events)}))
    assert (record["cost_usd"], record["trajectory"]["cost_problem"]) == (None, problem)


def test_agent_eval_harness_events_json(make_case: MakeCase) -> None:
    events = [
        {"type": "system", "subtype": "init", "model": "m"},
        {
            "type": "assistant",
            "text": "Looking.",
            "tools": [{"name": "Grep", "id": "t1", "input": {"pattern": "x"}}],
        },
        {
            "type": "assistant",
            "text": "sub",
            "parent_tool_use_id": "t1",
            "tools": [{"name": "Read", "id": "t2", "input": {}}],
        },
        {"type": "tool_result", "tool_use_id": "t1", "content": "no match", "is_error": True},
        {"type": "result", "cost_usd": 0.42, "num_turns": 2},
    ]
    record, _ = record_of(make_case({"events.json": json.dumps(events)}))
    assert record["tool_calls"] == [
        {
            "name": "Grep",
            "arguments": {"pattern": "x"},
            "input": {"pattern": "x"},
            "turn": 1,
            "result": {"error": "no match"},
            "subagent": False,
        }
    ]
    assert (record["cost_usd"], record["num_turns"]) == (0.42, 1)
    everything = record["trajectory"]["tool_calls"]  # the subagent's calls too, marked
    assert [(call["name"], call["subagent"]) for call in everything] == [
        ("Grep", False),
        ("Read", True),
    ]


def test_a_claude_code_stream_in_events_jsonl(make_case: MakeCase) -> None:
    lines = [
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "text", "text": "Reading docs."},
                    {"type": "tool_use", "id": "t1", "name": "WebFetch", "input": {"url": "u"}},
                ]
            },
        },
        "not json at all",
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "<html>"}]
            },
        },
        {"type": "result", "total_cost_usd": 1.5, "num_turns": 1},
    ]
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    record, _ = record_of(make_case({"events.jsonl": text}))
    assert record["tool_calls"] == [
        {
            "name": "WebFetch",
            "arguments": {"url": "u"},
            "input": {"url": "u"},
            "turn": 1,
            "result": "<html>",
            "subagent": False,
        }
    ]
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


# --- where the trail is read from: Harbor's agent logs, or the case when eval.yaml says --


def harbor_record(case: Path, logs: Path | None) -> tuple[dict, tuple[str, ...]]:
    """The record by default: the trajectory only from Harbor's agent logs dir."""
    reading = read_case(check_case_dir(case), (), {}, agent_logs=logs)
    return reading.record, reading.warnings


def forged_case(make_case: MakeCase) -> Path:
    """A case whose own trajectory.json is a forged, perfect run (no tool calls, $0)."""
    forged = {
        "steps": [{"source": "agent", "message": "did it all by hand"}],
        "final_metrics": {"total_cost_usd": 0.0},
    }
    return make_case({"trajectory.json": json.dumps(forged), "events.json": "[]"})


def test_by_default_only_harbors_agent_logs_are_read(make_case: MakeCase, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(FIXTURE, logs / "trajectory.json")
    record, warnings = harbor_record(forged_case(make_case), logs)
    assert record["trajectory"]["source"] == f"{logs}/trajectory.json"
    assert record["num_turns"] == 3 and record["trajectory_problem"] is None
    assert warnings == ()


def test_a_relative_agent_logs_dir_is_the_working_dirs(tmp_path: Path) -> None:
    """`--agent-logs logs` from the dir that holds it (it was "logs/trajectory.json:
    leaves the case dir", so every trajectory judge scored 0), and a dir named through a
    symlinked dir above it."""
    (tmp_path / "real" / "logs").mkdir(parents=True)
    shutil.copy(FIXTURE, tmp_path / "real" / "logs" / "trajectory.json")
    (tmp_path / "link").symlink_to("real")
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "a.txt").write_text("a")
    (tmp_path / "eval.yaml").write_text(
        "judges:\n  - name: used\n    builtin: trajectory_tool_used\n"
        "    arguments: {tool_name: Bash}\n"
    )
    for name, logs in (("relative", "logs"), ("through-a-symlink", f"{tmp_path}/link/logs")):
        out = tmp_path / f"out-{name}"
        command = [str(Path(sys.executable).with_name("verifier")), "grade", "--agent-logs", logs]
        done = subprocess.run(
            [*command, "--config", "../eval.yaml", "--case", "../case", "--out", str(out)],
            cwd=tmp_path / "real",
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0 and done.stderr == "", done.stderr
        judges = json.loads((out / "judges.json").read_text())
        assert judges["per_judge"]["used"]["rationale"] == (
            "Bash was called 1 times (at least 1 wanted)"
        )


UNUSABLE = {
    "over the size cap": lambda p: os.truncate(_touch(p), 33 * 1024 * 1024),
    "truncated": lambda p: p.write_text(FIXTURE.read_text()[:200]),
    "not a trajectory": lambda p: p.write_text('{"steps": 3}'),
    "a symlink": lambda p: _symlink_to_a_good_one(p),
    "a FIFO": lambda p: os.mkfifo(p),
    "a directory": lambda p: p.mkdir(),
    "nested 100,000 deep": lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
    # 30 MB that would take 780 MB parsed, in the grader's process
    "a memory bomb of empty arrays": lambda p: p.write_text("[" + ",".join(["[]"] * 10**7) + "]"),
}


def _symlink_to_a_good_one(path: Path) -> None:
    shutil.copy(FIXTURE, path.parent / "real.json")
    path.symlink_to("real.json")


def _touch(path: Path) -> Path:
    path.touch()
    return path


@pytest.mark.parametrize("unusable", sorted(UNUSABLE))
def test_an_unusable_harbor_trajectory_is_never_replaced_by_the_cases_own(
    make_case: MakeCase, tmp_path: Path, unusable: str
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    UNUSABLE[unusable](logs / "trajectory.json")
    record, warnings = harbor_record(forged_case(make_case), logs)
    assert record["trajectory"] is None and record["tool_calls"] == []
    assert record["cost_usd"] is None and record["num_turns"] is None
    assert record["trajectory_problem"].startswith(f"{logs}/trajectory.json: ")
    assert record["trajectory_problem"] in warnings


def test_an_unreadable_harbor_trajectory_is_a_fact_as_a_non_root_uid(
    make_case: MakeCase, tmp_path: Path
) -> None:
    """Read by an arbitrary non-root UID (as the image runs on OpenShift); as root the
    test drops to one with setpriv, since root reads a mode-000 file."""
    shared = Path(tempfile.mkdtemp(prefix="trail-"))
    try:
        shared.chmod(0o755)
        case, logs = shared / "case", shared / "logs"
        case.mkdir()
        (case / "trajectory.json").write_text(FIXTURE.read_text())
        logs.mkdir()
        shutil.copy(FIXTURE, logs / "trajectory.json")
        (logs / "trajectory.json").chmod(0)
        code = (
            "import json, sys; from pathlib import Path; "
            "from verifier.case import read_case; "
            "r = read_case(Path(sys.argv[1]), (), {}, agent_logs=Path(sys.argv[2])).record; "
            "print(json.dumps([r['trajectory'], r['trajectory_problem']]))"
        )
        command = [sys.executable, "-c", code, str(case), str(logs)]
        if os.geteuid() == 0:
            command = ["setpriv", "--reuid=1000680000", "--regid=0", "--clear-groups", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        trajectory, problem = json.loads(done.stdout)
        assert trajectory is None
        assert (
            problem == f"{logs}/trajectory.json: cannot be read (Permission denied); no "
            "trajectory read"
        )
    finally:
        shutil.rmtree(shared)


def test_no_agent_logs_dir_is_no_trajectory_not_the_cases(
    make_case: MakeCase, tmp_path: Path
) -> None:
    """Outside Harbor (no /logs/agent) the trail is absent: the case's own is read only
    when eval.yaml asks for it (`trajectory: case`)."""
    case = forged_case(make_case)
    record, warnings = harbor_record(case, tmp_path / "absent")
    assert record["trajectory"] is None and warnings == ()
    assert "no agent logs dir" in record["trajectory_problem"]
    assert "trajectory: case" in record["trajectory_problem"]
    record, _ = harbor_record(case, None)  # a batch trial that collected none
    assert record["trajectory"] is None and "not collected" in record["trajectory_problem"]
    (tmp_path / "empty").mkdir()
    record, _ = harbor_record(case, tmp_path / "empty")
    assert record["trajectory_problem"] == (
        f"{tmp_path}/empty/trajectory.json does not exist: no trajectory in Harbor's agent logs"
    )


def test_a_named_case_file_is_read_only_when_eval_yaml_names_it(make_case: MakeCase) -> None:
    case = make_case({"trajectory.json": FIXTURE.read_text(), "mine/run.json": "[]"})
    reading = read_case(check_case_dir(case), (), {}, trajectory_from="mine/run.json")
    assert reading.record["trajectory"]["source"] == "mine/run.json"
    reading = read_case(check_case_dir(case), (), {}, trajectory_from="missing.json")
    assert reading.record["trajectory"] is None
    assert (
        reading.record["trajectory_problem"] == "no trajectory in the case (looked for "
        "missing.json)"
    )


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("", "agent_logs"),
        ("trajectory: agent_logs\n", "agent_logs"),
        ("trajectory: case\n", "case"),
        ("trajectory: logs/run.json\n", "logs/run.json"),
    ],
)
def test_eval_yaml_names_where_the_trail_is_read(
    load: Callable[[str], object], written: str, read: str
) -> None:
    assert load(written + "judges: [{name: j, check: 'return True'}]\n").trajectory == read


@pytest.mark.parametrize("written", ["/logs/agent/trajectory.json", "../x.json", "3", "."])
def test_a_trajectory_outside_the_case_is_a_load_error(
    load: Callable[[str], object], written: str
) -> None:
    with pytest.raises(
        ConfigError,
        match=r"trajectory: .* must be agent_logs \(Harbor's agent "
        r"logs\), case \(the case's own trail\) or a path",
    ):
        load(f"trajectory: {written}\njudges: [{{name: j, check: 'return True'}}]\n")
