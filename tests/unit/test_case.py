"""The record a judge sees: files, compatibility keys, caps, binaries, symlinks, inputs."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from verifier.case import CaseLimits, check_case_dir, read_case
from verifier.errors import CaseError

MakeCase = Callable[..., Path]


def record_of(
    case: Path,
    outputs: tuple[str, ...] = (),
    annotations: dict | None = None,
    limits: CaseLimits | None = None,
):
    return read_case(
        check_case_dir(case), outputs, annotations or {}, limits=limits or CaseLimits()
    )


def test_without_outputs_every_file_is_read(make_case: MakeCase) -> None:
    case = make_case({"a.txt": "A", "sub/b.md": "B"})
    record = record_of(case).record
    assert record["files"] == {"a.txt": "A", "sub/b.md": "B"}
    assert record["case_dir"] == str(case.resolve())
    assert record["stdout"] is None and record["inputs"] is None


def test_declared_outputs_limit_files_and_add_content_keys(make_case: MakeCase) -> None:
    case = make_case(
        {"rfe/b.md": "second", "rfe/a.md": "first", "other.txt": "x", "report.md": "R"}
    )
    record = record_of(case, ("rfe", "report.md")).record
    assert record["files"] == {"rfe/a.md": "first", "rfe/b.md": "second", "report.md": "R"}
    assert record["rfe_content"] == "first"
    assert record["rfe_file"] == str(case.resolve() / "rfe/a.md")
    assert record["report.md_content"] == "R"


def test_missing_declared_output_gives_null_content(make_case: MakeCase) -> None:
    record = record_of(make_case({"x": "1"}), ("rfe",)).record
    assert record["rfe_content"] is None and record["rfe_file"] is None
    assert record["files"] == {}


def test_binary_and_undecodable_files_are_placeholders(make_case: MakeCase) -> None:
    """As the eval.yaml contract has it: `{"_binary": true, "path", "name"}` for a file
    with a NUL byte and for one that is not valid UTF-8 (a check reading it as text
    raises over the case's data, and is false: tests/unit/judges/builtins/test_hostile_gate.py)."""
    case = make_case({"img.png": b"\x89PNG\x00\x01", "latin.txt": b"caf\xe9\n"})
    reading = record_of(case)
    files = reading.record["files"]
    assert files["img.png"] == {"_binary": True, "path": "img.png", "name": "img.png"}
    assert files["latin.txt"] == {"_binary": True, "path": "latin.txt", "name": "latin.txt"}
    assert reading.warnings == ()


def test_symlinks_leaving_the_case_are_not_followed(make_case: MakeCase, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    case = make_case({"a.txt": "A", "inner.txt": "I"})
    (case / "leak.txt").symlink_to(secret)
    (case / "leakdir").symlink_to(tmp_path)
    (case / "alias.txt").symlink_to(case / "inner.txt")
    result = record_of(case)
    assert "leak.txt" not in result.record["files"]
    assert "top secret" not in str(result.record)
    assert result.record["files"]["alias.txt"] == "I"
    assert any("leak.txt: symlink leaves the case dir" in w for w in result.warnings)


def test_declared_output_that_is_an_escaping_symlink_is_refused(
    make_case: MakeCase, tmp_path: Path
) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x.txt").write_text("outside")
    case = make_case({"a.txt": "A"})
    (case / "out").symlink_to(tmp_path / "outside")
    result = record_of(case, ("out",))
    assert result.record["files"] == {}
    assert "out: leaves the case dir; not followed" in result.warnings


def test_files_over_the_size_cap_are_left_out_with_a_warning(make_case: MakeCase) -> None:
    limits = CaseLimits(max_file_bytes=10)
    result = record_of(make_case({"big.txt": "x" * 11, "small.txt": "ok"}), limits=limits)
    assert result.record["files"] == {"small.txt": "ok"}
    assert any("big.txt" in warning and "cap" in warning for warning in result.warnings)


def test_total_size_cap_applies_across_files(make_case: MakeCase) -> None:
    limits = CaseLimits(max_total_bytes=15)
    result = record_of(make_case({"a.txt": "x" * 10, "b.txt": "y" * 10}), limits=limits)
    assert list(result.record["files"]) == ["a.txt"]
    assert any("b.txt" in warning for warning in result.warnings)


def test_stdout_log_and_input_yaml_are_read(make_case: MakeCase) -> None:
    case = make_case({"stdout.log": "ran ok\n", "input.yaml": "task: fix\nn: 3\n"})
    record = record_of(case, annotations={"gold": 1}).record
    assert record["stdout"] == "ran ok\n"
    assert record["inputs"] == {"task": "fix", "n": 3}
    assert record["annotations"] == {"gold": 1}


def test_invalid_input_yaml_is_null_with_a_warning(make_case: MakeCase) -> None:
    result = record_of(make_case({"input.yaml": "a: [\n"}))
    assert result.record["inputs"] is None
    assert "input.yaml: not valid YAML; inputs is null" in result.warnings


def test_missing_case_dir_is_a_case_error(tmp_path: Path) -> None:
    with pytest.raises(CaseError, match="case directory not found") as caught:
        check_case_dir(tmp_path / "nope")
    assert caught.value.exit_code == 3


def test_empty_case_dir_is_read_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = record_of(tmp_path / "empty")
    assert result.record["files"] == {}
    assert result.warnings == ("the case dir is empty: the agent left nothing",)


def test_case_that_is_a_file_is_a_case_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CaseError, match="is not a directory"):
        check_case_dir(tmp_path / "file")


# --- what the agent can leave: facts about the case, never errors ------------------------


def test_symlink_loops_and_dangling_links_are_left_out_with_warnings(make_case: MakeCase) -> None:
    case = make_case({"ok.txt": "fine"})
    (case / "self.json").symlink_to("self.json")
    (case / "a").symlink_to("b")
    (case / "b").symlink_to("a")
    (case / "gone.txt").symlink_to("nowhere.txt")
    result = record_of(case)
    assert result.record["files"] == {"ok.txt": "fine"}
    assert "self.json: is a symlink loop; left out" in result.warnings
    assert "a: is a symlink loop; left out" in result.warnings
    assert "gone.txt: is a dangling symlink; left out" in result.warnings


def test_fifos_are_never_opened(make_case: MakeCase) -> None:
    case = make_case({"ok.txt": "fine"})
    os.mkfifo(case / "pipe")
    os.mkfifo(case / "input.yaml")
    result = record_of(case)  # opening a FIFO would block for ever
    assert result.record["files"] == {"ok.txt": "fine"}
    assert "pipe: is not a regular file (a FIFO); left out" in result.warnings
    assert result.record["inputs"] is None
    assert "input.yaml: is not a regular file (a FIFO); inputs is null" in result.warnings


def test_absurd_depth_is_cut_with_a_warning(make_case: MakeCase) -> None:
    case = make_case({"top.txt": "top"})
    deep = case
    for _ in range(1000):
        deep = deep / "d"
        os.mkdir(deep)  # 2,000 bytes of path: past PATH_MAX for absolute paths
    (case / "d" / "d" / "near.txt").write_text("near")
    result = record_of(case)
    assert result.record["files"] == {"top.txt": "top", "d/d/near.txt": "near"}
    assert any("deeper than 64 levels; left out" in warning for warning in result.warnings)
    (case / "d" / "d" / "near.txt").unlink()
    while deep != case:  # shutil.rmtree recurses once per level
        deep.rmdir()
        deep = deep.parent


def test_a_wide_case_stops_at_the_entry_cap(make_case: MakeCase) -> None:
    case = make_case({f"f{index:03d}.txt": "x" for index in range(50)})
    result = record_of(case, limits=CaseLimits(max_entries=20))
    assert len(result.record["files"]) == 20
    assert "more than 20 entries; the rest are left out" in result.warnings


def test_a_huge_sparse_file_is_left_out_without_reading_it(make_case: MakeCase) -> None:
    case = make_case({"ok.txt": "fine"})
    with (case / "huge.log").open("wb") as handle:
        handle.truncate(3 * 1024**3)
    result = record_of(case)
    assert result.record["files"] == {"ok.txt": "fine"}
    assert any(w.startswith("huge.log: is 3221225472 bytes, over the") for w in result.warnings)


BILLION_LAUGHS = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (BILLION_LAUGHS, "with its aliases expanded it is larger than"),
        ("a: &a [*a]\n", "refers to itself"),
        ("x: " + "[" * 5000 + "]" * 5000 + "\n", "not valid YAML"),
    ],
)
def test_input_yaml_bombs_are_refused(make_case: MakeCase, text: str, problem: str) -> None:
    result = record_of(make_case({"input.yaml": text}))
    assert result.record["inputs"] is None
    assert any(w.startswith("input.yaml: ") and problem in w for w in result.warnings)


def test_an_unreadable_subdir_is_left_out_when_grading_as_a_user(tmp_path: Path) -> None:
    """As root every dir is readable, so the read runs as an unprivileged user."""
    if os.geteuid() != 0:
        pytest.fail("runs as root in CI (it drops to UID 65534 for the read)")
    root = Path(tempfile.mkdtemp(prefix="case-perm-"))
    try:
        root.chmod(0o755)
        (root / "ok.txt").write_text("fine")
        (root / "locked").mkdir(mode=0o700)
        (root / "locked" / "x.txt").write_text("hidden")
        (root / "secret.txt").write_text("no")
        (root / "secret.txt").chmod(0o600)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            result = record_of(root)
            os.write(write, json.dumps([result.record["files"], result.warnings]).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as handle:
            files, warnings = json.loads(handle.read())
        os.waitpid(pid, 0)
    finally:
        shutil.rmtree(root)
    assert files == {"ok.txt": "fine"}
    assert "locked: cannot be read (Permission denied); left out" in warnings
    assert "secret.txt: cannot be read (Permission denied); left out" in warnings
