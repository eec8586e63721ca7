"""eval.yaml -> EvalConfig: every validation rule, each error naming file and key.

Loading is the only place the task author's intent is checked. Anything that would
otherwise surface as a wrong reward on every case (a typo'd key, a judge name that a
formula cannot see, a score_range that cannot normalize) is refused here, before a
single case is graded, and every independent problem is collected so that
`verifier check` can list them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import attrs

from verifier.config.fields import (
    RELATIVE_PATH_PATTERN,
    Locator,
    Problems,
    RelativePath,
    Text,
    nullable,
)
from verifier.config.judges import judges_schema, parse_judges
from verifier.config.records import NO_TASK_INPUT, EvalConfig, JudgeConfig, JudgeKinds, TaskInput
from verifier.config.reward_block import parse_reward, reward_schema
from verifier.errors import ConfigError, ConfigErrors, did_you_mean
from verifier.references import ANNOTATION_PREFIX, TASK_INPUT_FILE
from verifier.reward import DefaultReward
from verifier.trajectory import FROM_AGENT_LOGS, FROM_CASE
from verifier.yaml_io import read_yaml

if TYPE_CHECKING:
    from verifier.config.execution import Execution
    from verifier.dataset import Dataset

SUITE_LEVEL_KEYS = frozenset(
    {
        "description",
        "execution",
        "runner",
        "models",
        "permissions",
        "mlflow",
        "dataset",
        "inputs",
        "traces",
        "thresholds",
        "hooks",
        "generation",
        "skill",
        "matrix",
    }
)
VERIFIER_KEYS = frozenset(
    {"name", "outputs", "judges", "reward", "annotations", "task_input", "trajectory"}
)
SCHEMA_DIALECT = "http://json-schema.org/draft-07/schema#"  # what editors support best


@attrs.frozen
class OutputEntry:
    """One `outputs` entry: a path relative to the case dir, or a mapping with `path`
    (its other keys, such as agent-eval-harness's `schema`, are not read)."""

    description: str = "a file or dir the judges see, relative to the case dir"

    def parse(self, value: Any, at: Locator) -> str:
        raw = value.get("path") if isinstance(value, dict) else value
        if not isinstance(raw, str) or not raw.strip():
            raise at.error("must be a non-empty path relative to the case dir")
        pure = PurePosixPath(raw)
        if pure.is_absolute() or ".." in pure.parts or str(pure) == "." or "\0" in raw:
            raise at.error(f"{raw!r} must be relative to the case dir, without '..', not '.'")
        if pure.name.startswith(ANNOTATION_PREFIX):
            raise at.error(
                f"{raw!r} would make the record key {pure.name}_content, and record keys "
                f"starting with {ANNOTATION_PREFIX!r} hold the dataset's annotation files; "
                "rename the output"
            )
        return str(pure)

    def schema(self) -> dict[str, Any]:
        path = {"type": "string", "pattern": RELATIVE_PATH_PATTERN}
        tool = {
            "type": "string",
            "pattern": r"\S",
            "description": "the agent's tool calls judges see: those whose tool name contains this",
        }
        return {
            "description": self.description,
            "anyOf": [
                path,
                {"type": "object", "properties": {"path": path}, "required": ["path"]},
                {"type": "object", "properties": {"tool": tool}, "required": ["tool"]},
            ],
        }


class IncompleteConfig(ConfigErrors):
    """The problems of an eval.yaml that read far enough to look further: `partial` is
    its config with what failed left out or at its default (the judges that parsed,
    the default reward), for `verifier check` to prepare those judges and survey the
    dataset in the same run (verifier.grading.check_eval), never for grading."""

    def __init__(self, problems: Sequence[ConfigError], partial: EvalConfig) -> None:
        super().__init__(problems)
        self.partial = partial


def load_config(path: Path, kinds: JudgeKinds) -> EvalConfig:
    """Read and validate eval.yaml; raise IncompleteConfig (exit 2) listing every problem
    found.

    `kinds` is the judge-kind registry (verifier.judges.kinds.KINDS).
    """
    at = Locator(str(path), "", path.resolve().parent)
    document = read_yaml(path, missing="file not found; pass --config or set VERIFIER_CONFIG")
    if not isinstance(document, dict):
        raise at.error("must be a YAML mapping with a 'judges' list")
    warnings: list[str] = []
    problems = Problems()
    for key in document:
        if key not in VERIFIER_KEYS | SUITE_LEVEL_KEYS:
            warnings.append(
                f"{at.source}: {key}: unknown top-level key, ignored"
                f"{did_you_mean(str(key), VERIFIER_KEYS)}"
            )
    name = document.get("name") or path.resolve().parent.name
    if not isinstance(name, str):
        problems.add(at.child("name").error("must be a string"))
    judges, failed_names = parse_judges(
        document.get("judges"), at.child("judges"), kinds, warnings, problems
    )
    reward = problems.attempt(
        parse_reward, document.get("reward"), judges, failed_names, at.child("reward"), warnings
    )
    outputs, tools = problems.attempt(_outputs, document.get("outputs"), at.child("outputs")) or (
        (),
        (),
    )
    annotations = problems.attempt(_annotations, document.get("annotations"), at)
    task_input = problems.attempt(_task_input, document.get("task_input"), at)
    dataset = problems.attempt(_dataset, document.get("dataset"), at)
    execution = problems.attempt(_execution, document, at)
    trajectory = problems.attempt(
        TrajectoryChoice().parse, document.get("trajectory"), at.child("trajectory")
    )
    for problem in _judge_step_problems(judges, execution, at):
        problems.add(problem)
    if execution is not None and reward is not None:
        warnings.extend(_step_warnings(judges, execution, reward, at))
    models = document.get("models")
    default_model = models.get("judge") if isinstance(models, dict) else None
    config = EvalConfig(  # what failed (its problem collected) is left at its default
        path=path.resolve(),
        name=name if isinstance(name, str) else path.resolve().parent.name,
        outputs=outputs,
        tool_outputs=tools,
        judges=judges,
        reward=reward if reward is not None else DefaultReward(),
        annotations=annotations if annotations is not None else {},
        default_model=default_model if isinstance(default_model, str) else None,
        warnings=tuple(warnings),
        task_input=task_input if task_input is not None else NO_TASK_INPUT,
        dataset=dataset,
        execution=execution,
        trajectory=trajectory if trajectory is not None else FROM_AGENT_LOGS,
    )
    if problems.errors:
        raise IncompleteConfig(problems.errors, config)
    return config


@attrs.frozen
class TrajectoryChoice:
    """eval.yaml's `trajectory:`: where the agent's trajectory is read from."""

    description: str = (
        "where the agent's trajectory is read from: agent_logs (default: Harbor's agent "
        "logs, --agent-logs), case (the case's own trail, which the agent writes and can "
        "forge), or the path of one file in the case (agent-written too)"
    )

    def parse(self, value: Any, at: Locator) -> str:
        if value is None:
            return FROM_AGENT_LOGS
        if value in (FROM_AGENT_LOGS, FROM_CASE):
            return value
        try:
            return OutputEntry().parse(value, at)
        except ConfigError:
            raise at.error(
                f"{value!r} must be {FROM_AGENT_LOGS} (Harbor's agent logs), {FROM_CASE} (the "
                "case's own trail) or a path relative to the case dir"
            ) from None

    def schema(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "anyOf": [
                {"enum": [FROM_AGENT_LOGS, FROM_CASE]},
                {"type": "string", "pattern": RELATIVE_PATH_PATTERN},
                {"type": "null"},
            ],
        }


def _dataset(value: Any, at: Locator) -> Dataset | None:
    """eval.yaml's dataset (its module is imported only when there is one: grading
    every other eval never pays for it)."""
    if value is None:
        return None
    from verifier.dataset import read_dataset

    return read_dataset(value, at.source, at.base_dir)


def _execution(document: Mapping[str, Any], at: Locator) -> Execution | None:
    """eval.yaml's execution and runner blocks, when it has them."""
    if not any(key in document for key in ("execution", "runner", "skill")):
        return None
    from verifier.config.execution import parse_execution

    return parse_execution(document, at)


def _judge_step_problems(
    judges: Sequence[JudgeConfig] | None, execution: Execution | None, at: Locator
) -> list[ConfigError]:
    """A judge's `step:` must name a step of execution.steps: a typo would leave the
    judge out of every step's verifier."""
    problems = []
    step_ids = execution.step_ids if execution is not None else ()
    for judge in judges or ():
        if judge.step is None:
            continue
        where = Locator(at.source, f"{judge.key}.step", at.base_dir)
        if not step_ids:
            problems.append(
                where.error(
                    f"names step {judge.step!r}, but eval.yaml has no execution.steps; remove it "
                    "or define the steps"
                )
            )
        elif judge.step not in step_ids:
            problems.append(
                where.error(
                    f"{judge.step!r} is not a step of execution.steps "
                    f"({', '.join(step_ids)}){did_you_mean(judge.step, step_ids)}"
                )
            )
    return problems


def _step_warnings(
    judges: Sequence[JudgeConfig], execution: Execution, reward: Any, at: Locator
) -> list[str]:
    """The reward block is composed by the final step's verifier (Harbor's
    multi_step_reward_strategy = final): a judge of an earlier step it names has no
    value there, and a final step without judges gives every trial 0.0."""
    if not execution.steps:
        return []
    earlier = {
        judge.name: judge.step for judge in judges if judge.step not in (None, execution.final_step)
    }
    referenced = dict(reward.referenced_names())
    if reward.mode == "judge":
        referenced["reward.judge"] = frozenset({reward.judge})
    warnings = []
    for key, names in referenced.items():
        for name in sorted(set(names) & set(earlier)):
            warnings.append(
                f"{at.source}: {key}: {name} is graded in step {earlier[name]!r}, but the "
                f"reward is composed in the final step {execution.final_step!r}, where it has "
                "no value"
            )
    if judges and not any(judge.step in (None, execution.final_step) for judge in judges):
        warnings.append(
            f"{at.source}: no judge is graded in the final step {execution.final_step!r} (none "
            "is scoped to it or to no step): it composes the trial's reward, which is then 0.0"
        )
    return warnings


def _outputs(value: Any, at: Locator) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(paths, tool name patterns): `{path: ...}` (or a plain string) entries limit the
    files judges see; `{tool: NAME}` entries choose the agent's tool calls judges see
    (a call matches when NAME is part of its tool's name)."""
    if value is None:
        return (), ()
    if not isinstance(value, list):
        raise at.error("must be a list of {path: ...} or {tool: ...} entries")
    paths, tools = [], []
    for index, entry in enumerate(value):
        if isinstance(entry, dict) and "tool" in entry and "path" not in entry:
            tool = entry["tool"]
            if not isinstance(tool, str) or not tool.strip():
                raise at.item(index).child("tool").error("must be a non-empty tool name")
            tools.append(tool)
        else:
            paths.append(OutputEntry().parse(entry, at.item(index).child("path")))
    return tuple(paths), tuple(tools)


def _annotations(value: Any, at: Locator) -> Mapping[str, Any]:
    at = at.child("annotations")
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            relative = RelativePath().parse(value, at)
        except ConfigError:
            raise at.error(
                f"{value!r} is not a file beside eval.yaml ({at.base_dir / value})"
            ) from None
        value = read_yaml(at.base_dir / relative)
        if value is None:
            return {}
    if not isinstance(value, dict):
        raise at.error("must be a mapping or the path of a YAML mapping")
    return value


def _task_input(value: Any, at: Locator) -> TaskInput:
    """The trusted task input: `task_input:` (a mapping, or a YAML file beside eval.yaml),
    else an input.yaml beside eval.yaml, else none (the case's own input.yaml is then
    used, as agent-supplied material)."""
    key = at.child("task_input")
    if isinstance(value, str):
        relative = RelativePath().parse(value, key)
        return TaskInput(read_yaml(at.base_dir / relative), f"task_input file {relative}", True)
    if value is not None:
        if not isinstance(value, dict):
            raise key.error("must be a mapping, or the path of a YAML file beside eval.yaml")
        return TaskInput(value, "task_input in eval.yaml", True)
    beside = at.base_dir / TASK_INPUT_FILE
    if beside.is_file():
        return TaskInput(read_yaml(beside), f"{TASK_INPUT_FILE} beside eval.yaml", True)
    return NO_TASK_INPUT


def eval_schema(kinds: JudgeKinds) -> dict[str, Any]:
    """eval.yaml as JSON Schema (`verifier schema`), from the declarations the loader
    checks files with: the judge keys and kinds, the builtins' arguments, the reward block.

    Like the loader it accepts the suite-level keys and any other top-level key (the
    loader warns about those). What only loading can tell (a file beside eval.yaml, a
    `check` that compiles, a formula, a judge name used twice) it does not describe.
    """
    suite_level: dict[str, dict[str, Any]] = {
        key: {"description": "suite-level (agent-eval-harness): accepted, not read"}
        for key in sorted(SUITE_LEVEL_KEYS)
    }
    suite_level["dataset"] = {
        "description": "the cases (agent-eval-harness): dataset.path, a dir beside eval.yaml, "
        "gives each case its entry's annotations and input",
        "anyOf": [
            {"type": "object", "properties": {"path": nullable({"type": "string"})}},
            {"type": "null"},
        ],
    }
    suite_level["models"] = {
        "description": "suite-level; models.judge is the default model of LLM judges",
        "properties": {"judge": Text(description="provider/model").schema()},
    }
    properties = {
        "name": nullable(Text(description="shown in output; default: the dir's name").schema()),
        "outputs": nullable(
            {
                "type": "array",
                "items": OutputEntry().schema(),
                "description": "what the judges see of the case (default: all of it)",
            }
        ),
        "judges": judges_schema(kinds.every()),
        "reward": reward_schema(),
        "annotations": {
            "description": "ground truth for the judges: a mapping, or a YAML file's path",
            "anyOf": [
                {"type": "object"},
                {"type": "string", "pattern": RELATIVE_PATH_PATTERN},
                {"type": "null"},
            ],
        },
        "trajectory": TrajectoryChoice().schema(),
        "task_input": {
            "description": "the trusted task input judges see as `inputs`: a mapping, or a "
            "YAML file's path",
            "anyOf": [
                {"type": "object"},
                {"type": "string", "pattern": RELATIVE_PATH_PATTERN},
                {"type": "null"},
            ],
        },
    }
    return {
        "$schema": SCHEMA_DIALECT,
        "title": "eval.yaml (harbor-verifier)",
        "type": "object",
        "required": ["judges"],
        "properties": {**properties, **suite_level},
    }
