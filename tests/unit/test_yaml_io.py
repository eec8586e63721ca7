"""The one YAML reader: a trusted file's mistakes are ConfigErrors naming the file and
the line, never a traceback or a silently kept value."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier import yaml_io


def test_duplicate_keys_are_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text("name: a\njudges: []\nname: b\n")
    with pytest.raises(yaml_io.ConfigError, match=r"line 3.*duplicate key 'name'"):
        yaml_io.read_yaml(path)


def test_a_number_too_long_for_python_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text("a: " + "9" * 5000 + "\n")
    with pytest.raises(yaml_io.ConfigError, match="invalid YAML"):
        yaml_io.read_yaml(path)
