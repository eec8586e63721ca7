"""The typer app behind every `verifier` command except the `grade` fast path."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from verifier import __version__
from verifier.cli import guarded
from verifier.errors import EXIT_OK

app = typer.Typer(
    name="verifier",
    help="Grade agent case directories against eval.yaml and write Harbor rewards.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
def grade(ctx: typer.Context) -> None:
    """Grade one case dir and write reward.json, reward.txt, judges.json (see grade --help)."""
    from verifier.grade_command import run_grade

    raise typer.Exit(run_grade(ctx.args))


@app.command()
def check(
    config: Annotated[Path, typer.Argument(help="the eval.yaml to validate")],
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
) -> None:
    """Validate eval.yaml without grading: judges, reward mode, warnings, every problem."""
    from verifier.check_command import run_check

    raise typer.Exit(guarded(lambda: run_check(config), debug=debug))


@app.command()
def batch(
    cases: Annotated[
        Path, typer.Option("--cases", help="a dir of case dirs, or a Harbor job dir (its trials)")
    ],
    out: Annotated[Path, typer.Option("--out", help="OUT/<case>/reward.json ..., OUT/summary.*")],
    config: Annotated[
        Path, typer.Option("--config", envvar="VERIFIER_CONFIG", help="eval.yaml")
    ] = Path("/tests/eval.yaml"),
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", min=1, help="worker processes (default: the CPU count)"),
    ] = None,
    shard: Annotated[
        str | None, typer.Option("--shard", metavar="I/N", help="grade only shard I of N")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="re-grade cases already graded with this config")
    ] = False,
    memory_mb: Annotated[
        int,
        typer.Option(
            "--memory-mb", envvar="VERIFIER_JUDGE_MEMORY_MB", help="memory cap of each judge (MB)"
        ),
    ] = 2048,
    no_llm: Annotated[
        bool, typer.Option("--no-llm", envvar="VERIFIER_NO_LLM", help="skip LLM judges")
    ] = False,
    termination_log: Annotated[
        Path | None,
        typer.Option(
            "--termination-log",
            envvar="VERIFIER_TERMINATION_LOG",
            help="also write the summary line here (/dev/termination-log in Kubernetes)",
        ),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
) -> None:
    """Grade every case under --cases in parallel workers; resumable, shardable."""
    from verifier.batch import batch_request, run_batch_command

    raise typer.Exit(
        guarded(
            lambda: run_batch_command(
                batch_request(
                    config, cases, out, jobs, shard, force, memory_mb, no_llm, termination_log
                )
            ),
            debug=debug,
        )
    )


task_app = typer.Typer(help="Harbor task packages graded by this image.", no_args_is_help=True)
app.add_typer(task_app, name="task")


@task_app.command("init")
def task_init(
    dest: Annotated[Path, typer.Argument(help="the task package dir to create")],
    config: Annotated[Path, typer.Option("--config", help="the eval.yaml that grades the task")],
    image: Annotated[
        str, typer.Option("--image", help="the verifier image tests/Dockerfile builds FROM")
    ] = "localhost/harbor-verifier:latest",
    agent_image: Annotated[
        str | None,
        typer.Option("--agent-image", help="the agent's image ([environment].docker_image)"),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="org/name [default: local/<DEST name>]")
    ] = None,
    workdir: Annotated[
        str, typer.Option("--workdir", help="the agent's work dir: artifacts and VERIFIER_CASE")
    ] = "/app",
    instruction: Annotated[
        Path | None, typer.Option("--instruction", help="a file to use as instruction.md")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="write into a non-empty DEST")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
) -> None:
    """Render a Harbor task package whose separate verifier is this image grading eval.yaml."""
    from verifier.task import init_task

    def render() -> int:
        created = init_task(
            dest, config, image=image, agent_image=agent_image, name=name,
            workdir=workdir, instruction=instruction, force=force,
        )  # fmt: skip
        print(f"created Harbor task {created}")
        _warn_if_invalid(config)
        print(f"next: write {created / 'solution' / 'solve.sh'}, then")
        print(f"  harbor run -p {created} --agent oracle -e podman --no-delete")
        return EXIT_OK

    raise typer.Exit(guarded(render, debug=debug))


def _warn_if_invalid(config: Path) -> None:
    """A package with a broken eval.yaml is still written (it records a verifier error
    in every trial, which is sometimes the point), but its author should know."""
    from verifier.config import load_config
    from verifier.errors import ConfigError

    try:
        load_config(config)
    except ConfigError as error:
        print(
            f"warning: {error.message}; every trial of this task will record a verifier error",
            file=sys.stderr,
        )


@app.command()
def version() -> None:
    """Print the verifier's version."""
    print(__version__)
    raise typer.Exit(EXIT_OK)
