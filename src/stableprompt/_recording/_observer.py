"""Watching a response body on its way to the caller: decoding, usage, TTFT, diagnostics.

A :class:`ResponseObserver` is fed every raw chunk the caller receives (it copies, never holds
back or changes a byte), decodes ``gzip``/``deflate`` content encodings (``br``/``zstd``
when their packages are installed, else the usage is unknown with the reason), runs SSE bodies
through the wire format's stream accumulator (usage, response id, time to first token) and
copies JSON bodies aside. When the body ends or the caller stops reading, :meth:`close
<ResponseObserver.close>` builds one frozen :class:`Observation` and hands it to a
one-method :class:`ObservationSink` (the recorder's, see :meth:`Recorder.observe
<stableprompt.Recorder.observe>`). The observer knows nothing of the recorder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .._canonical import loads
from .._sse import SSEParser
from .._usage import CacheUsage
from .._wire._base import StreamAccumulator
from .._wire._formats import DIAGNOSTIC_EVENTS
from .._wire._registry import stream_accumulator_for
from ..providers import stream_accumulator
from ._call import elapsed_ms
from ._decoders import ContentDecoder, IdentityDecoder, decoder_for
from ._http import header

if TYPE_CHECKING:
    from .._ledger._usage_record import UsageRecord

__all__ = ["BodyObserver", "Observation", "ObservationSink", "ResponseObserver"]

_MAX_JSON_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Observation:
    """What one response body amounted to, as the observer saw it by :meth:`close
    <ResponseObserver.close>`.

    Attributes:
        status_code: HTTP status of the response, ``None`` when none arrived (the send
            raised ``error``).
        body: The whole decoded body of a non-stream response that ended (``None`` for
            streams, a body cut short, or one that could not be read).
        usage: Usage read from a stream (or unknown, with the reason, when the body could not
            be decoded or read), ``None`` for non-stream bodies (parsed from ``body``).
        response_id: Provider message/response id seen in a stream.
        diagnostics: Provider cache diagnostics seen in a stream, as received.
        ttft_ms: Milliseconds from sending to the first content token (streams).
        latency_ms: Milliseconds from sending to the observer's close (the body's end, or
            when the caller stopped reading): the call's latency, also when it is finished
            later on another thread (``_deferred``).
        error: The exception raised while reading the body, if any.
        provider_error: The provider's error type when the stream carried an error event.
        incomplete: Why the body is incomplete (closed early, cut before its final event).
        detail: Extra evidence for ``verdict_detail`` (``stream``, ``usage_error``,
            ``observer_error``, ``usage_unknown_reason``).
    """

    status_code: int | None = None
    body: bytes | None = None
    usage: CacheUsage | None = None
    response_id: str | None = None
    diagnostics: Any = None
    ttft_ms: float | None = None
    latency_ms: float | None = None
    error: BaseException | None = None
    provider_error: str | None = None
    incomplete: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


class ObservationSink(Protocol):
    """Where an observer hands its :class:`Observation`, once, at :meth:`close
    <ResponseObserver.close>`; returns the call's record, if one was made."""

    def __call__(self, observation: Observation, /) -> UsageRecord | None: ...


class BodyObserver(Protocol):
    """What a recording transport feeds a response body to (:class:`ResponseObserver` is
    one; ``_deferred`` has another that only keeps the chunks for a recording thread)."""

    def feed(self, chunk: bytes) -> None:
        """Observe the next raw chunk, exactly as received (never raises)."""
        ...

    def close(self, *, complete: bool = True, error: BaseException | None = None
              ) -> UsageRecord | None:
        """End of the body (idempotent); ``complete=False`` when the caller stopped early,
        ``error`` raised while reading it. Returns the call's record, if already made."""
        ...


class ResponseObserver:
    """Watches one response body as the caller reads it, then hands an :class:`Observation`
    to its sink.

    :meth:`feed` each raw chunk exactly as received (it is never modified or delayed); call
    :meth:`close` once at the end (``complete=False`` when the caller stopped early). SSE
    bodies (``text/event-stream``) go through the wire format's stream accumulator (usage,
    response id, TTFT); other bodies are copied aside (up to 64 MiB) and parsed at close.
    Nothing here raises.

    Args:
        sink: Receives the :class:`Observation` at :meth:`close`.
        usage_format: Usage parser of the call (wire format name), for the stream accumulator.
        status_code: HTTP status of the response.
        headers: Response headers (``content-type``, ``content-encoding``).
        content_encoding: Overrides the header (``""`` for a body already decoded).
        clock: Monotonic clock in seconds, for TTFT and the latency.
        started: ``clock()`` reading when the request was sent (seconds).
        watch_diagnostics: Look for provider cache diagnostics in stream events; a callable
            answers it later (``None``: not known yet; the decoded stream is kept aside until
            it answers, and watched if it never did by :meth:`close`): a request whose body
            is decoded on another thread meanwhile (``_deferred``).
        request_format: The call's request format, when its usage dialect was overridden
            (the stream keeps the request format's event shape).

    Attributes:
        eager: Close as soon as the body is known complete (a stream's terminal event, or
            a body's ``Content-Length`` reached), inside the :meth:`feed` of that chunk,
            before the caller gets it: an SDK may consider the call done at that chunk,
            before the body ends. Default False (close at the body's end); a recorder whose
            close is cheap sets it (``_recording._deferred``: the close journals the call).
    """

    def __init__(
        self,
        sink: ObservationSink,
        *,
        usage_format: str,
        status_code: int,
        headers: Any,
        content_encoding: str | None = None,
        clock: Callable[[], float],
        started: float,
        watch_diagnostics: bool | Callable[[], bool | None] = False,
        request_format: str | None = None,
    ) -> None:
        self.sink = sink
        self._clock, self._started = clock, started
        self.usage_format = usage_format
        self.status_code = status_code
        content_type = (header(headers, "content-type") or "").lower()
        if content_encoding is None:
            content_encoding = header(headers, "content-encoding") or ""
        self._problem: str | None = None
        self._decoder: ContentDecoder = IdentityDecoder()
        try:
            self._decoder = decoder_for(content_encoding)
        except LookupError as exc:
            self._problem = str(exc)
        # SSE, or AWS's binary event stream (Bedrock ConverseStream)
        self._sse = ("text/event-stream" in content_type
                     or "application/vnd.amazon.eventstream" in content_type)
        length = header(headers, "content-length")
        self._length = int(length) if length is not None and length.isdigit() else None
        self._raw = 0
        self.eager = False
        self._acc: StreamAccumulator | None = None
        self._buffer: bytearray | None = None
        self._diag: SSEParser | None = None
        # the watch_diagnostics callable while it has not answered
        self._undecided: Callable[[], bool | None] | None = None
        self._held = bytearray()  # the decoded stream meanwhile
        self.diagnostics: Any = None
        self.closed = False
        self._result: UsageRecord | None = None
        try:
            if self._sse:
                self._acc = (
                    stream_accumulator(usage_format, clock=clock, start=started)
                    if request_format is None
                    else stream_accumulator_for(usage_format, request_format, clock=clock,
                                                start=started))
                if callable(watch_diagnostics):
                    self._undecided = watch_diagnostics
                elif watch_diagnostics:
                    self._diag = SSEParser()
            else:
                self._buffer = bytearray()
        except Exception as exc:
            self._problem = f"{type(exc).__name__}: {exc}"

    def feed(self, chunk: bytes) -> None:
        """Observe the next raw chunk (never raises)."""
        if self._problem is not None or self.closed:
            return
        try:
            self._raw += len(chunk)
            self._take(self._decoder.decode(bytes(chunk)))
        except Exception as exc:
            self._problem = f"{type(exc).__name__}: {exc}"
            return
        if self.eager and (self._acc.terminal if self._acc is not None else
                           self._length is not None and self._raw >= self._length):
            self.close()

    def _take(self, data: bytes) -> None:
        if not data:
            return
        if self._acc is not None:
            self._acc.feed(data)
            if self._undecided is not None:
                self._decide(data, self._undecided())
            elif self._diag is not None:
                for event in self._diag.feed(data):
                    self._diagnose(event.event, event.data)
        elif self._buffer is not None:
            if len(self._buffer) + len(data) > _MAX_JSON_BYTES:
                self._problem = "response body larger than 64 MiB: not parsed"
                self._buffer = None
            else:
                self._buffer += data

    def _decide(self, data: bytes, watch: bool | None) -> None:
        """Keep ``data`` aside while ``watch`` is unknown; once known, watch what was kept
        (or drop it)."""
        self._held += data
        if watch is None:
            return
        held, self._held, self._undecided = bytes(self._held), bytearray(), None
        if watch:
            self._diag = SSEParser()
            for event in self._diag.feed(held):
                self._diagnose(event.event, event.data)

    def _diagnose(self, name: str, data: str) -> None:
        if name not in DIAGNOSTIC_EVENTS:
            return
        try:
            obj = loads(data)
        except ValueError:
            return
        if not isinstance(obj, Mapping):
            return
        for holder in (obj, obj.get("message"), obj.get("response")):
            if isinstance(holder, Mapping):
                for key in ("diagnostics", "prompt_cache_diagnostics"):
                    if holder.get(key) is not None:
                        self.diagnostics = holder[key]

    def close(
        self, *, complete: bool = True, error: BaseException | None = None
    ) -> UsageRecord | None:
        """End of the body (idempotent): hand the :class:`Observation` to the sink.

        A response cut before its end (a stream whose accumulator did not see its final
        event, whoever closed it; a JSON body closed early) is recorded as incomplete: verdict
        ``unknown``, the usage fields seen so far kept, never a predecessor. A caller that
        closes a stream after its final event (SDKs stop at ``[DONE]``) loses nothing. An
        error event inside the stream makes the call a failure (``error_class``
        ``ProviderError``, the provider's type in ``verdict_detail["error_type"]``).

        Args:
            complete: False when the caller closed the stream before its end.
            error: An exception raised while reading the body.

        Returns:
            What the sink returned (the record), also on later calls.
        """
        if self.closed:
            return self._result
        self.closed = True
        detail: dict[str, Any] = {}
        usage: CacheUsage | None = None
        body: bytes | None = None
        response_id: str | None = None
        ttft_ms: float | None = None
        incomplete: str | None = None
        provider_error: str | None = None
        try:
            if self._problem is None:
                self._take(self._decoder.flush())
            if self._undecided is not None:  # never answered: watch what was kept
                self._decide(b"", self._undecided() is not False)
        except Exception as exc:
            self._problem = f"{type(exc).__name__}: {exc}"
        if not complete:
            detail["stream"] = "closed before the end of the body"
        acc = self._acc
        if acc is not None:
            response_id, ttft_ms, provider_error = acc.response_id, acc.ttft_ms, acc.error
            if self._problem is None:
                try:
                    usage = acc.finish()
                except Exception as exc:
                    detail["usage_error"] = f"{getattr(exc, 'code', type(exc).__name__)}: {exc}"
                if acc.interrupted and usage is not None:  # cut before its final event
                    incomplete = usage.unknown_reason or "stream ended before its final event"
        elif self._buffer is not None and self._problem is None:
            if complete:
                body = bytes(self._buffer)
            else:
                incomplete = "the response body was closed before its end"
        if self._problem is not None:
            detail["observer_error"] = self._problem
            usage = CacheUsage.unknown(self.usage_format, self._problem)
        elif acc is not None and usage is None:
            usage = CacheUsage.unknown(self.usage_format, "stream usage unreadable")
        if incomplete is not None and usage is not None and (
                usage.unknown_reason not in (None, incomplete)):
            detail["usage_unknown_reason"] = usage.unknown_reason
        self._result = self.sink(Observation(
            status_code=self.status_code,
            body=body,
            usage=usage,
            response_id=response_id,
            diagnostics=self.diagnostics,
            ttft_ms=ttft_ms,
            latency_ms=elapsed_ms(self._started, self._clock()),
            error=error,
            provider_error=provider_error,
            incomplete=incomplete,
            detail=detail,
        ))
        return self._result
