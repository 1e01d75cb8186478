"""Google Gemini ``generateContent`` / ``streamGenerateContent`` (wire format ``"gemini"``).

Semantics (PROVIDERS.md §4.1; ``googleapis/python-genai`` ``types.py``
``GenerateContentResponseUsageMetadata``): ``promptTokenCount`` *includes* the cached content;
``cachedContentTokenCount`` is the cache read, for implicit and explicit caches. Gemini reports
no cache writes (explicit caches are created through the ``cachedContents`` API), so
``cache_write_tokens`` is ``None``.

Zero values: the REST API speaks proto3 JSON, which omits integer fields equal to 0; Firebase's
reference says ``cachedContentTokenCount`` "will be 0" without caching and PROVIDERS.md §4.1
says to "parse a missing value as 0". So an absent ``cachedContentTokenCount``,
``candidatesTokenCount`` or ``thoughtsTokenCount`` is read as 0 — that is how Gemini says 0 —
while ``promptTokenCount`` is required. ``output_tokens = candidatesTokenCount +
thoughtsTokenCount`` (both billed as output); ``toolUsePromptTokenCount`` stays in ``raw``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._exceptions import UsageParseError
from .._sse import SSEEvent
from .._usage import CacheUsage
from ._base import Clock, Sighting, SSEStreamAccumulator
from ._fields import as_mapping, inclusive_usage, opt_int, req_int

__all__ = ["WIRE_FORMAT", "GeminiStreamAccumulator", "parse_response", "parse_usage"]

WIRE_FORMAT = "gemini"


def parse_usage(usage: object, pointer: str = "") -> CacheUsage:
    """Normalize a Gemini ``usageMetadata`` object.

    Args:
        usage: ``{"promptTokenCount", "cachedContentTokenCount"?, "candidatesTokenCount"?,
            "thoughtsTokenCount"?, "toolUsePromptTokenCount"?, "totalTokenCount"?,
            "cacheTokensDetails"?}`` (camelCase, as on the wire).
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).

    Returns:
        CacheUsage with ``input_tokens_total = promptTokenCount``,
        ``cache_read = cachedContentTokenCount`` (absent = 0, see module docstring),
        ``cache_write = None``.

    Raises:
        UsageParseError: ``promptTokenCount`` missing, or a count negative / not an integer.
    """
    obj = as_mapping(usage, pointer, "Gemini usageMetadata")
    total = req_int(obj, "promptTokenCount", pointer)
    read = opt_int(obj, "cachedContentTokenCount", pointer) or 0
    candidates = opt_int(obj, "candidatesTokenCount", pointer) or 0
    thoughts = opt_int(obj, "thoughtsTokenCount", pointer) or 0
    return inclusive_usage(
        WIRE_FORMAT, obj, total=total, read=read, write=None, output=candidates + thoughts
    )


def parse_response(body: object) -> CacheUsage:
    """Normalize the usage of a Gemini response body (``body["usageMetadata"]``).

    Args:
        body: A ``GenerateContentResponse`` object, or the JSON array that
            ``streamGenerateContent`` returns without ``alt=sse`` (the last element carrying
            ``usageMetadata`` is used).

    Raises:
        UsageParseError: ``usage-missing`` at ``/usageMetadata`` (or ``/0/usageMetadata``)
            when there is none, else as :func:`parse_usage` with pointers into the body.
    """
    if isinstance(body, Sequence) and not isinstance(body, (str, bytes, bytearray)):
        for index in range(len(body) - 1, -1, -1):
            item = as_mapping(body[index], f"/{index}", "Gemini response chunk")
            if item.get("usageMetadata") is not None:
                return parse_usage(item["usageMetadata"], f"/{index}/usageMetadata")
        raise UsageParseError(
            "no chunk carries usageMetadata", code="usage-missing", pointer="/0/usageMetadata"
        )
    obj = as_mapping(body, "", "Gemini response body")
    if obj.get("usageMetadata") is None:
        raise UsageParseError(
            "response body has no usageMetadata", code="usage-missing", pointer="/usageMetadata"
        )
    return parse_usage(obj["usageMetadata"], "/usageMetadata")


def _has_content(candidate: Mapping[str, Any]) -> bool:
    content = candidate.get("content")
    if not isinstance(content, Mapping):
        return False
    parts = content.get("parts")
    if not isinstance(parts, list):
        return False
    for part in parts:
        if isinstance(part, Mapping) and (
            part.get("text") or part.get("functionCall") or part.get("inlineData")
        ):
            return True
    return False


class GeminiStreamAccumulator(SSEStreamAccumulator):
    """Accumulate usage from ``streamGenerateContent?alt=sse`` (``data:`` lines, each a
    ``GenerateContentResponse``).

    Rule (PROVIDERS.md §4.1): take the last chunk that carries ``usageMetadata``. Whether
    intermediate chunks repeat the prompt counts is UNVERIFIED, so if the stream ends before a
    candidate's ``finishReason`` (or a ``promptFeedback.blockReason``) the input side is kept
    and ``output_tokens`` is unknown. ``response_id`` is ``responseId``; ``model`` is
    ``modelVersion``. Content-bearing chunks (TTFT): a part with text (thoughts included),
    a ``functionCall`` or inline data.
    """

    wire_format = WIRE_FORMAT

    def __init__(self, *, clock: Clock | None = None, start: float | None = None) -> None:
        super().__init__(clock=clock, start=start)
        self._usage: Sighting | None = None
        self._finished_seen = False

    def _event(self, event: SSEEvent) -> None:
        obj = self._decode_object(event.data, event.offset)
        if obj is None:
            return
        self._identify(obj, "responseId", "modelVersion", keep_first=True)
        candidates = obj.get("candidates")
        if isinstance(candidates, list):
            self._finished_seen |= self._scan_choices(candidates, _has_content, "finishReason")
        feedback = obj.get("promptFeedback")
        if isinstance(feedback, Mapping) and feedback.get("blockReason"):
            self._finished_seen = True
        error = obj.get("error")
        if isinstance(error, Mapping):
            self.error = str(error.get("status") or error.get("message"))
        if obj.get("usageMetadata") is not None:
            self._usage = Sighting(
                obj["usageMetadata"], event.offset, "/usageMetadata", self._finished_seen
            )

    def _finish(self) -> CacheUsage:
        if self._usage is None:
            return self._unknown("stream ended without a chunk carrying usageMetadata")
        usage = self._parse_at(parse_usage, self._usage)
        if not self._usage.final:
            return self._partial(usage, "stream ended before finishReason: output_tokens unknown")
        return usage
