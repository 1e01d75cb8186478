"""Shared pieces of the per-wire-format usage parsers and stream accumulators.

- Field readers that validate provider JSON and raise :class:`UsageParseError` with the JSON
  pointer of the offending value (codes ``usage-type``, ``usage-negative``, ``usage-missing``).
- :func:`exclusive_usage` / :func:`inclusive_usage`: build a :class:`CacheUsage` from a
  provider whose input count excludes cached tokens (Anthropic, Bedrock) or includes them
  (OpenAI, Gemini, DeepSeek, vLLM, llama.cpp).
- :class:`StreamAccumulator`: the observe-only streaming base (byte feeding, TTFT clock,
  response id, decode-error bookkeeping).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from .._canonical import escape_pointer, loads
from .._exceptions import UsageParseError
from .._sse import SSEEvent, SSEParser
from .._usage import CacheUsage

__all__ = [
    "Clock",
    "SSEStreamAccumulator",
    "StreamAccumulator",
    "as_mapping",
    "child",
    "exclusive_usage",
    "inclusive_usage",
    "opt_int",
    "opt_obj",
    "req_int",
    "response_usage",
]

Clock = Callable[[], float]
"""A monotonic clock in seconds (``time.monotonic`` by default)."""


def child(base: str, key: str | int) -> str:
    """The JSON pointer of ``key`` under the pointer ``base``."""
    return f"{base}/{escape_pointer(key)}"


def _type_name(value: object) -> str:
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
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def as_mapping(value: object, pointer: str, what: str) -> Mapping[str, Any]:
    """Return ``value`` as a JSON object or raise ``usage-type`` at ``pointer``.

    A pydantic model (e.g. the official SDKs' ``response.usage``) is accepted and dumped with
    its wire field names, keeping only fields that were actually set.
    """
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump(mode="json", by_alias=True, exclude_unset=True)
        if isinstance(dumped, Mapping):
            return dumped
    raise UsageParseError(
        f"{what} must be a JSON object, got {_type_name(value)}",
        code="usage-type",
        pointer=pointer,
    )


def opt_int(obj: Mapping[str, Any], key: str, base: str) -> int | None:
    """Read an optional non-negative integer token count; absent or ``null`` -> ``None``.

    Raises:
        UsageParseError: ``usage-type`` (not an integer; booleans and floats included) or
            ``usage-negative``, with the field's pointer.
    """
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is not int:
        raise UsageParseError(
            f"{key} must be an integer token count, got {_type_name(value)} {value!r}",
            code="usage-type",
            pointer=child(base, key),
        )
    if value < 0:
        raise UsageParseError(
            f"{key} must not be negative, got {value}",
            code="usage-negative",
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
            f"{key} must be a JSON object, got {_type_name(value)}",
            code="usage-type",
            pointer=child(base, key),
        )
    return value


def exclusive_usage(
    wire_format: str,
    raw: Mapping[str, Any],
    *,
    uncached: int,
    read: int | None,
    write: int | None,
    write_5m: int | None = None,
    write_1h: int | None = None,
    output: int | None,
    notes: tuple[str, ...] = (),
) -> CacheUsage:
    """CacheUsage for a provider whose input count excludes cache reads and writes.

    ``input_tokens_total = uncached + read + write``, known only when both cache counts are.
    """
    total = uncached + read + write if read is not None and write is not None else None
    return CacheUsage(
        wire_format=wire_format,
        input_tokens_total=total,
        uncached_tokens=uncached,
        cache_read_tokens=read,
        cache_write_tokens=write,
        cache_write_5m_tokens=write_5m,
        cache_write_1h_tokens=write_1h,
        output_tokens=output,
        raw=dict(raw),
        inconsistency_notes=notes,
    )


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
    return CacheUsage(
        wire_format=wire_format,
        input_tokens_total=total,
        uncached_tokens=uncached,
        cache_read_tokens=read,
        cache_write_tokens=write,
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


class StreamAccumulator(ABC):
    """Observe a streamed response and produce its :class:`CacheUsage` at the end.

    Feed every byte chunk the caller receives, in order, with :meth:`feed`; the accumulator
    never modifies the chunks and keeps only the current unterminated line plus the few usage
    objects it needs. Call :meth:`finish` once at end of stream.

    Attributes:
        wire_format: The wire format this accumulator parses.
        response_id: The provider's message/response id once seen (Anthropic ``msg_...``,
            OpenAI ``chatcmpl-...`` / ``resp_...``, Gemini ``responseId``), else ``None``.
        model: The model name the provider reported, once seen.
        start: Clock reading (seconds) when the request was sent; TTFT is measured from it.
            Writable: a transport that builds the accumulator early sets it at send time.
        first_content_at: Clock reading of the first content-bearing event (text, tool-call
            or reasoning delta), or ``None`` so far.
        error: The provider's in-stream error type/message when it sent one, else ``None``.
        interrupted: Set by :meth:`finish`: True when the stream ended before its usage-bearing
            or final event (server truncation, a dropped connection, a caller that stopped
            reading), False when it ran to its end (with or without a usage report).
        bytes_seen: Bytes fed so far.
        undecodable_events: Byte offsets of events whose payload was not valid JSON.
    """

    wire_format: ClassVar[str]

    def __init__(self, *, clock: Clock | None = None, start: float | None = None) -> None:
        """Create an accumulator.

        Args:
            clock: Monotonic clock in seconds; ``time.monotonic`` when ``None``.
            start: Clock reading at request send time; ``clock()`` now when ``None``.
        """
        self._clock: Clock = clock if clock is not None else time.monotonic
        self.start: float = start if start is not None else self._clock()
        self.first_content_at: float | None = None
        self.response_id: str | None = None
        self.model: str | None = None
        self.error: str | None = None
        self.interrupted = False
        self.bytes_seen = 0
        self.undecodable_events: list[int] = []
        self._result: CacheUsage | None = None

    @property
    def ttft_ms(self) -> float | None:
        """Milliseconds from :attr:`start` to the first content-bearing event, or ``None``."""
        if self.first_content_at is None:
            return None
        return (self.first_content_at - self.start) * 1000.0

    @property
    def buffered_bytes(self) -> int:
        """Bytes held back right now: the current unterminated line (or eventstream message).

        Never more than the longest single line/message of the stream: the body itself is
        not retained.
        """
        return self._buffered()

    @property
    def finished(self) -> bool:
        """True once :meth:`finish` has run."""
        return self._result is not None

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        """Observe the next chunk of the response body, exactly as received.

        Raises:
            UsageParseError: ``usage-stream-type`` for a non-bytes chunk, ``usage-stream-closed``
                after :meth:`finish`. Provider content never raises here: undecodable events
                are recorded in :attr:`undecodable_events` and reported by :meth:`finish`.
        """
        if self._result is not None:
            raise UsageParseError(
                "feed() called after finish()", code="usage-stream-closed", offset=self.bytes_seen
            )
        if not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise UsageParseError(
                f"stream chunks must be bytes, got {type(chunk).__name__}",
                code="usage-stream-type",
                offset=self.bytes_seen,
            )
        self.bytes_seen += len(chunk)
        self._feed(chunk)

    def finish(self) -> CacheUsage:
        """End of stream: return the usage (idempotent).

        Returns:
            The normalized usage; :meth:`CacheUsage.unknown` with a reason when the stream
            ended without its usage-bearing event, or with ``output_tokens=None`` and an
            ``unknown_reason`` when only the input side had been reported.

        Raises:
            UsageParseError: The usage object in the stream is malformed; ``pointer`` is
                relative to the JSON event and ``offset`` is the event's byte offset.
        """
        if self._result is None:
            self._close()
            self._result = self._finish()
        return self._result

    def _mark_content(self) -> None:
        if self.first_content_at is None:
            self.first_content_at = self._clock()

    def _decode(self, data: str | bytes, offset: int) -> Any:
        try:
            return loads(data)
        except ValueError:
            self.undecodable_events.append(offset)
            return None

    def _unknown(self, reason: str, *, interrupted: bool = True) -> CacheUsage:
        """Unknown usage with ``reason``; ``interrupted=False`` when the stream did reach its
        end and simply carried no usage (see :attr:`interrupted`)."""
        self.interrupted = interrupted
        if self.undecodable_events:
            shown = ", ".join(str(o) for o in self.undecodable_events[:5])
            reason += f"; {len(self.undecodable_events)} undecodable event(s) at byte {shown}"
        if self.error is not None:
            reason += f"; provider error: {self.error}"
        return CacheUsage.unknown(self.wire_format, reason)

    def _parse_at(
        self, parse: Callable[[Any, str], CacheUsage], usage: Any, pointer: str, offset: int
    ) -> CacheUsage:
        try:
            return parse(usage, pointer)
        except UsageParseError as exc:
            exc.offset = offset
            raise

    def _partial(self, usage: CacheUsage, reason: str) -> CacheUsage:
        """Keep the input side of ``usage`` but mark the output count unknown (the stream was
        cut before its end: :attr:`interrupted`)."""
        self.interrupted = True
        return usage.model_copy(update={"output_tokens": None, "unknown_reason": reason})

    @abstractmethod
    def _feed(self, chunk: bytes | bytearray | memoryview) -> None: ...

    @abstractmethod
    def _buffered(self) -> int: ...

    @abstractmethod
    def _close(self) -> None: ...

    @abstractmethod
    def _finish(self) -> CacheUsage: ...


class SSEStreamAccumulator(StreamAccumulator):
    """Accumulator for ``text/event-stream`` bodies: subclasses handle decoded events."""

    def __init__(self, *, clock: Clock | None = None, start: float | None = None) -> None:
        super().__init__(clock=clock, start=start)
        self._sse = SSEParser()

    def _feed(self, chunk: bytes | bytearray | memoryview) -> None:
        for event in self._sse.feed(chunk):
            self._event(event)

    def _close(self) -> None:
        for event in self._sse.close():
            self._event(event)

    def _buffered(self) -> int:
        return self._sse.pending

    @abstractmethod
    def _event(self, event: SSEEvent) -> None: ...
