"""The case directory -> the record a judge receives as `outputs`.

The case is untrusted agent output: it is only ever read, never imported or
executed here, symlinks that leave it are not followed, and size caps keep one
oversized or adversarial file from exhausting the grader.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from verifier.errors import CaseError
from verifier.yaml_io import YAMLError, parse_yaml

_BINARY_SNIFF_BYTES = 8192


class CaseLimits(NamedTuple):
    """How much of a case is read: one oversized or adversarial case must not exhaust
    the grader, and what is left out is named in a case warning."""

    max_file_bytes: int = 2 * 1024 * 1024
    max_total_bytes: int = 64 * 1024 * 1024
    max_files: int = 10_000


DEFAULT_LIMITS = CaseLimits()


class CaseReading(NamedTuple):
    """The record judges receive as `outputs`, and what reading the case had to say."""

    record: dict[str, Any]
    warnings: tuple[str, ...]


def check_case_dir(case_dir: Path) -> Path:
    """The resolved case dir, or CaseError (exit 3) when there is nothing to grade."""
    if not case_dir.exists():
        raise CaseError(f"{case_dir}: case directory not found; pass --case or set VERIFIER_CASE")
    if not case_dir.is_dir():
        raise CaseError(f"{case_dir}: is not a directory; --case must name the agent's work dir")
    try:
        has_entries = any(os.scandir(case_dir))
    except OSError as error:
        raise CaseError(f"{case_dir}: case directory cannot be read: {error.strerror}") from None
    if not has_entries:
        raise CaseError(
            f"{case_dir}: case directory is empty; the agent's files were not delivered "
            "(check the mount or Harbor's artifacts setting)"
        )
    return case_dir.resolve()


def resolve_inside(case_dir: Path, relative: str) -> Path | None:
    """The real path of case_dir/relative, or None when it leaves the case dir."""
    candidate = (case_dir / relative).resolve()
    return candidate if candidate.is_relative_to(case_dir) else None


def read_case(
    case_dir: Path,
    outputs: Sequence[str],
    annotations: Mapping[str, Any],
    limits: CaseLimits = DEFAULT_LIMITS,
) -> CaseReading:
    """Build the record for a checked, resolved case dir (see check_case_dir)."""
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
    record.update(
        files=reader.files,
        case_dir=str(case_dir),
        annotations=annotations,
        stdout=reader.read_text("stdout.log"),
        inputs=reader.read_yaml("input.yaml"),
    )
    return CaseReading(record=record, warnings=tuple(reader.warnings))


class _Reader:
    """Reads files under one case dir, enforcing the caps across all reads."""

    def __init__(self, case_dir: Path, limits: CaseLimits) -> None:
        self.case_dir = case_dir
        self.limits = limits
        self.files: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.total_bytes = 0

    def read_tree(self, relative: str) -> dict[str, Any]:
        """Every regular file under relative (a file or a dir), keyed by case-relative path."""
        found: dict[str, Any] = {}
        for path in self._walk(relative):
            key = path.relative_to(self.case_dir).as_posix()
            if key not in self.files:
                if len(self.files) >= self.limits.max_files:
                    self.warnings.append(
                        f"more than {self.limits.max_files} files; the rest are left out"
                    )
                    break
                content = self._load(path, key)
                if content is None:
                    continue
                self.files[key] = content
            found[key] = self.files[key]
        return found

    def read_text(self, relative: str) -> str | None:
        path = resolve_inside(self.case_dir, relative)
        if path is None or not path.is_file():
            return None
        content = self._load(path, relative)
        return content if isinstance(content, str) else None

    def read_yaml(self, relative: str) -> Any:
        text = self.read_text(relative)
        if text is None:
            return None
        try:
            return parse_yaml(text)
        except YAMLError:
            self.warnings.append(f"{relative}: not valid YAML; inputs is null")
            return None

    def _walk(self, relative: str) -> Iterator[Path]:
        root = resolve_inside(self.case_dir, relative)
        if root is None:
            self.warnings.append(f"{relative}: leaves the case dir; not followed")
            return
        if root.is_file():
            yield root
            return
        for directory, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            for filename in sorted(filenames):
                path = Path(directory, filename)
                real = path.resolve()
                if not real.is_relative_to(self.case_dir):
                    key = path.relative_to(self.case_dir)
                    self.warnings.append(f"{key}: symlink leaves the case dir; not followed")
                elif real.is_file():
                    yield path

    def _load(self, path: Path, key: str) -> Any:
        try:
            size = path.stat().st_size
            if size > self.limits.max_file_bytes:
                self.warnings.append(
                    f"{key}: {size} bytes is over the {self.limits.max_file_bytes}-byte cap; "
                    "left out"
                )
                return None
            if self.total_bytes + size > self.limits.max_total_bytes:
                self.warnings.append(
                    f"{key}: the case is over {self.limits.max_total_bytes} bytes; left out"
                )
                return None
            data = path.read_bytes()
        except OSError as error:
            self.warnings.append(f"{key}: cannot be read ({error.strerror}); left out")
            return None
        self.total_bytes += len(data)
        if b"\0" not in data[:_BINARY_SNIFF_BYTES]:
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                pass
        return {"_binary": True, "path": key, "name": path.name}
