"""`task init --force` never silently overwrites a file its author changed
(verifier.task.record): it rewrites what init wrote, keeps and names the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from verifier.task import InitRequest, init_task
from verifier.task.record import RECORD

EVAL = """\
name: demo
judges:
  - name: answer
    builtin: file_contains
    arguments: {path: answer.txt, text: "42"}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    source.mkdir()
    (source / "eval.yaml").write_text(EVAL)
    (source / "notes.txt").write_text("v1\n")
    return source / "eval.yaml"


def test_the_record_holds_what_init_wrote(tmp_path: Path, config: Path) -> None:
    dest = init_task(InitRequest(tmp_path / "task", config))
    record = json.loads((dest / RECORD).read_text())
    written = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    assert set(record["files"]) == written - {RECORD}
    assert all(digest.startswith("sha256:") for digest in record["files"].values())


def test_force_keeps_and_names_the_files_the_author_changed(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = init_task(InitRequest(tmp_path / "task", config))
    capsys.readouterr()
    (dest / "solution/solve.sh").write_text("#!/bin/bash\necho 42 > /app/answer.txt\n")
    (dest / "environment/Dockerfile").write_text("FROM debian\nWORKDIR /app\n")
    (config.parent / "notes.txt").write_text("v2\n")  # the source changed: rewritten
    init_task(InitRequest(dest, config, force=True))
    assert (dest / "solution/solve.sh").read_text() == "#!/bin/bash\necho 42 > /app/answer.txt\n"
    assert (dest / "environment/Dockerfile").read_text() == "FROM debian\nWORKDIR /app\n"
    assert (dest / "tests/notes.txt").read_text() == "v2\n"
    warnings = capsys.readouterr().err
    for name in ("solution/solve.sh", "environment/Dockerfile"):
        assert f"{dest / name}: kept as it is (changed since task init wrote it)" in warnings
    assert "tests/notes.txt: kept" not in warnings
    # Still recorded as init's own content: a third init keeps them too.
    init_task(InitRequest(dest, config, force=True))
    assert (dest / "solution/solve.sh").read_text().endswith("/app/answer.txt\n")


def test_force_keeps_a_file_init_never_recorded_when_it_differs(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A package from before the record: its files differ from today's templates."""
    dest = tmp_path / "task"
    (dest / "solution").mkdir(parents=True)
    (dest / "solution/solve.sh").write_text("#!/bin/bash\n# mine\n")
    init_task(InitRequest(dest, config, force=True))
    assert (dest / "solution/solve.sh").read_text() == "#!/bin/bash\n# mine\n"
    assert "not recorded by an earlier task init" in capsys.readouterr().err


def test_files_init_no_longer_writes_are_removed_unless_edited(
    tmp_path: Path, config: Path
) -> None:
    (config.parent / "old.txt").write_text("old\n")
    (config.parent / "edited.txt").write_text("edited\n")
    dest = init_task(InitRequest(tmp_path / "task", config))
    (config.parent / "old.txt").unlink()
    (config.parent / "edited.txt").unlink()
    (dest / "tests/edited.txt").write_text("the author's now\n")
    init_task(InitRequest(dest, config, force=True))
    assert not (dest / "tests/old.txt").exists()
    assert (dest / "tests/edited.txt").read_text() == "the author's now\n"


def test_without_an_instruction_no_placeholder_task_input_is_baked(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The placeholder is no task; an edited instruction.md is, on the next init."""
    dest = init_task(InitRequest(tmp_path / "task", config))
    assert not (dest / "tests/input.yaml").exists()
    assert "instruction.md is a placeholder" in capsys.readouterr().err
    (dest / "instruction.md").write_text("Write 42 to answer.txt.\n")
    init_task(InitRequest(dest, config, force=True))
    assert yaml.safe_load((dest / "tests/input.yaml").read_text()) == {
        "prompt": "Write 42 to answer.txt.\n"
    }
    instruction = tmp_path / "instruction.md"
    instruction.write_text("Given.\n")
    other = init_task(InitRequest(tmp_path / "other", config, instruction=instruction))
    assert yaml.safe_load((other / "tests/input.yaml").read_text()) == {"prompt": "Given.\n"}
