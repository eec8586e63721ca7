"""The builtin registry: each builtin declares its arguments as one frozen record, whose
fields are its eval.yaml keys, and receives that record, parsed and defaulted once."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from verifier.config import Locator
from verifier.config.fields import Number, Text
from verifier.errors import ConfigError
from verifier.judges.builtins import all_builtins
from verifier.judges.builtins.pass_rate_arguments import PassRateArguments
from verifier.judges.builtins.registry import (
    BUILTINS,
    BuiltinContext,
    argument,
    builtin,
    declared_keys,
)


@attrs.frozen(kw_only=True)
class GreetArguments:
    name: str = argument(Text(non_empty=True), required=True)
    times: int = argument(Number(integer=True, minimum=1, problem="must be 1 or more"), default=2)


@pytest.fixture
def greet() -> Iterator[str]:
    def greet(context: BuiltinContext, arguments: GreetArguments) -> tuple[bool, str]:
        return True, " ".join([f"hello {arguments.name}"] * arguments.times)

    builtin("toy", GreetArguments)(greet)
    try:
        yield "greet"
    finally:
        del BUILTINS["greet"]


def test_a_builtin_receives_its_arguments_as_one_record_defaults_filled_in(
    greet: str, tmp_path: Path
) -> None:
    found = BUILTINS[greet]
    record = found.bind({"name": "ada"}, Locator("eval.yaml", "judges[0].arguments", tmp_path))
    assert record == GreetArguments(name="ada", times=2)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.times = 3  # type: ignore[misc]
    context = BuiltinContext(tmp_path, tmp_path, {})
    assert found.run(context, record) == (True, "hello ada hello ada")


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({}, "eval.yaml: judges[0].arguments: greet needs argument 'name'"),
        (
            {"name": "ada", "tims": 1},
            "eval.yaml: judges[0].arguments.tims: greet takes name, times (did you mean 'times'?)",
        ),
        ({"name": "ada", "times": 0}, "eval.yaml: judges[0].arguments.times: 0 must be 1 or more"),
    ],
)
def test_a_bad_argument_is_a_one_line_error_naming_its_key(
    greet: str, tmp_path: Path, given: dict[str, object], problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        BUILTINS[greet].bind(given, Locator("eval.yaml", "judges[0].arguments", tmp_path))
    assert str(raised.value) == problem


def test_a_record_field_not_declared_as_an_argument_is_refused_at_registration() -> None:
    @attrs.frozen(kw_only=True)
    class Undeclared:
        name: str = "x"

    with pytest.raises(TypeError, match=r"Undeclared\.name is no builtin argument"):
        builtin("toy", Undeclared)
    assert "Undeclared" not in str(BUILTINS)


def test_every_builtin_takes_the_context_and_one_record_of_its_declared_keys() -> None:
    assert all_builtins()
    for found in all_builtins():
        assert found.arguments == declared_keys(found.record)
        assert [key.name for key in found.arguments] == [f.name for f in attrs.fields(found.record)]
        if found.prompt is None:
            assert list(inspect.signature(found.run).parameters) == ["context", "arguments"]


def test_the_test_builtins_rules_between_arguments_read_the_record(tmp_path: Path) -> None:
    at = Locator("eval.yaml", "judges[0].arguments", tmp_path)
    bound = BUILTINS["pass_rate"].bind({"runner": "go", "tests": ["pkg/TestA"]}, at)
    assert isinstance(bound, PassRateArguments)
    assert (bound.runner, bound.tests, bound.timeout, bound.min_tests) == (
        "go",
        ("pkg/TestA",),
        30,
        1,
    )
    with pytest.raises(ConfigError, match=r"arguments\.tests: 'a::b' is not a go test id"):
        BUILTINS["pass_rate"].bind({"runner": "go", "tests": ["a::b"]}, at)
