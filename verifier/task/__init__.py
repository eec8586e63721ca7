"""Harbor task packages from task-templates/: `verifier task init`.

A task package graded by this verifier in Harbor's "separate" mode:

    DEST/task.toml            artifacts = [WORKDIR], [verifier] env, [verifier.environment]
    DEST/instruction.md       the agent's prompt
    DEST/environment/         --environment DIR's copy, else a placeholder Dockerfile, or
                              nothing when --agent-image is set
    DEST/solution/solve.sh    the reference solution (Harbor's `oracle` agent)
    DEST/tests/Dockerfile     the environment with the verifier on top (--environment:
                              verifier.task.environment), else FROM the verifier image
    DEST/tests/eval.yaml      the grading config, beside a copy of its whole directory
                              (verifier.task.tests_dir)
    DEST/.verifier-task-init.json  what init wrote (verifier.task.record)

tests/ is the verifier's side only: the agent never sees it. An eval.yaml with
`execution.steps` makes a multi-step package (verifier.task.package); with
`--from-dataset`, one package per dataset case (verifier.task.from_dataset).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import yaml

from verifier.console import warn_all
from verifier.errors import UsageError
from verifier.references import TASK_INPUT_FILE, referenced_files
from verifier.task.environment import CONTEXT_IN_TESTS, case_files, read_environment
from verifier.task.instruction import (
    agent_timeout,
    read_execution,
    step_specs,
    with_min_rewards,
)
from verifier.task.package import (
    NAME_RE,
    PackageSpec,
    StepSpec,
    check_dest,
    render,
    safe_name,
    templates_dir,
    write_package,
)
from verifier.task.protect import environment_files, guard_missing, protected_files
from verifier.task.record import describe_kept
from verifier.task.request import InitRequest, check_request, check_steps
from verifier.task.settings import verifier_settings
from verifier.task.tests_dir import TestsFile, TestsPlan, plan_tests_dir
from verifier.task.workdir_toolchain import refuse_toolchain_in_workdir
from verifier.yaml_io import read_yaml

__all__ = ["InitRequest", "init_task", "referenced_files", "render", "templates_dir"]


def init_task(request: InitRequest) -> Path:
    """Render the task templates into `dest` and copy eval.yaml's directory into tests/.

    The package is trusted by construction: its tests/ holds the task input judges
    see (eval.yaml's own `task_input` or input.yaml beside it, else `task_input`,
    else the instruction as `{prompt: ...}`; the placeholder instruction is no task
    input), never the agent's. With `execution.steps`, each step's instruction is
    rendered from its prompt and that input (verifier.task.instruction), and each
    step but the last gets `min_reward` (its own `min_reward` in eval.yaml first).

    The request's fields are InitRequest's (verifier.task.request). `protect` globs
    match the files the environment's Dockerfile copies into the work dir, or without
    `environment` those the author put in DEST/environment/. task.toml's [verifier]
    timeout, deadline, network and user come from eval.yaml (verifier.task.settings);
    `verifier_network` overrides the network mode.

    Returns `dest`. Raises UsageError for bad arguments or a non-empty `dest` without
    `force` (with `force`, files init wrote before are rewritten and files their
    author changed are kept, each with a warning), ConfigError when eval.yaml cannot
    be read or references a file that is missing or outside its directory. Prints a
    warning for each file left out of tests/.
    """
    workdir = check_request(request, from_dataset=False)
    dest, config = Path(request.dest), Path(request.config)
    image, agent_image, name = request.image, request.agent_image, request.name
    instruction, task_input, protect = request.instruction, request.task_input, request.protect
    environment, min_reward = request.environment, request.min_reward
    env = read_environment(environment) if environment is not None else None
    if env is not None:
        refuse_toolchain_in_workdir(env, workdir, f"--environment {env.root}")
    name = name if name is not None else f"local/{safe_name(dest.resolve().name)}"
    if not NAME_RE.match(name) or ".." in name:
        raise UsageError(f"--name {name!r}: use org/name (letters, digits, '.', '_', '-')")
    instruction_text = _read_instruction(instruction) if instruction is not None else None

    # Every ConfigError before anything is written.
    execution = read_execution(config)
    check_steps(request, execution)
    leave_out = [dest] if env is None else [dest, env.root]
    plan = plan_tests_dir(
        config, leave_out=leave_out, reserved=() if env is None else (CONTEXT_IN_TESTS,)
    )
    input_text = _task_input_text(config, plan, task_input)
    if execution.steps and instruction is not None:
        raise UsageError(
            f"--instruction {instruction}: {config} has execution.steps; each step's "
            "instruction is rendered from its prompt"
        )
    steps: tuple[StepSpec, ...] = ()
    placeholder = False
    if execution.steps:
        steps = step_specs(execution, _input_value(config, input_text), str(config))
        steps = with_min_rewards(steps, read_yaml(config), min_reward, str(config))
        instruction_text = "\n".join(step.instruction for step in steps)
    elif instruction_text is None:
        instruction_text, placeholder = _edited_instruction(dest, name, workdir)
    if input_text is None and not placeholder:
        input_text = yaml.safe_dump(
            {"prompt": instruction_text}, allow_unicode=True, sort_keys=False
        )
    if env is not None:
        agent_files: tuple[TestsFile, ...] = ()
        starts_with = case_files(env, workdir)
    else:
        agent_files = starts_with = environment_files(dest) if protect else ()
    protected = (
        protected_files(starts_with, protect, env.root if env else None) if (protect) else ()
    )
    check_dest(dest, request.force)
    kept = write_package(
        PackageSpec(
            dest=dest,
            name=name,
            image=image,
            agent_image=agent_image,
            workdir=workdir,
            tests=plan,
            instruction=instruction_text,
            task_input=input_text or None,
            steps=steps,
            agent_timeout_s=agent_timeout(execution),
            agent_files=agent_files,
            protected=protected,
            verifier_env=request.verifier_env,
            environment=env,
            settings=verifier_settings(config, request.verifier_network),
        )
    )
    warn_all(plan.warnings)
    warn_all(env.warnings if env is not None else ())
    warn_all(describe_kept(dest, kept))
    if placeholder and input_text is None:
        warn_all(
            [
                (
                    f"{dest / 'instruction.md'} is a placeholder, so the task has no trusted "
                    "task input yet: edit it and run task init --force again (or pass "
                    "--instruction)"
                )
            ]
        )
    if protect:
        warn_all([warning for warning in [guard_missing(read_yaml(config))] if warning])
    return dest


def _edited_instruction(dest: Path, name: str, workdir: str) -> tuple[str, bool]:
    """(instruction.md's text, whether it is the placeholder): the author's edit of an
    earlier package's instruction.md is the instruction (init keeps it anyway)."""
    placeholder = render(
        (templates_dir() / "instruction.md").read_text(encoding="utf-8"),
        {"name": name, "workdir": workdir},
    )
    try:
        written = (dest / "instruction.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return placeholder, True
    return (written, False) if written.strip() and written != placeholder else (placeholder, True)


def _task_input_text(config: Path, plan: TestsPlan, task_input: Path | None) -> str | None:
    """What to write as tests/input.yaml: '' when eval.yaml brings its own task input,
    the --input file's text, or None (the instruction becomes the prompt)."""
    document = read_yaml(config)
    own = isinstance(document, dict) and document.get("task_input") is not None
    own = own or any(file.relative == PurePosixPath(TASK_INPUT_FILE) for file in plan.files)
    if task_input is None:
        return "" if own else None
    if own:
        raise UsageError(f"--input {task_input}: {config} already has its task input")
    parsed = read_yaml(task_input, missing="file not found (--input)")
    if not isinstance(parsed, dict):
        raise UsageError(f"--input {task_input}: must be a YAML mapping (the task's input)")
    return task_input.read_text(encoding="utf-8")


def _input_value(config: Path, input_text: str | None) -> object:
    """The task input the steps' instructions are rendered with: --input's, else
    eval.yaml's own (task_input, or input.yaml beside it), else none."""
    if input_text:
        return yaml.safe_load(input_text)
    if input_text is None:
        return None
    document = read_yaml(config)
    own = document.get("task_input") if isinstance(document, dict) else None
    if isinstance(own, dict):
        return own
    beside = config.parent / (own if isinstance(own, str) else TASK_INPUT_FILE)
    return read_yaml(beside) if beside.is_file() else None


def _read_instruction(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--instruction {path}: cannot be read: {exc}") from None
