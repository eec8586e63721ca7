"""`verifier task init`: a Harbor task package graded by this image."""

from __future__ import annotations

from verifier.console import warn, warn_all
from verifier.errors import EXIT_OK, ConfigErrors
from verifier.grading import check_eval
from verifier.options import Options
from verifier.task import init_task


def run_init(options: Options) -> int:
    assert options.dest is not None
    created = init_task(
        options.dest, options.config, image=options.image, agent_image=options.agent_image,
        name=options.name, workdir=options.workdir, instruction=options.instruction,
        task_input=options.task_input, force=options.force,
    )  # fmt: skip
    print(f"created Harbor task {created}")
    _warn_if_invalid(options)
    print(f"next: write {created / 'solution' / 'solve.sh'}, then")
    print(f"  harbor run -p {created} --agent oracle -e podman --no-delete")
    return EXIT_OK


def _warn_if_invalid(options: Options) -> None:
    """A package with a broken eval.yaml is still written (it records a verifier error
    in every trial, which is sometimes the point), but its author should know; so should
    the author of a weighted or expression reward that drops errored judges. A model left
    to $EVAL_JUDGE_MODEL is only a warning: task.toml's [verifier] env may set it."""
    checked = check_eval(options.config)
    if checked.problems:
        message = ConfigErrors(checked.problems).message
        warn(f"{message}; every trial of this task will record a verifier error")
        return
    warn_all(checked.warnings)
    reward = checked.config.reward if checked.config is not None else None
    if (
        reward is not None
        and reward.mode in ("weighted", "expression")
        and reward.on_error == "drop"
    ):
        warn(
            f"{options.config}: reward.on_error is drop: a judge that errors is dropped and "
            "the others renormalize, so an error can raise the reward; for RL training set "
            "reward.on_error: zero"
        )
