"""Shared pieces of the per-wire-format usage parsers.

- Field readers that validate provider JSON and raise :class:`UsageParseError` with the JSON
  pointer of the offending value (codes ``usage-type``, ``usage-negative``, ``usage-missing``),
  and :func:`cache_details` for the OpenAI-style ``*_tokens_details`` object.
- :func:`exclusive_usage` / :func:`inclusive_usage`: build a :class:`CacheUsage` from a
  provider whose input count excludes cached tokens (Anthropic, Bedrock) or includes them
  (OpenAI, Gemini, DeepSeek, vLLM, llama.cpp).
- :func:`response_usage`: find ``body["usage"]`` in a non-streaming response body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .._canonical import escape_pointer, json_type_name, show_int, show_value
from .._exceptions import UsageParseError
from .._usage import MAX_TOKEN_COUNT, CacheUsage

__all__ = [
    "TTLSplit",
    "UsageKeys",
    "as_mapping",
    "cache_details",
    "child",
    "exclusive_usage",
    "inclusive_usage",
    "opt_int",
    "opt_obj",
    "req_int",
    "response_usage",
]


def child(base: str, key: str | int) -> str:
    """The JSON pointer of ``key`` under the pointer ``base``."""
    return f"{base}/{escape_pointer(key)}"


def _json_object(value: Mapping[Any, Any], pointer: str, what: str) -> Mapping[str, Any]:
    """``value`` as a plain JSON object with string keys. A ``Mapping`` that is not a plain
    ``dict`` (a user or SDK object) is copied once here, so no method of it runs later: one
    that raises is a ``usage-type`` error at ``pointer``, never a bare exception."""
    if type(value) is not dict:
        try:
            value = dict(value.items())
        except Exception as exc:
            raise UsageParseError(f"{what} cannot be read as a JSON object "
                                  f"({type(exc).__name__})", code="usage-type",
                                  pointer=pointer) from exc
    for key in value:
        if not isinstance(key, str):
            raise UsageParseError(f"{what} keys must be strings, got {json_type_name(key)} "
                                  f"{show_value(key)}", code="usage-type", pointer=pointer)
    return value


def as_mapping(value: object, pointer: str, what: str) -> Mapping[str, Any]:
    """Return ``value`` as a JSON object or raise ``usage-type`` at ``pointer``.

    A pydantic model (e.g. the official SDKs' ``response.usage``) is accepted and dumped with
    its wire field names, keeping only fields that were actually set.

    Raises:
        UsageParseError: ``usage-type`` when ``value`` is not an object, has a non-string key,
            or is a model whose ``model_dump`` fails or returns no object.
    """
    if isinstance(value, Mapping):
        return _json_object(value, pointer, what)
    try:
        dump = getattr(value, "model_dump", None)
    except Exception:  # an object whose attribute access raises: not a model
        dump = None
    if callable(dump):
        try:
            dumped = dump(mode="json", by_alias=True, exclude_unset=True)
        except Exception as exc:
            raise UsageParseError(
                f"{what}: {type(value).__name__}.model_dump() failed ({type(exc).__name__})",
                code="usage-type", pointer=pointer) from exc
        if isinstance(dumped, Mapping):
            return _json_object(dumped, pointer, what)
    raise UsageParseError(
        f"{what} must be a JSON object, got {json_type_name(value)}",
        code="usage-type",
        pointer=pointer,
    )


def opt_int(obj: Mapping[str, Any], key: str, base: str) -> int | None:
    """Read an optional non-negative integer token count; absent or ``null`` -> ``None``.

    Raises:
        UsageParseError: ``usage-type`` (not an integer; booleans and floats included),
            ``usage-negative``, or ``usage-overflow`` (above :data:`MAX_TOKEN_COUNT`, more than
            the ledger can store), with the field's pointer.
    """
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is float and value.is_integer() and abs(value) > MAX_TOKEN_COUNT:
        raise UsageParseError(  # an integer too large for the JSON decoder's int
            f"{key} = {value:.6g} is above the largest token count the ledger stores "
            f"({MAX_TOKEN_COUNT})", code="usage-overflow", pointer=child(base, key))
    if type(value) is not int:
        raise UsageParseError(
            f"{key} must be an integer token count, got {json_type_name(value)} "
            f"{show_value(value)}",
            code="usage-type",
            pointer=child(base, key),
        )
    if value < 0:
        raise UsageParseError(
            f"{key} must not be negative, got {show_int(value)}",
            code="usage-negative",
            pointer=child(base, key),
        )
    if value > MAX_TOKEN_COUNT:
        raise UsageParseError(
            f"{key} = {show_int(value)} is above the largest token count the ledger stores "
            f"({MAX_TOKEN_COUNT})",
            code="usage-overflow",
            pointer=child(base, key),
        )
    return value


def req_int(obj: Mapping[str, Any], key: str, base: str) -> int:
    """Read a required non-negative integer; absent or ``null`` raises ``usage-missing``."""
    value = opt_int(obj, key, base)
    if value is None:
        raise UsageParseError(
            f"required field {key} is missing", code="usage-missing", pointer=child(base, key)
        )
    return value


def opt_obj(obj: Mapping[str, Any], key: str, base: str) -> Mapping[str, Any] | None:
    """Read an optional nested object; absent or ``null`` -> ``None``, else it must be a dict."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise UsageParseError(
            f"{key} must be a JSON object, got {json_type_name(value)}",
            code="usage-type",
            pointer=child(base, key),
        )
    return _json_object(value, child(base, key), key)


def cache_details(obj: Mapping[str, Any], key: str, base: str) -> tuple[int | None, int | None]:
    """``(cached_tokens, cache_write_tokens)`` of the OpenAI-style details object ``obj[key]``
    (``prompt_tokens_details`` in chat usage, ``input_tokens_details`` in Responses usage).

    Returns:
        Each count, or ``None`` when it (or the whole details object) was not sent.

    Raises:
        UsageParseError: as :func:`opt_obj` and :func:`opt_int`, with the field's pointer.
    """
    details = opt_obj(obj, key, base)
    if details is None:
        return None, None
    details_pointer = child(base, key)
    return (
        opt_int(details, "cached_tokens", details_pointer),
        opt_int(details, "cache_write_tokens", details_pointer),
    )


class TTLSplit(NamedTuple):
    """A provider's breakdown of its cache write by TTL (tokens).

    Attributes:
        write_5m: Tokens written with a 5-minute TTL, or ``None`` when unknown.
        write_1h: Tokens written with a 1-hour TTL, or ``None`` when unknown.
        total: Tokens the breakdown accounts for (all its entries, whatever their TTL): the
            cache write when the provider sent only the breakdown.
        notes: Inconsistencies found while reading the breakdown.
    """

    write_5m: int | None
    write_1h: int | None
    total: int
    notes: tuple[str, ...] = ()


_NO_SPLIT = TTLSplit(None, None, 0)
"""Stands for a breakdown the provider did not send (its ``total`` is never used)."""


class UsageKeys(NamedTuple):
    """Where a provider whose input count excludes cached tokens puts each count.

    Attributes:
        uncached: The uncached input count (required), e.g. Anthropic ``input_tokens``.
        read: The cache read count.
        write: The cache write count.
        output: The output count.
    """

    uncached: str
    read: str
    write: str
    output: str


def exclusive_usage(
    wire_format: str,
    usage: object,
    pointer: str,
    *,
    what: str,
    keys: UsageKeys,
    split: Callable[[Mapping[str, Any], str], TTLSplit | None],
) -> CacheUsage:
    """Read a usage object whose input count excludes cache reads and writes.

    The fields are read in this order (the first bad one raises): ``keys.uncached``,
    ``keys.read``, ``keys.write``, the TTL breakdown (``split(obj, pointer)``, ``None`` when
    not sent), ``keys.output``.

    Args:
        wire_format: The wire format name recorded in the result.
        usage: The usage object (a JSON object or an SDK model).
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).
        what: How error messages name the object (``"Anthropic usage"``, ...).
        keys: The provider's field names.
        split: Reader of the TTL breakdown.

    Returns:
        CacheUsage with ``input_tokens_total = uncached + read + write``, known only when both
        cache counts are; the write is the breakdown's ``total`` when only the breakdown was
        sent; the breakdown's 5m/1h split and notes.

    Raises:
        UsageParseError: A count missing (``usage-missing``), negative or not an integer.
    """
    obj = as_mapping(usage, pointer, what)
    uncached = req_int(obj, keys.uncached, pointer)
    read = opt_int(obj, keys.read, pointer)
    write = opt_int(obj, keys.write, pointer)
    ttl = split(obj, pointer)
    if ttl is None:
        ttl = _NO_SPLIT
    elif write is None:
        write = ttl.total
    total = uncached + read + write if read is not None and write is not None else None
    output = opt_int(obj, keys.output, pointer)
    return _cache_usage(wire_format, obj, total, uncached, read, write, output, ttl.notes, ttl)


def inclusive_usage(
    wire_format: str,
    raw: Mapping[str, Any],
    *,
    total: int | None,
    read: int | None,
    write: int | None,
    output: int | None,
    notes: tuple[str, ...] = (),
) -> CacheUsage:
    """CacheUsage for a provider whose input count includes cached tokens.

    ``uncached = total - read - (write or 0)``: known when ``total`` and ``read`` are; an
    unreported write is counted in the remainder. Not clamped (negative when inconsistent).
    """
    uncached = total - read - (write or 0) if total is not None and read is not None else None
    return _cache_usage(wire_format, raw, total, uncached, read, write, output, notes)


def _cache_usage(
    wire_format: str,
    raw: Mapping[str, Any],
    total: int | None,
    uncached: int | None,
    read: int | None,
    write: int | None,
    output: int | None,
    notes: tuple[str, ...],
    split: TTLSplit = _NO_SPLIT,
) -> CacheUsage:
    return CacheUsage(
        wire_format=wire_format,
        input_tokens_total=total,
        uncached_tokens=uncached,
        cache_read_tokens=read,
        cache_write_tokens=write,
        cache_write_5m_tokens=split.write_5m,
        cache_write_1h_tokens=split.write_1h,
        output_tokens=output,
        raw=dict(raw),
        inconsistency_notes=notes,
    )


def response_usage(
    body: object, parse: Callable[[Any, str], CacheUsage], what: str = "response body"
) -> CacheUsage:
    """Apply ``parse(usage, "/usage")`` to ``body["usage"]`` of a non-streaming response body.

    Args:
        body: The decoded response body (a JSON object or an SDK model).
        parse: The wire format's ``parse_usage``.
        what: How error messages name the body (``"Anthropic response body"``, ...).

    Raises:
        UsageParseError: ``usage-type`` at ``""`` when the body is not an object,
            ``usage-missing`` at ``/usage`` when it has no usage (e.g. an error body), else as
            ``parse`` with pointers under ``/usage``.
    """
    obj = as_mapping(body, "", what)
    if obj.get("usage") is None:
        raise UsageParseError(
            "response body has no usage object", code="usage-missing", pointer="/usage"
        )
    return parse(obj["usage"], "/usage")
