"""OpenAI Responses API (wire format ``"openai-responses"``): usage parsing and streaming.

Semantics (PROVIDERS.md §3; ``openai-python`` ``types/responses/response_usage.py``):
``input_tokens`` *includes* ``input_tokens_details.cached_tokens`` (read) and
``input_tokens_details.cache_write_tokens`` (write, 2026-07); the guide's own cost code computes
``ordinary = input_tokens - cached_tokens - cache_write_tokens``. Newer SDKs also carry
``input_tokens_details.cache_write_tokens_details`` (``ttl_30m_tokens`` / ``ttl_12h_tokens``):
kept in ``raw`` and checked against the write total, but not mapped to the 5m/1h fields.
Also used for xAI's Responses API (``input_tokens_details.cached_tokens``, PROVIDERS.md §11).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._sse import SSEEvent
from .._usage import CacheUsage
from ._base import Clock, Sighting, SSEStreamAccumulator
from ._fields import (
    as_mapping,
    cache_details,
    child,
    inclusive_usage,
    opt_int,
    opt_obj,
    req_int,
    response_usage,
)

__all__ = ["WIRE_FORMAT", "OpenAIResponsesStreamAccumulator", "parse_response", "parse_usage"]

WIRE_FORMAT = "openai-responses"

_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def parse_usage(usage: object, pointer: str = "") -> CacheUsage:
    """Normalize a Responses ``usage`` object.

    Args:
        usage: ``{"input_tokens", "input_tokens_details"?: {"cached_tokens"?,
            "cache_write_tokens"?, "cache_write_tokens_details"?}, "output_tokens"?, ...}``; a
            ``dict`` or an SDK ``ResponseUsage`` model.
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).

    Returns:
        CacheUsage with ``input_tokens_total = input_tokens``, ``cache_read = cached_tokens``,
        ``cache_write = cache_write_tokens`` (``None`` when not sent).

    Raises:
        UsageParseError: ``input_tokens`` missing, or a count negative / not an integer.
    """
    obj = as_mapping(usage, pointer, "OpenAI Responses usage")
    total = req_int(obj, "input_tokens", pointer)
    read, write = cache_details(obj, "input_tokens_details", pointer)
    notes = _ttl_notes(obj, pointer, write)
    output = opt_int(obj, "output_tokens", pointer)
    return inclusive_usage(
        WIRE_FORMAT, obj, total=total, read=read, write=write, output=output, notes=notes
    )


def _ttl_notes(obj: Mapping[str, Any], pointer: str, write: int | None) -> tuple[str, ...]:
    """A note when ``input_tokens_details.cache_write_tokens_details`` (30m + 12h) exceeds
    ``cache_write_tokens``, or, both sent, does not add up to it."""
    details = opt_obj(obj, "input_tokens_details", pointer)
    if details is None:
        return ()
    details_pointer = child(pointer, "input_tokens_details")
    ttl = opt_obj(details, "cache_write_tokens_details", details_pointer)
    if ttl is None:
        return ()
    ttl_pointer = child(details_pointer, "cache_write_tokens_details")
    split = [opt_int(ttl, key, ttl_pointer) for key in ("ttl_30m_tokens", "ttl_12h_tokens")]
    known = [value for value in split if value is not None]
    too_big = bool(known) and write is not None and sum(known) > write
    mismatch = len(known) == 2 and write is not None and sum(known) != write
    if too_big or mismatch:
        return (
            f"cache_write_tokens_details 30m + 12h ({sum(known)}) does not match "
            f"cache_write_tokens ({write})",
        )
    return ()


def parse_response(body: object) -> CacheUsage:
    """Normalize the usage of a non-streaming Responses body (``body["usage"]``).

    Raises:
        UsageParseError: ``usage-missing`` at ``/usage`` when absent or null, else as
            :func:`parse_usage` with pointers under ``/usage``.
    """
    return response_usage(body, parse_usage, "Responses body")


class OpenAIResponsesStreamAccumulator(SSEStreamAccumulator):
    """Accumulate usage from a Responses SSE stream.

    Rule (PROVIDERS.md §3.2): usage arrives only on the terminal event — ``response.completed``,
    ``response.incomplete`` or ``response.failed`` — at ``response.usage``; earlier events carry
    ``"usage": null``. ``response_id`` is ``response.id`` (from ``response.created`` on).
    Content-bearing events (TTFT): any ``*.delta`` event (output text, function-call arguments,
    reasoning text, refusal, ...).
    """

    wire_format = WIRE_FORMAT

    def __init__(self, *, clock: Clock | None = None, start: float | None = None) -> None:
        super().__init__(clock=clock, start=start)
        self._usage: Sighting | None = None
        self._terminal: str | None = None

    def _event(self, event: SSEEvent) -> None:
        if self.first_content_at is not None and event.event.endswith(".delta"):
            return  # nothing left to learn from deltas: skip decoding
        obj = self._decode_object(event.data, event.offset)
        if obj is None:
            return
        kind = obj.get("type", event.event)
        if not isinstance(kind, str):
            return
        response = obj.get("response")
        if isinstance(response, Mapping):
            self._identify(response, "id", "model")
        if kind.endswith(".delta"):
            self._mark_content()
        elif kind in _TERMINAL:
            self._terminal = kind
            if isinstance(response, Mapping) and response.get("usage") is not None:
                self._usage = Sighting(response["usage"], event.offset, "/response/usage")
            if kind == "response.failed" and isinstance(response, Mapping):
                error = response.get("error")
                if isinstance(error, Mapping):
                    self.error = str(error.get("code") or error.get("message"))
        elif kind == "error":
            self.error = str(obj.get("code") or obj.get("message"))

    def _finish(self) -> CacheUsage:
        if self._usage is None:
            if self._terminal is not None:
                return self._unknown(f"{self._terminal} carried no usage", interrupted=False)
            return self._unknown(
                "stream ended before response.completed/incomplete/failed: no usage reported"
            )
        return self._parse_at(parse_usage, self._usage)
