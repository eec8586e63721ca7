"""The formula allow-list (reward-api.md 'Formula safety') and evaluation."""

from __future__ import annotations

import re

import pytest

from verifier.formula import FormulaError, FormulaRuntimeError, parse_formula


@pytest.mark.parametrize(
    ("source", "values", "expected"),
    [
        ("0.6 * quality + 0.4 * efficiency", {"quality": 0.5, "efficiency": 1.0}, 0.7),
        ("min(a, b)", {"a": 0.2, "b": 0.9}, 0.2),
        ("max(a, b) - abs(-0.1)", {"a": 0.2, "b": 0.9}, 0.8),
        ("round(a, 1)", {"a": 0.26}, 0.3),
        ("sum([a, b]) / len((a, b))", {"a": 0.2, "b": 0.4}, 0.3),
        ("mean([a, b, c])", {"a": 0.0, "b": 0.5, "c": 1.0}, 0.5),
        ("a if a > 0.5 else 0", {"a": 0.4}, 0.0),
        ("a and b", {"a": 1.0, "b": 0.3}, 0.3),
        ("(a >= 0.5) * b", {"a": 0.5, "b": 0.8}, 0.8),
        ("a // 0.25 % 3", {"a": 0.8}, 0.0),
        (
            "base = mean([clarity, accuracy])\nmin(base, efficiency)",
            {"clarity": 0.4, "accuracy": 0.8, "efficiency": 0.9},
            0.6,
        ),
    ],
)
def test_allowed_formulas_evaluate(source: str, values: dict[str, float], expected: float) -> None:
    assert parse_formula(source).evaluate(values) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("a ** 2", "'**'"),
        ("'text'", "string constants"),
        ("b'x'", "string constants"),
        ("a * 1000001", "exceeds"),
        ("a * 1e7", "exceeds"),
        ("a + " + " + ".join(["a"] * 100), "AST nodes"),
        ("x = a", "last line must be an expression"),
        ("_secret + 1", "starts with '_'"),
        ("a.real", "attribute access"),
        ("[a] * 1000", "only as call arguments"),
        ("(a, b)", "only as call arguments"),
        ("open('x')", "only these functions"),
        ("__import__('os')", "only these functions"),
        ("max(a, key=b)", "keyword arguments"),
        ("[x for x in a]", "list comprehension"),
        ("lambda: 1", "lambda"),
        ("a[0]", "subscripting"),
        ("{a: 1}", "a dict"),
        ("a | b", "BitOr"),
        ("a in b", "'In'"),
        ("None", "constant None"),
        ("min = 3\nmin", "cannot assign to function"),
        ("a = b = 1\na", "one plain name"),
        ("import os\n1", "only assignments may precede"),
        ("a +", "syntax error"),
        ("", "is empty"),
    ],
)
def test_unsafe_or_malformed_formulas_fail_at_parse(source: str, message: str) -> None:
    with pytest.raises(FormulaError, match=re.escape(message)):
        parse_formula(source)


def test_exactly_200_nodes_is_allowed_and_201_is_not() -> None:
    import ast

    def nodes(source: str) -> int:
        return sum(1 for _ in ast.walk(ast.parse(source)))

    source = "a"
    while nodes(source + " + a") <= 200:
        source += " + a"
    assert nodes(source) <= 200
    parse_formula(source)
    with pytest.raises(FormulaError, match="AST nodes"):
        parse_formula(source + " + a")


def test_constant_of_exactly_one_million_is_allowed() -> None:
    assert parse_formula("a * 1000000").evaluate({"a": 1e-6}) == pytest.approx(1.0)


def test_free_names_exclude_functions_and_assigned_names() -> None:
    formula = parse_formula("base = mean([clarity, accuracy])\nmin(base, efficiency)")
    assert formula.free_names == {"clarity", "accuracy", "efficiency"}


@pytest.mark.parametrize(
    ("source", "values", "message"),
    [
        ("quality + 1", {}, "quality"),
        ("a / b", {"a": 1.0, "b": 0.0}, "ZeroDivisionError"),
        ("mean([])", {}, "ZeroDivisionError"),
        ("len(a)", {"a": 1.0}, "TypeError"),
        (
            "a * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6"
            " * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6"
            " * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6"
            " * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6 * 1e6"
            " * 1e6 * 1e6 * 1e6",
            {"a": 1.0},
            "not a finite number",
        ),
        ("max", {}, "not a number"),
    ],
)
def test_runtime_failures_raise_formula_runtime_error(
    source: str, values: dict[str, float], message: str
) -> None:
    with pytest.raises(FormulaRuntimeError, match=message):
        parse_formula(source).evaluate(values)


def test_formula_cannot_reach_python_builtins() -> None:
    with pytest.raises(FormulaRuntimeError, match="print"):
        parse_formula("print").evaluate({})


def test_integer_arithmetic_cannot_grow_without_bound() -> None:
    """`x = x * x` repeated (no `**` needed) would take minutes on Python ints."""
    squarings = "\n".join(["x = a + 1"] + ["x = x * x"] * 18 + ["x"])
    formula = parse_formula(squarings)
    with pytest.raises(FormulaRuntimeError, match="not a finite number"):
        formula.evaluate({"a": 1.0})
    counted = parse_formula("\n".join(["x = len([a, a])"] + ["x = x * x"] * 18 + ["x"]))
    with pytest.raises(FormulaRuntimeError, match="not a finite number"):
        counted.evaluate({"a": 1.0})


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("9" * 10_001, "characters long"),
        ("-" * 100_000 + "a", "characters long"),
        ("-" * 4_000 + "a", "nested too deeply"),
        ("a + " * 100 + "a", "AST nodes"),
    ],
)
def test_formulas_that_would_crash_the_parser_are_formula_errors(source: str, problem: str) -> None:
    with pytest.raises(FormulaError, match=problem):
        parse_formula(source)
