"""What the agent did, from the trail it left: Harbor's ATIF trajectory, or an event log.

Harbor's agents write an ATIF trajectory (`trajectory.json`: steps from system,
user and agent, each agent step with its text, tool calls and metrics, and
`final_metrics` with the cost); agent-eval-harness cases hold `events.json` (its
flat events) or `events.jsonl` (Claude Code's or Codex's stream). Both become one
neutral Trajectory: the agent's text turns, its tool calls, its cost and tokens.

Where it is read from is the task author's choice (eval.yaml's `trajectory:`),
never the agent's: by default only Harbor's agent logs (`--agent-logs`, the trail
Harbor wrote after the agent ended); the case's own trail (which the agent writes,
so can forge) only when eval.yaml names it (`trajectory: case`, or a path in the
case). A trail that is absent or unusable where it was asked for is a fact (None
and the reason, which the trajectory judges fail with), never a reason to read
another one, and never an error: any JSON shape, any number, any id reads.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs

from verifier.casefiles import read_case_file
from verifier.values import finite_float, json_text

MAX_TRAJECTORY_BYTES = 32 * 1024 * 1024
# Arrays and objects a trajectory may hold (its brackets and braces, counted before it
# is parsed, in strings too: an over-count only for a trail of millions of them). It is
# parsed in the grader's own process, where each one takes far more memory than its
# bytes; the cap keeps that bounded, above what Harbor's longest runs hold.
MAX_TRAJECTORY_CONTAINERS = 2_000_000
AGENT_LOGS_TRAJECTORY = "trajectory.json"  # in Harbor's agent logs dir, /logs/agent
# eval.yaml's `trajectory:`: where the trail is read from (else a path in the case).
FROM_AGENT_LOGS = "agent_logs"  # Harbor's agent logs only (the default)
FROM_CASE = "case"  # the case's own trail, at CASE_TRAJECTORY_PATHS (agent-written)
# Where a trajectory may be, relative to the case dir, in the order they are tried.
CASE_TRAJECTORY_PATHS = (
    "trajectory.json",
    "agent/trajectory.json",
    "logs/agent/trajectory.json",
    "events.json",
    "events.jsonl",
)


@attrs.frozen
class ToolCall:
    name: str
    arguments: Mapping[str, Any]
    turn: int  # the agent turn (1-based) it was made in (the last one, for a subagent's)
    result: Any = None  # what came back: text, {"error": text} when marked an error, or None
    subagent: bool = False  # made by a subagent the agent started, not the agent itself

    def to_json(self) -> dict[str, Any]:
        """As judges see it; `input` repeats `arguments` under agent-eval-harness's name."""
        return {**attrs.asdict(self, recurse=False), "input": self.arguments}


@attrs.frozen
class Trajectory:
    source: str  # where it was read from
    turns: tuple[str, ...]  # the agent's text, turn by turn (subagents left out)
    tool_calls: tuple[ToolCall, ...]
    cost_usd: float | None
    input_tokens: int | None
    output_tokens: int | None
    # Every tool call's name as rewardkit counts them: on any step (an ATIF step without
    # `source: agent` too) and a subagent's too; tool_calls holds the agent's own steps'.
    tool_names: tuple[str, ...] = ()
    cost_problem: str | None = None  # why cost_usd is None: what cost_budget fails with

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    def to_json(self) -> dict[str, Any]:
        """As judges see it in the record (`outputs["trajectory"]`)."""
        return {
            "source": self.source,
            "turns": list(self.turns),
            "tool_calls": [call.to_json() for call in self.tool_calls],
            "cost_usd": self.cost_usd,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "num_turns": self.num_turns,
            "tool_names": list(self.tool_names),
            "cost_problem": self.cost_problem,
        }


def agent_tool_calls(
    trajectory: Trajectory | None, patterns: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The record's `tool_calls`: the agent's own calls (not its subagents'), only those
    whose tool name contains one of patterns when there are any (eval.yaml's
    `outputs: [{tool: NAME}]`, as agent-eval-harness selects them)."""
    if trajectory is None:
        return []
    return [
        call.to_json()
        for call in trajectory.tool_calls
        if not call.subagent and (not patterns or any(p in call.name for p in patterns))
    ]


@attrs.frozen
class Trail:
    """The trajectory read from where eval.yaml says, or why there is none."""

    trajectory: Trajectory | None
    problem: str | None  # None when read; else what the trajectory judges fail with
    unusable: bool = False  # there, but unusable: also a case warning


def read_trail(case_dir: Path, agent_logs: Path | None, choice: str = FROM_AGENT_LOGS) -> Trail:
    """The agent's trajectory from where `choice` (eval.yaml's `trajectory:`) says:
    Harbor's agent logs dir, the case's own trail, or one path in the case. Nothing
    else is ever tried: a trail the agent could write is never a stand-in for the one
    Harbor wrote."""
    if choice == FROM_AGENT_LOGS:
        return _agent_logs_trail(agent_logs)
    paths = CASE_TRAJECTORY_PATHS if choice == FROM_CASE else (choice,)
    trajectory, problem = read_trajectory(case_dir, paths)
    if trajectory is not None:
        return Trail(trajectory, None)
    if problem is not None:
        return Trail(None, problem, unusable=True)
    return Trail(None, f"no trajectory in the case (looked for {', '.join(paths)})")


def _agent_logs_trail(agent_logs: Path | None) -> Trail:
    """Harbor's trajectory.json in the agent logs dir: a symlink, a FIFO, a dir, an
    unreadable, oversized or invalid file is unusable; a missing one is absent. A
    relative dir is the working dir's (as the operator typed it)."""
    if agent_logs is None:
        return Trail(
            None,
            "no agent logs: Harbor's /logs/agent was not collected for this "
            "case (declare /logs/agent/trajectory.json an artifact)",
        )
    agent_logs = Path(os.path.abspath(agent_logs))
    shown = agent_logs / AGENT_LOGS_TRAJECTORY
    try:
        logs_mode = os.lstat(agent_logs).st_mode
    except OSError:
        return Trail(
            None,
            f"no agent logs dir {agent_logs} (Harbor's agent logs; outside "
            "Harbor, eval.yaml's `trajectory: case` reads the case's own "
            "trail, which the agent writes)",
        )
    if not stat.S_ISDIR(logs_mode):
        return Trail(
            None,
            f"{agent_logs}: the agent logs are not a directory; no trajectory read",
            unusable=True,
        )
    try:
        file_mode = os.lstat(shown).st_mode
    except FileNotFoundError:
        return Trail(None, f"{shown} does not exist: no trajectory in Harbor's agent logs")
    except OSError as error:
        return Trail(
            None, f"{shown}: cannot be read ({error.strerror}); no trajectory read", unusable=True
        )
    if stat.S_ISLNK(file_mode):
        return Trail(
            None, f"{shown}: is a symlink; not followed, no trajectory read", unusable=True
        )
    # The dir itself is no symlink (lstat above): its real path only resolves the
    # operator's own dirs above it, which the reader's confinement compares against.
    real = Path(os.path.realpath(agent_logs))
    trajectory, problem = read_trajectory(real, (AGENT_LOGS_TRAJECTORY,))
    if trajectory is None:
        return Trail(None, f"{agent_logs}/{problem}", unusable=True)
    return Trail(attrs.evolve(trajectory, source=str(shown)), None)


def read_trajectory(
    case_dir: Path, paths: Iterable[str] = CASE_TRAJECTORY_PATHS
) -> tuple[Trajectory | None, str | None]:
    """(the first trajectory found under case_dir, None) or (None, a warning when one was
    there but unusable); (None, None) when there is none."""
    for relative in paths:
        found = read_case_file(case_dir, relative, MAX_TRAJECTORY_BYTES)
        if found.data is None:
            if found.problem == "does not exist":
                continue
            return None, f"{relative}: {found.problem}; no trajectory read"
        text = found.data.decode("utf-8", errors="replace")
        containers = text.count("[") + text.count("{")
        if containers > MAX_TRAJECTORY_CONTAINERS:
            return None, (
                f"{relative}: holds {containers} arrays and objects, over the "
                f"{MAX_TRAJECTORY_CONTAINERS} cap; no trajectory read"
            )
        try:
            trajectory = parse_trajectory(text, relative)
        except (ValueError, RecursionError, MemoryError) as error:
            return None, f"{relative}: not a trajectory ({error}); no trajectory read"
        return trajectory, None
    return None, None


def parse_trajectory(text: str, source: str) -> Trajectory:
    """A trajectory from ATIF JSON, a JSON array of flat events, or JSON-lines events;
    ValueError when the text is none of them."""
    if source.endswith(".jsonl"):
        return _from_events(_stream_events(text), source)
    document = json.loads(text)
    if isinstance(document, dict) and isinstance(document.get("steps"), list):
        return _from_atif(document, source)
    if isinstance(document, list):
        return _from_events(document, source)
    raise ValueError("neither an ATIF trajectory nor a list of events")


def _from_atif(document: Mapping[str, Any], source: str) -> Trajectory:
    turns: list[str] = []
    calls: list[ToolCall] = []
    metered: list[Any] = []  # the agent steps' `metrics`, where a step has any
    names: list[str] = []
    for step in document["steps"]:
        if isinstance(step, dict) and isinstance(step.get("tool_calls"), list):
            names += [
                call["function_name"]
                for call in step["tool_calls"]
                if isinstance(call, dict) and isinstance(call.get("function_name"), str)
            ]
        if not isinstance(step, dict) or step.get("source") != "agent":
            continue
        turns.append(_text(step.get("message")))
        results = _observations(step.get("observation"))
        for call in _items(step.get("tool_calls")):
            if isinstance(call, dict) and isinstance(call.get("function_name"), str):
                result = results.get(_id(call.get("tool_call_id")))
                calls.append(
                    _tool_call(call["function_name"], call.get("arguments"), len(turns), result)
                )
        if step.get("metrics") is not None:
            metered.append(step["metrics"])
    final = document.get("final_metrics")
    final = final if isinstance(final, dict) else {}
    cost = _atif_figure(final, "total_cost_usd", metered, "cost_usd", _amount)
    prompt = _atif_figure(final, "total_prompt_tokens", metered, "prompt_tokens", _count)
    completion = _atif_figure(
        final, "total_completion_tokens", metered, "completion_tokens", _count
    )
    return Trajectory(
        source=source,
        turns=tuple(turns),
        tool_calls=tuple(calls),
        cost_usd=cost.value,
        input_tokens=prompt.value,
        output_tokens=completion.value,
        tool_names=tuple(names),
        cost_problem=cost.problem,
    )


Amount = TypeVar("Amount", int, float)


@attrs.frozen
class _Figure(Generic[Amount]):
    """A figure of the trail (its cost, a token count), or why none is known."""

    value: Amount | None  # a finite number >= 0
    problem: str | None = None


def _atif_figure(
    final: Mapping[str, Any],
    total_key: str,
    metered: Sequence[Any],
    step_key: str,
    read: Callable[[Any], Amount | None],
) -> _Figure[Amount]:
    """final_metrics' total when it gives one; without it, the sum of the agent steps'
    figures when every step that carries metrics gives one (Harbor's agents put a
    call's metrics on one of its steps). A figure that is left out or is not a finite
    number >= 0 is unknown, never 0, and a broken total is never replaced by the
    steps': a budget must not pass on what the trail does not say."""
    total = final.get(total_key)
    if total is not None:
        value = read(total)
        if value is None:
            return _Figure(
                None, f"final_metrics.{total_key} is {_shown(total)}, not a finite number >= 0"
            )
        return _Figure(value)
    if not metered:
        return _Figure(None, f"the trajectory gives no final_metrics.{total_key} and no metrics")
    figures = [read(metrics.get(step_key)) for metrics in metered if isinstance(metrics, dict)]
    known = [figure for figure in figures if figure is not None]
    if len(known) < len(metered):
        return _Figure(
            None,
            f"the trajectory gives no final_metrics.{total_key}, and "
            f"{len(metered) - len(known)} of the {len(metered)} agent steps with metrics "
            f"give no {step_key} that is a finite number >= 0",
        )
    summed = read(sum(known))
    if summed is None:
        return _Figure(None, f"the agent steps' {step_key} add up past any finite number")
    return _Figure(summed)


def _shown(value: Any) -> str:
    """A figure as the trail gives it, cut short (a 400-digit integer is not a message)."""
    text = json_text(value)
    return text if len(text) <= 40 else f"{text[:32]}... ({len(text)} characters)"


def _from_events(events: Iterable[Any], source: str) -> Trajectory:
    """agent-eval-harness's flat events: `assistant` (text, tools; a subagent's carry
    `parent_tool_use_id`), `tool_result` (content, is_error), `result` (cost)."""
    events = [event for event in events if isinstance(event, dict)]
    results = {
        _id(event.get("tool_use_id")): _result(event.get("content"), event.get("is_error") is True)
        for event in events
        if event.get("type") == "tool_result"
    }
    turns: list[str] = []
    calls: list[ToolCall] = []
    for event in events:
        if event.get("type") == "assistant":
            subagent = bool(event.get("parent_tool_use_id"))
            if not subagent:
                turns.append(_text(event.get("text")))
            for tool in _items(event.get("tools")):
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    result = results.get(_id(tool.get("id")))
                    calls.append(
                        _tool_call(tool["name"], tool.get("input"), len(turns), result, subagent)
                    )
    cost = _events_cost([event for event in events if event.get("type") == "result"])
    return Trajectory(
        source=source,
        turns=tuple(turns),
        tool_calls=tuple(calls),
        cost_usd=cost.value,
        input_tokens=None,
        output_tokens=None,
        tool_names=tuple(call.name for call in calls),
        cost_problem=cost.problem,
    )


def _events_cost(results: Sequence[Mapping[str, Any]]) -> _Figure[float]:
    """The run's cost: the last `result` event's (the run's end); one that gives none
    that is a finite number >= 0 leaves it unknown, never an earlier event's."""
    if not results:
        return _Figure(None, "the events hold no `result` event, which gives the run's cost")
    cost = results[-1].get("cost_usd")
    value = _amount(cost)
    if value is None:
        shown = "absent" if cost is None else _shown(cost)
        return _Figure(None, f"the last `result` event's cost is {shown}, not a finite number >= 0")
    return _Figure(value)


def _tool_call(
    name: str, arguments: Any, turn: int, result: Any, subagent: bool = False
) -> ToolCall:
    return ToolCall(name, arguments if isinstance(arguments, dict) else {}, turn, result, subagent)


def _observations(observation: Any) -> dict[Any, Any]:
    """An ATIF step's tool results by the id of the call they answer."""
    results = observation.get("results") if isinstance(observation, dict) else None
    return {
        _id(result.get("source_call_id")): _result(result.get("content"), False)
        for result in _items(results)
        if isinstance(result, dict) and _id(result.get("source_call_id")) is not None
    }


def _result(content: Any, is_error: bool) -> Any:
    text = _text(content) if isinstance(content, list) else content
    return {"error": text} if is_error else text


def _stream_events(text: str) -> Iterator[dict[str, Any]]:
    """Claude Code's stream-json lines as flat events (assistant text and tool uses,
    the result's cost); lines that are not JSON objects are skipped."""
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        blocks = (
            [block for block in content if isinstance(block, dict)]
            if isinstance(content, list)
            else []
        )
        if event.get("type") == "assistant":
            yield {
                "type": "assistant",
                "parent_tool_use_id": event.get("parent_tool_use_id"),
                "text": _text([b for b in blocks if b.get("type") == "text"]),
                "tools": [
                    {"name": b.get("name"), "id": b.get("id"), "input": b.get("input")}
                    for b in blocks
                    if b.get("type") == "tool_use"
                ],
            }
        elif event.get("type") == "user":
            for block in blocks:
                if block.get("type") == "tool_result":
                    yield {
                        "type": "tool_result",
                        **{key: block.get(key) for key in ("tool_use_id", "content", "is_error")},
                    }
        elif event.get("type") == "result":
            yield {"type": "result", "cost_usd": event.get("total_cost_usd")}


def _text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, list):  # content parts
        return "\n".join(
            part.get("text", "")
            for part in message
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _items(value: Any) -> list[Any]:
    """A list's items; anything else (a number, a string, a mapping) has none."""
    return value if isinstance(value, list) else []


def _id(value: Any) -> str | int | None:
    """A call id as a key: a string or a whole number; anything else (a list, a
    mapping, a float) identifies nothing."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _amount(value: Any) -> float | None:
    """A cost: a finite number >= 0, else none (inf, NaN, a 400-digit integer, a
    negative cost that would make any budget pass)."""
    number = finite_float(value)
    return number if number is not None and number >= 0 else None


def _count(value: Any) -> int | None:
    """A token count: a finite number >= 0, as a whole number, else none."""
    number = _amount(value)
    return int(number) if number is not None else None
