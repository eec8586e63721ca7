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
from typing import Any

import attrs

from verifier.errors import CaseError, UsageError
from verifier.parsers import parse_shard
from verifier.trajectory import AGENT_LOGS_TRAJECTORY

HARBOR_CONVENTION_SOURCE = "/logs/artifacts"
AGENT_LOGS_SOURCE = "/logs/agent"


@attrs.frozen
class Shard:
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


@attrs.frozen
class Case:
    """One entry of --cases: `name` is its directory under --out, `case_dir` what the
    judges read, `case_id` its entry in eval.yaml's dataset, `step` the execution step
    it is (one step of a multi-step Harbor trial); `skipped` says why it is not a case
    (then it is never graded)."""

    name: str
    case_dir: Path
    case_id: str
    step: str | None = None
    agent_logs: Path | None = None  # where the trial's artifacts put /logs/agent
    skipped: str | None = None


def discover_cases(cases_dir: Path, out_dir: Path | None = None) -> list[Case]:
    """Every entry under cases_dir, sorted by name: cases, and skipped entries with a reason.

    A plain directory: each subdirectory is a case, its dataset id its name (a
    symlink to one inside cases_dir too); a plain file, a dangling symlink or a
    symlink leaving cases_dir is a skipped entry, so none is silently dropped. A
    Harbor job directory (its config.json has a job_name): each trial is a case, read
    from the artifacts Harbor collected for it (see harbor_trial_case), its dataset id
    the name of its task's directory (`task init --from-dataset` names each task after
    its dataset entry); each step of a multi-step trial is a case
    `<trial>/steps/<step>`, read from the artifacts collected after that step
    (steps/<step>/artifacts); Harbor's own files there are not entries. Names starting
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
        if reason is not None:
            found.append(Case(entry.name, path, entry.name, skipped=reason))
        elif trials:
            found.extend(trial_cases(path))
        else:
            found.append(Case(entry.name, path, entry.name))
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


def trial_cases(trial: Path) -> list[Case]:
    """A trial's case, or one per step of a multi-step trial."""
    task = trial_task_name(trial)
    steps = trial / "steps"
    if not steps.is_dir() or steps.is_symlink():
        return [Case(trial.name, harbor_trial_case(trial), task, None, agent_logs(trial))]
    return [
        Case(
            f"{trial.name}/steps/{step.name}",
            harbor_trial_case(step),
            task,
            step.name,
            agent_logs(step),
        )
        for step in sorted(steps.iterdir())
        if step.is_dir() and not step.is_symlink()
    ]


def trial_task_name(trial: Path) -> str:
    """The name of the task directory a trial ran (its config.json's task.path), else
    the trial's name up to Harbor's `__<suffix>`."""
    try:
        task = json.loads((trial / "config.json").read_text(encoding="utf-8"))["task"]["path"]
        return PurePosixPath(str(task)).name
    except (OSError, ValueError, TypeError, KeyError):
        return trial.name.split("__", 1)[0]


def agent_logs(trial: Path) -> Path | None:
    """Where the trial's artifacts hold Harbor's agent logs: what its verifier saw at
    /logs/agent when the task declared /logs/agent (or its trajectory.json) an artifact."""
    for entry in _manifest(trial):
        source = str(entry.get("source", "")).rstrip("/")
        destination = PurePosixPath(str(entry.get("destination", "")))
        if destination.is_absolute() or ".." in destination.parts:
            continue
        if source == AGENT_LOGS_SOURCE:
            return trial / destination
        if source == f"{AGENT_LOGS_SOURCE}/{AGENT_LOGS_TRAJECTORY}":
            return trial / destination.parent
    return None


def _manifest(trial: Path) -> list[dict[str, Any]]:
    try:
        entries = json.loads((trial / "artifacts" / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return (
        [entry for entry in entries if isinstance(entry, dict)] if isinstance(entries, list) else []
    )


def harbor_trial_case(trial: Path) -> Path:
    """The case of one Harbor trial (or one step of it, steps/<step>): what the
    verifier container would see as its case.

    artifacts/manifest.json lists what Harbor collected; the one declared artifact
    (e.g. /app, at artifacts/app; the agent's logs aside) is the case. With none but
    the agent's /logs/artifacts, that is the case; with several, the whole artifacts
    dir.
    """
    entries = _manifest(trial)
    sources = [str(entry.get("source", "")).rstrip("/") for entry in entries]
    declared = [
        entry.get("destination")
        for entry, source in zip(entries, sources, strict=True)
        if entry.get("type") == "directory"
        and source not in (HARBOR_CONVENTION_SOURCE, AGENT_LOGS_SOURCE)
    ]
    convention = [
        entry.get("destination")
        for entry, source in zip(entries, sources, strict=True)
        if source == HARBOR_CONVENTION_SOURCE
    ]
    chosen = declared or convention
    artifacts = trial / "artifacts"
    if len(chosen) != 1 or not isinstance(chosen[0], str):
        return artifacts
    relative = PurePosixPath(chosen[0])
    if relative.is_absolute() or ".." in relative.parts:
        return artifacts
    return trial / relative
