"""Canonical JSON: the one place that calls orjson.

Determinism depends on fixed orjson options, so every serialization and parse in stableprompt
goes through :func:`canonical_json`, :func:`wire_json` or :func:`loads`.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from ._exceptions import CanonicalizationError
from ._public import public

__all__ = ["INT_MAX", "INT_MIN", "MAX_NESTING", "RawJSON", "canonical_json", "checked_json",
           "decoded_json", "escape_pointer", "json_safe", "json_type_name", "loads",
           "pointer_get", "raw_json", "show_int", "show_value", "unescape_pointer", "wire_json"]

_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
_CANONICAL = _PASSTHROUGH | orjson.OPT_SORT_KEYS
_WIRE = _PASSTHROUGH

MAX_NESTING = 255
"""The deepest container nesting canonical JSON holds (orjson's limit): walks of JSON values
stop here with a typed error instead of a RecursionError."""

INT_MIN, INT_MAX = -(2**63), 2**64 - 1
"""The integers orjson reads and writes exactly; beyond, it parses a float and refuses to
write one."""


RawJSON = orjson.Fragment
"""The type of :func:`raw_json` values."""


def raw_json(data: bytes) -> Any:
    """``data``, JSON bytes this module already wrote, as a value that :func:`canonical_json`,
    :func:`wire_json` and :func:`checked_json` embed verbatim (``orjson.Fragment``): how an
    object whose member order carries meaning (a JSON Schema ``properties`` map: the order in
    which OpenAI Structured Outputs generate fields, see ``_prompt._tool_schema``) keeps that
    order inside a document whose other keys are sorted. Never for bytes from outside: they
    are not checked again."""
    return orjson.Fragment(data)


def _reject(obj: Any) -> Any:
    raise TypeError(type(obj).__name__)


def show_int(value: int) -> str:
    """``str(value)``, or ``"an integer of N bits"`` when it is too long to print (Python
    refuses to format ints over 4,300 digits; error messages must never fail)."""
    bits = value.bit_length()
    return str(value) if bits <= 256 else f"{'-' if value < 0 else ''}an integer of {bits} bits"


def show_value(value: object) -> str:
    """A short, never-failing ``repr`` for error messages about outside input (huge ints,
    long strings, objects whose ``__repr__`` raises): at most 80 characters."""
    if isinstance(value, int) and not isinstance(value, bool):
        return show_int(value)
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ must not replace the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def escape_pointer(token: str | int) -> str:
    """Escape one JSON pointer reference token (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return str(token).replace("~", "~0").replace("/", "~1")


def unescape_pointer(token: str) -> str:
    """Undo :func:`escape_pointer` on one reference token (``~1`` -> ``/``, then ``~0`` ->
    ``~``)."""
    return token.replace("~1", "/").replace("~0", "~")


def pointer_get(doc: Any, pointer: str, default: Any = None) -> Any:
    """The value at JSON pointer ``pointer`` (RFC 6901) inside decoded JSON ``doc``.

    ``""`` is ``doc`` itself. An array index must be decimal digits below the length; ``-``
    and negative indexes name nothing.

    Returns:
        The value, or ``default`` when the pointer names nothing in ``doc`` (a missing key, an
        index out of range, or a step into a scalar).
    """
    for token in pointer.split("/")[1:]:
        token = unescape_pointer(token)
        if isinstance(doc, dict) and token in doc:
            doc = doc[token]
        elif isinstance(doc, list) and token.isdigit() and int(token) < len(doc):
            doc = doc[int(token)]
        else:
            return default
    return doc


def _problems(obj: Any, pointer: str) -> Iterator[tuple[str, str, str]]:
    """Yield ``(pointer, code, what)`` for every value without a canonical JSON form."""
    kind = type(obj)
    if kind is str:
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError as exc:
            yield pointer, "canonical-surrogate", (
                f"lone surrogate {obj[exc.start]!r} at character {exc.start} is not UTF-8")
        return
    if kind is bool or obj is None or kind is RawJSON:
        return
    if kind is int:
        if not INT_MIN <= obj <= INT_MAX:
            yield (pointer, "canonical-int-range",
                   f"integer {show_int(obj)} outside the 64-bit range")
        return
    if kind is float:
        if not math.isfinite(obj):
            yield pointer, "canonical-nan", f"{obj!r} is not valid JSON (NaN/Infinity)"
        return
    if kind is dict:
        for key, value in obj.items():
            if type(key) is not str:
                yield (pointer, "canonical-key",
                       f"non-string key {show_value(key)} ({type(key).__name__})")
                continue
            yield from _problems(value, f"{pointer}/{escape_pointer(key)}")
        return
    if kind is list or kind is tuple:
        for index, value in enumerate(obj):
            yield from _problems(value, f"{pointer}/{index}")
        return
    if isinstance(obj, enum.Enum):  # orjson writes enum members as their value
        yield from _problems(obj.value, pointer)
    elif isinstance(obj, (set, frozenset)):
        yield pointer, "canonical-set", "a set has no defined order; pass a sorted list"
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        yield pointer, "canonical-bytes", "bytes are not JSON; decode to str first"
    else:
        yield pointer, "canonical-type", f"{kind.__name__} is not a JSON type"


def _raise_first(obj: Any, cause: Exception | None) -> None:
    try:
        for pointer, code, what in _problems(obj, ""):
            raise CanonicalizationError(
                f"cannot serialize: {what}", code=code, pointer=pointer
            ) from cause
    except RecursionError:
        raise CanonicalizationError(
            "cannot serialize: nesting too deep or circular (orjson allows 255 levels)",
            code="canonical-depth", pointer="") from cause
    if cause is not None and "recursion limit" in str(cause).lower():
        raise CanonicalizationError(
            "cannot serialize: nesting deeper than 255 levels, or circular",
            code="canonical-depth", pointer="") from cause
    if cause is not None:  # orjson failed on something our walk accepts: surface it as ours
        raise CanonicalizationError(f"cannot serialize: {cause}", pointer="") from cause


def _dumps(obj: Any, option: int) -> bytes:
    try:
        data = orjson.dumps(obj, default=_reject, option=option)
    except (TypeError, orjson.JSONEncodeError) as exc:
        _raise_first(obj, exc)
        raise  # pragma: no cover - _raise_first always raises when given a cause
    # orjson writes NaN/Infinity as null: only a document containing null can hide one.
    if _has_null(data) is not None and _may_hide_nonfinite(obj):
        _raise_first(obj, None)
    return _exact(data)


_has_null = re.compile(b"null").search
"""``re``'s search: ~4x faster than ``b"null" in data`` on CPython 3.11 (measured: 0.28 vs
1.0 us on a 500-byte message), and every serialized message passes here."""

_PLAIN = frozenset({str, int, bool, type(None)})


def _may_hide_nonfinite(obj: Any) -> bool:
    """Whether ``obj`` (already serialized by orjson without error) may hold a NaN/Infinity
    float that orjson wrote as ``null``: a quick walk over exact JSON types (every other
    problem made orjson raise); any other type (an enum member, ...) answers True so the full
    walk (:func:`_problems`) decides. A message with ``"content": null`` is serialized on
    every turn: this walk is several times cheaper than that one."""
    stack = [obj]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _PLAIN or kind is RawJSON:  # raw: bytes this module wrote
            continue
        if kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif kind is not float or not math.isfinite(item):
            return True
    return False


def _exact(data: bytes) -> bytes:
    """``data`` in an allocation of its own size. orjson returns its output buffer, which
    keeps its growth capacity (at least ~4 KiB, measured with tracemalloc: ~4.1 KB held per
    300-byte message), and the SDK keeps every message's bytes for the conversation's life:
    one copy of the exact length frees the rest (``benchmarks/memory.py``)."""
    return bytes(memoryview(data))


def canonical_json(obj: Any) -> bytes:
    """Serialize ``obj`` to canonical JSON bytes.

    Canonical means: object keys sorted by code point, no whitespace, UTF-8 without ASCII
    escaping, arrays in the given order. The output is a pure function of the value: identical
    across processes, platforms and ``PYTHONHASHSEED``.

    Args:
        obj: JSON-compatible value: ``dict`` with ``str`` keys, ``list``/``tuple``, ``str``,
            ``int`` (-2**63 .. 2**64-1), finite ``float``, ``bool``, ``None``; enum members
            are written as their value. Other subclasses of ``str``/``int``/``dict``, sets,
            bytes, dataclasses and datetimes are rejected.

    Returns:
        The UTF-8 JSON bytes.

    Raises:
        CanonicalizationError: naming the JSON pointer of the first offending value, with code
            ``canonical-nan``, ``canonical-key``, ``canonical-set``, ``canonical-bytes``,
            ``canonical-int-range``, ``canonical-type``, ``canonical-surrogate`` (lone UTF-16
            surrogate in a string) or ``canonical-depth`` (nesting deeper than 255 levels, or
            a cycle).
    """
    return _dumps(obj, _CANONICAL)


def wire_json(obj: Any) -> bytes:
    """Serialize ``obj`` compactly keeping dict insertion order (the order "as received").

    Used to reproduce what a provider tokenizes from a request body, where key order matters.
    Same value rules and errors as :func:`canonical_json`.
    """
    return _dumps(obj, _WIRE)


def checked_json(obj: Any) -> bytes:
    """:func:`canonical_json` of a value built only from values :func:`canonical_json`
    already accepted (a stored message's canonical blocks reshaped for a wire format, a text
    it serialized): the same bytes, without the checks, in an allocation of their own size
    (the renderers' per-message hot path). Never for values from a caller.

    Raises:
        orjson.JSONEncodeError (a ``TypeError``): ``obj`` holds a value orjson cannot write.
    """
    return orjson.dumps((obj,), option=_CANONICAL)[1:-1]  # the slice is the exact copy


def decoded_json(obj: Any, *, kept: bool = True) -> bytes:
    """:func:`wire_json` of a value that :func:`loads` produced (so it holds only JSON types
    and no NaN/Infinity): the same bytes, without the validation walk a ``null`` triggers in
    :func:`wire_json`. Only for comparing, locating or hashing bytes; never for values built
    in Python. ``kept=False``: bytes dropped at once (hashed), returned in orjson's own
    buffer, without the exact-size copy that frees its spare capacity (see :func:`_exact`).

    Raises:
        orjson.JSONEncodeError (a ``TypeError``): ``obj`` is no decoded JSON value.
    """
    data = orjson.dumps(obj, option=_WIRE)
    return _exact(data) if kept else data


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON, preserving object key order. Raises ``orjson.JSONDecodeError`` (a
    ``ValueError``) on malformed input; callers wrap it with their own location."""
    return orjson.loads(data)


def json_safe(value: Any) -> Any:
    """``value`` made JSON-safe for a record: mappings (keys as ``str``) and lists are copied,
    non-finite floats and any other type become their ``str``; ``str``, ``int``, ``bool``,
    finite floats and ``None`` are kept. Never raises."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)
public(canonical_json)


def json_type_name(value: object) -> str:
    """The JSON Schema type name of a decoded value (``null``, ``boolean``, ``integer``,
    ``number``, ``string``, ``array``, ``object``), else its Python class name: what an error
    message says a value is."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__
