"""What the agent did, from the trail it left: Harbor's ATIF trajectory, or an event log.

Harbor's agents write an ATIF trajectory (`trajectory.json`: steps from system,
user and agent, each agent step with its text, tool calls and metrics, and
`final_metrics` with the cost); agent-eval-harness cases hold `events.json` (its
flat events) or `events.jsonl` (Claude Code's or Codex's stream). Both become one
neutral Trajectory: the agent's text turns, its tool calls, its cost and tokens.

It is the agent's own material (untrusted, like the whole case): it is read
through verifier.case.read_case_file, and whatever is wrong with it (missing,
malformed, huge) is a fact (None and a warning), never an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from verifier.casefiles import read_case_file
from verifier.named import NamedTuple

MAX_TRAJECTORY_BYTES = 32 * 1024 * 1024
AGENT_LOGS_TRAJECTORY = "trajectory.json"  # in Harbor's agent logs dir, /logs/agent
# Where a trajectory may be, relative to the case dir, in the order they are tried.
CASE_TRAJECTORY_PATHS = (
    "trajectory.json",
    "agent/trajectory.json",
    "logs/agent/trajectory.json",
    "events.json",
    "events.jsonl",
)


class ToolCall(NamedTuple):
    name: str
    arguments: Mapping[str, Any]
    turn: int  # the agent turn (1-based) it was made in (the last one, for a subagent's)
    result: Any = None  # what came back: text, {"error": text} when marked an error, or None
    subagent: bool = False  # made by a subagent the agent started, not the agent itself

    def to_json(self) -> dict[str, Any]:
        """As judges see it; `input` repeats `arguments` under agent-eval-harness's name."""
        return {**self._asdict(), "input": self.arguments}


class Trajectory(NamedTuple):
    source: str  # where it was read from
    turns: tuple[str, ...]  # the agent's text, turn by turn (subagents left out)
    tool_calls: tuple[ToolCall, ...]
    cost_usd: float | None
    input_tokens: int | None
    output_tokens: int | None
    # Every tool call's name as rewardkit counts them: on any step (an ATIF step without
    # `source: agent` too) and a subagent's too; tool_calls holds the agent's own steps'.
    tool_names: tuple[str, ...] = ()

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
        try:
            trajectory = parse_trajectory(text, relative)
        except (ValueError, RecursionError) as error:
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
    prompt_tokens = completion_tokens = 0
    cost = 0.0
    has_metrics = False
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
        for call in step.get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("function_name"), str):
                result = results.get(call.get("tool_call_id"))
                calls.append(_tool_call(call["function_name"], call.get("arguments"),
                                        len(turns), result))  # fmt: skip
        metrics = step.get("metrics")
        if isinstance(metrics, dict):
            has_metrics = True
            prompt_tokens += int(_number(metrics.get("prompt_tokens")))
            completion_tokens += int(_number(metrics.get("completion_tokens")))
            cost += _number(metrics.get("cost_usd"))
    final = document.get("final_metrics")
    final = final if isinstance(final, dict) else {}
    return Trajectory(
        source=source,
        turns=tuple(turns),
        tool_calls=tuple(calls),
        cost_usd=_first(final.get("total_cost_usd"), cost if has_metrics else None),
        input_tokens=_first(final.get("total_prompt_tokens"), prompt_tokens or None),
        output_tokens=_first(final.get("total_completion_tokens"), completion_tokens or None),
        tool_names=tuple(names),
    )


def _from_events(events: Iterable[Any], source: str) -> Trajectory:
    """agent-eval-harness's flat events: `assistant` (text, tools; a subagent's carry
    `parent_tool_use_id`), `tool_result` (content, is_error), `result` (cost)."""
    events = [event for event in events if isinstance(event, dict)]
    results = {
        event.get("tool_use_id"): _result(event.get("content"), event.get("is_error") is True)
        for event in events
        if event.get("type") == "tool_result"
    }
    turns: list[str] = []
    calls: list[ToolCall] = []
    cost = None
    for event in events:
        if event.get("type") == "assistant":
            subagent = bool(event.get("parent_tool_use_id"))
            if not subagent:
                turns.append(_text(event.get("text")))
            for tool in event.get("tools") or ():
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    result = results.get(tool.get("id"))
                    calls.append(_tool_call(tool["name"], tool.get("input"), len(turns),
                                            result, subagent))  # fmt: skip
        elif event.get("type") == "result" and _is_number(event.get("cost_usd")):
            cost = float(event["cost_usd"])
    names = tuple(call.name for call in calls)
    return Trajectory(source, tuple(turns), tuple(calls), cost, None, None, names)


def _tool_call(
    name: str, arguments: Any, turn: int, result: Any, subagent: bool = False
) -> ToolCall:
    return ToolCall(name, arguments if isinstance(arguments, dict) else {}, turn, result, subagent)


def _observations(observation: Any) -> dict[Any, Any]:
    """An ATIF step's tool results by the id of the call they answer."""
    results = observation.get("results") if isinstance(observation, dict) else None
    return {
        result.get("source_call_id"): _result(result.get("content"), False)
        for result in results or ()
        if isinstance(result, dict) and result.get("source_call_id") is not None
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
                "text": "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text"),
                "tools": [{"name": b.get("name"), "id": b.get("id"), "input": b.get("input")}
                          for b in blocks if b.get("type") == "tool_use"],
            }  # fmt: skip
        elif event.get("type") == "user":
            for block in blocks:
                if block.get("type") == "tool_result":
                    yield {"type": "tool_result", **{key: block.get(key) for key in
                           ("tool_use_id", "content", "is_error")}}  # fmt: skip
        elif event.get("type") == "result":
            yield {"type": "result", "cost_usd": event.get("total_cost_usd")}


def _text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, list):  # content parts
        return "\n".join(
            part.get("text", "") for part in message
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )  # fmt: skip
    return ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: Any) -> float:
    return float(value) if _is_number(value) else 0.0


def _first(*values: Any) -> Any:
    return next((value for value in values if _is_number(value)), None)
