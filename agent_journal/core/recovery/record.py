"""Record: the plain value class every recovery result is.

Invariant: a Record's fields are its `__slots__`, in order; two records are equal when
they are of the same class with equal fields. It stands in for `dataclasses`, whose
import (inspect, ast) is a large part of a warm digest's start-up.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Record:
    """Fields from `__slots__`; `DEFAULTS` maps a field to its default (a callable such as
    `list` is called for each instance)."""

    __slots__: tuple[str, ...] = ()
    DEFAULTS: dict[str, Any] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self.__slots__
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes {len(names)} fields")
        for name, value in zip(names, args, strict=False):
            object.__setattr__(self, name, value)
        for name in names[len(args):]:
            if name in kwargs:
                value = kwargs.pop(name)
            elif name in self.DEFAULTS:
                value = self.DEFAULTS[name]
                value = value() if callable(value) else value
            else:
                raise TypeError(f"{type(self).__name__} needs field {name}")
            object.__setattr__(self, name, value)
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no field {sorted(kwargs)[0]}")

    def fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.fields() == other.fields()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, *map(repr, self.fields())))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({inner})"
