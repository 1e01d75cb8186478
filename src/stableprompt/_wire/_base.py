"""The observe-only stream accumulators' base classes.

- :class:`StreamAccumulator`: byte feeding, TTFT clock, response id and model, decode-error
  bookkeeping, and the unknown / partial results every wire format reports the same way.
- :class:`SSEStreamAccumulator`: the ``text/event-stream`` framing, for subclasses that handle
  decoded events.
- :class:`Sighting`: where a stream carried its latest usage-bearing object.

The usage parsers' shared pieces are in :mod:`._fields`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .._canonical import loads
from .._exceptions import UsageParseError
from .._sse import SSEEvent, SSEParser
from .._usage import CacheUsage

__all__ = ["Clock", "SSEStreamAccumulator", "Sighting", "StreamAccumulator"]

MAX_ERROR_CHARS = 500
"""Longest provider error text kept from a stream (a longer one is cut, its length said)."""

Clock = Callable[[], float]
"""A monotonic clock in seconds (``time.monotonic`` by default)."""


@dataclass(frozen=True, slots=True)
class Sighting:
    """The latest usage-bearing object a stream carried (the last non-null one wins).

    Attributes:
        value: The object as decoded, not yet validated.
        offset: Byte offset of the event that carried it.
        pointer: JSON pointer of ``value`` inside that event (prefix of error pointers).
        final: False when it came before the stream's final chunk (cumulative mid-stream usage
            whose output count is not final yet).
    """

    value: Any
    offset: int
    pointer: str
    final: bool = True


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
        self._error: str | None = None
        self.interrupted = False
        self.bytes_seen = 0
        self.undecodable_events: list[int] = []
        self._result: CacheUsage | None = None

    @property
    def error(self) -> str | None:
        """The provider's in-stream error type/message, at most :data:`MAX_ERROR_CHARS`."""
        return self._error

    @error.setter
    def error(self, value: str | None) -> None:
        if value is not None and len(value) > MAX_ERROR_CHARS:
            value = f"{value[:MAX_ERROR_CHARS]}... ({len(value)} characters)"
        self._error = value

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

    @property
    def terminal(self) -> bool:
        """True once the stream's terminal event was fed (Anthropic ``message_stop``, Chat
        Completions ``[DONE]``, a Responses ``response.completed``/``failed``/``incomplete``):
        nothing after it can change the usage, and an SDK may consider the call complete
        before the body ends. False for formats without one (the body's end decides)."""
        return False

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

    def _decode_object(self, data: str | bytes, offset: int) -> Mapping[str, Any] | None:
        """The event's JSON object; ``None`` for ``null``, invalid JSON or a non-object (the
        last two are recorded in :attr:`undecodable_events`)."""
        obj = self._decode(data, offset)
        if isinstance(obj, Mapping):
            return obj
        if obj is not None:
            self.undecodable_events.append(offset)
        return None

    def _identify(
        self, obj: Mapping[str, Any], id_key: str, model_key: str, *, keep_first: bool = False
    ) -> None:
        """Take :attr:`response_id` / :attr:`model` from string values of ``obj``; with
        ``keep_first`` only while they are still unknown."""
        if isinstance(obj.get(id_key), str) and not (keep_first and self.response_id is not None):
            self.response_id = obj[id_key]
        if isinstance(obj.get(model_key), str) and not (keep_first and self.model is not None):
            self.model = obj[model_key]

    def _scan_choices(
        self, choices: list[Any], has_content: Callable[[Mapping[str, Any]], bool], finish_key: str
    ) -> bool:
        """Mark content when a choice (candidate) ``has_content``; True when one of them
        carries a truthy ``finish_key``. Non-object entries are skipped."""
        finished = False
        for choice in choices:
            if not isinstance(choice, Mapping):
                continue
            if self.first_content_at is None and has_content(choice):
                self._mark_content()
            if choice.get(finish_key):
                finished = True
        return finished

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

    def _parse_at(self, parse: Callable[[Any, str], CacheUsage], seen: Sighting) -> CacheUsage:
        """``parse`` the sighted usage; a :class:`UsageParseError` gets the event's offset."""
        try:
            return parse(seen.value, seen.pointer)
        except UsageParseError as exc:
            exc.offset = seen.offset
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
        self._overlong_seen = 0

    def _feed(self, chunk: bytes | bytearray | memoryview) -> None:
        for event in self._sse.feed(chunk):
            self._event(event)
        dropped = self._sse.overlong
        if len(dropped) > self._overlong_seen:  # lines past MAX_LINE_BYTES: undecodable
            self.undecodable_events.extend(dropped[self._overlong_seen:])
            self._overlong_seen = len(dropped)

    def _close(self) -> None:
        for event in self._sse.close():
            self._event(event)

    def _buffered(self) -> int:
        return self._sse.pending

    @abstractmethod
    def _event(self, event: SSEEvent) -> None: ...
