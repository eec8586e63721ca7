"""`task init --environment DIR`: one environment for the agent and for the verifier.

DIR is a task's environment as Harbor's environment/ holds it: a Dockerfile and its
build context. The package gets it twice:

- DEST/environment/: DIR as it is; Harbor builds the agent's image from it.
- DEST/tests/environment/: the same files (the Dockerfile aside), because Harbor
  builds the verifier's image with tests/ as the context and nothing else. The
  package's tests/Dockerfile is DIR's Dockerfile with every read of the context moved
  under environment/ (verifier.task.dockerfile), and its .dockerignore likewise.

On top of the environment, tests/Dockerfile adds the verifier: it empties the agent's
work dir (the case is then exactly what Harbor collects from the agent, never merged
with the environment's own files: a file the agent deleted stays deleted), copies
/opt/verifier from the verifier image (a self-contained layer with its own Python:
the environment may have another Python or none), and puts eval.yaml and what it
references in /tests, readable by root and group 0 only. Command judges then run
with the environment's toolchain (its PATH, interpreter, test runner, the project's
dependencies), and the grader stays apart from it.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import attrs

from verifier.errors import UsageError
from verifier.task.dockerfile import (
    Dockerfile,
    IgnoreRules,
    final_workdir,
    image_paths,
    parse_dockerfile,
    parse_dockerignore,
    relocate,
)
from verifier.task.tests_dir import TESTS_SIZE_WARNING, TestsFile, copyable_files

DOCKERFILE = "Dockerfile"
DOCKERIGNORE = ".dockerignore"
CONTEXT_IN_TESTS = "environment"  # tests/environment/: DIR's context for the verifier's build
# Version control is not part of a task: Harbor's packaging and lint skip it too.
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".bzr"})


@attrs.frozen
class Environment:
    root: Path  # DIR
    dockerfile: Dockerfile
    dockerfile_text: str  # as written: environment/Dockerfile
    files: tuple[TestsFile, ...]  # every file of DIR but the Dockerfile, relative to DIR
    ignore: IgnoreRules  # DIR's .dockerignore (none: nothing ignored)
    warnings: tuple[str, ...]

    @property
    def workdir(self) -> str:
        return final_workdir(self.dockerfile)


def read_environment(
    directory: Path, dockerfile: Path | None = None, flag: str = "--environment"
) -> Environment:
    """DIR's Dockerfile and files; UsageError (naming `flag`) when DIR is no
    environment: missing, no Dockerfile, or a Dockerfile without FROM. `dockerfile`:
    where the Dockerfile is when it is not DIR/Dockerfile (a compose file's `build:`
    may name another, or a context above it)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UsageError(f"{flag} {directory}: not a directory")
    dockerfile_path = directory / DOCKERFILE if dockerfile is None else Path(dockerfile)
    if not dockerfile_path.is_file():
        other = (
            " (Harbor builds environment/Dockerfile: rename Containerfile)"
            if (dockerfile_path.parent / "Containerfile").is_file()
            else ""
        )
        raise UsageError(f"{flag} {directory}: has no {dockerfile_path.name}{other}")
    try:
        text = dockerfile_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{flag} {dockerfile_path}: cannot be read: {error}") from None
    parsed = parse_dockerfile(text, f"{flag} {dockerfile_path}")
    ignore_path = directory / DOCKERIGNORE
    ignore = (
        parse_dockerignore(ignore_path.read_text(encoding="utf-8"))
        if (ignore_path.is_file())
        else IgnoreRules(())
    )
    warnings: list[str] = []
    files = tuple(_walk(directory, warnings, dockerfile_path))
    size = sum(file.source.stat().st_size for file in files)
    if size > TESTS_SIZE_WARNING:
        warnings.append(
            f"{flag} {directory}: {size / 1024 / 1024:.0f} MiB, copied into the "
            "package twice (environment/ and tests/environment/): leave out what no build "
            "reads, or list it in its .dockerignore and remove it"
        )
    return Environment(directory, parsed, text, files, ignore, tuple(warnings))


def _walk(directory: Path, warnings: list[str], dockerfile: Path) -> list[TestsFile]:
    """DIR's files but its Dockerfile (written from its text): all of them, as the
    build context sends them, version control aside."""
    return [
        TestsFile(relative, path)
        for relative, path in copyable_files(
            directory, warnings, skipped_dirs=_SKIPPED_DIRS, skipped_files=()
        )
        if path != dockerfile or relative != PurePosixPath(DOCKERFILE)
    ]


def case_files(environment: Environment, workdir: str) -> tuple[TestsFile, ...]:
    """The files the agent starts with in its work dir, as far as the Dockerfile's
    COPY/ADD say: each as TestsFile(path relative to the work dir, file in DIR)."""
    available = [
        file.relative.as_posix()
        for file in environment.files
        if not environment.ignore.excludes(file.relative.as_posix())
    ]
    by_context = {file.relative.as_posix(): file.source for file in environment.files}
    found = []
    for image_path, context in sorted(image_paths(environment.dockerfile, available).items()):
        relative = posixpath.relpath(image_path, workdir)
        if relative.startswith("..") or relative == ".":
            continue
        found.append(TestsFile(PurePosixPath(relative), by_context[context]))
    return tuple(found)


def verifier_dockerfile(
    environment: Environment,
    image: str,
    workdir: str,
    tests_entries: Sequence[str],
    *,
    config_dir: str = "/tests",
    before_verifier: Sequence[str] = (),
    env: Sequence[str] = (),
    source_label: str = "environment/Dockerfile",
) -> str:
    """tests/Dockerfile: the environment, then the verifier on top (module docstring).
    `tests_entries`: the top-level names of tests/ that go into `config_dir` (where
    eval.yaml is: /tests, or for an imported task a dir of its own, so that the task's
    own tests can be handed to its script as /tests); `before_verifier`: instructions
    between the two (an import's build-time installs); `env`: more ENV settings;
    `source_label`: where the environment's Dockerfile comes from."""
    files = sorted(name for name in tests_entries if "/" not in name)
    dirs = sorted({name.split("/", 1)[0] for name in tests_entries if "/" in name})
    copies = [f"COPY {json.dumps([*files, f'{config_dir}/'])}"] if files else []
    copies += [f"COPY {json.dumps([name, f'{config_dir}/{name}'])}" for name in dirs]
    relocated = relocate(environment.dockerfile, CONTEXT_IN_TESTS).rstrip("\n")
    own = config_dir == "/tests"
    return "\n".join(
        [
            "# The verifier's image of this task: the task's own environment, built as the",
            "# agent's is, with harbor-verifier on top as a self-contained layer (/opt/verifier,",
            "# its own Python: whatever the environment has or lacks). Harbor builds this file",
            "# with tests/ as the context, where environment/ is a copy of the agent's build",
            "# context. Generated by `verifier task init --environment` or `verifier task",
            "# import`: see docs/harbor.md.",
            "",
            f"# --- {source_label}, reading its context from {CONTEXT_IN_TESTS}/ ---",
            relocated,
            *(["", *before_verifier] if before_verifier else []),
            "",
            "# --- the verifier ---",
            "USER root",
            f"# The case is exactly what Harbor collects from the agent's {workdir}: it starts",
            "# empty, so nothing of the environment's own copy can come back into it. The",
            "# working dir is set again: the environment's may have been inside it, and Harbor",
            "# runs every command of the trial there.",
            f"RUN rm -rf {workdir} && mkdir -p {workdir}",
            f"WORKDIR {workdir}",
            f"COPY --from={image} /opt/verifier /opt/verifier",
            *copies,
            f"# {config_dir} is root's, readable by group 0 (the grader's group) and nobody else:",
            "# a command judge run as another user cannot read the grading config.",
            "RUN set -eu; \\",
            *([] if own else [f"    mkdir -p /tests; {_root_only(config_dir)}; \\"]),
            "    cp /opt/verifier/test.sh /tests/test.sh; \\",
            f"    {_root_only('/tests')}; chmod 0750 /tests/test.sh; \\",
            *([] if own else ["    chmod 0755 /tests; \\"]),
            "    mkdir -p /logs/verifier; chown 1001:0 /logs/verifier; chmod 0775 /logs/verifier",
            f"ENV VERIFIER_CONFIG={config_dir}/eval.yaml VERIFIER_CASE={workdir} "
            "VERIFIER_OUT=/logs/verifier" + "".join(f" {setting}" for setting in env),
            "USER 1001:0",
            "# Harbor keeps this container alive with `sleep infinity`, which as PID 1 ignores",
            "# SIGTERM, and execs the grader in it: SIGKILL stops it at the end of the trial at",
            "# once, not after the engine's 10 s stop timeout.",
            "STOPSIGNAL SIGKILL",
            "ENTRYPOINT []",
            'CMD ["/tests/test.sh"]',
            "",
        ]
    )


def _root_only(directory: str) -> str:
    return f"chown -R 0:0 {directory}; chmod -R u=rwX,g=rX,o= {directory}"


def context_copy(environment: Environment) -> tuple[TestsFile, ...]:
    """tests/environment/: DIR's files for the verifier's build (its .dockerignore is
    tests/.dockerignore, relocated)."""
    return tuple(
        TestsFile(PurePosixPath(CONTEXT_IN_TESTS) / file.relative, file.source)
        for file in environment.files
        if file.relative != PurePosixPath(DOCKERIGNORE)
    )
