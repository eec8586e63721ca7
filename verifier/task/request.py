"""What `verifier task init` is asked to make, one record for one package
(verifier.task.init_task) and for one per dataset case
(verifier.task.from_dataset.init_dataset_tasks), and the checks both make of it
before anything is read or written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import attrs

from verifier.config.execution import Execution
from verifier.defaults import DEFAULT_IMAGE, DEFAULT_VERIFIER_NETWORK, DEFAULT_WORKDIR
from verifier.errors import UsageError
from verifier.task.package import check_arguments


@attrs.frozen
class InitRequest:
    """One task package (or, from a dataset, one per case) and how to make it.

    `environment`: the task's environment dir (a Dockerfile and its context), for the
    agent and, with the verifier on top, for the verifier (verifier.task.environment).
    `verifier_env`: more of `[verifier] env` (the verifier's VERIFIER_* settings, such
    as `task init --reward-keys`). `protect`: globs of the agent's files copied into
    tests/protected/ for a tamper guard (verifier.task.protect). `name`: the task's
    org/name (default local/<DEST name>); from a dataset, the org (default eval.yaml's
    name). `case_ids`: from a dataset, only these cases. `verifier_network` overrides
    the network mode task.toml takes from eval.yaml; `min_reward` gates each step but
    the last of a multi-step eval (its own `min_reward` in eval.yaml first).
    """

    dest: Path
    config: Path
    image: str = DEFAULT_IMAGE
    agent_image: str | None = None
    name: str | None = None
    workdir: str = DEFAULT_WORKDIR
    instruction: Path | None = None
    task_input: Path | None = None
    environment: Path | None = None
    protect: Sequence[str] = ()
    case_ids: Sequence[str] | None = None
    verifier_env: Mapping[str, str] = MappingProxyType({})
    verifier_network: str = DEFAULT_VERIFIER_NETWORK
    min_reward: float | None = None
    force: bool = False


def check_request(request: InitRequest, *, from_dataset: bool) -> str:
    """The workdir as the package uses it, once the arguments are checked: the images,
    the workdir, and the flags that only one way of making packages takes. UsageError
    naming the flag."""
    workdir = check_arguments(request.workdir, request.image, request.agent_image)
    if not from_dataset:
        if request.case_ids is not None:
            raise UsageError(
                "--cases: only with --from-dataset (the dataset's cases to make tasks of)"
            )
        if request.environment is not None and request.agent_image is not None:
            raise UsageError("--environment and --agent-image: give the agent one environment")
        return workdir
    for flag, given in (("--instruction", request.instruction), ("--input", request.task_input)):
        if given is not None:
            raise UsageError(
                f"{flag}: --from-dataset renders each case's instruction and input from its "
                "dataset entry"
            )
    if request.environment is not None:
        raise UsageError(
            "--environment: --from-dataset gives each case its own environment/ (the case's "
            "files); use --agent-image for the image they go into"
        )
    return workdir


def check_steps(request: InitRequest, execution: Execution) -> None:
    """--min-reward gates a step: UsageError for an eval without execution.steps."""
    if request.min_reward is not None and not execution.steps:
        raise UsageError(f"--min-reward: {request.config} has no execution.steps (it gates a step)")
