"""The package's layout as a reader navigates it: by file name."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import verifier
from tests.paths import TESTS

PACKAGE = Path(verifier.__file__).parent


def test_module_file_names_are_unique_within_the_package() -> None:
    """A name a reader greps for, or sees in a traceback, points at one file."""
    places: defaultdict[str, list[str]] = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        if path.name not in {"__init__.py", "__main__.py"}:
            places[path.name].append(str(path.relative_to(PACKAGE)))
    assert places, f"no modules found under {PACKAGE}"
    assert {name: where for name, where in places.items() if len(where) > 1} == {}


def test_the_unit_tests_mirror_the_package() -> None:
    """tests/README.md's rule: a folder of tests/unit/ is a folder of the package (or
    project/, the repository's own tests), so a maintainer knows where a test goes."""
    units = TESTS / "unit"
    folders = {
        path.relative_to(units).as_posix()
        for path in units.rglob("*")
        if path.is_dir() and path.name != "__pycache__"
    }
    assert folders, f"no folders under {units}"
    packages = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_dir() and (path / "__init__.py").exists()
    }
    assert sorted(folders - packages - {"project"}) == []
