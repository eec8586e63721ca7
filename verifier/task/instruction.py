"""A Harbor task's instruction, rendered the way agent-eval-harness renders it.

The harness (`agent_eval/harbor/tasks.py`, `resolve_arguments` in its config.py)
fills the invocation's template with the case's input: a Jinja2 template
(`{{ input.prompt }}`, missing names are errors) or the brace style (`{field}`
required, `{field?}` optional); runs of spaces and tabs become one space. A prompt
template is the instruction; a skill becomes `/skill arguments` (Codex: "Use the
skill skill with arguments: ..."); the runner's system prompt goes first. When that
leaves nothing, the input's `prompt` is the instruction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from verifier.config import Locator
from verifier.config.execution import Execution, Invocation, parse_execution
from verifier.errors import ConfigError
from verifier.task.package import DEFAULT_AGENT_TIMEOUT_S, StepSpec
from verifier.yaml_io import read_yaml

_BRACE = re.compile(r"\{([^}]+)\}")
_BLANKS = re.compile(r"[ \t]+")


def render_instruction(invocation: Invocation, task_input: Any, where: str, key: str) -> str:
    """The instruction for one invocation and its case's input; ConfigError (naming
    `where` and `key`) when the template needs a field the input does not have."""
    fields = task_input if isinstance(task_input, Mapping) else {}
    if invocation.prompt and not invocation.skill:
        command = _resolve(invocation.prompt, fields, where, f"{key}.prompt")
    else:
        arguments = _resolve(invocation.arguments or "", fields, where, f"{key}.arguments")
        command = _skill_command(invocation, arguments) if invocation.skill else arguments
    if not command and isinstance(fields.get("prompt"), str):
        command = fields["prompt"]
    if not command.strip():
        raise ConfigError(
            where,
            key,
            "gives the agent no instruction: set a prompt, a skill or arguments, "
            "or give the case's input a prompt",
        )
    if invocation.system_prompt:
        command = f"{invocation.system_prompt.rstrip()}\n\n{command}"
    return command


def _resolve(template: str, fields: Mapping[str, Any], where: str, key: str) -> str:
    if not template:
        return ""
    if "{{" in template or "{%" in template:
        text = _jinja(template, fields, where, key)
    else:

        def field(match: re.Match[str]) -> str:
            name = match.group(1)
            optional = name.endswith("?")
            value = fields.get(name.removesuffix("?"))
            if value is None:
                if optional:
                    return ""
                raise ConfigError(
                    where,
                    key,
                    f"needs the input field {name!r}, which the case's input "
                    "does not have (write {" + name + "?} for an optional one)",
                )
            return str(value)

        text = _BRACE.sub(field, template)
    return _BLANKS.sub(" ", text).strip()


def _jinja(template: str, fields: Mapping[str, Any], where: str, key: str) -> str:
    import jinja2  # only here: task init renders, grading never does
    from jinja2.sandbox import SandboxedEnvironment

    environment = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)
    try:
        return environment.from_string(template).render(input=dict(fields), steps={})
    except jinja2.UndefinedError as error:
        hint = (
            "; {{ steps.* }} does not carry over to Harbor: pass state between steps "
            "through the workspace's files"
            if "steps." in template
            else ""
        )
        raise ConfigError(
            where, key, f"cannot be filled from the case's input: {error}{hint}"
        ) from None
    except jinja2.TemplateError as error:
        raise ConfigError(where, key, f"is not a valid template: {error}") from None


def _skill_command(invocation: Invocation, arguments: str) -> str:
    assert invocation.skill is not None
    if invocation.runner_type == "codex":
        # Codex finds a skill by its own name, without a plugin namespace such as `ci:`.
        command = f"Use the {invocation.skill.rsplit(':', 1)[-1]} skill"
        return f"{command} with arguments: {arguments}" if arguments else command
    return f"/{invocation.skill} {arguments}".strip()


def read_execution(config: Path) -> Execution:
    """eval.yaml's execution block (ConfigError when it cannot be used to render)."""
    document = read_yaml(config)
    if not isinstance(document, dict):
        raise ConfigError(str(config), "", "must be a YAML mapping")
    return parse_execution(document, Locator(str(config), "", config.resolve().parent))


def step_specs(execution: Execution, task_input: object, where: str) -> tuple[StepSpec, ...]:
    """Each step's instruction.md, rendered from its invocation and the case's input."""
    return tuple(
        StepSpec(
            step.id,
            render_instruction(
                step.invocation, task_input, where, f"execution.steps[{index}] ({step.id})"
            )
            + "\n",
            step.timeout_s,
        )
        for index, step in enumerate(execution.steps)
    )


def agent_timeout(execution: Execution) -> float:
    """The agent's time: execution.timeout, else the package's default."""
    return execution.timeout_s if execution.timeout_s is not None else DEFAULT_AGENT_TIMEOUT_S


def with_min_rewards(
    steps: tuple[StepSpec, ...], document: object, default: float | None, where: str
) -> tuple[StepSpec, ...]:
    """Each step with its min_reward: eval.yaml's execution.steps[i].min_reward, else
    (every step but the last) `default`, --min-reward."""
    execution = document.get("execution") if isinstance(document, dict) else None
    listed = execution.get("steps") if isinstance(execution, dict) else None
    given = [
        entry.get("min_reward") if isinstance(entry, dict) else None
        for entry in (listed if isinstance(listed, list) else [])
    ]
    result = []
    for index, declared in enumerate(steps):
        step = declared
        value = given[index] if index < len(given) else None
        if value is None and index < len(steps) - 1:
            value = default  # the last step stops nothing: the flag leaves it alone
        if value is not None:
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (0 <= value <= 1)
            ):
                raise ConfigError(
                    where,
                    f"execution.steps[{index}] ({step.id}).min_reward",
                    f"{value!r} must be a number in [0, 1]",
                )
            step = attrs.evolve(step, min_reward=float(value))
        result.append(step)
    return tuple(result)
