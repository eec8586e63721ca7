"""Module judges: imported from eval.yaml's dir, never from the case or the working dir."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from verifier.errors import ConfigError
from verifier.grading import grade, load_eval
from verifier.results import Status

WriteConfig = Callable[..., Path]
MakeCase = Callable[..., Path]


def write_module(directory: Path, relative: str, source: str) -> None:
    path = directory / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))


def test_module_function_is_called_with_outputs_and_arguments(
    write_config: WriteConfig, make_case: MakeCase
) -> None:
    config = write_config(
        "judges:\n  - {name: rm, module: evaljudges.rm, function: score, "
        "arguments: {bonus: 0.5}}\nreward: {judge: rm}\n"
    )
    write_module(config.parent, "evaljudges/__init__.py", "")
    write_module(
        config.parent,
        "evaljudges/rm.py",
        """
        def score(outputs, bonus):
            return len(outputs["files"]) * 0.25 + bonus, "counted files"
        """,
    )
    grading = grade(load_eval(config), make_case({"a": "1"}))
    assert grading.results[0].value == 0.75
    assert grading.results[0].rationale == "counted files"
    assert grading.reward == 0.75


def test_case_dir_modules_never_shadow_judge_modules(
    write_config: WriteConfig, make_case: MakeCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config("judges:\n  - {name: j, module: helperjudge, function: score}\n")
    write_module(config.parent, "helperjudge.py", "def score(outputs):\n    return 1.0\n")
    case = make_case(
        {"helperjudge.py": "def score(outputs):\n    return 5.0\n", "json.py": "x = 1"}
    )
    monkeypatch.chdir(case)
    grading = grade(load_eval(config), case)
    assert grading.results[0].value == 1.0


def test_module_that_does_not_import_is_a_load_error(write_config: WriteConfig) -> None:
    config = write_config("judges:\n  - {name: j, module: brokenjudge, function: score}\n")
    write_module(config.parent, "brokenjudge.py", "def score(outputs:\n")
    with pytest.raises(
        ConfigError, match=r"judges\[0\] \(j\)\.module: cannot import 'brokenjudge'"
    ):
        load_eval(config)


def test_missing_module_is_a_load_error(write_config: WriteConfig) -> None:
    config = write_config("judges:\n  - {name: j, module: nosuchjudge, function: score}\n")
    with pytest.raises(ConfigError, match="ModuleNotFoundError"):
        load_eval(config)


def test_missing_function_is_a_load_error(write_config: WriteConfig) -> None:
    config = write_config("judges:\n  - {name: j, module: emptyjudge, function: score}\n")
    write_module(config.parent, "emptyjudge.py", "x = 1\n")
    with pytest.raises(ConfigError, match=r"emptyjudge\.score is not a function"):
        load_eval(config)


def test_module_resolving_outside_the_config_dir_is_refused(write_config: WriteConfig) -> None:
    config = write_config("judges:\n  - {name: j, module: json, function: dumps}\n")
    with pytest.raises(ConfigError, match=r"not a file under"):
        load_eval(config)


def test_module_judge_errors_are_records(write_config: WriteConfig, make_case: MakeCase) -> None:
    config = write_config("judges:\n  - {name: j, module: raisingjudge, function: score}\n")
    write_module(
        config.parent, "raisingjudge.py", "def score(outputs):\n    raise ValueError('bad')\n"
    )
    result = grade(load_eval(config), make_case({"a": "1"})).results[0]
    assert result.status is Status.ERROR
    assert result.error.startswith("ValueError: bad (at ")
    assert os.path.basename(result.error.split("(at ")[1]).startswith("raisingjudge.py:2")
