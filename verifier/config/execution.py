"""eval.yaml's `execution` (with `runner`): how agent-eval-harness invokes the agent.

The verifier reads it for two things. `verifier task init` renders each Harbor task's
instruction from it the way the harness does (a prompt template, or a skill with
arguments, filled with the case's input). And `execution.steps` makes an eval
multi-step: each step is one agent invocation in the shared workspace, a judge's
`step:` scopes it to one of them, and a Harbor task gets one `[[steps]]` entry per
step, each with its own verifier (see verifier.grading). The rest of `execution`
(mode, parallelism, env, budgets) is the harness's own and is not read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from verifier.config.fields import Locator, Number

DEFAULT_RUNNER = "claude-code"
# A step id names Harbor's steps/<id>/ directory: a portable name, also safe in TOML.
STEP_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_TIMEOUT = Number(positive=True, problem="must be a positive number of seconds")


@attrs.frozen
class Invocation:
    """What one agent invocation is told: a prompt template, or a skill and its
    arguments template, and the runner's system prompt put before it."""

    prompt: str | None = None
    skill: str | None = None
    arguments: str | None = None
    runner_type: str = DEFAULT_RUNNER
    system_prompt: str | None = None


@attrs.frozen
class Step:
    id: str
    invocation: Invocation
    timeout_s: float | None  # the agent's time for this step (None: the task's)


@attrs.frozen
class Execution:
    invocation: Invocation = Invocation()
    timeout_s: float | None = None  # the agent's time (execution.timeout)
    steps: tuple[Step, ...] = ()

    @property
    def step_ids(self) -> tuple[str, ...]:
        return tuple(step.id for step in self.steps)

    @property
    def final_step(self) -> str | None:
        """The step whose verifier composes the trial's reward (None: one step only)."""
        return self.steps[-1].id if self.steps else None


def parse_execution(document: Mapping[str, Any], at: Locator) -> Execution:
    """`execution` and `runner` of eval.yaml; ConfigError naming the key that is wrong."""
    execution = _mapping(document.get("execution"), at.child("execution"))
    runner = _mapping(document.get("runner"), at.child("runner"))
    top_skill = _text(document, "skill", at)  # the harness's deprecated top-level `skill`
    invocation = _invocation(execution, runner, at.child("execution"), top_skill)
    at = at.child("execution")
    timeout = execution.get("timeout")
    steps_value = execution.get("steps")
    if steps_value is None or steps_value == []:
        return Execution(invocation, _timeout(timeout, at.child("timeout")), ())
    if invocation.prompt or invocation.skill:
        raise at.child("steps").error(
            "cannot be combined with execution.prompt or execution.skill: put each "
            "invocation in its own step"
        )
    if execution.get("mode", "case") != "case":
        raise at.child("mode").error("must be 'case' with execution.steps (one agent per case)")
    if not isinstance(steps_value, list):
        raise at.child("steps").error("must be a list of steps, each with an id and a prompt")
    steps: list[Step] = []
    for index, value in enumerate(steps_value):
        step = _step(value, at.child("steps").item(index), runner)
        if step.id in {earlier.id for earlier in steps}:
            raise (
                at.child("steps")
                .item(index)
                .child("id")
                .error(f"{step.id!r} is the id of an earlier step; step ids must be unique")
            )
        steps.append(step)
    return Execution(invocation, _timeout(timeout, at.child("timeout")), tuple(steps))


def _step(value: Any, at: Locator, runner: Mapping[str, Any]) -> Step:
    if not isinstance(value, dict):
        raise at.error("must be a mapping with an id and a prompt or skill")
    step_id = value.get("id")
    if not isinstance(step_id, str) or not STEP_ID_PATTERN.match(step_id):
        raise at.child("id").error(
            f"{step_id!r} must be a step name like 'plan' (letters, digits, '.', '_', '-'; "
            "up to 64): it names the Harbor task's steps/<id>/ directory"
        )
    at = Locator(at.source, f"{at.key} ({step_id})", at.base_dir)
    step_runner = _mapping(value.get("runner"), at.child("runner")) or runner
    invocation = _invocation(value, step_runner, at, None)
    if not invocation.prompt and not invocation.skill:
        raise at.error("must set a prompt or a skill (what the agent is asked in this step)")
    return Step(step_id, invocation, _timeout(value.get("timeout"), at.child("timeout")))


def _invocation(
    block: Mapping[str, Any], runner: Mapping[str, Any], at: Locator, top_skill: str | None
) -> Invocation:
    prompt = _text(block, "prompt", at)
    skill = _text(block, "skill", at) or top_skill
    if prompt and prompt.strip() and skill and skill.strip():
        raise at.child("prompt").error("cannot be combined with a skill: pick one")
    runner_at = Locator(at.source, "runner", at.base_dir)
    return Invocation(
        prompt=prompt if prompt and prompt.strip() else None,
        skill=skill.strip() if skill and skill.strip() else None,
        arguments=_text(block, "arguments", at),
        runner_type=_text(runner, "type", runner_at) or DEFAULT_RUNNER,
        system_prompt=_text(runner, "system_prompt", runner_at),
    )


def _mapping(value: Any, at: Locator) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise at.error("must be a mapping")
    return value


def _text(block: Mapping[str, Any], key: str, at: Locator) -> str | None:
    value = block.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise at.child(key).error("must be a string")
    return value


def _timeout(value: Any, at: Locator) -> float | None:
    return None if value is None else _TIMEOUT.parse(value, at)
