"""Duck-typed helpers over httpx and httpx2 objects, so one implementation serves both stacks.

The official ``anthropic`` 2.x / ``openai`` 3.x SDKs hand over ``httpx2`` objects, other code
``httpx`` ones; nothing here imports either: the module is read from an object's class.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from .._policy import header_rules

__all__ = ["SESSION_HEADER", "byte_stream_class", "cache_headers", "header", "in_memory",
           "module_of"]

SESSION_HEADER = "x-stableprompt-session"
"""Request header naming the session/conversation id (read by the recorder, never stored)."""

_MODULES: dict[str, ModuleType] = {}
_STREAM_CLASSES: dict[tuple[str, type[Any]], type[Any]] = {}


def header(headers: Any, name: str) -> str | None:
    """Case-insensitive header lookup on an httpx/httpx2 ``Headers`` or a plain mapping
    (``name`` in lower case); ``None`` when absent or unreadable. Never raises."""
    if headers is None:
        return None
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, Mapping) and not _caseless(headers):
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except Exception:
        return None
    return None if value is None else str(value)


def cache_headers(headers: Any, wire_format: str) -> dict[str, str] | None:
    """The request's allow-listed cache-relevant headers
    (:data:`~stableprompt._policy.CACHE_HEADERS` of ``wire_format``): lower-case name -> value
    as sent (repeated headers joined with ``", "`` as httpx joins them); ``{}`` when none was
    sent, ``None`` for a format that has none (its betas are in the body). Nothing outside the
    allow-list is ever read. Never raises."""
    rules = header_rules(wire_format)
    if not rules:
        return None
    found: dict[str, str] = {}
    for rule in rules:
        value = header(headers, rule.name)
        if value is not None:
            found[rule.name] = value
    return found


def _caseless(headers: Any) -> bool:
    """True for an httpx/httpx2 ``Headers``, whose ``get`` already ignores case (so a miss
    needs no scan of every item: 14 of them on an official SDK's request)."""
    kind = type(headers)
    found = _CASELESS.get(kind)
    if found is None:
        found = _CASELESS[kind] = _root(kind) in ("httpx", "httpx2") and issubclass(
            kind, module_of(headers).Headers)
    return found


_CASELESS: dict[type[Any], bool] = {}


def module_of(obj: Any) -> ModuleType:
    """``httpx`` or ``httpx2``: the package that defines ``obj``'s class (imported once)."""
    root = _root(type(obj))
    module = _MODULES.get(root)
    if module is None:
        module = _MODULES[root] = importlib.import_module(root)
    return module


def _root(kind: type[Any]) -> str:
    """The top-level package that defines ``kind`` (``httpx``, ``httpx2``, ...)."""
    return kind.__module__.split(".", 1)[0]


def in_memory(response: Any) -> bool:
    """True when ``response``'s body is already in memory (its module's ``ByteStream``)."""
    return isinstance(response.stream, module_of(response).ByteStream)


def byte_stream_class(module: ModuleType, mixin: type[Any], *, name: str, is_async: bool
                      ) -> type[Any]:
    """``mixin`` combined with ``module``'s ``SyncByteStream`` (``AsyncByteStream`` when
    ``is_async``), as that module's client requires of ``response.stream``. Created once per
    module and mixin, named ``name``."""
    key = (module.__name__, mixin)
    cls = _STREAM_CLASSES.get(key)
    if cls is None:
        base = module.AsyncByteStream if is_async else module.SyncByteStream
        cls = _STREAM_CLASSES[key] = type(name, (mixin, base), {})
    return cls
