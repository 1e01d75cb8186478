"""Anthropic Messages API (wire format ``"anthropic"``): usage parsing and stream accumulation.

Semantics (PROVIDERS.md §1; docs.claude.com/en/docs/build-with-claude/prompt-caching and
``anthropic-sdk-python`` ``types/usage.py`` / ``types/message.py``): ``input_tokens`` is only the
uncached remainder after the last breakpoint; the total prompt is
``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``. The
``cache_creation`` object (``ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``) is a
TTL breakdown whose sum *equals* ``cache_creation_input_tokens``: it is never added on top.

Also used for Anthropic-on-Bedrock via InvokeModel and Anthropic-compatible servers, which
return the same ``usage`` shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._canonical import unescape_pointer
from .._exceptions import UsageParseError
from .._sse import SSEEvent
from .._usage import CacheUsage
from ._base import Clock, SSEStreamAccumulator
from ._fields import (
    TTLSplit,
    UsageKeys,
    child,
    exclusive_usage,
    opt_obj,
    req_int,
    response_usage,
)

__all__ = ["WIRE_FORMAT", "AnthropicStreamAccumulator", "parse_response", "parse_usage"]

WIRE_FORMAT = "anthropic"

_WRITE_KEY = "cache_creation_input_tokens"
_KEYS = UsageKeys("input_tokens", "cache_read_input_tokens", _WRITE_KEY, "output_tokens")


def parse_usage(usage: object, pointer: str = "") -> CacheUsage:
    """Normalize an Anthropic ``usage`` object.

    Args:
        usage: The ``usage`` object of a Message (or the accumulated ``usage`` of a stream):
            ``{"input_tokens", "cache_creation_input_tokens"?, "cache_read_input_tokens"?,
            "cache_creation"?: {"ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"},
            "output_tokens"?, ...}``. A ``dict`` or an SDK ``Usage`` model.
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).

    Returns:
        CacheUsage with ``uncached = input_tokens``, ``cache_read = cache_read_input_tokens``,
        ``cache_write = cache_creation_input_tokens`` (or the TTL split's sum when only the
        split was sent) and the 5m/1h split. The total is known only when both cache fields
        were sent.

    Raises:
        UsageParseError: ``input_tokens`` missing (``usage-missing``), a count negative
            (``usage-negative``) or not an integer (``usage-type``); ``pointer`` names it.
    """
    return exclusive_usage(
        WIRE_FORMAT, usage, pointer, what="Anthropic usage", keys=_KEYS, split=_ttl_split
    )


def _ttl_split(obj: Mapping[str, Any], pointer: str) -> TTLSplit | None:
    """The ``cache_creation`` TTL split; its sum is the write (the docs: they are equal)."""
    ttl = opt_obj(obj, "cache_creation", pointer)
    if ttl is None:
        return None
    ttl_pointer = child(pointer, "cache_creation")
    write_5m = req_int(ttl, "ephemeral_5m_input_tokens", ttl_pointer)
    write_1h = req_int(ttl, "ephemeral_1h_input_tokens", ttl_pointer)
    return TTLSplit(write_5m, write_1h, write_5m + write_1h)


def parse_response(body: object) -> CacheUsage:
    """Normalize the usage of a non-streaming Messages response body (``body["usage"]``).

    Raises:
        UsageParseError: ``usage-missing`` at ``/usage`` when the body has none (e.g. an error
            body), otherwise as :func:`parse_usage` with pointers under ``/usage``.
    """
    return response_usage(body, parse_usage, "Anthropic response body")


class AnthropicStreamAccumulator(SSEStreamAccumulator):
    """Accumulate usage from a Messages SSE stream.

    Rule (PROVIDERS.md §1.2, as the SDK's ``lib/streaming/_messages.py`` does): start from
    ``message_start.message.usage``, then overwrite it with every non-null field of each
    ``message_delta.usage``. Counts are cumulative: never summed. The TTL split exists only in
    ``message_start``: when a ``message_delta`` changes ``cache_creation_input_tokens``, the
    split no longer describes the final count, so the 5m/1h fields become unknown (``None``;
    the raw ``cache_creation`` object stays in ``raw``). ``response_id`` is ``message.id``.
    Content-bearing events (for TTFT): ``content_block_delta`` of any kind (text, tool input
    JSON, thinking) and the start of a ``tool_use`` block. A stream that ended after
    ``message_start`` but before any ``message_delta`` keeps the input side and reports
    ``output_tokens`` as unknown.
    """

    wire_format = WIRE_FORMAT

    def __init__(self, *, clock: Clock | None = None, start: float | None = None) -> None:
        super().__init__(clock=clock, start=start)
        self._usage: dict[str, Any] | None = None
        # key -> (byte offset of the event that last set it, pointer of its usage object)
        self._sources: dict[str, tuple[int, str]] = {}
        self._saw_delta = False
        self._split_stale = False

    def _event(self, event: SSEEvent) -> None:
        if event.event == "ping" or (
            self.first_content_at is not None and event.event == "content_block_delta"
        ):
            return  # nothing left to learn from these: skip decoding
        obj = self._decode_object(event.data, event.offset)
        if obj is None:
            return
        kind = obj.get("type", event.event)
        if kind == "content_block_delta":
            self._mark_content()
        elif kind == "content_block_start":
            block = obj.get("content_block")
            if isinstance(block, Mapping) and block.get("type") in ("tool_use", "server_tool_use"):
                self._mark_content()
        elif kind == "message_start":
            message = obj.get("message")
            if isinstance(message, Mapping):
                self._identify(message, "id", "model")
                usage = message.get("usage")
                if isinstance(usage, Mapping):
                    self._usage = dict(usage)
                    self._sources = {key: (event.offset, "/message/usage") for key in usage}
        elif kind == "message_delta":
            usage = obj.get("usage")
            if isinstance(usage, Mapping):
                self._saw_delta = True
                if self._usage is None:
                    self._usage = {}
                written = usage.get(_WRITE_KEY)
                if written is not None and written != self._usage.get(_WRITE_KEY, written):
                    self._split_stale = True
                for key, value in usage.items():
                    if value is not None:
                        self._usage[key] = value
                        self._sources[key] = (event.offset, "/usage")
        elif kind == "error":
            error = obj.get("error")
            self.error = str(error.get("type", error)) if isinstance(error, Mapping) else str(error)

    def _finish(self) -> CacheUsage:
        if self._usage is None:
            return self._unknown("stream ended before message_start: no usage reported")
        try:
            usage = parse_usage(self._usage)
        except UsageParseError as exc:
            key = unescape_pointer((exc.pointer or "/").split("/")[1])
            offset, base = self._sources.get(key, (None, ""))
            exc.pointer = f"{base}{exc.pointer}"
            exc.offset = offset
            raise
        if self._split_stale:
            usage = usage.model_copy(
                update={"cache_write_5m_tokens": None, "cache_write_1h_tokens": None})
        if not self._saw_delta:
            return self._partial(usage, "stream ended before message_delta: output_tokens unknown")
        return usage
