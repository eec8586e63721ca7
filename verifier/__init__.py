"""Grades an agent's case directory against eval.yaml and writes a Harbor reward.

Importing the package first drops the working directory from the import path, before
anything else is imported: `python -m verifier` puts the current directory first on
sys.path, and grading often runs with the agent's work dir as the current directory,
where a planted `typing.py` or `urllib/` would otherwise run as soon as the first
module of ours imported it. (A planted `verifier/` itself is found before this file
runs: `python -I -m verifier`, or the `verifier` command, leaves the cwd out.)
"""

import os as _os
import sys as _sys

__version__ = "0.1.0"


def _drop_working_dir() -> None:
    """Remove every spelling of the current directory from sys.path ("" and "." are
    resolved at each import, and the cwd itself is what `python -m` inserts)."""
    try:
        cwd = _os.path.realpath(_os.getcwd())
    except OSError:  # a deleted cwd: only its relative spellings can name it
        cwd = None
    kept = []
    for entry in _sys.path:
        if entry in ("", "."):
            continue
        if cwd is not None and (entry == cwd or _os.path.realpath(entry) == cwd):
            continue
        kept.append(entry)
    _sys.path[:] = kept


_drop_working_dir()
