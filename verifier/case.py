"""The case directory -> the record a judge receives as `outputs`, and safe reads of its files.

The case is untrusted agent output: it is only ever read, never imported or
executed here, and nothing in it may make grading fail. Every oddity the agent
can leave is a fact about the case, never an exception: a symlink that leaves
the case or loops, a dangling link, a FIFO or device, a file or dir that cannot
be read, absurd depth or width, a huge or binary file, a YAML alias bomb. Each
becomes a case warning and the entry is left out of the record; a builtin that
asks for such a file gets the fact back and fails with it as its rationale. So
what the agent leaves can only lower its reward. A binary file (a NUL byte in its
first 8 KiB) or one that is not valid UTF-8 is a marker in the record, `{"_binary":
true, "path", "name"}` (the eval.yaml contract); a check that reads it as text raises
over the case's data, which makes the check false, never an error.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from verifier.casefiles import kind_of, read_case_file, resolve_inside
from verifier.config import TaskInput
from verifier.errors import CaseError
from verifier.trajectory import FROM_AGENT_LOGS, agent_tool_calls, read_trail
from verifier.yaml_io import parse_untrusted_yaml

_BINARY_SNIFF_BYTES = 8192


@attrs.frozen
class CaseLimits:
    """How much of a case is read, so that one oversized or adversarial case cannot
    exhaust the grader; what is left out is named in a case warning."""

    max_file_bytes: int = 2 * 1024 * 1024
    max_total_bytes: int = 64 * 1024 * 1024
    max_files: int = 10_000
    max_entries: int = 200_000  # directory entries looked at, files or not
    max_depth: int = 64
    max_yaml_bytes: int = 1024 * 1024
    # A parsed YAML document with its aliases expanded: values plus characters of text.
    max_yaml_expansion: int = 4 * 1024 * 1024


DEFAULT_LIMITS = CaseLimits()


CASE_INPUT_SOURCE = "input.yaml in the case (agent-supplied)"


@attrs.frozen
class CaseReading:
    """The record judges receive as `outputs`, and what reading the case had to say."""

    record: dict[str, Any]
    warnings: tuple[str, ...]
    task_input: TaskInput


def check_case_dir(case_dir: Path) -> Path:
    """The real path of the case dir, or CaseError (exit 3) when there is none to grade.

    An empty dir is a case like any other (an agent that did nothing gets the
    reward its judges give nothing); only a missing, unreadable or non-directory
    case is an error.
    """
    real = Path(os.path.realpath(case_dir))
    try:
        mode = os.stat(real).st_mode
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            raise CaseError(
                f"{case_dir}: case directory not found; pass --case or set VERIFIER_CASE"
            ) from None
        raise CaseError(f"{case_dir}: case directory cannot be read: {error.strerror}") from None
    if not stat.S_ISDIR(mode):
        raise CaseError(f"{case_dir}: is not a directory; --case must name the agent's work dir")
    try:
        with os.scandir(real) as entries:
            next(entries, None)
    except OSError as error:
        raise CaseError(f"{case_dir}: case directory cannot be read: {error.strerror}") from None
    return real


def read_case(  # noqa: PLR0913 (each a distinct input of the case's reading, by keyword)
    case_dir: Path,
    outputs: Sequence[str],
    annotations: Mapping[str, Any],
    *,
    task_input: TaskInput | None = None,
    limits: CaseLimits = DEFAULT_LIMITS,
    tool_outputs: Sequence[str] = (),
    annotation_contents: Mapping[str, Any] | None = None,
    agent_logs: Path | None = None,
    trajectory_from: str = FROM_AGENT_LOGS,
) -> CaseReading:
    """Build the record for a checked, real case dir (see check_case_dir).

    `task_input` is the trusted task input (from the task author's side); without
    one, the case's own input.yaml is used, marked as agent-supplied.
    `annotation_contents` are the dataset entry's `annotation_<key>_content` keys.
    `agent_logs` is Harbor's agent logs dir (/logs/agent); `trajectory_from`
    (eval.yaml's `trajectory:`) says whether the agent's trajectory is read from
    there (the default) or from the case (verifier.trajectory.read_trail).
    """
    reader = _Reader(case_dir, limits)
    record: dict[str, Any] = {}
    for output in outputs or (".",):
        files = reader.read_tree(output)
        if output == ".":
            continue
        name = Path(output).name
        first = min(files, default=None)
        record[f"{name}_content"] = files[first] if first is not None else None
        record[f"{name}_file"] = str(case_dir / first) if first is not None else None
    if task_input is None or task_input.source is None:
        found = reader.read_yaml("input.yaml")
        task_input = TaskInput(found, CASE_INPUT_SOURCE if found is not None else None, False)
    if _is_empty(case_dir):
        reader.warnings.append("the case dir is empty: the agent left nothing")
    trail = read_trail(case_dir, agent_logs, trajectory_from)
    if trail.unusable:
        reader.warnings.append(str(trail.problem))
    trajectory = trail.trajectory
    record.update(
        files=reader.files,
        case_dir=str(case_dir),
        annotations=annotations,
        stdout=reader.read_text("stdout.log"),
        inputs=task_input.value,
        inputs_trusted=task_input.trusted,
        trajectory=trajectory.to_json() if trajectory else None,
        trajectory_problem=trail.problem,
        tool_calls=agent_tool_calls(trajectory, tool_outputs),
        cost_usd=trajectory.cost_usd if trajectory else None,
        num_turns=trajectory.num_turns if trajectory else None,
    )
    record.update(annotation_contents or {})
    return CaseReading(record=record, warnings=tuple(reader.warnings), task_input=task_input)


class _Reader:
    """Reads files under one case dir, enforcing the caps across all reads."""

    def __init__(self, case_dir: Path, limits: CaseLimits) -> None:
        self.case_dir = case_dir
        self.limits = limits
        self.files: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.total_bytes = 0
        self.entries_seen = 0  # directory entries looked at (max_entries)
        self.stopped = False

    def read_tree(self, relative: str) -> dict[str, Any]:
        """Every regular file under relative (a file or a dir), keyed by case-relative path."""
        found: dict[str, Any] = {}
        for key in self._walk(relative):
            if key not in self.files:
                if len(self.files) >= self.limits.max_files:
                    self._stop(f"more than {self.limits.max_files} files; the rest are left out")
                    break
                content = self._load(key)
                if content is None:
                    continue
                self.files[key] = content
            found[key] = self.files[key]
        return found

    def read_text(self, relative: str) -> str | None:
        found = read_case_file(self.case_dir, relative, self.limits.max_file_bytes)
        return _decoded(found.data) if found.data is not None else None

    def read_yaml(self, relative: str) -> Any:
        found = read_case_file(self.case_dir, relative, self.limits.max_yaml_bytes)
        if found.data is None:
            if found.problem != "does not exist":
                self.warnings.append(f"{relative}: {found.problem}; inputs is null")
            return None
        document, problem = parse_untrusted_yaml(found.data, self.limits.max_yaml_expansion)
        if problem is not None:
            self.warnings.append(f"{relative}: {problem}; inputs is null")
        return document

    def _walk(self, relative: str) -> Iterator[str]:
        """Case-relative keys of the regular files under relative, depth first, by name."""
        root, problem = resolve_inside(self.case_dir, relative)
        if root is None:
            self.warnings.append(f"{relative}: {problem}; not followed")
            return
        try:
            mode = os.stat(root).st_mode
        except OSError:
            return  # a declared output the agent did not write
        if stat.S_ISREG(mode):
            yield _key(self.case_dir, root)
            return
        if not stat.S_ISDIR(mode):
            self.warnings.append(f"{relative}: is not a regular file ({kind_of(mode)}); left out")
            return
        stack = [(root, 0)]
        while stack and not self.stopped:
            directory, depth = stack.pop()
            subdirs = []
            for entry in self._entries(directory):
                key = _key(self.case_dir, Path(entry.path))
                kind = self._kind(entry, key)
                if kind == "file":
                    yield key
                elif kind == "dir" and depth + 1 >= self.limits.max_depth:
                    self.warnings.append(
                        f"{key}: deeper than {self.limits.max_depth} levels; left out"
                    )
                elif kind == "dir":
                    subdirs.append(Path(entry.path))
            stack.extend((path, depth + 1) for path in reversed(subdirs))

    def _entries(self, directory: Path) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as listing:
                entries = []
                for entry in listing:
                    self.entries_seen += 1
                    if self.entries_seen > self.limits.max_entries:
                        self._stop(
                            f"more than {self.limits.max_entries} entries; the rest are left out"
                        )
                        break
                    entries.append(entry)
        except OSError as error:
            key = _key(self.case_dir, directory)
            self.warnings.append(f"{key}: cannot be read ({error.strerror}); left out")
            return []
        return sorted(entries, key=lambda entry: entry.name)

    def _kind(self, entry: os.DirEntry[str], key: str) -> str:
        """'file', 'dir' or '' (left out, with a warning saying why)."""
        try:
            if entry.is_symlink():
                target, problem = resolve_inside(self.case_dir, key)
                if target is None:
                    self.warnings.append(f"{key}: symlink {problem}; not followed")
                    return ""
                if os.path.isdir(target):
                    self.warnings.append(f"{key}: symlink to a directory; not followed")
                    return ""
                return "file"  # read_case_file reports loops and dangling links
            if entry.is_dir(follow_symlinks=False):
                return "dir"
            if entry.is_file(follow_symlinks=False):
                return "file"
            mode = entry.stat(follow_symlinks=False).st_mode
            self.warnings.append(f"{key}: is not a regular file ({kind_of(mode)}); left out")
        except OSError as error:
            self.warnings.append(f"{key}: cannot be read ({error.strerror}); left out")
        return ""

    def _load(self, key: str) -> Any:
        remaining = self.limits.max_total_bytes - self.total_bytes
        cap = min(self.limits.max_file_bytes, max(remaining, 0))
        found = read_case_file(self.case_dir, key, cap)
        if found.data is None:
            if cap < self.limits.max_file_bytes and "cap" in (found.problem or ""):
                self.warnings.append(
                    f"{key}: the case is over {self.limits.max_total_bytes} bytes; left out"
                )
            else:
                self.warnings.append(f"{key}: {found.problem}; left out")
            return None
        self.total_bytes += len(found.data)
        if b"\0" not in found.data[:_BINARY_SNIFF_BYTES]:
            try:
                return found.data.decode("utf-8")
            except UnicodeDecodeError:
                pass
        return {"_binary": True, "path": key, "name": Path(key).name}

    def _stop(self, warning: str) -> None:
        if not self.stopped:
            self.warnings.append(warning)
        self.stopped = True


def _is_empty(case_dir: Path) -> bool:
    try:
        with os.scandir(case_dir) as entries:
            return next(entries, None) is None
    except OSError:
        return False  # check_case_dir read it; a later failure is not emptiness


def _key(case_dir: Path, path: Path) -> str:
    return path.relative_to(case_dir).as_posix() if path != case_dir else "."


def _decoded(data: bytes) -> str | None:
    if b"\0" in data[:_BINARY_SNIFF_BYTES]:
        return None
    return data.decode("utf-8", errors="replace")
