"""`verifier task init`: a Harbor task package graded by this image, or one per case of
eval.yaml's dataset (--from-dataset); `verifier task test`: the package checked with
real images before it is published."""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path

from verifier.console import warn, warn_all
from verifier.errors import EXIT_CONFIG, EXIT_OK, EXIT_TASK_TEST, ConfigErrors, UsageError
from verifier.grading import check_eval, check_reward_keys
from verifier.options import ALL_REWARD_KEYS, NATIVE_REWARD_KEYS, Options
from verifier.task import init_task
from verifier.task.from_dataset import init_dataset_tasks
from verifier.task.harbor_task import TASK_TOML
from verifier.task.importer import ImportOptions, import_many, import_task, summary_lines
from verifier.task.manifest import MANIFEST
from verifier.task.testing import (
    Engine,
    PackageFailed,
    default_engine,
    describe_judges,
    read_package,
    test_package,
)


def run_init(options: Options) -> int:
    assert options.dest is not None
    if options.from_dataset:
        return _init_from_dataset(options)
    if options.case_ids is not None:
        raise UsageError("--cases: only with --from-dataset (the dataset's cases to make tasks of)")
    created = init_task(
        options.dest,
        options.config,
        image=options.image,
        agent_image=options.agent_image,
        name=options.name,
        workdir=options.workdir,
        instruction=options.instruction,
        task_input=options.task_input,
        protect=options.protect or (),
        force=options.force,
        verifier_env=verifier_env(options),
        environment=options.environment,
        verifier_network=options.verifier_network,
        min_reward=options.min_reward,
    )
    print(f"created Harbor task {created}")
    _warn_if_invalid(options)
    solution = (
        "steps/<step>/solution/solve.sh" if (created / "steps").is_dir() else "solution/solve.sh"
    )
    print(f"next: write {created / solution}, then")
    print(f"  verifier task test {created}")
    print(f"  harbor run -p {created} --agent oracle -e podman --no-delete")
    _note_network(created)
    return EXIT_OK


def _note_network(package: Path) -> None:
    """Say once that a restricted verifier network needs Harbor's egress control."""
    with (package / "task.toml").open("rb") as handle:
        mode = tomllib.load(handle).get("verifier", {}).get("network_mode")
    if mode in ("no-network", "allowlist"):
        print(
            f"note: [verifier] network_mode = {mode!r}: Harbor enforces it with its "
            "egress sidecar (images from a registry); where it cannot, trials fail at "
            "start: then run task init again with --verifier-network public"
        )


def run_import(options: Options) -> int:
    """One Harbor task into a package graded by this image, or each task of a dir."""
    assert options.source is not None and options.dest is not None
    arguments = ImportOptions(options.image, options.verifier_network, options.force)
    if not (options.source / TASK_TOML).is_file() and options.source.is_dir():
        outcomes = import_many(options.source, options.dest, arguments)
        for line in summary_lines(outcomes):
            print(line)
        print(f"next: verifier task test {options.dest}/<task>, then")
        print(f"  harbor run -p {options.dest} --agent oracle -e podman --no-delete")
        return EXIT_OK if all(outcome.imported for outcome in outcomes) else EXIT_CONFIG
    imported = import_task(options.source, options.dest, arguments)
    print(f"imported Harbor task {imported.name} into {imported.dest}")
    for note in imported.notes:
        print(f"note: {note}")
    print("next:")
    print(f"  verifier task test {imported.dest}")
    print(f"  harbor run -p {imported.dest} --agent oracle -e podman --no-delete")
    return EXIT_OK


def run_test(options: Options) -> int:
    """Build the package's images, grade the untouched environment and the solution."""
    assert options.dest is not None
    package = read_package(options.dest)
    engine = Engine(options.engine or default_engine(shutil.which), options.build_network)
    print(f"task test {package.name} ({package.dest}) with {engine.name}")
    try:
        untouched, solved = test_package(
            package, engine, options.expect, os.environ, lambda line: print(line, flush=True)
        )
    except PackageFailed as failure:
        print(f"task test: FAILED: {failure}", file=sys.stderr)
        for line in describe_judges(failure.judges):
            print(line, file=sys.stderr)
        return EXIT_TASK_TEST
    print(
        f"task test: ok (solution {solved.reward:.4g} = expected {options.expect:.4g}, "
        f"untouched {untouched.reward:.4g} < {solved.reward:.4g})"
    )
    return EXIT_OK


def _init_from_dataset(options: Options) -> int:
    assert options.dest is not None
    for flag, given in (("--instruction", options.instruction), ("--input", options.task_input)):
        if given is not None:
            raise UsageError(
                f"{flag}: --from-dataset renders each case's instruction and input from its "
                "dataset entry"
            )
    if options.environment is not None:
        raise UsageError(
            "--environment: --from-dataset gives each case its own environment/ (the case's "
            "files); use --agent-image for the image they go into"
        )
    created = init_dataset_tasks(
        options.dest,
        options.config,
        image=options.image,
        agent_image=options.agent_image,
        org=options.name,
        workdir=options.workdir,
        case_ids=options.case_ids,
        protect=options.protect or (),
        force=options.force,
        verifier_env=verifier_env(options),
        verifier_network=options.verifier_network,
        min_reward=options.min_reward,
    )
    for task in created:
        print(f"created Harbor task {task}")
    print(f"wrote {options.dest / MANIFEST} ({len(created)} tasks)")
    _warn_if_invalid(options)
    print("next: write each task's solution/solve.sh (for the oracle agent), then")
    print(f"  harbor run -p {options.dest} --agent oracle -e podman --no-delete")
    return EXIT_OK


def verifier_env(options: Options) -> dict[str, str]:
    """What of this command's options the package's verifier reads from `[verifier] env`
    (`--reward-keys`: its VERIFIER_REWARD_JSON; names that are no judge of eval.yaml, when
    it loads, are a UsageError before anything is written)."""
    if options.reward_keys is ALL_REWARD_KEYS:
        return {}
    config = check_eval(options.config).config
    if config is not None:
        check_reward_keys(config, options.reward_keys)
    if options.reward_keys == NATIVE_REWARD_KEYS:
        return {"VERIFIER_REWARD_JSON": "native"}
    return {"VERIFIER_REWARD_JSON": ",".join(options.reward_keys) or "reward"}


def _warn_if_invalid(options: Options) -> None:
    """A package with a broken eval.yaml is still written (it records a verifier error
    in every trial, which is sometimes the point), but its author should know; so
    should the author of a weighted or expression reward that drops errored judges,
    and of one package for an eval with a dataset (every trial is graded as the case
    the workdir names, /app: "app", which no dataset entry matches). A model left to
    $EVAL_JUDGE_MODEL is only a warning: task.toml's [verifier] env may set it."""
    checked = check_eval(options.config)
    if checked.problems:
        message = ConfigErrors(checked.problems).message
        warn(f"{message}; every trial of this task will record a verifier error")
        return
    warn_all(checked.warnings)
    config = checked.config
    assert config is not None
    reward = config.reward
    if reward.mode in ("weighted", "expression") and reward.on_error == "drop":
        warn(
            f"{options.config}: reward.on_error is drop: a judge that errors is dropped and "
            "the others renormalize, so an error can raise the reward; for RL training set "
            "reward.on_error: zero"
        )
    if config.dataset is not None and not options.from_dataset:
        warn(
            f"{options.config} has a dataset ({config.dataset.path}/): this one package grades "
            "every trial without a dataset entry; pass --from-dataset for one task per case"
        )
