"""An agent-eval-harness dataset: one directory per case, each holding the case's task
input (`input.yaml`), its ground truth (`annotations.yaml`) and the files that names.

eval.yaml's `dataset.path` points at it. A case graded with the id of one of its
entries gets that entry's annotations (over eval.yaml's own), the text of every
file an annotation names as `annotation_<key>_content` (what existing harness
prompts read), and its input as the trusted task input. `verifier task init
--from-dataset` makes one Harbor task per entry from the same reading.

The dataset is the task author's, so it is trusted, but it is still checked: a
dataset dir that is absent altogether is not an error (agent-eval-harness's root
eval.yaml names the dir its own runs generate, and a task package may ship eval.yaml
alone): every case is graded without annotations, with a case warning, and `verifier
check` warns. A dataset path that is there but is no directory, and a broken entry
(invalid YAML, an annotation file behind a symlink or outside the dataset), is a
ConfigError naming the file and the key, never a silent omission.
Which annotation values name files follows the harness (`load_case_record` in its
score.py): a short, one-line, relative string naming a file of the dataset.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from verifier.errors import ConfigError
from verifier.references import ANNOTATION_PREFIX
from verifier.yaml_io import read_yaml

ANNOTATIONS_FILE = "annotations.yaml"
INPUT_FILES = ("input.yaml", "input.yml", "input.json")  # the first present is the input
# A case id is a directory name, a Harbor task name and a path part of the package.
CASE_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
MAX_ANNOTATION_FILE_BYTES = 16 * 1024 * 1024
_MAX_FILE_NAME = 255  # longer annotation values are text, not file names (as the harness)
_SNIFF_BYTES = 8192


@attrs.frozen
class DatasetCase:
    """One entry of the dataset, read."""

    case_id: str
    directory: Path  # resolved
    annotations: Mapping[str, Any]
    annotation_files: Mapping[str, PurePosixPath]  # key -> file, relative to directory
    contents: Mapping[str, Any]  # record key `annotation_<key>_content` -> text
    input_file: PurePosixPath | None  # relative to directory
    task_input: Any  # the parsed input; None when the entry has none

    @property
    def label(self) -> str:
        """`dataset/task-0010`: the entry as the author knows it (the dataset's dir name)."""
        return f"{self.directory.parent.name}/{self.case_id}"

    def files(self) -> list[PurePosixPath]:
        """Every file of the entry, relative to it, sorted (ConfigError for a symlink)."""
        return sorted(_entry_files(self.directory))

    def agent_inputs(self) -> list[PurePosixPath]:
        """The entry's files the agent is given (what the harness uploads to its
        workspace): the input and every other file that is neither annotations.yaml
        nor named by an annotation. Relative to the entry, sorted."""
        private = {PurePosixPath(ANNOTATIONS_FILE), *self.annotation_files.values()}
        return [path for path in self.files() if path not in private]


@attrs.frozen
class Dataset:
    """eval.yaml's `dataset.path`, checked at load: a directory inside eval.yaml's dir."""

    root: Path  # resolved
    path: PurePosixPath  # as eval.yaml gives it, relative to eval.yaml's dir
    source: str  # eval.yaml, for messages
    missing: bool = False  # nothing at root: a dataset with no entries (see the module)

    def missing_warning(self) -> str:
        return (
            f"{self.source}: dataset.path {str(self.path)!r} does not exist beside eval.yaml: "
            "cases are graded without the dataset's annotations and input"
        )

    def case_ids(self) -> list[str]:
        """The ids of every entry: the dataset's non-hidden subdirectories, sorted."""
        if self.missing:
            return []
        try:
            entries = sorted(os.scandir(self.root), key=lambda entry: entry.name)
        except OSError as error:
            raise ConfigError(
                self.source, "dataset.path", f"{self.root} cannot be read ({error.strerror})"
            ) from None
        return [
            entry.name
            for entry in entries
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False)
        ]

    def case(self, case_id: str) -> DatasetCase | None:
        """The entry for case_id, or None when the dataset has none (ConfigError when it
        has one that cannot be used)."""
        if self.missing or not CASE_ID_PATTERN.match(case_id):
            return None
        directory = self.root / case_id
        if directory.is_symlink() or not directory.is_dir():
            return None
        annotations = self._annotations(directory)
        files = {
            key: relative
            for key, value in annotations.items()
            if (relative := self._annotation_file(directory, str(key), value)) is not None
        }
        input_file = next((name for name in INPUT_FILES if _present(directory / name)), None)
        task_input = None
        if input_file is not None:
            _refuse_symlink(directory / input_file, self.root, str(directory), "", input_file)
            task_input = read_yaml(directory / input_file)
        return DatasetCase(
            case_id=case_id,
            directory=directory,
            annotations=annotations,
            annotation_files=files,
            contents={
                f"{ANNOTATION_PREFIX}{key}_content": _content(directory / relative)
                for key, relative in files.items()
            },
            input_file=PurePosixPath(input_file) if input_file is not None else None,
            task_input=task_input,
        )

    def _annotations(self, directory: Path) -> Mapping[str, Any]:
        path = directory / ANNOTATIONS_FILE
        if not _present(path):
            return {}
        _refuse_symlink(path, self.root, str(path), "", ANNOTATIONS_FILE)
        document = read_yaml(path)
        if document is None:
            return {}
        if not isinstance(document, dict):
            raise ConfigError(str(path), "", "must be a YAML mapping of annotation keys")
        return document

    def _annotation_file(self, directory: Path, key: str, value: Any) -> PurePosixPath | None:
        """The file an annotation value names, or None when the value is not a file name."""
        if not isinstance(value, str) or not _looks_like_a_file_name(value):
            return None
        path = Path(os.path.normpath(directory / value))
        if not _present(path):
            return None
        where = str(directory / ANNOTATIONS_FILE)
        if not path.is_relative_to(self.root):
            raise ConfigError(where, key, f"{value!r} leads outside the dataset {self.root}")
        _refuse_symlink(path, self.root, where, key, repr(value))
        if not path.is_file():
            return None  # a directory: the value is a name, not a file
        return PurePosixPath(os.path.relpath(path, directory))


def read_dataset(value: Any, source: str, base_dir: Path) -> Dataset | None:
    """eval.yaml's `dataset` block -> the Dataset of its `path`, or None without one.

    Only `path` is read (the harness's `schema` and `workspace` are suite-level)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(source, "dataset", "must be a mapping with a 'path'")
    raw = value.get("path")
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or "\0" in raw:
        raise ConfigError(source, "dataset.path", "must be a directory relative to eval.yaml")
    relative = PurePosixPath(raw)
    if relative.is_absolute() or ".." in relative.parts:
        raise ConfigError(
            source,
            "dataset.path",
            f"{raw!r} must be a directory inside eval.yaml's dir (no absolute path, no '..'): "
            "a Harbor task package carries eval.yaml's dir, nothing outside it",
        )
    root = base_dir / relative
    if not root.is_symlink() and not root.exists():  # absent altogether: no entries
        return Dataset(root=root.resolve(), path=relative, source=source, missing=True)
    if not root.is_dir():
        raise ConfigError(
            source, "dataset.path", f"{root} is not a directory (paths are relative to eval.yaml)"
        )
    if not root.resolve().is_relative_to(base_dir.resolve()):
        raise ConfigError(source, "dataset.path", f"{raw!r} leads outside eval.yaml's dir")
    return Dataset(root=root.resolve(), path=relative, source=source)


@attrs.frozen
class DatasetSurvey:
    """What `verifier check` says about a dataset: its entries, their annotation keys,
    and every entry that cannot be used."""

    case_ids: tuple[str, ...]
    annotation_keys: tuple[str, ...]
    file_keys: tuple[str, ...]  # keys naming a file in at least one entry
    without_input: tuple[str, ...]
    problems: tuple[ConfigError, ...]


def survey(dataset: Dataset) -> DatasetSurvey:
    ids = dataset.case_ids()
    keys: set[str] = set()
    file_keys: set[str] = set()
    without_input = []
    problems = []
    for case_id in ids:
        if not CASE_ID_PATTERN.match(case_id):
            problems.append(
                ConfigError(
                    str(dataset.root / case_id),
                    "",
                    "is not a usable case id: use letters, digits, '.', '_' and '-' "
                    "(it names a Harbor task)",
                )
            )
            continue
        try:
            entry = dataset.case(case_id)
        except ConfigError as error:
            problems.append(error)
            continue
        if entry is None:  # listed a moment ago: removed or replaced since
            problems.append(
                ConfigError(str(dataset.root / case_id), "", "is no longer a case directory")
            )
            continue
        keys.update(str(key) for key in entry.annotations)
        file_keys.update(entry.annotation_files)
        if entry.input_file is None:
            without_input.append(case_id)
    return DatasetSurvey(
        tuple(ids),
        tuple(sorted(keys)),
        tuple(sorted(file_keys)),
        tuple(without_input),
        tuple(problems),
    )


def _present(path: Path) -> bool:
    """Something is there (a dangling symlink too: it is refused, not overlooked)."""
    return path.is_symlink() or path.exists()


def _looks_like_a_file_name(value: str) -> bool:
    return (
        0 < len(value) <= _MAX_FILE_NAME
        and "\n" not in value
        and "\0" not in value
        and value == value.strip()
        and not value.startswith("/")
    )


def _refuse_symlink(path: Path, root: Path, where: str, key: str, shown: str) -> None:
    """Dataset files are read as they are: a symlink (the file, or a dir on its way down
    from the dataset root) is refused, as the harness refuses it."""
    current = path
    while current != root and current.is_relative_to(root):
        if current.is_symlink():
            raise ConfigError(
                where,
                key,
                f"{shown} is a symlink; dataset files must be regular files inside "
                "the dataset (copy the file in)",
            )
        current = current.parent


def _content(path: Path) -> Any:
    """An annotation file's text, or the record's marker for a binary file."""
    try:
        size = path.stat().st_size
        if size > MAX_ANNOTATION_FILE_BYTES:
            raise ConfigError(
                str(path),
                "",
                f"is {size} bytes, over the {MAX_ANNOTATION_FILE_BYTES}-byte cap "
                "for an annotation file",
            )
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(str(path), "", f"cannot be read ({error.strerror})") from None
    if b"\0" not in data[:_SNIFF_BYTES]:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return {"_binary": True, "path": str(path), "name": path.name}


def _entry_files(directory: Path) -> Iterator[PurePosixPath]:
    """Every file under an entry, relative; a symlink is refused."""
    for current, dirnames, filenames in os.walk(directory):
        dirnames.sort()
        here = Path(current)
        for name in [*dirnames, *filenames]:
            if (here / name).is_symlink():
                _refuse_symlink(here / name, directory, str(here / name), "", name)
        for name in filenames:
            yield PurePosixPath((here / name).relative_to(directory).as_posix())
