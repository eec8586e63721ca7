"""An existing Harbor task, read for `verifier task import`: its task.toml, where its
tests ran and with which toolchain, and what of it the import cannot carry over.

A Harbor task (Terminal-Bench style) is a dir with task.toml, instruction.md,
environment/ (a Dockerfile, a docker-compose.yaml whose `main` service is built, or
nothing when `[environment].docker_image` names the image), tests/ with test.sh, and
solution/. Its test.sh ran where Harbor put it: in the agent's own container
("shared" mode, the default), or in the image of tests/Dockerfile or
`[verifier.environment].docker_image` ("separate"). That image is the tests'
toolchain, and the package import makes builds its verifier image from the same
definition (ToolchainSource).

What cannot be imported is a UsageError naming the file, the key and the fix; what
imports but may not grade as it did (services beside the agent, paths outside the
work dir) is a note for the import's summary.
"""

from __future__ import annotations

import posixpath
import tomllib
from pathlib import Path
from typing import Any

import attrs

from verifier.errors import UsageError
from verifier.task.dockerfile import IgnoreRules, final_workdir, parse_dockerfile
from verifier.task.environment import DOCKERFILE, Environment, read_environment
from verifier.yaml_io import read_yaml

TASK_TOML = "task.toml"
INSTRUCTION = "instruction.md"
TESTS_DIR = "tests"
TEST_SCRIPT = "test.sh"
COMPOSE_FILE = "docker-compose.yaml"
MAIN_SERVICE = "main"  # Harbor's service for the agent's (and a separate verifier's) container


@attrs.frozen
class ToolchainSource:
    """The image the task's test.sh ran in, as a build: a Dockerfile with its context,
    or only an image (then the build is `FROM` it)."""

    environment: Environment  # the Dockerfile and its context (none: `FROM image` alone)
    label: str  # where it comes from, for messages: "environment/Dockerfile", ...
    docker_image: str | None = None  # the image, when there is no Dockerfile


@attrs.frozen
class HarborTask:
    root: Path
    config: dict[str, Any]  # task.toml as tomllib reads it
    name: str  # [task].name, else local/<dir name>
    toolchain: ToolchainSource
    workdir: str  # the agent's work dir: the case
    script_cwd: str  # where Harbor ran test.sh (the exec dir of its container)
    script: Path  # tests/test.sh
    separate: bool  # the task's verifier already ran in its own container
    notes: tuple[str, ...]  # what imports but needs the author's eye


def read_harbor_task(root: Path) -> HarborTask:
    """The task at `root`; UsageError when it is not one this import can carry over."""
    root = Path(root)
    path = root / TASK_TOML
    if not path.is_file():
        raise UsageError(f"{root}: no {TASK_TOML}: not a Harbor task dir")
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise UsageError(f"{path}: cannot be read: {error}") from None
    _check_importable(root, config)
    script = root / TESTS_DIR / TEST_SCRIPT
    if not script.is_file():
        raise UsageError(
            f"{root / TESTS_DIR}: no {TEST_SCRIPT}: the task has no test script to import "
            "(write tests/test.sh, or make the package with `verifier task init`)"
        )
    notes: list[str] = []
    environment = _table(config, "environment")
    verifier = _table(config, "verifier")
    separate = _is_separate(root, verifier)
    toolchain = (
        _separate_toolchain(root, verifier)
        if separate
        else _agent_toolchain(root, environment, notes)
    )
    workdir = _workdir(config, toolchain, path)
    script_cwd = (_table(verifier, "environment") if separate else environment).get("workdir")
    if not (isinstance(script_cwd, str) and script_cwd.startswith("/")):
        built = final_workdir(toolchain.environment.dockerfile)
        script_cwd = built if built != "/" and not toolchain.docker_image else workdir
    task = _table(config, "task")
    name = task.get("name") if isinstance(task.get("name"), str) else None
    return HarborTask(
        root=root,
        config=config,
        name=name or f"local/{root.resolve().name}",
        toolchain=toolchain,
        workdir=workdir,
        script_cwd=posixpath.normpath(script_cwd),
        script=script,
        separate=separate,
        notes=tuple(notes),
    )


def _check_importable(root: Path, config: dict[str, Any]) -> None:
    where = root / TASK_TOML
    if config.get("steps"):
        raise UsageError(
            f"{where}: [[steps]]: a multi-step task is not imported (each step's tests/ "
            "would need its own judge): import each step as a task of its own"
        )
    environment = _table(config, "environment")
    if str(environment.get("os", "linux")).lower() != "linux":
        raise UsageError(f"{where}: [environment] os = {environment['os']!r}: only linux")
    if _table(config, "metadata").get("verifier") == "harbor-verifier":
        raise UsageError(
            f"{where}: [metadata] verifier = 'harbor-verifier': already graded by this image"
        )
    if (root / TESTS_DIR / "test.bat").is_file() and not (root / TESTS_DIR / TEST_SCRIPT).is_file():
        raise UsageError(f"{root / TESTS_DIR}: test.bat: only tests/test.sh (linux) is imported")


def _is_separate(root: Path, verifier: dict[str, Any]) -> bool:
    mode = verifier.get("environment_mode")
    if mode == "shared":
        return False
    return (
        mode == "separate"
        or isinstance(verifier.get("environment"), dict)
        or (root / TESTS_DIR / DOCKERFILE).is_file()
        or (root / TESTS_DIR / COMPOSE_FILE).is_file()
    )


def _separate_toolchain(root: Path, verifier: dict[str, Any]) -> ToolchainSource:
    """A separate verifier's image, as Harbor resolves it (models/task/verifier_mode.py):
    [verifier.environment].docker_image, else tests/Dockerfile built with tests/."""
    image = _table(verifier, "environment").get("docker_image")
    if isinstance(image, str) and image:
        return _image_only(root, image, "[verifier.environment] docker_image")
    tests = root / TESTS_DIR
    if (tests / DOCKERFILE).is_file():
        return ToolchainSource(
            read_environment(tests, flag="tests/Dockerfile"), f"{TESTS_DIR}/{DOCKERFILE}"
        )
    if (tests / COMPOSE_FILE).is_file():
        return _compose_toolchain(root, tests, f"{TESTS_DIR}/{COMPOSE_FILE}", [])
    # environment_mode = "separate" alone: a copy of [environment], i.e. the agent's image.
    return _agent_toolchain(root, {}, [])


def _agent_toolchain(root: Path, environment: dict[str, Any], notes: list[str]) -> ToolchainSource:
    """The agent's image (shared mode): environment/Dockerfile, the `main` service of
    environment/docker-compose.yaml, or [environment].docker_image."""
    directory = root / "environment"
    image = environment.get("docker_image")
    if (directory / COMPOSE_FILE).is_file():
        return _compose_toolchain(root, directory, f"environment/{COMPOSE_FILE}", notes)
    if (directory / DOCKERFILE).is_file():
        return ToolchainSource(
            read_environment(directory, flag="environment/Dockerfile"), f"environment/{DOCKERFILE}"
        )
    if isinstance(image, str) and image:
        return _image_only(root, image, "[environment] docker_image")
    raise UsageError(
        f"{directory}: no {DOCKERFILE} or {COMPOSE_FILE}, and task.toml sets no [environment] "
        "docker_image: the task has no environment to build its verifier from"
    )


def _compose_toolchain(
    root: Path, directory: Path, label: str, notes: list[str]
) -> ToolchainSource:
    """The `main` service of a compose file: its build (context and dockerfile, relative
    to the compose file's dir, so `context: ..` is the task's root), or its image."""
    path = directory / COMPOSE_FILE
    document = read_yaml(path)
    services = document.get("services") if isinstance(document, dict) else None
    main = services.get(MAIN_SERVICE) if isinstance(services, dict) else None
    if not isinstance(main, dict):
        main = {}
    others = sorted(name for name in (services or {}) if name != MAIN_SERVICE)
    if others:
        notes.append(
            f"{label}: the services {', '.join(others)} run beside the agent; the verifier's "
            "container has none of them: tests that reach one fail"
        )
    build = main.get("build")
    if build is None:
        image = main.get("image")
        if isinstance(image, str) and image:
            return _image_only(root, image, f"{label}: services.main.image")
        if (directory / DOCKERFILE).is_file():  # Harbor's base file builds DIR itself
            return ToolchainSource(read_environment(directory, flag=label), label)
        raise UsageError(f"{path}: services.main has neither build nor image, and no Dockerfile")
    if isinstance(build, str):
        build = {"context": build}
    if not isinstance(build, dict):
        raise UsageError(f"{path}: services.main.build: must be a path or a mapping")
    context_text = str(build.get("context", "."))
    if "${" in context_text or "://" in context_text:
        raise UsageError(
            f"{path}: services.main.build.context {context_text!r}: only a local dir is "
            "imported (no variables or URLs)"
        )
    context = (directory / context_text).resolve()
    if not context.is_relative_to(root.resolve()):
        raise UsageError(
            f"{path}: services.main.build.context {context_text!r} leaves the task's dir"
        )
    dockerfile = context / str(build.get("dockerfile", DOCKERFILE))
    if not dockerfile.resolve().is_relative_to(context):
        raise UsageError(f"{path}: services.main.build.dockerfile leaves its context")
    return ToolchainSource(read_environment(context, dockerfile, flag=label), label)


def _image_only(root: Path, image: str, label: str) -> ToolchainSource:
    """No Dockerfile: the verifier's build is `FROM` the image alone."""
    if any(char.isspace() for char in image) or not image.strip():
        raise UsageError(f"{root / TASK_TOML}: {label} {image!r}: not an image reference")
    text = f"FROM {image}\n"
    environment = Environment(
        root=root,
        dockerfile=parse_dockerfile(text, label),
        dockerfile_text=text,
        files=(),
        ignore=IgnoreRules(()),
        warnings=(),
    )
    return ToolchainSource(environment, label, docker_image=image)


def _workdir(config: dict[str, Any], toolchain: ToolchainSource, where: Path) -> str:
    """The agent's work dir: the task's first artifact path, else [environment].workdir,
    else the Dockerfile's final WORKDIR (the exec dir Harbor runs the agent and the
    shared test.sh in)."""
    artifacts = config.get("artifacts")
    first = artifacts[0] if isinstance(artifacts, list) and artifacts else None
    source = first.get("source") if isinstance(first, dict) else first
    workdir = _table(config, "environment").get("workdir")
    candidates = (
        (f"{where}: artifacts", source),
        (f"{where}: [environment] workdir", workdir),
        (
            toolchain.label,
            None if toolchain.docker_image else final_workdir(toolchain.environment.dockerfile),
        ),
    )
    for label, value in candidates:
        if isinstance(value, str) and value.startswith("/") and "$" not in value:
            normalized = posixpath.normpath(value)
            if normalized != "/":
                return normalized
            if label == toolchain.label:
                break
    raise UsageError(
        f"{where}: the agent's work dir is not known (no artifacts, no [environment] workdir, "
        f'no WORKDIR in {toolchain.label}): set [environment] workdir = "/app" in task.toml'
    )


def _table(document: object, key: str) -> dict[str, Any]:
    value = document.get(key) if isinstance(document, dict) else None
    return value if isinstance(value, dict) else {}
