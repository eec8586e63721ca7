"""What `task init` wrote into a package, so that `--force` never overwrites an edit.

DEST/.verifier-task-init.json records the sha256 of every file init wrote. Writing a
package again (`--force`), a file is replaced only when it is missing, already has the
new content, or still has the content init recorded; a file that differs from both
(the author edited it, or init never wrote it) is kept as it is and reported. Files
init wrote before and does not write now are removed when unchanged, kept (and
reported) when edited. Harbor reads nothing of the record: its content digest and
`harbor lint` look at task.toml, instruction.md and the package's dirs only.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path, PurePosixPath

import attrs

RECORD = ".verifier-task-init.json"
_VERSION = 1


@attrs.frozen
class Kept:
    """A file init would have written (or removed) but left alone: the author's."""

    path: PurePosixPath  # relative to the package
    why: str


class PackageWriter:
    """Writes one package's files (or dataset.toml beside packages), keeping edits."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.previous = _read_record(dest / RECORD)
        self.written: dict[str, str] = {}
        self.kept: list[Kept] = []

    def write_text(
        self, relative: str | PurePosixPath, text: str, executable: bool = False
    ) -> None:
        self.write_bytes(relative, text.encode("utf-8"), executable)

    def copy(self, relative: str | PurePosixPath, source: Path, executable: bool = False) -> None:
        self.write_bytes(relative, Path(source).read_bytes(), executable)

    def write_bytes(self, relative: str | PurePosixPath, data: bytes, executable: bool) -> None:
        """Write data at relative (modes world-readable: the verifier image reads what
        COPY puts in /tests as a non-root user), unless the file there is the author's."""
        key = PurePosixPath(relative).as_posix()
        target = self.dest / key
        digest = _sha256(data)
        current = _digest_of(target)
        if current is not None and current != digest and current != self.previous.get(key):
            why = (
                "changed since task init wrote it"
                if key in self.previous
                else ("not recorded by an earlier task init")
            )
            self.kept.append(Kept(PurePosixPath(key), why))
            if key in self.previous:
                self.written[key] = self.previous[key]  # still init's: the edit stays an edit
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        if current != digest:
            if target.is_symlink() or target.exists():
                target.unlink()
            target.write_bytes(data)
        target.chmod(0o755 if executable else 0o644)
        self.written[key] = digest

    def finish(self) -> list[Kept]:
        """Remove what init wrote before and not now (unless edited); write the record."""
        for key, digest in sorted(self.previous.items()):
            if key in self.written:
                continue
            target = self.dest / key
            current = _digest_of(target)
            if current is None:
                continue
            if current == digest:
                target.unlink()
                _remove_empty_parents(target.parent, self.dest)
            else:
                self.kept.append(Kept(PurePosixPath(key), "no longer generated, and edited"))
        record = {"version": _VERSION, "files": dict(sorted(self.written.items()))}
        temporary = self.dest / f".{RECORD}.tmp"
        temporary.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, self.dest / RECORD)
        return self.kept


def describe_kept(dest: Path, kept: list[Kept]) -> list[str]:
    """One warning line per kept file, naming it and saying how to regenerate it."""
    return [
        f"{dest / item.path}: kept as it is ({item.why}); delete it and run task init "
        "again to regenerate it"
        for item in kept
    ]


def _read_record(path: Path) -> dict[str, str]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, dict):
        return {}
    return {str(key): str(value) for key, value in files.items() if isinstance(value, str)}


def _digest_of(path: Path) -> str | None:
    if path.is_symlink():
        return "symlink"
    if not path.is_file():
        return None
    return _sha256(path.read_bytes())


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _remove_empty_parents(directory: Path, stop: Path) -> None:
    while directory != stop and directory.is_relative_to(stop):
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
