"""Builtins over what the agent did: its tool calls, turns and cost.

rewardkit's trajectory criteria (over Harbor's ATIF trajectory) and
agent-eval-harness's process and efficiency builtins, with their names, arguments,
defaults and verdicts. They read the trajectory the case reader found where
eval.yaml's `trajectory:` says (verifier.trajectory: by default Harbor's agent logs
only), or the one at `path` in the case (the author names that file: it is
agent-written). With none, or an unusable one, a check that needs it fails with the
reason: an agent must not pass "did not use tool X" by leaving no trail, or a
broken one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from verifier.config.fields import Choice, Flag, Number, OneOrMany, Text
from verifier.judges.builtins.arguments import CasePath
from verifier.judges.builtins.registry import (
    PARTIAL_CREDIT,
    BuiltinContext,
    NoArguments,
    ValueWithRationale,
    argument,
    builtin,
)
from verifier.trajectory import read_trajectory
from verifier.values import finite_float

TRAJECTORY_PATH = CasePath(
    description="a trajectory file in the case, which the agent writes (default: the "
    "trajectory eval.yaml's `trajectory:` names)"
)


@attrs.frozen(kw_only=True)
class ToolUsedArguments:
    tool_name: str = argument(Text(non_empty=True), required=True)
    min_count: int = argument(
        Number(integer=True, minimum=1, problem="must be a whole number >= 1"), default=1
    )
    path: str | None = argument(TRAJECTORY_PATH)


@attrs.frozen(kw_only=True)
class ToolNotUsedArguments:
    tool_name: str = argument(Text(non_empty=True), required=True)
    path: str | None = argument(TRAJECTORY_PATH)


@attrs.frozen(kw_only=True)
class TurnCountArguments:
    max_turns: int = argument(
        Number(integer=True, minimum=1, problem="must be a whole number >= 1"), required=True
    )
    path: str | None = argument(TRAJECTORY_PATH)


@attrs.frozen(kw_only=True)
class CostBudgetArguments:
    max_cost_usd: float = argument(Number(minimum=0, problem="must be a number >= 0"), default=1.0)


@attrs.frozen(kw_only=True)
class ConsultedDocsArguments:
    min_coverage: float = argument(
        Number(minimum=0, maximum=1, problem="must be a fraction from 0 to 1"), default=0.8
    )
    match: str = argument(Choice(("suffix", "exact", "basename")), default="suffix")
    include_subagents: bool = argument(Flag(), default=True)
    include_grep: bool = argument(Flag(), default=True)
    preloaded_files: Sequence[str] = argument(
        OneOrMany(
            Text(non_empty=True),
            description="paths counted as read (e.g. an auto-loaded CLAUDE.md)",
        ),
        default=(),
    )


def trajectory_of(
    context: BuiltinContext, path: str | None
) -> tuple[Mapping[str, Any] | None, str]:
    """(the trajectory as the record holds it, "") or (None, why there is none)."""
    if path is None:
        return record_trajectory(context)
    trajectory, problem = read_trajectory(context.case_dir, (path,))
    if trajectory is None:
        return None, problem or f"{path} does not exist"
    return trajectory.to_json(), ""


def record_trajectory(context: BuiltinContext) -> tuple[Mapping[str, Any] | None, str]:
    """(the record's trajectory, "") or (None, what the case reader said of it)."""
    found = context.record.get("trajectory")
    if isinstance(found, Mapping):
        return found, ""
    return None, str(context.record.get("trajectory_problem") or "no trajectory")


def _agent_calls(trajectory: Mapping[str, Any], tool_name: str) -> int:
    """The calls of tool_name in the whole trail, counted as rewardkit counts them: on
    every step (ATIF steps without `source: agent` too) and a subagent's too, so that
    "never used X" cannot pass a call the agent made through either."""
    names = trajectory.get("tool_names")
    if not isinstance(names, list):  # a trajectory recorded without them: its calls
        names = [call.get("name") for call in trajectory.get("tool_calls") or ()]
    return sum(1 for name in names if name == tool_name)


@builtin("trajectory", ToolUsedArguments)
def trajectory_tool_used(
    context: BuiltinContext, arguments: ToolUsedArguments
) -> ValueWithRationale:
    tool_name, min_count = arguments.tool_name, arguments.min_count
    trajectory, problem = trajectory_of(context, arguments.path)
    if trajectory is None:
        return False, problem
    count = _agent_calls(trajectory, tool_name)
    return count >= min_count, f"{tool_name} was called {count} times (at least {min_count} wanted)"


@builtin("trajectory", ToolNotUsedArguments)
def trajectory_tool_not_used(
    context: BuiltinContext, arguments: ToolNotUsedArguments
) -> ValueWithRationale:
    tool_name = arguments.tool_name
    trajectory, problem = trajectory_of(context, arguments.path)
    if trajectory is None:
        return False, problem
    count = _agent_calls(trajectory, tool_name)
    return count == 0, f"{tool_name} was called {count} times"


@builtin("trajectory", TurnCountArguments, score_range=PARTIAL_CREDIT)
def trajectory_turn_count(
    context: BuiltinContext, arguments: TurnCountArguments
) -> ValueWithRationale:
    """1.0 within max_turns, falling linearly to 0.0 at twice as many (rewardkit's)."""
    max_turns = arguments.max_turns
    trajectory, problem = trajectory_of(context, arguments.path)
    if trajectory is None:
        return 0.0, problem
    turns = int(trajectory.get("num_turns") or 0)
    value = max(0.0, min(1.0, 2.0 - turns / max_turns))
    return value, f"{turns} agent turns (budget {max_turns}, none left at {2 * max_turns})"


@builtin("efficiency", CostBudgetArguments)
def cost_budget(context: BuiltinContext, arguments: CostBudgetArguments) -> ValueWithRationale:
    """agent-eval-harness's efficiency/cost_budget, verdicts word for word, with the
    fact after "No cost data available": a cost the trail leaves out or gives as no
    finite number >= 0 is no cost data (verifier.trajectory), never $0."""
    max_cost_usd = arguments.max_cost_usd
    trajectory, problem = record_trajectory(context)
    if trajectory is None:
        return False, f"No cost data available: {problem}"
    cost = finite_float(trajectory.get("cost_usd"))
    if cost is None or cost < 0:
        return False, f"No cost data available: {trajectory.get('cost_problem')}"
    if cost <= max_cost_usd:
        return True, f"Cost ${cost:.2f} within budget ${max_cost_usd:.2f}"
    return False, f"Cost ${cost:.2f} exceeds budget ${max_cost_usd:.2f}"


@builtin("process", ConsultedDocsArguments)
def consulted_docs(
    context: BuiltinContext, arguments: ConsultedDocsArguments
) -> ValueWithRationale:
    """agent-eval-harness's process/consulted_docs: the agent read enough of the task's
    `annotations.expected_files` (Read calls, Grep calls, and shell reads an agent's
    events mark as `read_paths`)."""
    min_coverage, match = arguments.min_coverage, arguments.match
    include_subagents, include_grep = arguments.include_subagents, arguments.include_grep
    preloaded_files = arguments.preloaded_files
    annotations = context.record.get("annotations")
    listed = annotations.get("expected_files") if isinstance(annotations, Mapping) else None
    listed = listed if isinstance(listed, list | tuple) else [listed] if listed else []
    expected = [e for e in (_normalize(p, match) for p in listed) if e]
    if not expected:
        return True, "No expected_files specified — nothing to verify"
    trajectory, problem = record_trajectory(context)
    if trajectory is None:
        return False, problem
    preloaded = [_normalize(p, match) for p in preloaded_files or () if p]
    calls = [
        call
        for call in trajectory.get("tool_calls") or ()
        if include_subagents or not call.get("subagent")
    ]
    read = [r for r in (_normalize(p, match) for p in _read_paths(calls, include_grep)) if r]

    def seen(path: str, among: Sequence[str]) -> bool:
        if match == "suffix":
            return any(_suffix_match(other, path) for other in among)
        return path in among

    hits = [path for path in expected if seen(path, read) or seen(path, preloaded)]
    via_preload = [path for path in hits if not seen(path, read)] if preloaded else []
    coverage = len(hits) / len(expected)
    detail = (
        f"Read {len(hits)}/{len(expected)} expected docs "
        f"(coverage {coverage:.0%}, threshold {min_coverage:.0%})"
    )
    if via_preload:
        detail += f" [{len(via_preload)} via auto-load]"
    return coverage >= min_coverage, detail


@builtin("process", NoArguments)
def tool_call_validation(
    context: BuiltinContext,
    arguments: NoArguments,  # noqa: ARG001 (every builtin takes its record)
) -> ValueWithRationale:
    """agent-eval-harness's process/tool_call_validation over the record's `tool_calls`
    (here with each call's result, from the trajectory's observations or tool_result
    events: an error result, or one whose text starts with an error, fails)."""
    trajectory, problem = record_trajectory(context)
    if trajectory is None:
        return False, problem  # no trail is not a trail without errors
    tool_calls = context.record.get("tool_calls") or []
    if not tool_calls:
        return True, "No tool calls to validate"
    errors = []
    for index, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            continue
        result = call.get("result", call.get("output", "")) or ""
        name = call.get("name", f"#{index}")
        if isinstance(result, dict) and result.get("error"):
            errors.append(f"Tool '{name}': {str(result['error'])[:100]}")
        elif isinstance(result, str) and "error" in result.lower()[:50]:
            errors.append(f"Tool '{name}': {result[:100]}")
    if errors:
        return False, f"Tool call errors: {'; '.join(errors)}"
    return True, f"All {len(tool_calls)} tool calls completed successfully"


def _read_paths(calls: Sequence[Mapping[str, Any]], include_grep: bool) -> list[Any]:
    """The files the calls read, as agent-eval-harness's extract_read_calls finds them."""
    paths: list[Any] = []
    for call in calls:
        arguments = call.get("arguments") or {}
        name = call.get("name")
        if name == "Read":
            paths.append(arguments.get("file_path"))
        elif name == "Grep" and include_grep and arguments.get("path") not in (None, "", "."):
            paths.append(arguments.get("path"))
        elif name == "Bash" and isinstance(arguments.get("read_paths"), list):
            paths.extend(arguments["read_paths"])
    return paths


def _normalize(path: Any, match: str) -> str:
    path = (path if isinstance(path, str) else "").replace("\\", "/").strip()
    return path.rsplit("/", 1)[-1] if match == "basename" else path


def _suffix_match(read: str, expected: str) -> bool:
    """One path ends the other at a component boundary (`docs/a.md` ~ `/repo/docs/a.md`,
    but not `report.md` ~ `final-report.md`)."""
    return bool(read and expected) and (
        read == expected or read.endswith("/" + expected) or expected.endswith("/" + read)
    )
