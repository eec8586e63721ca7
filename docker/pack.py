"""Packs the bundle's pure-Python modules as byte code in zip archives (docker/bundle.sh).

Source and byte code side by side would make the verifier's layer twice its size; a
zip of byte code is a fifth of it. The stdlib goes to lib/python3X.zip (lib-dynload
stays a directory: extension modules cannot be imported from a zip); every installed
distribution without extension modules goes to lib/site-packages.zip (its metadata
stays a directory). What must stay a directory does: a package with extension modules
(PyYAML's _yaml), compiled in place to byte code only, and the verifier itself, source
and byte code: it reads its templates and prompts as files, and its tracebacks
(--debug) show source lines. Byte code is hash-based and unchecked: valid whatever the
files' mtimes become. What is packed is compiled as `python -OO` would (no docstrings,
no asserts: a seventh less), which the stdlib and these libraries support; the
verifier's own code is compiled as it runs.

Usage: pack.py STDLIB_DIR STDLIB_ZIP SITE_DIR SITE_ZIP KEEP_NAME...
"""

from __future__ import annotations

import os
import py_compile
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

_UNCHECKED = py_compile.PycInvalidationMode.UNCHECKED_HASH
_OPTIMIZE = 2  # -OO
_EXTENSION_SUFFIXES = (".so",)


def pack_tree(root: Path, archive: zipfile.ZipFile, names: list[Path], scratch: Path) -> None:
    """Every file under each of `names` (relative to root) into the archive, .py as .pyc."""
    for name in names:
        top = root / name
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in files:
            relative = path.relative_to(root)
            if "__pycache__" in relative.parts or path.suffix == ".pyc":
                continue
            if path.suffix == ".py":
                compiled = scratch / "module.pyc"
                py_compile.compile(str(path), str(compiled), dfile=str(path), doraise=True,
                                   invalidation_mode=_UNCHECKED, optimize=_OPTIMIZE)  # fmt: skip
                archive.write(compiled, relative.with_suffix(".pyc").as_posix())
            else:
                archive.write(path, relative.as_posix())


def compile_in_place(top: Path) -> None:
    """Each .py under top replaced by its byte code (a sourceless module.pyc beside it)."""
    for path in sorted(top.rglob("*.py")) if top.is_dir() else [top] * (top.suffix == ".py"):
        py_compile.compile(str(path), str(path.with_suffix(".pyc")), dfile=str(path),
                           doraise=True, invalidation_mode=_UNCHECKED,
                           optimize=_OPTIMIZE)  # fmt: skip
        path.unlink()


def has_extension(path: Path) -> bool:
    return path.is_dir() and any(p.suffix in _EXTENSION_SUFFIXES for p in path.rglob("*"))


def main(stdlib: Path, stdlib_zip: Path, site: Path, site_zip: Path, keep: list[str]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        kept_in_stdlib = {"lib-dynload", site.name}
        stdlib_names = [
            Path(entry.name) for entry in os.scandir(stdlib) if entry.name not in kept_in_stdlib
        ]
        with zipfile.ZipFile(stdlib_zip, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
            pack_tree(stdlib, archive, stdlib_names, Path(scratch))
        for name in stdlib_names:
            _remove(stdlib / name)

        # Distributions' metadata (*.dist-info) stays a directory: it is small, and
        # importlib.metadata reads it there whichever way the code is stored.
        site_names = [
            Path(entry.name)
            for entry in os.scandir(site)
            if entry.name not in keep and not entry.name.endswith(".dist-info")
            and not entry.name.endswith(_EXTENSION_SUFFIXES) and not has_extension(Path(entry.path))
        ]  # fmt: skip
        with zipfile.ZipFile(site_zip, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
            pack_tree(site, archive, site_names, Path(scratch))
        for name in site_names:
            _remove(site / name)
        for entry in os.scandir(site):
            if entry.name not in keep and not entry.name.endswith(".dist-info"):
                compile_in_place(Path(entry.path))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    first, second, third, fourth, *rest = (Path(arg) for arg in sys.argv[1:])
    main(first, second, third, fourth, [str(name) for name in rest])
