"""The record a judge sees: files, compatibility keys, caps, binaries, symlinks, inputs."""

from __future__ import annotations

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
    return read_case(check_case_dir(case), outputs, annotations or {}, limits or CaseLimits())


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
    case = make_case({"img.png": b"\x89PNG\x00\x01", "latin.txt": b"caf\xe9"})
    files = record_of(case).record["files"]
    assert files["img.png"] == {"_binary": True, "path": "img.png", "name": "img.png"}
    assert files["latin.txt"] == {"_binary": True, "path": "latin.txt", "name": "latin.txt"}


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


def test_empty_case_dir_is_a_case_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(CaseError, match="case directory is empty"):
        check_case_dir(tmp_path / "empty")


def test_case_that_is_a_file_is_a_case_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CaseError, match="is not a directory"):
        check_case_dir(tmp_path / "file")
