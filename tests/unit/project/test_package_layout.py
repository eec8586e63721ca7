"""The package's layout as a reader navigates it: by file name."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import verifier

PACKAGE = Path(verifier.__file__).parent


def test_module_file_names_are_unique_within_the_package() -> None:
    """A name a reader greps for, or sees in a traceback, points at one file."""
    places: defaultdict[str, list[str]] = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        if path.name not in {"__init__.py", "__main__.py"}:
            places[path.name].append(str(path.relative_to(PACKAGE)))
    assert places, f"no modules found under {PACKAGE}"
    assert {name: where for name, where in places.items() if len(where) > 1} == {}
