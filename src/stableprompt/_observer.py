"""Watching a response body on its way to the caller: decoding, usage, TTFT, diagnostics.

A :class:`ResponseObserver` is fed every raw chunk the caller receives (it copies, never holds
back or changes a byte), decodes ``gzip``/``deflate`` content encodings, runs SSE bodies
through the wire format's stream accumulator (usage, response id, time to first token) and
copies JSON bodies aside, then hands everything to :meth:`Recorder.finish
<stableprompt._recorder.Recorder.finish>` when the body ends or the caller stops reading.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._canonical import loads
from ._sse import SSEParser
from ._usage import CacheUsage
from .providers import stream_accumulator
from .providers._base import StreamAccumulator

if TYPE_CHECKING:
    from ._record import UsageRecord
    from ._recorder import Pending, Recorder

__all__ = ["ResponseObserver", "header"]

_MAX_JSON_BYTES = 64 * 1024 * 1024
_DIAGNOSTIC_EVENTS = frozenset({
    "message_start", "message_delta", "response.completed", "response.incomplete",
    "response.failed",
})


def header(headers: Any, name: str) -> str | None:
    """Case-insensitive header lookup on an httpx/httpx2 ``Headers`` or a plain mapping;
    ``None`` when absent or unreadable."""
    if headers is None:
        return None
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, Mapping):
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except Exception:
        return None
    return None if value is None else str(value)


class _Decoder:
    """Incremental Content-Encoding decoder: identity, gzip, deflate (zlib or raw)."""

    def __init__(self, encoding: str) -> None:
        self.encodings = [e.strip().lower() for e in encoding.split(",") if e.strip()]
        self.encodings = [e for e in self.encodings if e != "identity"]
        self.supported = all(e in ("gzip", "x-gzip", "deflate") for e in self.encodings)
        self._objs = [self._new(e) for e in reversed(self.encodings)] if self.supported else []
        self._deflate_raw = [False] * len(self._objs)

    @staticmethod
    def _new(encoding: str, raw: bool = False) -> Any:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        return zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)

    def decode(self, data: bytes) -> bytes:
        for index, obj in enumerate(self._objs):
            try:
                data = obj.decompress(data)
            except zlib.error:
                encoding = list(reversed(self.encodings))[index]
                if encoding != "deflate" or self._deflate_raw[index]:
                    raise
                self._deflate_raw[index] = True  # deflate sent without the zlib header
                self._objs[index] = obj = self._new("deflate", raw=True)
                data = obj.decompress(data)
        return data

    def flush(self) -> bytes:
        data = b""
        for obj in self._objs:
            data = obj.decompress(data) + obj.flush()
        return data


class ResponseObserver:
    """Watches one response body as the caller reads it, then finishes the record.

    :meth:`feed` each raw chunk exactly as received (it is never modified or delayed); call
    :meth:`close` once at the end (``complete=False`` when the caller stopped early). SSE
    bodies (``text/event-stream``) go through the wire format's stream accumulator (usage,
    response id, TTFT); other bodies are copied aside (up to 64 MiB) and parsed at close.
    Nothing here raises.
    """

    def __init__(
        self,
        recorder: Recorder,
        pending: Pending,
        *,
        status_code: int,
        headers: Any,
        content_encoding: str | None = None,
    ) -> None:
        self.recorder = recorder
        self.pending = pending
        self.status_code = status_code
        content_type = (header(headers, "content-type") or "").lower()
        if content_encoding is None:
            content_encoding = header(headers, "content-encoding") or ""
        self._decoder = _Decoder(content_encoding)
        self._problem: str | None = None
        if not self._decoder.supported:
            self._problem = f"content-encoding {content_encoding!r} is not decodable here"
        self._sse = "text/event-stream" in content_type
        self._acc: StreamAccumulator | None = None
        self._buffer: bytearray | None = None
        self._diag: SSEParser | None = None
        self.diagnostics: Any = None
        self.closed = False
        try:
            if self._sse:
                self._acc = stream_accumulator(
                    pending.usage_format, clock=recorder.monotonic, start=pending.started
                )
                if pending.diagnostics_requested is not None:
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
            self._take(self._decoder.decode(bytes(chunk)))
        except Exception as exc:
            self._problem = f"{type(exc).__name__}: {exc}"

    def _take(self, data: bytes) -> None:
        if not data:
            return
        if self._acc is not None:
            self._acc.feed(data)
            if self._diag is not None:
                for event in self._diag.feed(data):
                    self._diagnose(event.event, event.data)
        elif self._buffer is not None:
            if len(self._buffer) + len(data) > _MAX_JSON_BYTES:
                self._problem = "response body larger than 64 MiB: not parsed"
                self._buffer = None
            else:
                self._buffer += data

    def _diagnose(self, name: str, data: str) -> None:
        if name not in _DIAGNOSTIC_EVENTS:
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
        """End of the body (idempotent): parse, attribute and store. Never raises.

        Args:
            complete: False when the caller closed the stream before its end.
            error: An exception raised while reading the body.
        """
        if self.closed:
            return self.pending.record
        self.closed = True
        detail: dict[str, Any] = {}
        usage: CacheUsage | None = None
        body: bytes | None = None
        response_id: str | None = None
        ttft_ms: float | None = None
        try:
            if self._problem is None:
                self._take(self._decoder.flush())
        except Exception as exc:
            self._problem = f"{type(exc).__name__}: {exc}"
        if not complete:
            detail["stream"] = "closed before the end of the body"
        acc = self._acc
        if acc is not None:
            response_id, ttft_ms = acc.response_id, acc.ttft_ms
            if self._problem is None:
                try:
                    usage = acc.finish()
                except Exception as exc:
                    detail["usage_error"] = f"{getattr(exc, 'code', type(exc).__name__)}: {exc}"
            if usage is None:
                usage = CacheUsage.unknown(self.pending.usage_format,
                                           self._problem or "stream usage unreadable")
        elif self._buffer is not None and self._problem is None and complete:
            body = bytes(self._buffer)
        if self._problem is not None:
            detail["observer_error"] = self._problem
        return self.recorder.finish(
            self.pending,
            status_code=self.status_code,
            body=body,
            usage=usage if 200 <= self.status_code < 300 else None,
            response_id=response_id,
            diagnostics=self.diagnostics,
            ttft_ms=ttft_ms,
            error=error,
            detail=detail,
        )
