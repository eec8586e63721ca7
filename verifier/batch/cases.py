"""Which cases a batch grades: the directories under --cases, or a Harbor job's trials.

A case is named by its directory, and that name is what the rest of the batch keys
on: its out dir, its summary row, its shard. `--shard I/N` picks cases by a hash of
their name, so N pods cover every case exactly once whatever order they list the
directory in.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from verifier.errors import CaseError, UsageError
from verifier.options import parse_shard

HARBOR_CONVENTION_SOURCE = "/logs/artifacts"


class Shard(NamedTuple):
    """Case `name` belongs to shard `index` of `count` by a stable hash of the name.

    A hash (not the position in a sorted listing) keeps a case in its shard when
    cases are added, so a resumed sharded run redoes nothing.
    """

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        try:
            return cls(*parse_shard(text))
        except ValueError as error:
            raise UsageError(f"--shard: {error}") from None

    def owns(self, name: str) -> bool:
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


class Case(NamedTuple):
    """One entry of --cases: `name` is its directory under --out, `case_dir` what the
    judges read; `skipped` says why it is not a case (then it is never graded)."""

    name: str
    case_dir: Path
    skipped: str | None = None


def discover_cases(cases_dir: Path, out_dir: Path | None = None) -> list[Case]:
    """Every entry under cases_dir, sorted by name: cases, and skipped entries with a reason.

    A plain directory: each subdirectory is a case (a symlink to one inside cases_dir
    too); a plain file, a dangling symlink or a symlink leaving cases_dir is a skipped
    entry, so none is silently dropped. A Harbor job directory (its config.json has
    a job_name): each trial is a case, read from the artifacts Harbor collected for it
    (see harbor_trial_case); Harbor's own files there are not entries. Names starting
    with "." and the out dir (even inside cases_dir) are never entries.
    """
    if not cases_dir.is_dir():
        raise CaseError(f"{cases_dir}: cases directory not found; pass --cases DIR")
    root = Path(os.path.realpath(cases_dir))
    skip = os.path.realpath(out_dir) if out_dir is not None else None
    trials = is_harbor_job(cases_dir)
    found = []
    for entry in sorted(os.scandir(cases_dir), key=lambda entry: entry.name):
        path = Path(entry.path)
        if entry.name.startswith(".") or os.path.realpath(path) == skip:
            continue
        reason = _not_a_case(entry, root)
        if reason == _NOT_A_DIRECTORY and trials:
            continue  # config.json, result.json, job.log: Harbor's, not trials
        case_dir = harbor_trial_case(path) if trials and reason is None else path
        found.append(Case(entry.name, case_dir, reason))
    return found


_NOT_A_DIRECTORY = "not a directory"


def _not_a_case(entry: os.DirEntry[str], root: Path) -> str | None:
    """Why a directory entry is not a case, or None when it is one."""
    try:
        if entry.is_symlink():
            if not os.path.exists(entry.path):
                return "a symlink to nothing (dangling, or a loop)"
            target = Path(os.path.realpath(entry.path))
            if not target.is_relative_to(root):
                return f"a symlink leaving --cases (to {target})"
        return None if entry.is_dir() else _NOT_A_DIRECTORY
    except OSError as error:
        return f"cannot be read ({error.strerror})"


def select_cases(cases: Sequence[Case], shard: Shard | None) -> list[Case]:
    """The entries of this shard (all of them without --shard), skipped ones included."""
    return [case for case in cases if shard is None or shard.owns(case.name)]


def is_harbor_job(directory: Path) -> bool:
    """Harbor writes config.json with a job_name at the top of every job directory."""
    try:
        document = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and "job_name" in document


def harbor_trial_case(trial: Path) -> Path:
    """The case of one Harbor trial: what the verifier container would see as its case.

    artifacts/manifest.json lists what Harbor collected; the one declared artifact
    (e.g. /app, at artifacts/app) is the case. With none but the agent's
    /logs/artifacts, that is the case; with several, the whole artifacts dir.
    """
    artifacts = trial / "artifacts"
    try:
        entries = json.loads((artifacts / "manifest.json").read_text(encoding="utf-8"))
        declared = [
            entry["destination"]
            for entry in entries
            if entry.get("type") == "directory"
            and str(entry.get("source", "")).rstrip("/") != HARBOR_CONVENTION_SOURCE
        ]
        convention = [
            entry["destination"]
            for entry in entries
            if str(entry.get("source", "")).rstrip("/") == HARBOR_CONVENTION_SOURCE
        ]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return artifacts
    chosen = declared if declared else convention
    if len(chosen) != 1:
        return artifacts
    relative = PurePosixPath(str(chosen[0]))
    if relative.is_absolute() or ".." in relative.parts:
        return artifacts
    return trial / relative
