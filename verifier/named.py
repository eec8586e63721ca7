"""typing.NamedTuple, less the part of its cost the grading path cannot afford.

The records of this package are declared with NamedTuple's class syntax, and the
grading path declares about fifty of them at import, once per RL rollout.
typing.NamedTuple turns every field's annotation (a string, under `from
__future__ import annotations`) into a ForwardRef, compiling it: that is half of
a record's creation time and several milliseconds of every `verifier grade`.
This NamedTuple makes the same collections.namedtuple classes and keeps the
annotations as written. Type checkers see typing.NamedTuple itself.
"""

from __future__ import annotations

import collections
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

    class _NamedTupleMeta(type):
        def __new__(cls, typename: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> type:
            if bases != (NamedTuple,):
                raise TypeError(f"{typename}: a NamedTuple can only inherit from NamedTuple")
            annotations = namespace.get("__annotations__", {})
            defaults: list[Any] = []
            for field in annotations:
                if field in namespace:
                    defaults.append(namespace[field])
                elif defaults:
                    raise TypeError(f"{typename}: field {field} without a default follows "
                                    "a field with one")  # fmt: skip
            record = collections.namedtuple(
                typename, annotations, defaults=defaults, module=namespace["__module__"]
            )
            record.__annotations__ = annotations
            for key, value in namespace.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"{typename}: cannot overwrite NamedTuple attribute {key}")
                if key not in _TAKEN and key not in record._fields:
                    setattr(record, key, value)
            return record

    NamedTuple = type.__new__(_NamedTupleMeta, "NamedTuple", (), {})

__all__ = ["NamedTuple"]
