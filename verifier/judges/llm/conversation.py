"""The `conversation` a prompt sees: what the agent said, recovered from the case.

The agent's trajectory comes first (the record's `trajectory`: Harbor's ATIF
trajectory.json, from the trial's agent logs or the case, or the harness's events):
its text turns in order, each followed by its tool calls. Without one, stdout.log:
agent CLIs run by agent-eval style harnesses write their transcript there as JSON
lines (Claude Code's `--output-format stream-json`, Codex's `exec --json`), and the
conversation is the agent's own text turns; plain text is the conversation as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from verifier.values import json_text


def conversation_of(record: Mapping[str, Any]) -> str:
    """A `conversation` key of the record if the case reader set one, else the agent's
    trajectory, else stdout.log."""
    explicit = record.get("conversation")
    if isinstance(explicit, str):
        return explicit
    from_trajectory = _trajectory_text(record.get("trajectory"))
    if from_trajectory:
        return from_trajectory
    stdout = record.get("stdout")
    if not isinstance(stdout, str):
        return ""
    turns = list(_assistant_turns(stdout))
    return "\n\n".join(turns) if turns else stdout


def conversation_source(record: Mapping[str, Any]) -> str | None:
    """The file the conversation was read from (a rubric's material shows it once, as
    the conversation, not again among the files), None when not from a file."""
    if isinstance(record.get("conversation"), str):
        return None
    trajectory = record.get("trajectory")
    if _trajectory_text(trajectory):
        return str(trajectory["source"])  # type: ignore[index]
    return "stdout.log" if isinstance(record.get("stdout"), str) else None


def _trajectory_text(trajectory: Any) -> str:
    """The trajectory's turns, each with its tool calls, as text ('' when it has none)."""
    if not isinstance(trajectory, Mapping) or not isinstance(trajectory.get("turns"), list):
        return ""
    calls: dict[int, list[str]] = {}
    for call in trajectory.get("tool_calls") or ():
        if isinstance(call, Mapping) and isinstance(call.get("turn"), int):
            arguments = json_text(call.get("arguments"))
            calls.setdefault(call["turn"], []).append(f"[tool call] {call.get('name')} {arguments}")
    parts = []
    for turn, text in enumerate(trajectory["turns"], start=1):
        lines = [text.strip()] if isinstance(text, str) and text.strip() else []
        lines += calls.get(turn, [])
        if lines:
            parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _assistant_turns(stdout: str) -> Iterator[str]:
    """The agent's text turns of a JSON-lines transcript (nothing when it is not one)."""
    events = _json_lines(stdout)
    if events is None:
        return
    for event in events:
        kind = event.get("type")
        if kind == "assistant" and not event.get("parent_tool_use_id"):
            message = event.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            yield from _text_blocks(content)
        elif kind == "item.completed":
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") in (
                "agent_message",
                "assistant_message",
            ):
                text = item.get("text")
                if isinstance(text, str) and text.strip():
                    yield text


def _text_blocks(content: Any) -> Iterator[str]:
    if isinstance(content, str) and content.strip():
        yield content
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str) and text.strip():
                    yield text


def _json_lines(text: str) -> list[dict[str, Any]] | None:
    """The events, when most non-empty lines are JSON objects with a `type`; else None."""
    lines = [line for line in text.splitlines() if line.strip()]
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # a line nested 100,000 deep is no event
            continue
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            events.append(event)
    return events if lines and len(events) * 2 > len(lines) else None
