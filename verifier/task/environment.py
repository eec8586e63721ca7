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


def read_environment(directory: Path) -> Environment:
    """DIR's Dockerfile and files; UsageError (naming --environment) when DIR is no
    environment: missing, no Dockerfile, or a Dockerfile without FROM."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UsageError(f"--environment {directory}: not a directory")
    dockerfile_path = directory / DOCKERFILE
    if not dockerfile_path.is_file():
        other = (
            " (Harbor builds environment/Dockerfile: rename Containerfile)"
            if (directory / "Containerfile").is_file()
            else ""
        )
        raise UsageError(f"--environment {directory}: has no {DOCKERFILE}{other}")
    try:
        text = dockerfile_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"--environment {dockerfile_path}: cannot be read: {error}") from None
    dockerfile = parse_dockerfile(text, f"--environment {dockerfile_path}")
    ignore_path = directory / DOCKERIGNORE
    ignore = (
        parse_dockerignore(ignore_path.read_text(encoding="utf-8"))
        if (ignore_path.is_file())
        else IgnoreRules(())
    )
    warnings: list[str] = []
    files = tuple(_walk(directory, warnings))
    size = sum(file.source.stat().st_size for file in files)
    if size > TESTS_SIZE_WARNING:
        warnings.append(
            f"--environment {directory}: {size / 1024 / 1024:.0f} MiB, copied into the "
            "package twice (environment/ and tests/environment/): leave out what no build "
            "reads, or list it in its .dockerignore and remove it"
        )
    return Environment(directory, dockerfile, text, files, ignore, tuple(warnings))


def _walk(directory: Path, warnings: list[str]) -> list[TestsFile]:
    """DIR's files but its Dockerfile (written from its text): all of them, as the
    build context sends them, version control aside."""
    return [
        TestsFile(relative, path)
        for relative, path in copyable_files(
            directory, warnings, skipped_dirs=_SKIPPED_DIRS, skipped_files=()
        )
        if relative != PurePosixPath(DOCKERFILE)
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
    environment: Environment, image: str, workdir: str, tests_entries: Sequence[str]
) -> str:
    """tests/Dockerfile: the environment, then the verifier on top (module docstring).
    `tests_entries`: the top-level names of tests/ that go into /tests."""
    files = sorted(name for name in tests_entries if "/" not in name)
    dirs = sorted({name.split("/", 1)[0] for name in tests_entries if "/" in name})
    copies = [f"COPY {json.dumps([*files, '/tests/'])}"] if files else []
    copies += [f"COPY {json.dumps([name, f'/tests/{name}'])}" for name in dirs]
    relocated = relocate(environment.dockerfile, CONTEXT_IN_TESTS).rstrip("\n")
    return "\n".join(
        [
            "# The verifier's image of this task: the task's own environment, built as the",
            "# agent's is, with harbor-verifier on top as a self-contained layer (/opt/verifier,",
            "# its own Python: whatever the environment has or lacks). Harbor builds this file",
            "# with tests/ as the context, where environment/ is a copy of the agent's build",
            "# context. Generated by `verifier task init --environment`: see docs/harbor.md.",
            "",
            f"# --- environment/Dockerfile, reading its context from {CONTEXT_IN_TESTS}/ ---",
            relocated,
            "",
            "# --- the verifier ---",
            "USER root",
            f"# The case is exactly what Harbor collects from the agent's {workdir}: it starts",
            "# empty, so nothing of the environment's own copy can come back into it.",
            f"RUN rm -rf {workdir} && mkdir -p {workdir}",
            f"COPY --from={image} /opt/verifier /opt/verifier",
            *copies,
            "# /tests is root's, readable by group 0 (the grader's group) and nobody else: a",
            "# command judge run as another user cannot read the grading config.",
            "RUN set -eu; \\",
            "    cp /opt/verifier/test.sh /tests/test.sh; \\",
            "    chown -R 0:0 /tests; chmod -R u=rwX,g=rX,o= /tests; chmod 0750 /tests/test.sh; \\",
            "    mkdir -p /logs/verifier; chown 1001:0 /logs/verifier; chmod 0775 /logs/verifier",
            f"ENV VERIFIER_CONFIG=/tests/eval.yaml VERIFIER_CASE={workdir} "
            "VERIFIER_OUT=/logs/verifier",
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


def context_copy(environment: Environment) -> tuple[TestsFile, ...]:
    """tests/environment/: DIR's files for the verifier's build (its .dockerignore is
    tests/.dockerignore, relocated)."""
    return tuple(
        TestsFile(PurePosixPath(CONTEXT_IN_TESTS) / file.relative, file.source)
        for file in environment.files
        if file.relative != PurePosixPath(DOCKERIGNORE)
    )
