"""The `conversation` a prompt sees: what the agent said, recovered from the case.

Agent CLIs run by agent-eval style harnesses write their transcript to stdout as
JSON lines (Claude Code's `--output-format stream-json`, Codex's `exec --json`);
stdout.log then holds events, and the conversation is the agent's own text turns
in order. When stdout.log is plain text it is the conversation as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def conversation_of(record: dict[str, Any]) -> str:
    """A `conversation` key of the record if the case reader set one, else from stdout.log."""
    explicit = record.get("conversation")
    if isinstance(explicit, str):
        return explicit
    stdout = record.get("stdout")
    if not isinstance(stdout, str):
        return ""
    turns = list(_assistant_turns(stdout))
    return "\n\n".join(turns) if turns else stdout


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
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            events.append(event)
    return events if lines and len(events) * 2 > len(lines) else None
