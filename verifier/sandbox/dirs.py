"""The dirs of one command, beneath the policy's scratch: its HOME (and TMPDIR), its
private copy of the case, the trusted files it is handed, and the dir it hands files
back in. Only its own UID may enter them (as root, the sandbox UID owns them; the
provided files stay root's, read-only)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath

import attrs


@attrs.frozen
class CommandDirs:
    """Where one command's things are: `root` is its own dir in the scratch."""

    root: Path
    returned: bool  # whether it hands files back (then `results` exists)
    provided: bool  # whether it was handed files (then `given` exists)
    tmp_made: bool = False  # whether it has a private /tmp of its own (then `tmp` exists)
    copies: tuple[str, ...] = ()  # the image's dirs it has private copies of (`copy_of`)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def case(self) -> Path:
        """Its private copy of the case, where it starts (made by case_copy)."""
        return self.root / "case"

    @property
    def given(self) -> Path:
        return self.root / "provided"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def tmp(self) -> Path:
        """An empty dir of its own, shown at /tmp by a view (verifier.sandbox.views)."""
        return self.root / "tmp"

    def setuid_copy(self, index: int) -> Path:
        """Its copy of the image's `index`th setuid program (views.setuid_mounts)."""
        return self.root / "setuid" / str(index)

    def copy_of(self, at: str) -> Path:
        """Its private copy of the image's dir `at` (/etc), shown there by a view."""
        return self.root / "image" / at.strip("/")

    @property
    def writable(self) -> tuple[str, ...]:
        """The dirs it may write beneath (and, when supervised, chmod beneath)."""
        own = (
            self.case,
            self.home,
            *([self.results] if self.returned else []),
            *([self.tmp] if self.tmp_made else []),
            *(self.copy_of(at) for at in self.copies),
        )
        return tuple(map(str, own))


@contextlib.contextmanager
def command_dirs(
    scratch: str,
    uid: int | None,
    provided: Mapping[PurePosixPath, Path],
    returned: bool,
    tmp: bool = False,
    copies: tuple[str, ...] = (),
) -> Iterator[CommandDirs]:
    """A command's dirs in a fresh dir of `scratch`, owned by `uid` when given (the grader
    is root), the provided files copied in, and with `tmp` a private temp dir; all of it
    removed afterwards. OSError when a provided file cannot be read: the author's fault,
    not the case's."""
    import tempfile

    with tempfile.TemporaryDirectory(
        prefix="command-", dir=scratch, ignore_cleanup_errors=True
    ) as made:
        dirs = CommandDirs(
            Path(made), returned=returned, provided=bool(provided), tmp_made=tmp, copies=copies
        )
        dirs.home.mkdir()
        if returned:
            dirs.results.mkdir(0o700)
        if tmp:
            dirs.tmp.mkdir(0o700)
        if copies:  # each copy is made by the command's run, beneath this dir
            (dirs.root / "image").mkdir(0o711)
        if uid is not None:
            for path in (
                dirs.root,
                dirs.home,
                *([dirs.results] if returned else []),
                *([dirs.tmp] if tmp else []),
            ):
                os.chown(path, uid, uid)
        if provided:
            _provide(dirs.given, provided)
        yield dirs


def provided_names(provided: Mapping[str, Path]) -> dict[PurePosixPath, Path]:
    """The provided files by their relative names; ValueError for a name that is not one
    (absolute, empty, with `..`), which eval.yaml's loader refuses first."""
    names = {}
    for name, source in provided.items():
        relative = PurePosixPath(name)
        if relative.is_absolute() or not relative.parts or ".." in relative.parts or "\0" in name:
            raise ValueError(f"provided name {name!r} must be a relative path inside the dir")
        names[relative] = Path(source)
    return names


def _provide(given: Path, names: Mapping[PurePosixPath, Path]) -> None:
    """Copy each trusted file to given/<name>, read-only to everyone (and, as root,
    owned by root: the sandbox user cannot change it)."""
    import shutil

    for relative, source in names.items():
        target = given.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(source, target)
        except OSError as error:
            raise OSError(
                error.errno, f"provided file {source} cannot be copied: {error.strerror}"
            ) from None
        target.chmod(0o555 if os.access(source, os.X_OK) else 0o444)
    for directory in sorted((path for path in given.rglob("*") if path.is_dir()), reverse=True):
        directory.chmod(0o555)
    given.chmod(0o555)
