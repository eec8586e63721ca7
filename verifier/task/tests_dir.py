"""What a task package's tests/ holds: the whole directory of eval.yaml, as Harbor's own
task template does (its tests/Dockerfile is `COPY . /tests/`).

Copying the directory, not just the files eval.yaml names, is what makes a package
load: a judge module may read a data file, a prompt may include another, and no
scan of eval.yaml can know. Left out: version control and caches (nothing grading
reads), editor leftovers, the package being written when it lies inside the
directory, names that tests/ itself needs, and symlinks that are not plain files
inside the directory (each with a warning). A copy over TESTS_SIZE_WARNING bytes is
worth a warning: every verifier image of the task carries it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import attrs

from verifier.errors import ConfigError
from verifier.globs import compile_glob
from verifier.judges.builtins import builtin_reference_files
from verifier.references import referenced_files

# Directories nothing grading reads: version control, caches, virtual environments.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".ipynb_checkpoints",
        ".cache",
        ".venv",
        "node_modules",
    }
)
# Files nothing grading reads: byte code, editor leftovers, Harbor's own ignore rules
# (which would change what Harbor selects from tests/).
SKIPPED_FILES = ("*.pyc", "*.pyo", ".DS_Store", "*.swp", "*.swo", "*~", ".harborignore")
# Names in tests/ that would shadow the package's own files or the image's test.sh.
RESERVED_TEST_FILES = frozenset(
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
TESTS_SIZE_WARNING = 20 * 1024 * 1024
CONFIG_NAME = "eval.yaml"  # what the config is called in tests/, whatever its own name


@attrs.frozen
class TestsFile:
    """One file of tests/: where it goes, relative to tests/, and where it comes from."""

    relative: PurePosixPath
    source: Path


@attrs.frozen
class TestsPlan:
    files: tuple[TestsFile, ...]
    warnings: tuple[str, ...]


def plan_tests_dir(
    config: Path,
    *,
    leave_out: Iterable[Path] = (),
    extra: Iterable[TestsFile] = (),
    reserved: Iterable[str] = (),
) -> TestsPlan:
    """The files of tests/ for eval.yaml `config`: its directory (minus what the module
    docstring says, and minus the dirs in `leave_out`), eval.yaml as `eval.yaml`, and
    `extra` files. `reserved`: more top-level names the package uses itself. ConfigError
    when eval.yaml names a file that is missing, outside its directory, or one of the
    names tests/ reserves."""
    base = config.resolve().parent
    reserved_names = RESERVED_TEST_FILES | frozenset(reserved)
    referenced = referenced_files(config, builtin_reference_files)
    for relative in referenced:
        if relative.parts[0] in reserved_names:
            raise ConfigError(
                str(config),
                "",
                f"references {relative}, a name the task's tests/ dir reserves: rename it",
            )
    skipped = {path.resolve() for path in leave_out} | {config.resolve()}
    warnings: list[str] = []
    warned: set[str] = set()
    files = [TestsFile(PurePosixPath(CONFIG_NAME), config)]
    for relative, source in copyable_files(base, warnings, skipped=skipped):
        if relative.parts[0] in reserved_names:
            if relative.parts[0] not in warned:
                warned.add(relative.parts[0])
                warnings.append(
                    f"{base / relative.parts[0]}: not copied into the task's tests/ "
                    f"({relative.parts[0]} is the package's own there); rename it if a judge "
                    "needs it"
                )
            continue
        files.append(TestsFile(relative, source))
    files.extend(extra)
    size = sum(_size(file.source) for file in files)
    if size > TESTS_SIZE_WARNING:
        warnings.append(
            f"{base}: tests/ gets {size / 1024 / 1024:.0f} MiB of eval.yaml's directory, and "
            "every verifier image of the task carries it: move what grading does not read "
            "out of that directory"
        )
    return TestsPlan(tuple(files), tuple(warnings))


def copyable_files(
    base: Path,
    warnings: list[str],
    *,
    skipped_dirs: frozenset[str] = SKIPPED_DIRS,
    skipped_files: tuple[str, ...] = SKIPPED_FILES,
    skipped: frozenset[Path] | set[Path] = frozenset(),
) -> Iterable[tuple[PurePosixPath, Path]]:
    """(relative path, source) of every file under base to copy into a package, sorted:
    not under a dir named in skipped_dirs or in `skipped`, not named like
    skipped_files; symlinks only to files inside base (a warning for each other)."""
    for current, dirnames, filenames in os.walk(base):
        here = Path(current)
        kept = []
        for name in sorted(dirnames):
            path = here / name
            if name in skipped_dirs or path.resolve() in skipped:
                continue
            if path.is_symlink():
                warnings.append(f"{path}: a symlink to a directory, not copied (copy it in)")
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            path = here / name
            if any(compile_glob(pattern).matches(name) for pattern in skipped_files):
                continue
            if path.resolve() in skipped:
                continue
            if path.is_symlink() and not _plain_file_inside(path, base):
                warnings.append(f"{path}: a symlink that is not a file inside {base}, not copied")
                continue
            if not path.is_file():
                warnings.append(f"{path}: not a regular file, not copied")
                continue
            yield PurePosixPath(path.relative_to(base).as_posix()), path


def _plain_file_inside(path: Path, base: Path) -> bool:
    target = path.resolve()
    return target.is_file() and target.is_relative_to(base)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
