"""typing.NamedTuple, less the part of its cost the grading path cannot afford.

The records of this package are declared with NamedTuple's class syntax, and the
grading path declares about fifty of them at import, once per RL rollout.
typing.NamedTuple compiles every field's annotation (a string, under `from
__future__ import annotations`) into a ForwardRef, and collections.namedtuple
compiles a `__new__` for every class: together about 150 microseconds a record,
a tenth of a `verifier grade`. This NamedTuple builds the same classes (tuple
subclasses with the namedtuple API: field properties, `_make`, `_replace`,
`_asdict`, `_fields`, `_field_defaults`) from one compiled `__new__` per number
of fields, and keeps the annotations as written. Type checkers see
typing.NamedTuple itself.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Iterable
from types import FunctionType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import NamedTuple
else:
    # What typing.NamedTupleMeta refuses to let a class body overwrite, and takes itself.
    _PROHIBITED = frozenset(
        {"_source", "_make", "_fields", "__init__", "_field_defaults", "__new__", "_replace",
         "_asdict", "__getnewargs__", "__slots__"}
    )  # fmt: skip
    _TAKEN = frozenset({"__module__", "__name__", "__annotations__"})
    # The C accessor collections.namedtuple gives each field.
    _field_getter = type(collections.namedtuple("_Probe", "field").field)

    class _NamedTupleMeta(type):
        def __new__(cls, typename: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> type:
            if bases != (NamedTuple,):
                raise TypeError(f"{typename}: a NamedTuple can only inherit from NamedTuple")
            annotations = namespace.get("__annotations__", {})
            fields = tuple(annotations)
            defaults: list[Any] = []
            for field in fields:
                if field.startswith("_"):
                    raise ValueError(f"{typename}: field names cannot start with '_': {field}")
                if field in namespace:
                    defaults.append(namespace[field])
                elif defaults:
                    raise TypeError(f"{typename}: field {field} without a default follows "
                                    "a field with one")  # fmt: skip
            record = _record_class(typename, fields, tuple(defaults), namespace["__module__"])
            record.__annotations__ = annotations
            for key, value in namespace.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"{typename}: cannot overwrite NamedTuple attribute {key}")
                if key not in _TAKEN and key not in fields:
                    setattr(record, key, value)
            return record

    NamedTuple = type.__new__(_NamedTupleMeta, "NamedTuple", (), {})

    def _record_class(
        typename: str, fields: tuple[str, ...], defaults: tuple[Any, ...], module: str
    ) -> type:
        template = _new_of_arity(len(fields))
        new = FunctionType(
            template.__code__.replace(co_varnames=("_cls", *fields)),
            template.__globals__, "__new__", defaults or None,
        )  # fmt: skip
        new.__qualname__ = f"{typename}.__new__"
        with_defaults = fields[len(fields) - len(defaults) :]
        namespace: dict[str, Any] = {
            "__doc__": f"{typename}({', '.join(fields)})",
            "__slots__": (),
            "__module__": module,
            "__new__": new,
            "__match_args__": fields,
            "_fields": fields,
            "_field_defaults": dict(zip(with_defaults, defaults, strict=True)),
            "_make": classmethod(_make),
            "_replace": _replace,
            "_asdict": _asdict,
            "__repr__": _repr,
            "__getnewargs__": _getnewargs,
        }
        for index, field in enumerate(fields):
            namespace[field] = _field_getter(index, f"Alias for field number {index}")
        return type(typename, (tuple,), namespace)

    @functools.cache
    def _new_of_arity(arity: int) -> FunctionType:
        """`__new__(_cls, _0, ..., _n)`, compiled once for every record of n + 1 fields;
        each record's copy renames the arguments after its fields."""
        names = "".join(f"_{index}, " for index in range(arity))
        source = f"lambda _cls, {names}: _tuple_new(_cls, ({names}))"
        return eval(source, {"_tuple_new": tuple.__new__})  # type: ignore[no-any-return]

    def _make(cls: type, iterable: Iterable[Any]) -> tuple[Any, ...]:
        made = tuple.__new__(cls, iterable)
        if len(made) != len(cls._fields):  # type: ignore[attr-defined]
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(made)}")  # type: ignore[attr-defined]
        return made

    def _replace(self: Any, /, **changes: Any) -> Any:
        replaced = self._make(map(changes.pop, self._fields, self))
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return replaced

    def _asdict(self: Any) -> dict[str, Any]:
        return dict(zip(self._fields, self, strict=True))

    def _repr(self: Any) -> str:
        shown = ", ".join(
            f"{field}={value!r}" for field, value in zip(self._fields, self, strict=True)
        )
        return f"{type(self).__name__}({shown})"

    def _getnewargs(self: Any) -> tuple[Any, ...]:
        return tuple(self)


__all__ = ["NamedTuple"]
