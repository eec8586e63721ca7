"""`verifier task init DIR --from-dataset`: one Harbor task per dataset case, as
agent-eval-harness makes them (`generate_tasks` in its agent_eval/harbor/tasks.py).

Each DIR/<case-id>/ is a complete package (verifier.task.package) whose:

- instruction.md is the eval's invocation filled with the case's input (or, for a
  multi-step eval, steps/<id>/instruction.md per step: verifier.task.instruction);
- environment/ carries what the harness gives the agent: the case's input file and
  every other file of its entry that is not annotations.yaml or named by an
  annotation (Harbor uploads environment/ into the agent's workdir when the agent's
  image is given; environment/Dockerfile COPYs them there otherwise);
- tests/ is eval.yaml's directory with only this case's dataset entry (its
  annotations, annotated files and input: the trusted task input), and task.toml
  tells the verifier the case's id (`VERIFIER_CASE_ID`).

DIR/dataset.toml lists them all (verifier.task.manifest), so `harbor run -p DIR` runs
every task and `harbor publish` can publish them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import attrs

from verifier.console import warn_all
from verifier.dataset import CASE_ID_PATTERN, Dataset, DatasetCase, read_dataset
from verifier.errors import UsageError
from verifier.task.instruction import (
    agent_timeout,
    read_execution,
    render_instruction,
    step_specs,
    with_min_rewards,
)
from verifier.task.manifest import MANIFEST, manifest_text
from verifier.task.package import (
    PackageSpec,
    check_dest,
    safe_name,
    write_package,
)
from verifier.task.protect import guard_missing, protected_files
from verifier.task.record import PackageWriter, describe_kept
from verifier.task.request import InitRequest, check_request, check_steps
from verifier.task.settings import verifier_settings
from verifier.task.tests_dir import TestsFile, TestsPlan, plan_tests_dir
from verifier.yaml_io import read_yaml


def init_dataset_tasks(request: InitRequest) -> list[Path]:
    """Write DEST/<case-id>/ for every dataset case (or those in case_ids) and
    DEST/dataset.toml; return the task dirs.

    Tasks are named `ORG/<case-id>`, ORG being the request's `name` (default:
    eval.yaml's name).
    UsageError for bad arguments, an unknown case id or a non-empty DEST without
    `force`; ConfigError for an eval.yaml or a dataset entry that cannot be used:
    every case is rendered before anything is written."""
    workdir = check_request(request, from_dataset=True)
    dest, config = Path(request.dest), Path(request.config)
    image, agent_image, protect = request.image, request.agent_image, request.protect
    document = read_yaml(config)
    eval_name = str(document.get("name") or config.resolve().parent.name)
    org = request.name if request.name is not None else safe_name(eval_name)
    if "/" in org or safe_name(org) != org:
        raise UsageError(
            f"--name {org!r}: with --from-dataset, --name is the org only (each task is "
            "named ORG/<case-id>): letters, digits, '.', '_', '-'"
        )
    dataset = read_dataset(document.get("dataset"), str(config), config.resolve().parent)
    if dataset is None:
        raise UsageError(f"--from-dataset: {config} has no dataset.path")
    if dataset.missing:
        raise UsageError(f"--from-dataset: {dataset.missing_warning()}, so no task to make")
    entries = _entries(dataset, request.case_ids)
    execution = read_execution(config)
    check_steps(request, execution)
    base = plan_tests_dir(config, leave_out=[dest, dataset.root])
    settings = verifier_settings(config, request.verifier_network)
    specs = []
    for entry in entries:
        steps = step_specs(execution, entry.task_input, str(config))
        steps = with_min_rewards(steps, document, request.min_reward, str(config))
        if steps:  # each step has its own instruction.md; the root has none
            instruction = "\n".join(step.instruction for step in steps)
        else:
            invocation = execution.invocation
            instruction = (
                render_instruction(invocation, entry.task_input, str(config), "execution") + "\n"
            )
        agent_files = tuple(
            TestsFile(relative, entry.directory / relative) for relative in entry.agent_inputs()
        )
        specs.append(
            PackageSpec(
                dest=dest / entry.case_id,
                name=f"{org}/{entry.case_id}",
                image=image,
                agent_image=agent_image,
                workdir=workdir,
                tests=_with_entry(base, dataset, entry),
                instruction=instruction,
                steps=steps,
                agent_files=agent_files,
                protected=protected_files(agent_files, protect) if protect else (),
                verifier_env={**request.verifier_env, "VERIFIER_CASE_ID": entry.case_id},
                metadata={"eval_name": eval_name, "case_id": entry.case_id},
                agent_timeout_s=agent_timeout(execution),
                settings=settings,
            )
        )
    check_dest(dest, request.force)
    for spec in specs:
        warn_all(describe_kept(spec.dest, write_package(spec)))
    writer = PackageWriter(dest)
    writer.write_text(
        MANIFEST,
        manifest_text(dest, f"{org}/{safe_name(eval_name)}", f"{eval_name}: {dataset.path}/"),
    )
    warn_all(describe_kept(dest, writer.finish()))
    written = [spec.dest for spec in specs]
    warn_all(base.warnings)
    if protect:
        warn_all([warning for warning in [guard_missing(document)] if warning])
    return written


def _entries(dataset: Dataset, case_ids: Sequence[str] | None) -> list[DatasetCase]:
    """The dataset's entries, all or those named (in the dataset's order)."""
    available = dataset.case_ids()
    if case_ids:
        unknown = [case_id for case_id in case_ids if case_id not in available]
        if unknown:
            raise UsageError(
                f"--cases: {', '.join(unknown)} not in the dataset {dataset.root} "
                f"(it has {', '.join(available) or 'no cases'})"
            )
    wanted = [case_id for case_id in available if not case_ids or case_id in case_ids]
    bad = [case_id for case_id in wanted if not CASE_ID_PATTERN.match(case_id)]
    if bad:
        raise UsageError(
            f"{dataset.root}: {', '.join(map(repr, bad))} cannot name a Harbor task: use "
            "letters, digits, '.', '_' and '-' (or leave them out with --cases)"
        )
    if not wanted:
        raise UsageError(f"--from-dataset: the dataset {dataset.root} has no cases")
    entries = []
    for case_id in wanted:
        entry = dataset.case(case_id)
        if entry is None:  # listed a moment ago, with a usable id: removed since
            raise UsageError(f"{dataset.root / case_id}: is no longer a case directory")
        entries.append(entry)
    return entries


def _with_entry(base: TestsPlan, dataset: Dataset, entry: DatasetCase) -> TestsPlan:
    """tests/ with this case's dataset entry, where eval.yaml's dataset.path finds it."""
    prefix = PurePosixPath(dataset.path) / entry.case_id
    files = tuple(
        TestsFile(prefix / relative, entry.directory / relative) for relative in entry.files()
    )
    return attrs.evolve(base, files=base.files + files)
