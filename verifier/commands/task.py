"""`verifier task init`: a Harbor task package graded by this image, or one per case of
eval.yaml's dataset (--from-dataset); `verifier task test`: the package checked with
real images before it is published."""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path

import attrs

from verifier.console import warn, warn_all
from verifier.errors import EXIT_CONFIG, EXIT_OK, EXIT_TASK_TEST, ConfigErrors
from verifier.grading import check_eval, check_reward_keys
from verifier.parsers import RewardKeys, RewardKeysKind
from verifier.task import InitRequest, init_task
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


@attrs.frozen
class InitArgs:
    """What `verifier task init` was given (verifier.cli.options)."""

    dest: Path
    config: Path
    image: str
    agent_image: str | None
    environment: Path | None
    name: str | None
    workdir: str
    instruction: Path | None
    task_input: Path | None
    from_dataset: bool
    case_ids: tuple[str, ...] | None
    protect: tuple[str, ...] | None
    verifier_network: str
    min_reward: float | None
    reward_keys: RewardKeys
    force: bool


@attrs.frozen
class ImportArgs:
    """What `verifier task import` was given (verifier.cli.options)."""

    source: Path
    dest: Path
    image: str
    verifier_network: str
    force: bool
    hardened_runner: bool


@attrs.frozen
class TestArgs:
    """What `verifier task test` was given (verifier.cli.options)."""

    __test__ = False  # not a test class, whatever pytest makes of its name

    dest: Path
    engine: str | None
    expect: float
    build_network: str | None


def init_request(args: InitArgs) -> InitRequest:
    """The package's request: the flags, and the [verifier] env --reward-keys sets."""
    return InitRequest(
        dest=args.dest,
        config=args.config,
        image=args.image,
        agent_image=args.agent_image,
        name=args.name,
        workdir=args.workdir,
        instruction=args.instruction,
        task_input=args.task_input,
        environment=args.environment,
        protect=args.protect or (),
        case_ids=args.case_ids,
        verifier_env=verifier_env(args),
        verifier_network=args.verifier_network,
        min_reward=args.min_reward,
        force=args.force,
    )


def run_init(args: InitArgs) -> int:
    if args.from_dataset:
        return _init_from_dataset(args)
    created = init_task(init_request(args))
    print(f"created Harbor task {created}")
    _warn_if_invalid(args)
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


def run_import(args: ImportArgs) -> int:
    """One Harbor task into a package graded by this image, or each task of a dir."""
    arguments = ImportOptions(args.image, args.verifier_network, args.force, args.hardened_runner)
    if not (args.source / TASK_TOML).is_file() and args.source.is_dir():
        outcomes = import_many(args.source, args.dest, arguments)
        for line in summary_lines(outcomes):
            print(line)
        print(f"next: verifier task test {args.dest}/<task>, then")
        print(f"  harbor run -p {args.dest} --agent oracle -e podman --no-delete")
        return EXIT_OK if all(outcome.imported for outcome in outcomes) else EXIT_CONFIG
    imported = import_task(args.source, args.dest, arguments)
    print(f"imported Harbor task {imported.name} into {imported.dest}")
    for note in imported.notes:
        print(f"note: {note}")
    if imported.suggestion is not None:
        print(f"suggestion: {imported.suggestion}")
    print("next:")
    print(f"  verifier task test {imported.dest}")
    print(f"  harbor run -p {imported.dest} --agent oracle -e podman --no-delete")
    return EXIT_OK


def run_test(args: TestArgs) -> int:
    """Build the package's images, grade the untouched environment and the solution."""
    package = read_package(args.dest)
    engine = Engine(args.engine or default_engine(shutil.which), args.build_network)
    print(f"task test {package.name} ({package.dest}) with {engine.name}")
    try:
        untouched, solved = test_package(
            package, engine, args.expect, os.environ, lambda line: print(line, flush=True)
        )
    except PackageFailed as failure:
        print(f"task test: FAILED: {failure}", file=sys.stderr)
        for line in describe_judges(failure.judges):
            print(line, file=sys.stderr)
        return EXIT_TASK_TEST
    print(
        f"task test: ok (solution {solved.reward:.4g} = expected {args.expect:.4g}, "
        f"untouched {untouched.reward:.4g} < {solved.reward:.4g})"
    )
    return EXIT_OK


def _init_from_dataset(args: InitArgs) -> int:
    created = init_dataset_tasks(init_request(args))
    for task in created:
        print(f"created Harbor task {task}")
    print(f"wrote {args.dest / MANIFEST} ({len(created)} tasks)")
    _warn_if_invalid(args)
    print("next: write each task's solution/solve.sh (for the oracle agent), then")
    print(f"  harbor run -p {args.dest} --agent oracle -e podman --no-delete")
    return EXIT_OK


def verifier_env(args: InitArgs) -> dict[str, str]:
    """What of this command's options the package's verifier reads from `[verifier] env`
    (`--reward-keys`: its VERIFIER_REWARD_JSON; names that are no judge of eval.yaml, when
    it loads, are a UsageError before anything is written)."""
    if args.reward_keys.kind is RewardKeysKind.ALL:
        return {}
    config = check_eval(args.config).config
    if config is not None:
        check_reward_keys(config, args.reward_keys)
    return {"VERIFIER_REWARD_JSON": str(args.reward_keys)}


def _warn_if_invalid(args: InitArgs) -> None:
    """A package with a broken eval.yaml is still written (it records a verifier error
    in every trial, which is sometimes the point), but its author should know; so
    should the author of a weighted or expression reward that drops errored judges,
    and of one package for an eval with a dataset (every trial is graded as the case
    the workdir names, /app: "app", which no dataset entry matches). A model left to
    $EVAL_JUDGE_MODEL is only a warning: task.toml's [verifier] env may set it."""
    checked = check_eval(args.config)
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
            f"{args.config}: reward.on_error is drop: a judge that errors is dropped and "
            "the others renormalize, so an error can raise the reward; for RL training set "
            "reward.on_error: zero"
        )
    if config.dataset is not None and not args.from_dataset:
        warn(
            f"{args.config} has a dataset ({config.dataset.path}/): this one package grades "
            "every trial without a dataset entry; pass --from-dataset for one task per case"
        )
