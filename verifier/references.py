"""What an eval.yaml depends on: the files beside it that grading reads.

Judge `module:`s (and the local modules they import), `prompt_file:`s, `context:`
files, an LLM judge's `prices:` file, `reference` and `judge_file` (with the files that
TOML names), builtin arguments that name reference files, a top-level `annotations:`
path and the dataset, relative to eval.yaml's directory.
A Harbor task package copies them and a batch's resume key hashes them, so both
agree on what "the config" is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from verifier.errors import ConfigError
from verifier.yaml_io import read_yaml

SKIPPED_NAMES = frozenset({"__pycache__", ".git", ".DS_Store"})
TASK_INPUT_FILE = "input.yaml"  # the trusted task input beside eval.yaml
HARBOR_TESTS = PurePosixPath("/tests")  # where Harbor puts a task's tests/: eval.yaml's dir
# Record keys annotation_<key>_content hold a dataset entry's annotation files.
ANNOTATION_PREFIX = "annotation_"


# A builtin's name and its arguments -> the arguments that name files beside eval.yaml.
BuiltinFiles = Callable[[str, Mapping[str, Any]], Iterable[str]]


def referenced_files(config: Path, builtin_files: BuiltinFiles) -> list[PurePosixPath]:
    """The files and package dirs eval.yaml needs, relative to its directory, sorted.

    Judge `module:` (dotted `a.b` -> `a/b.py` or the package dir `a/b/`, with the
    parent packages' `__init__.py`, plus the local modules they import), `prompt_file:`,
    `context:` files, `prices:` when it names a file, the reference files of `builtin:`
    judges (which arguments those are, builtin_files says: the builtin registry knows),
    top-level `annotations:` and
    `task_input:` when they are paths, the trusted task input `input.yaml` beside
    eval.yaml when there is one, and the `dataset.path` dir.
    """
    source = str(config)
    document = read_yaml(config)
    if not isinstance(document, dict):
        raise ConfigError(source, "", "must be a YAML mapping")

    base = config.resolve().parent
    found: set[PurePosixPath] = set()

    for key in ("annotations", "task_input"):
        if isinstance(document.get(key), str):
            found.add(_local_path(base, document[key], source, key))
    dataset = document.get("dataset")
    if isinstance(dataset, dict) and isinstance(dataset.get("path"), str) and dataset["path"]:
        found.add(_local_path(base, dataset["path"], source, "dataset.path"))
    if (base / TASK_INPUT_FILE).is_file():
        found.add(PurePosixPath(TASK_INPUT_FILE))

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
        # An LLM judge's prices may be a file.
        for file_key in ("prompt_file", "prices", "reference", "judge_file"):
            named = judge.get(file_key)
            if isinstance(named, str):
                found.add(_local_path(base, named, source, f"{key}.{file_key}"))
        if isinstance(judge.get("judge_file"), str):
            found.update(_judge_file_paths(base, PurePosixPath(judge["judge_file"])))
        arguments = judge.get("arguments")
        if isinstance(judge.get("builtin"), str) and isinstance(arguments, dict):
            for path in builtin_files(judge["builtin"], arguments):
                found.add(_local_path(base, path, source, f"{key}.arguments"))
        for ctx_index, ctx in enumerate(_as_list(judge.get("context"))):
            ctx_path = ctx.get("path") if isinstance(ctx, dict) else ctx
            if isinstance(ctx_path, str):
                found.add(_local_path(base, ctx_path, source, f"{key}.context[{ctx_index}]"))
    found.update(_with_local_imports(base, modules))

    if config.name == "eval.yaml":
        found.discard(PurePosixPath("eval.yaml"))  # the config itself
    # A package dir makes the files inside it redundant.
    dirs = {rel for rel in found if (base / rel).is_dir()}
    return sorted(r for r in found if not any(d in r.parents for d in dirs))


def judge_file_path(value: str, toml: PurePosixPath, config_dir: Path) -> PurePosixPath | None:
    """A path a rewardkit judge TOML (at `toml` in eval.yaml's dir, config_dir) names, as
    a path in config_dir: beside the TOML when relative; an absolute one inside config_dir
    as it is, or under /tests (Harbor's tests dir, where `task init` puts eval.yaml and
    its files: where rewardkit found it) as the same path in config_dir. None: an
    absolute path elsewhere."""
    path = PurePosixPath(value)
    if not path.is_absolute():
        return toml.parent / path
    if path.is_relative_to(HARBOR_TESTS):
        return path.relative_to(HARBOR_TESTS)
    resolved, base = Path(value).resolve(), config_dir.resolve()
    return PurePosixPath(resolved.relative_to(base)) if resolved.is_relative_to(base) else None


def _judge_file_paths(base: Path, toml: PurePosixPath) -> list[PurePosixPath]:
    """What a rewardkit judge TOML names beside itself: its [judge] `reference` and
    `prompt_template` (what cannot be read is the loader's to report)."""
    import tomllib  # only here: the grading path imports this module and needs no tomllib

    try:
        judge = tomllib.loads((base / toml).read_text(encoding="utf-8")).get("judge")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    if not isinstance(judge, dict):
        return []
    found = []
    for key in ("reference", "prompt_template"):
        named = judge.get(key)
        path = judge_file_path(named, toml, base) if isinstance(named, str) else None
        if path is not None:
            found.append(_local_path(base, str(path), str(base / toml), f"judge.{key}"))
    return found


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
    for child in walk_files(path):
        if child.suffix == ".py":
            yield child


def _imports(py: Path, package: tuple[str, ...]) -> Iterator[list[str]]:
    """Module names `py` imports (absolute ones, and relative ones made absolute)."""
    import ast  # only here: the grading path imports this module and needs no ast

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
        raise ConfigError(source, key, f"{value!r}: file not found next to eval.yaml ({base})")
    if not _inside(base, rel):
        raise ConfigError(source, key, f"{value!r} leads outside eval.yaml's dir")
    return rel


def _inside(base: Path, rel: PurePosixPath) -> bool:
    return (base / rel).resolve().is_relative_to(base)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def walk_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if SKIPPED_NAMES & set(path.relative_to(root).parts) or path.suffix == ".pyc":
            continue
        if path.is_file():
            yield path
