"""Harbor task packages from task-templates/: `verifier task init`.

A task package graded by this verifier in Harbor's "separate" mode:

    DEST/task.toml            artifacts = [WORKDIR], [verifier] env, [verifier.environment]
    DEST/instruction.md       the agent's prompt
    DEST/environment/         the agent's Dockerfile, or nothing when --agent-image is set
    DEST/solution/solve.sh    the reference solution (Harbor's `oracle` agent)
    DEST/tests/Dockerfile     FROM the verifier image; `COPY . /tests/`
    DEST/tests/eval.yaml      the grading config, beside a copy of its whole directory
                              (verifier.task.tests_dir)

tests/ is the verifier's side only: the agent never sees it.
"""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from pathlib import Path, PurePosixPath

import yaml

from verifier.console import warn_all
from verifier.errors import UsageError
from verifier.options import DEFAULT_IMAGE, DEFAULT_WORKDIR
from verifier.references import TASK_INPUT_FILE, referenced_files, walk_files
from verifier.task.tests_dir import TestsPlan, plan_tests_dir
from verifier.yaml_io import read_yaml

__all__ = ["init_task", "referenced_files", "render", "templates_dir"]

# Harbor's own pattern for [task].name (harbor.constants.ORG_NAME_PATTERN).
_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")
# A workdir that needs no quoting in TOML, sh or a Dockerfile.
_WORKDIR_RE = re.compile(r"^(/[A-Za-z0-9._-]+)+/?$")
_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")
# Container paths the verifier or Harbor own: the agent's work must not land there.
_RESERVED_DIRS = ("/tests", "/logs", "/solution", "/case", "/opt/verifier")


def init_task(
    dest: Path,
    config: Path,
    *,
    image: str = DEFAULT_IMAGE,
    agent_image: str | None = None,
    name: str | None = None,
    workdir: str = DEFAULT_WORKDIR,
    instruction: Path | None = None,
    task_input: Path | None = None,
    force: bool = False,
) -> Path:
    """Render the task templates into `dest` and copy eval.yaml's directory into tests/.

    The package is trusted by construction: its tests/ holds the task input judges
    see (eval.yaml's own `task_input` or input.yaml beside it, else `task_input`,
    else the instruction as `{prompt: ...}`), never the agent's.

    Returns `dest`. Raises UsageError for bad arguments or a non-empty `dest` without
    `force` (with `force`, the rendered files overwrite theirs and other files stay),
    ConfigError when eval.yaml cannot be read or references a file that is missing
    or outside its directory. Prints a warning for each file left out of tests/.
    """
    dest = Path(dest)
    config = Path(config)
    workdir = _check_workdir(workdir)
    name = name if name is not None else _default_name(dest)
    if not _NAME_RE.match(name) or ".." in name:
        raise UsageError(f"--name {name!r}: use org/name (letters, digits, '.', '_', '-')")
    for flag, value in (("--image", image), ("--agent-image", agent_image)):
        if value is not None and not _IMAGE_RE.match(value):
            raise UsageError(f"{flag} {value!r}: not an image reference")
    instruction_text = _read_instruction(instruction) if instruction is not None else None

    plan = plan_tests_dir(config, leave_out=[dest])  # every ConfigError before any write
    input_text = _task_input_text(config, plan, task_input)
    _check_dest(dest, force)

    values = {
        "name": name,
        "name_toml": _toml_str(name),
        "workdir": workdir,
        "workdir_toml": _toml_str(workdir),
        "image": image,
        "environment_toml": (
            "# The agent's image (no environment/Dockerfile).\n"
            f"docker_image = {_toml_str(agent_image)}"
            if agent_image
            else "# The agent's image is built from environment/Dockerfile."
        ),
    }
    root = templates_dir()
    dest.mkdir(parents=True, exist_ok=True)
    for template in sorted(walk_files(root)):
        rel = template.relative_to(root)
        if agent_image and rel.parts[0] == "environment":
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel == Path("instruction.md") and instruction_text is not None:
            text = instruction_text
        else:
            text = render(template.read_text(encoding="utf-8"), values)
        _write(target, text, executable=template.suffix == ".sh")
        if rel == Path("instruction.md") and input_text is None:
            input_text = yaml.safe_dump({"prompt": text}, allow_unicode=True, sort_keys=False)
    (dest / "environment").mkdir(exist_ok=True)
    stale = dest / "environment" / "Dockerfile"
    if agent_image and (stale.is_file() or stale.is_symlink()):
        stale.unlink()  # from an earlier init without --agent-image: docker_image rules now

    tests = dest / "tests"
    for file in plan.files:
        _copy_file(file.source, tests / file.relative)
    if input_text:
        _write(tests / TASK_INPUT_FILE, input_text)
    warn_all(plan.warnings)
    return dest


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


def templates_dir() -> Path:
    """The task templates: package data when installed, task-templates/ in a checkout."""
    try:
        packaged = Path(str(resources.files("verifier") / "templates"))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - zip imports
        packaged = None
    if packaged is not None and (packaged / "task.toml").is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "task-templates"
    if (checkout / "task.toml").is_file():
        return checkout
    raise FileNotFoundError("task templates not found: reinstall harbor-verifier")


def render(text: str, values: dict[str, str]) -> str:
    """Replace every {{name}}; an unknown name is a bug in the templates, not input."""

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"template placeholder {{{{{key}}}}} has no value")
        return values[key]

    return _PLACEHOLDER_RE.sub(substitute, text)


def _check_workdir(workdir: str) -> str:
    if not _WORKDIR_RE.match(workdir) or ".." in workdir.split("/"):
        raise UsageError(
            f"--workdir {workdir!r}: use an absolute path of letters, digits, '.', '_', '-'"
        )
    workdir = workdir.rstrip("/")
    for reserved in _RESERVED_DIRS:
        if (
            workdir == reserved
            or workdir.startswith(reserved + "/")
            or (reserved.startswith(workdir + "/"))
        ):
            raise UsageError(f"--workdir {workdir}: overlaps {reserved}, which the verifier uses")
    return workdir


def _default_name(dest: Path) -> str:
    short = re.sub(r"[^a-zA-Z0-9._-]+", "-", dest.resolve().name).strip(".-_") or "task"
    return f"local/{short}"


def _read_instruction(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--instruction {path}: cannot be read: {exc}") from None


def _check_dest(dest: Path, force: bool) -> None:
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{dest} exists and is not a directory")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise UsageError(f"{dest} is not empty: pass --force to overwrite the task's files")


def _write(target: Path, text: str, *, executable: bool = False) -> None:
    if target.is_symlink():
        target.unlink()
    target.write_text(text, encoding="utf-8")
    target.chmod(0o755 if executable else 0o644)


def _copy_file(source: Path, target: Path) -> None:
    # Content only, with world-readable modes: the verifier image runs as a
    # non-root user and must read what COPY puts in /tests.
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()
    shutil.copyfile(source, target)
    target.chmod(0o644)


def _toml_str(value: str) -> str:
    # A JSON string is a valid TOML basic string.
    return json.dumps(value, ensure_ascii=False)
