"""Frozen dataclass instances made at once, for the objects a render makes every turn and the
report makes every call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any, TypeVar

__all__ = ["frozen_instance", "slotted_maker"]

_T = TypeVar("_T")
_NEW = object.__new__


def frozen_instance(cls: type[_T], fields: dict[str, Any]) -> _T:
    """An instance of the frozen (non-slotted) dataclass ``cls`` whose ``__dict__`` is
    ``fields``: every field of ``cls`` (the caller passes them all, defaults included) and
    any private cache entries. The generated ``__init__`` sets each field through
    ``object.__setattr__`` (about 0.4 us each on CPython 3.11): ``RenderedPrompt`` (10
    fields) and ``ProviderRequest`` are made on every turn. ``tests/test_render.py`` checks
    both makers give every field."""
    obj: _T = _NEW(cls)
    obj.__dict__.update(fields)
    return obj


def slotted_maker(cls: type[_T]) -> Callable[..., _T]:
    """A maker of instances of the frozen slotted dataclass ``cls``, called as ``cls(...)``
    is (the same parameters in field order, the same defaults; no ``default_factory``), at
    about half the cost: generated once from the dataclass's fields, it sets each slot
    through its descriptor instead of the generated ``__init__``'s ``object.__setattr__`` per
    field. The same frozen object (equal, hashed, immutable as ``cls(...)`` makes;
    ``tests/test_report_pass.py``): the report makes a ``CallRow`` (43 fields) and a
    ``CallPrice`` per call, and its chart points.

    Raises:
        TypeError: ``cls`` has a field with a ``default_factory``, a ``__post_init__`` (the
            maker would skip it), or no slots.
    """
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__")
    scope: dict[str, Any] = {"_new": _NEW, "_cls": cls}
    params, body = [], []
    for f in fields(cls):  # type: ignore[arg-type]
        if f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name} has a default_factory")
        scope[f"_set_{f.name}"] = getattr(cls, f.name).__set__
        if f.default is not MISSING:
            scope[f"_default_{f.name}"] = f.default
        params.append(f.name if f.default is MISSING else f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(obj, {f.name})\n")
    exec(f"def make({', '.join(params)}):\n    obj = _new(_cls)\n{''.join(body)}    return obj\n",
         scope)
    maker: Callable[..., _T] = scope["make"]
    return maker
