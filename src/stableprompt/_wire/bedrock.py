"""AWS Bedrock Converse / ConverseStream (wire format ``"bedrock-converse"``).

Semantics (PROVIDERS.md §6; ``botocore`` ``bedrock-runtime/2023-09-30/service-2.json`` shape
``TokenUsage``; docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html): with prompt
caching, ``inputTokens`` is *only the non-cached* input; "total input tokens = inputTokens +
cacheReadInputTokens + cacheWriteInputTokens". ``cacheDetails`` (``[{ttl: "5m"|"1h",
inputTokens}]``) breaks the write down by TTL and is never added on top of
``cacheWriteInputTokens``.

Not handled: the UNVERIFIED report (PROVIDERS.md §6.2) that ConverseStream for OpenAI-family
models sends ``inputTokens`` *including* the cache write; the parser has no model to tell.

Streams: ConverseStream usage is in the ``metadata`` event. Two framings are accepted (detected
from the first byte):

- JSON lines: one event per line in the form boto3 yields them,
  ``{"metadata": {"usage": {...}, "metrics": {...}}}``, ``{"contentBlockDelta": {...}}``, ...
- The binary ``application/vnd.amazon.eventstream`` framing that travels over HTTP (prelude
  with lengths and CRC32, headers ``:event-type`` / ``:message-type``, JSON payload).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from typing import Any

from .._exceptions import UsageParseError
from .._sse import LineSplitter
from .._usage import CacheUsage
from ._base import Clock, Sighting, StreamAccumulator
from ._fields import (
    TTLSplit,
    UsageKeys,
    as_mapping,
    child,
    exclusive_usage,
    req_int,
    response_usage,
)

__all__ = [
    "WIRE_FORMAT",
    "BedrockStreamAccumulator",
    "encode_event",
    "parse_response",
    "parse_usage",
]

WIRE_FORMAT = "bedrock-converse"

_TTL_FIELDS = {"5m": 0, "1h": 1}
_KEYS = UsageKeys("inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens", "outputTokens")


def parse_usage(usage: object, pointer: str = "") -> CacheUsage:
    """Normalize a Bedrock ``TokenUsage`` object.

    Args:
        usage: ``{"inputTokens", "outputTokens"?, "totalTokens"?, "cacheReadInputTokens"?,
            "cacheWriteInputTokens"?, "cacheDetails"?: [{"ttl", "inputTokens"}]}``.
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).

    Returns:
        CacheUsage with ``uncached = inputTokens``, ``cache_read = cacheReadInputTokens``,
        ``cache_write = cacheWriteInputTokens`` (or the sum of ``cacheDetails`` when only those
        were sent) and the 5m/1h split; the total is known only when both cache fields are.
        A TTL other than ``5m``/``1h`` is flagged as an inconsistency note.

    Raises:
        UsageParseError: ``inputTokens`` missing; a count negative / not an integer; a
            ``cacheDetails`` entry that is not ``{"ttl": str, "inputTokens": int}``.
    """
    return exclusive_usage(
        WIRE_FORMAT, usage, pointer, what="Bedrock usage", keys=_KEYS, split=_cache_details
    )


def _cache_details(obj: Mapping[str, Any], pointer: str) -> TTLSplit | None:
    """The ``cacheDetails`` TTL breakdown; its total counts entries of every TTL."""
    details = obj.get("cacheDetails")
    if details is None:
        return None
    details_pointer = child(pointer, "cacheDetails")
    if not isinstance(details, list):
        raise UsageParseError(
            "cacheDetails must be an array", code="usage-type", pointer=details_pointer
        )
    split = [0, 0]  # botocore: "Empty if no cache creation occurred": a complete breakdown
    notes: list[str] = []
    detail_sum = 0
    for index, entry in enumerate(details):
        entry_pointer = child(details_pointer, index)
        item = as_mapping(entry, entry_pointer, "cacheDetails entry")
        tokens = req_int(item, "inputTokens", entry_pointer)
        ttl = item.get("ttl")
        if not isinstance(ttl, str):
            raise UsageParseError(
                "cacheDetails ttl must be a string",
                code="usage-type" if ttl is not None else "usage-missing",
                pointer=child(entry_pointer, "ttl"),
            )
        detail_sum += tokens
        slot = _TTL_FIELDS.get(ttl)
        if slot is None:
            notes.append(f"unrecognized cache TTL {ttl!r} at {entry_pointer} ({tokens} tokens)")
        else:
            split[slot] += tokens
    return TTLSplit(split[0], split[1], detail_sum, tuple(notes))


def parse_response(body: object) -> CacheUsage:
    """Normalize the usage of a Converse response body (``body["usage"]``).

    Raises:
        UsageParseError: ``usage-missing`` at ``/usage`` when absent, else as
            :func:`parse_usage` with pointers under ``/usage``.
    """
    return response_usage(body, parse_usage, "Converse response body")


def _header_string(value: str) -> bytes:
    data = value.encode()
    return b"\x07" + struct.pack(">H", len(data)) + data


def encode_event(event_type: str, payload: bytes, *, message_type: str = "event") -> bytes:
    """Frame one ``application/vnd.amazon.eventstream`` message (for tests and emulators).

    Args:
        event_type: The ``:event-type`` header, e.g. ``"metadata"`` (for ``message_type``
            ``"exception"`` it is written as ``:exception-type``).
        payload: The JSON payload bytes.
        message_type: ``"event"`` or ``"exception"``.

    Returns:
        The framed message: prelude (total length, headers length, CRC32), headers, payload,
        message CRC32, all big-endian.
    """
    type_header = ":event-type" if message_type == "event" else ":exception-type"
    headers = b""
    for name, value in (
        (type_header, event_type),
        (":content-type", "application/json"),
        (":message-type", message_type),
    ):
        raw_name = name.encode()
        headers += bytes([len(raw_name)]) + raw_name + _header_string(value)
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
    return message + struct.pack(">I", zlib.crc32(message))


_FIXED_HEADER_SIZES = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


def _parse_headers(data: bytes) -> dict[str, object]:
    headers: dict[str, object] = {}
    pos = 0
    while pos < len(data):
        name_len = data[pos]
        name = data[pos + 1 : pos + 1 + name_len].decode("utf-8", errors="replace")
        pos += 1 + name_len
        kind = data[pos]
        pos += 1
        value: object
        if kind in (0, 1):
            value = kind == 0
        elif kind in (6, 7):
            (length,) = struct.unpack_from(">H", data, pos)
            raw = data[pos + 2 : pos + 2 + length]
            value = raw.decode("utf-8", errors="replace") if kind == 7 else raw
            pos += 2 + length
        elif kind in _FIXED_HEADER_SIZES:
            size = _FIXED_HEADER_SIZES[kind]
            value = data[pos : pos + size]
            pos += size
        else:
            raise ValueError(f"unknown eventstream header type {kind}")
        headers[name] = value
    return headers


class BedrockStreamAccumulator(StreamAccumulator):
    """Accumulate usage from a ConverseStream body (JSON lines or binary eventstream).

    Rule (PROVIDERS.md §6.2): usage is ``metadata.usage``; no ``metadata`` event means
    :meth:`CacheUsage.unknown`. Content-bearing events (TTFT): ``contentBlockDelta`` with a
    non-empty delta, or a ``contentBlockStart`` that starts a tool use. Bedrock streams carry
    no response id (it is in the ``x-amzn-requestid`` header), so ``response_id`` stays ``None``.
    Error pointers are relative to the event (JSON lines: ``/metadata/usage/...``; binary:
    the payload, ``/usage/...``).
    """

    wire_format = WIRE_FORMAT

    def __init__(self, *, clock: Clock | None = None, start: float | None = None) -> None:
        super().__init__(clock=clock, start=start)
        self._mode: str | None = None  # "lines" or "binary", decided by the first byte
        self._lines = LineSplitter()
        self._buf = bytearray()
        self._buf_offset = 0
        self._corrupt: str | None = None
        self._usage: Sighting | None = None

    def _feed(self, chunk: bytes | bytearray | memoryview) -> None:
        if self._mode is None:
            data = bytes(chunk).lstrip()
            if not data:
                self._lines.feed(chunk)  # leading whitespace: JSON lines tolerate it
                return
            self._mode = "lines" if data[:1] in (b"{", b"[") else "binary"
        if self._mode == "lines":
            for offset, line in self._lines.feed(chunk):
                self._line(offset, line)
        else:
            self._binary(chunk)

    def _close(self) -> None:
        if self._mode == "lines":
            tail = self._lines.close()
            if tail is not None:
                self._line(tail[0], tail[1])  # JSON lines often lack the final newline
        elif self._mode == "binary" and self._buf and self._corrupt is None:
            self._corrupt = f"stream ended inside an eventstream message at byte {self._buf_offset}"

    def _buffered(self) -> int:
        return self._lines.pending + len(self._buf)

    def _line(self, offset: int, line: bytes) -> None:
        if not line.strip():
            return
        obj = self._decode_object(line, offset)
        if obj is None:
            return
        for kind, body in obj.items():
            self._on(kind, body, offset, f"/{kind}")

    def _binary(self, chunk: bytes | bytearray | memoryview) -> None:
        if self._corrupt is not None:
            return
        buf = self._buf
        buf += chunk
        while len(buf) >= 12:
            total, headers_len = struct.unpack_from(">II", buf, 0)
            (prelude_crc,) = struct.unpack_from(">I", buf, 8)
            if zlib.crc32(bytes(buf[:8])) != prelude_crc or total < 16 + headers_len:
                self._corrupt = f"bad eventstream prelude at byte {self._buf_offset}"
                buf.clear()
                return
            if len(buf) < total:
                return
            message = bytes(buf[:total])
            offset = self._buf_offset
            del buf[:total]
            self._buf_offset += total
            (message_crc,) = struct.unpack_from(">I", message, total - 4)
            if zlib.crc32(message[:-4]) != message_crc:
                self._corrupt = f"bad eventstream message CRC at byte {offset}"
                buf.clear()
                return
            try:
                headers = _parse_headers(message[12 : 12 + headers_len])
            except (ValueError, IndexError, struct.error):
                self._corrupt = f"bad eventstream headers at byte {offset}"
                buf.clear()
                return
            payload = message[12 + headers_len : -4]
            if headers.get(":message-type") == "exception":
                self.error = str(headers.get(":exception-type", "exception"))
                continue
            kind = headers.get(":event-type")
            if not isinstance(kind, str):
                continue
            body = self._decode(payload, offset) if payload else {}
            if body is not None:
                self._on(kind, body, offset, "")

    def _on(self, kind: str, body: object, offset: int, pointer: str) -> None:
        if not isinstance(body, Mapping):
            return
        if kind == "metadata":
            if body.get("usage") is not None:
                self._usage = Sighting(body["usage"], offset, f"{pointer}/usage")
        elif kind == "contentBlockDelta":
            if body.get("delta"):
                self._mark_content()
        elif kind == "contentBlockStart":
            start = body.get("start")
            if isinstance(start, Mapping) and start.get("toolUse"):
                self._mark_content()
        elif kind.endswith("Exception"):
            self.error = kind

    def _finish(self) -> CacheUsage:
        if self._usage is None:
            reason = "stream ended without a metadata event: no usage reported"
            if self._corrupt is not None:
                reason += f" ({self._corrupt})"
            return self._unknown(reason)
        return self._parse_at(parse_usage, self._usage)
