"""Harbor task packages from task-templates/: `verifier task init`.

A task package graded by this verifier in Harbor's "separate" mode:

    DEST/task.toml            artifacts = [WORKDIR], [verifier] env, [verifier.environment]
    DEST/instruction.md       the agent's prompt
    DEST/environment/         the agent's Dockerfile, or nothing when --agent-image is set
    DEST/solution/solve.sh    the reference solution (Harbor's `oracle` agent)
    DEST/tests/Dockerfile     FROM the verifier image; COPY eval.yaml and its files to /tests/
    DEST/tests/eval.yaml      the grading config, and every file it references, at the
                              same paths relative to it

Only eval.yaml and what it references go into tests/, so the agent never sees them.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections.abc import Iterator
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from verifier.config import parse_yaml
from verifier.errors import ConfigError, UsageError

DEFAULT_IMAGE = "localhost/harbor-verifier:latest"
DEFAULT_WORKDIR = "/app"

# Harbor's own pattern for [task].name (harbor.constants.ORG_NAME_PATTERN).
_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")
# A workdir that needs no quoting in TOML, sh or a Dockerfile.
_WORKDIR_RE = re.compile(r"^(/[A-Za-z0-9._-]+)+/?$")
_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")
# Container paths the verifier or Harbor own: the agent's work must not land there.
_RESERVED_DIRS = ("/tests", "/logs", "/solution", "/case", "/opt/verifier")
# Names in tests/ that would shadow the package's own files or the image's test.sh.
_RESERVED_TEST_FILES = frozenset(
    {
        "Dockerfile",
        "Containerfile",
        "docker-compose.yaml",
        ".dockerignore",
        ".containerignore",
        "test.sh",
        "test.bat",
        "eval.yaml",
    }
)
_SKIP_NAMES = frozenset({"__pycache__", ".git", ".DS_Store"})


def init_task(
    dest: Path,
    config: Path,
    *,
    image: str = DEFAULT_IMAGE,
    agent_image: str | None = None,
    name: str | None = None,
    workdir: str = DEFAULT_WORKDIR,
    instruction: Path | None = None,
    force: bool = False,
) -> Path:
    """Render the task templates into `dest` and copy eval.yaml and its files.

    Returns `dest`. Raises UsageError for bad arguments or a non-empty `dest` without
    `force` (with `force`, the rendered files overwrite theirs and other files stay),
    ConfigError when eval.yaml cannot be read or references a file that is missing
    or outside its directory.
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

    files = referenced_files(config)  # every ConfigError before anything is written
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
        "copy_lines": "\n".join(_copy_lines(files)),
    }
    root = templates_dir()
    dest.mkdir(parents=True, exist_ok=True)
    for template in sorted(_walk(root)):
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
    (dest / "environment").mkdir(exist_ok=True)
    stale = dest / "environment" / "Dockerfile"
    if agent_image and (stale.is_file() or stale.is_symlink()):
        stale.unlink()  # from an earlier init without --agent-image: docker_image rules now

    tests = dest / "tests"
    _copy_file(config, tests / "eval.yaml")
    for rel in files:
        source = config.parent / rel
        if source.is_dir():
            _copy_tree(source, tests / rel)
        else:
            _copy_file(source, tests / rel)
    return dest


def templates_dir() -> Path:
    """The task templates: package data when installed, task-templates/ in a checkout."""
    try:
        packaged = Path(str(resources.files("verifier") / "templates"))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - zip imports
        packaged = None
    if packaged is not None and (packaged / "task.toml").is_file():
        return packaged
    checkout = Path(__file__).resolve().parent.parent / "task-templates"
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


def referenced_files(config: Path) -> list[PurePosixPath]:
    """The files and package dirs eval.yaml needs, relative to its directory, sorted.

    Judge `module:` (dotted `a.b` -> `a/b.py` or the package dir `a/b/`, with the
    parent packages' `__init__.py`, plus the local modules they import), `prompt_file:`,
    `context:` files, and top-level `annotations:` when it is a path.
    """
    source = str(config)
    try:
        text = config.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, "", "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(source, "", f"cannot be read: {exc}") from None
    try:
        document = parse_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(source, "", f"not valid YAML: {exc}") from None
    if not isinstance(document, dict):
        raise ConfigError(source, "", "must be a YAML mapping")

    base = config.resolve().parent
    found: set[PurePosixPath] = set()

    annotations = document.get("annotations")
    if isinstance(annotations, str):
        found.add(_local_path(base, annotations, source, "annotations"))

    judges = document.get("judges") or []
    if not isinstance(judges, list):
        raise ConfigError(source, "judges", "must be a list")
    modules: list[PurePosixPath] = []
    for index, judge in enumerate(judges):
        if not isinstance(judge, dict):
            continue
        key = f"judges[{index}]"
        if isinstance(judge.get("name"), str):
            key = f"judges[{index}] ({judge['name']})"
        module = judge.get("module")
        if isinstance(module, str):
            modules.extend(_module_files(base, module, source, f"{key}.module"))
        prompt_file = judge.get("prompt_file")
        if isinstance(prompt_file, str):
            found.add(_local_path(base, prompt_file, source, f"{key}.prompt_file"))
        for ctx_index, ctx in enumerate(_as_list(judge.get("context"))):
            path = ctx.get("path") if isinstance(ctx, dict) else ctx
            if isinstance(path, str):
                found.add(_local_path(base, path, source, f"{key}.context[{ctx_index}]"))
    found.update(_with_local_imports(base, modules))

    if config.name == "eval.yaml":
        found.discard(PurePosixPath("eval.yaml"))  # the config itself
    for rel in found:
        if len(rel.parts) == 1 and rel.name in _RESERVED_TEST_FILES:
            raise ConfigError(
                source, "", f"references {rel}, a name the task's tests/ dir reserves: rename it"
            )
    # A package dir makes the files inside it redundant.
    dirs = {rel for rel in found if (base / rel).is_dir()}
    return sorted(r for r in found if not any(d in r.parents for d in dirs))


def _module_files(base: Path, module: str, source: str, key: str) -> list[PurePosixPath]:
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        raise ConfigError(source, key, f"{module!r} is not a dotted module name")
    found = _resolve_module(base, parts)
    rel = "/".join(parts)
    if found is None:
        raise ConfigError(source, key, f"no {rel}.py or package {rel}/ next to eval.yaml ({base})")
    if not found:
        raise ConfigError(source, key, f"{rel} leads outside eval.yaml's dir")
    return found


def _resolve_module(
    base: Path, parts: list[str], *, whole_package: bool = True
) -> list[PurePosixPath] | None:
    """`a.b.c` -> [a/b/c.py or a/b/c/, a/__init__.py, a/b/__init__.py (those present)].

    A package is its whole dir, or only its `__init__.py` unless `whole_package`.
    None when there is no such module next to eval.yaml; [] when it is a symlink
    that leads outside eval.yaml's dir.
    """
    rel = PurePosixPath(*parts)
    as_file = rel.with_name(rel.name + ".py")
    if (base / as_file).is_file():
        hit = as_file
    elif (base / rel).is_dir() and whole_package:
        hit = rel
    elif (base / rel / "__init__.py").is_file():
        hit = rel / "__init__.py"
    else:
        return None
    if not _inside(base, hit):
        return []
    out = [hit]
    for parent in list(rel.parents)[:-1]:
        init = parent / "__init__.py"
        if (base / init).is_file():
            out.append(init)
    return out


def _with_local_imports(base: Path, modules: list[PurePosixPath]) -> set[PurePosixPath]:
    """`modules` plus the modules next to eval.yaml that their code imports."""
    found: set[PurePosixPath] = set()
    queue = list(modules)
    while queue:
        rel = queue.pop()
        if rel in found:
            continue
        found.add(rel)
        for py in _python_files(base / rel):
            package = py.parent.relative_to(base).parts
            for parts in _imports(py, package):
                # An imported package brings its __init__.py, whose imports are
                # followed in turn; only a judge's own `module:` brings a whole dir.
                resolved = _resolve_module(base, parts, whole_package=False)
                queue.extend(resolved or [])
    return found


def _python_files(path: Path) -> Iterator[Path]:
    if path.is_file():
        if path.suffix == ".py":
            yield path
        return
    for child in _walk(path):
        if child.suffix == ".py":
            yield child


def _imports(py: Path, package: tuple[str, ...]) -> Iterator[list[str]]:
    """Module names `py` imports (absolute ones, and relative ones made absolute)."""
    try:
        tree = ast.parse(py.read_bytes(), filename=str(py))
    except (SyntaxError, ValueError, OSError):
        return  # the verifier's own load reports it, with the file and line
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                head = list(package[: len(package) - (node.level - 1)])
            else:
                head = []
            mod = head + (node.module.split(".") if node.module else [])
            if mod:
                yield mod
            for alias in node.names:  # `from pkg import submodule`
                if alias.name != "*":
                    yield [*mod, alias.name]


def _local_path(base: Path, value: str, source: str, key: str) -> PurePosixPath:
    rel = PurePosixPath(value)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts or str(rel) == ".":
        raise ConfigError(source, key, f"{value!r} must be a path relative to eval.yaml's dir")
    if not (base / rel).exists():
        raise ConfigError(source, key, f"{value!r}: no such file next to eval.yaml ({base})")
    if not _inside(base, rel):
        raise ConfigError(source, key, f"{value!r} leads outside eval.yaml's dir")
    return rel


def _inside(base: Path, rel: PurePosixPath) -> bool:
    return (base / rel).resolve().is_relative_to(base)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _copy_lines(files: list[PurePosixPath]) -> Iterator[str]:
    yield 'COPY ["eval.yaml", "/tests/eval.yaml"]'
    for rel in files:
        yield f"COPY {json.dumps([str(rel), f'/tests/{rel}'])}"


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


def _walk(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if _SKIP_NAMES & set(path.relative_to(root).parts) or path.suffix == ".pyc":
            continue
        if path.is_file():
            yield path


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


def _copy_tree(source: Path, target: Path) -> None:
    for path in _walk(source):
        _copy_file(path, target / path.relative_to(source))


def _toml_str(value: str) -> str:
    # A JSON string is a valid TOML basic string.
    return json.dumps(value, ensure_ascii=False)
