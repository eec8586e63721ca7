"""Reward formulas: parsed once, checked against an allow-list, evaluated many times.

A formula comes from eval.yaml, so it is trusted not to be malicious, but it is
written by hand and evaluated on every case of a training run: the allow-list
exists so that a typo or an expensive construct fails loudly at load time instead
of silently costing CPU or returning 0.0 on every case. Its cost is bounded at
load: at most MAX_SOURCE_CHARS characters and MAX_NODES syntax nodes, and every
arithmetic operation works on floats (its operands are converted when it runs),
so no integer can grow without bound: `x = x * x` repeated stays cheap and
overflows to inf, which the evaluation reports.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from types import CodeType
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    import ast

MAX_NODES = 200
MAX_SOURCE_CHARS = 5000
MAX_CONSTANT = 1e6


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items)


FUNCTIONS: Mapping[str, object] = {
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "sum": sum,
    "len": len,
    "mean": _mean,
}


@functools.cache
def _allowed_nodes() -> tuple[type[ast.AST], ...]:
    """The expressions and operators a formula may use."""
    import ast

    return (
        ast.Module,
        ast.Expr,
        ast.Assign,
        ast.Name,
        ast.Constant,
        ast.BinOp,
        ast.UnaryOp,
        ast.BoolOp,
        ast.Compare,
        ast.IfExp,
        ast.Call,
        ast.List,
        ast.Tuple,
        ast.Add,
        ast.Sub,
        ast.Mult,
        ast.Div,
        ast.FloorDiv,
        ast.Mod,
        ast.UAdd,
        ast.USub,
        ast.Not,
        ast.And,
        ast.Or,
        ast.Eq,
        ast.NotEq,
        ast.Lt,
        ast.LtE,
        ast.Gt,
        ast.GtE,
        ast.Load,
        ast.Store,
    )


class FormulaError(ValueError):
    """The formula is not allowed; the message says which construct and why."""


class FormulaRuntimeError(ArithmeticError):
    """The formula could not produce a finite number for this case."""


@attrs.frozen
class Formula:
    source: str
    free_names: frozenset[str]
    setup: CodeType | None
    result: CodeType

    def evaluate(self, values: Mapping[str, float]) -> float:
        """The formula's value for one case; unbound names raise FormulaRuntimeError."""
        namespace: dict[str, object] = {"__builtins__": {}, **FUNCTIONS, **values, _AS_FLOAT: float}
        try:
            if self.setup is not None:
                exec(self.setup, namespace)  # noqa: S102 (the allow-listed AST: Formula safety)
            result = eval(self.result, namespace)  # noqa: S307 (the allow-listed AST)
        except NameError as error:
            raise FormulaRuntimeError(f"{error} (no value for this case)") from None
        except (ArithmeticError, TypeError, ValueError) as error:
            raise FormulaRuntimeError(f"{type(error).__name__}: {error}") from None
        if not isinstance(result, int | float):
            raise FormulaRuntimeError(f"result is {type(result).__name__}, not a number")
        if not math.isfinite(result):
            raise FormulaRuntimeError(f"result is {result}, not a finite number")
        return float(result)


def parse_formula(source: str) -> Formula:
    """Validate and compile a formula, or raise FormulaError naming the problem."""
    import ast

    if len(source) > MAX_SOURCE_CHARS:
        raise FormulaError(f"is {len(source)} characters long; at most {MAX_SOURCE_CHARS}")
    try:
        module = ast.parse(source, mode="exec")
    except SyntaxError as error:
        raise FormulaError(f"syntax error: {error.msg} (line {error.lineno})") from None
    except (RecursionError, MemoryError):
        raise FormulaError("is nested too deeply to parse") from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise FormulaError(f"cannot be parsed: {error}") from None
    if not module.body:
        raise FormulaError("is empty")
    node_count = sum(1 for _ in ast.walk(module))
    if node_count > MAX_NODES:
        raise FormulaError(f"has {node_count} AST nodes; at most {MAX_NODES} are allowed")
    *setup, last = module.body
    if not isinstance(last, ast.Expr):
        raise FormulaError("last line must be an expression (the reward), not a statement")
    for statement in setup:
        if not isinstance(statement, ast.Assign):
            raise FormulaError(
                f"line {statement.lineno}: only assignments may precede the final expression"
            )
    _check_node(module, parent=None)
    module = ast.fix_missing_locations(_float_arithmetic(module))
    *setup, last = module.body
    # _float_arithmetic rewrites expressions inside the statements, never a statement
    assert isinstance(last, ast.Expr)
    assigned = {
        target.id
        for statement in setup
        for target in statement.targets  # type: ignore[attr-defined]
        if isinstance(target, ast.Name)
    }
    loaded = {
        node.id
        for node in ast.walk(module)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    setup_code = (
        compile(ast.Module(body=setup, type_ignores=[]), "<reward.formula>", "exec")
        if setup
        else None
    )
    result_code = compile(ast.Expression(body=last.value), "<reward.formula>", "eval")
    return Formula(
        source=source,
        free_names=frozenset(loaded - assigned - FUNCTIONS.keys()),
        setup=setup_code,
        result=result_code,
    )


_AS_FLOAT = "_float"  # formulas cannot name it: names starting with '_' are refused


def _float_arithmetic(module: ast.Module) -> ast.Module:
    """`a * b` becomes `_float(a) * _float(b)`: ints (from constants, len, round or
    booleans) never meet in arithmetic, so none can grow without bound."""
    import ast

    def as_float(node: ast.expr) -> ast.expr:
        call = ast.Call(func=ast.Name(_AS_FLOAT, ast.Load()), args=[node], keywords=[])
        return ast.copy_location(call, node)

    for node in ast.walk(module):
        if isinstance(node, ast.BinOp):
            node.left = as_float(node.left)
            node.right = as_float(node.right)
    return module


def _check_node(node: ast.AST, parent: ast.AST | None) -> None:
    import ast

    if not isinstance(node, _allowed_nodes()):
        raise FormulaError(f"{_describe(node)} is not allowed{_line(node)}")
    if isinstance(node, ast.Constant):
        _check_constant(node)
    elif isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise FormulaError(f"name '{node.id}' starts with '_'{_line(node)}")
    elif isinstance(node, ast.Assign):
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            raise FormulaError(f"assign to one plain name only{_line(node)}")
        if node.targets[0].id in FUNCTIONS:
            raise FormulaError(f"cannot assign to function '{node.targets[0].id}'{_line(node)}")
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            allowed = ", ".join(FUNCTIONS)
            raise FormulaError(f"only these functions may be called: {allowed}{_line(node)}")
        if node.keywords:
            raise FormulaError(f"keyword arguments are not allowed{_line(node)}")
    elif isinstance(node, ast.List | ast.Tuple) and not isinstance(parent, ast.Call):
        raise FormulaError(f"lists and tuples are allowed only as call arguments{_line(node)}")
    for child in ast.iter_child_nodes(node):
        if isinstance(node, ast.Call) and child is node.func:
            continue
        _check_node(child, parent=node)


def _check_constant(node: ast.Constant) -> None:
    value = node.value
    if isinstance(value, str | bytes):
        raise FormulaError(f"string constants are not allowed{_line(node)}")
    if not isinstance(value, int | float) or isinstance(value, complex):
        raise FormulaError(f"constant {value!r} is not allowed{_line(node)}")
    if not math.isfinite(value) or abs(value) > MAX_CONSTANT:
        raise FormulaError(f"constant {value!r} exceeds {MAX_CONSTANT:g}{_line(node)}")


def _describe(node: ast.AST) -> str:
    import ast

    names = {
        ast.Pow: "'**'",
        ast.Attribute: "attribute access",
        ast.Subscript: "subscripting",
        ast.Lambda: "lambda",
        ast.ListComp: "a list comprehension",
        ast.GeneratorExp: "a generator expression",
        ast.Starred: "'*' unpacking",
        ast.Dict: "a dict",
        ast.Set: "a set",
    }
    return names.get(type(node), f"'{type(node).__name__}'")


def _line(node: ast.AST) -> str:
    line = getattr(node, "lineno", None)
    return f" (line {line})" if line else ""
