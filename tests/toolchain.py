"""A task toolchain for tests: a python other users can run, with the packages a test needs.

Run as root, a command judge's command runs as UID 65534, and a non-root grader as yet
another UID; neither can read an interpreter or a venv under /root (pyenv's python, a
checkout's .venv there). `portable_python` makes a venv of the system's python of the
same minor version in a world-readable dir, holding copies of the given import packages
and of their distributions' metadata (pytest reads its dependencies' versions from it),
the way a task image has pytest installed. Shared by the unit tests of the test runners.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

# pytest as a task image has it: pytest, its dependencies and nothing else.
PYTEST_PACKAGES = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "pygments")
# What the verifier itself imports, for a grader that is not root.
VERIFIER_PACKAGES = (
    "verifier",
    "yaml",
    "_yaml",
    "jinja2",
    "markupsafe",
    "attr",
    "attrs",
)


def world_dir(prefix: str) -> Path:
    """A fresh dir under /tmp that every user can enter and read (pytest's tmp dirs are
    private); the caller removes it."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


@contextlib.contextmanager
def world_readable_dir(prefix: str) -> Iterator[Path]:
    """A world_dir, removed afterwards."""
    root = world_dir(prefix)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def toolchain_python(packages: Sequence[str]) -> Iterator[Path]:
    """portable_python with `packages`, in a dir of its own for as long as it is used."""
    with world_readable_dir("verifier-toolchain-") as root:
        yield portable_python(root, packages)


def portable_python(root: Path, packages: Sequence[str]) -> Path:
    """The python of a venv made under root (which must be world-readable) with copies
    of `packages` (import names; those not installed here are left out)."""
    base = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not os.access(base, os.X_OK):
        base = Path(sys.executable).resolve()
    venv = root / "venv"
    subprocess.run(
        [str(base), "-m", "venv", "--without-pip", str(venv)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = venv / "lib" / version / "site-packages"
    owners = importlib.metadata.packages_distributions()
    for name in copy_packages(packages, site):
        for owner in owners.get(name, ()):
            _copy_metadata(owner, site)
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return venv / "bin" / "python"


def copy_packages(packages: Sequence[str], site: Path) -> list[str]:
    """Copies in site of the import packages (or modules) `packages` as this process
    imports them; returns those copied (the ones not installed here are left out)."""
    copied = []
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        if origin.name == "__init__.py":
            shutil.copytree(
                origin.parent, site / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy(origin, site / origin.name)
        copied.append(name)
    return copied


def _copy_metadata(distribution: str, site: Path) -> None:
    """The distribution's .dist-info dir, beside the copied packages."""
    found = importlib.metadata.distribution(distribution)
    source = getattr(found, "_path", None)
    if isinstance(source, Path) and source.is_dir() and not (site / source.name).exists():
        shutil.copytree(source, site / source.name)
