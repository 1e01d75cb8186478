"""ProviderRequest: a rendered provider request body, ready to send."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .._canonical import loads
from .._public import public
from .._segment import Segment
from ._formats import segment_request
from ._segmenter import SegmentedRequest

__all__ = ["ProviderRequest"]


@dataclass(frozen=True)
class ProviderRequest:
    """A provider request body, ready to send.

    Attributes:
        wire_format: ``anthropic``, ``openai-chat`` or ``openai-responses``.
        path: URL path to POST to (``/v1/messages``, ``/v1/chat/completions``,
            ``/v1/responses``).
        content: The exact body bytes (UTF-8 JSON) to send.
    """

    wire_format: str
    path: str
    content: bytes = field(repr=False)

    @cached_property
    def body(self) -> dict[str, Any]:
        """The body as a fresh dict (decoded from ``content``)."""
        value: dict[str, Any] = loads(self.content)
        return value

    @cached_property
    def segmented(self) -> SegmentedRequest:
        """The body split into cache-order segments, exactly as a recorder or linter sees it."""
        return segment_request(self.wire_format, self.body)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Cache-order segments of the body (params, tools, system, messages)."""
        return self.segmented.segments

    @property
    def data(self) -> bytes:
        """Concatenated segment bytes."""
        return self.segmented.data

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.wire_format, self.path, self.content))

    @classmethod
    def _rendered(cls, wire_format: str, path: str, content: bytes,
                  fingerprints: Callable[[], tuple[str, str]] | None) -> ProviderRequest:
        """A request the SDK rendered: ``fingerprints`` gives ``(fingerprint,
        head_fingerprint)`` equal to the segmented body's, computed incrementally by the
        renderer (``None``: from the segmented body)."""
        request = cls(wire_format, path, content)
        if fingerprints is not None:
            request.__dict__["_fingerprints"] = fingerprints
        return request

    @cached_property
    def _chained(self) -> tuple[str, str]:
        make: Callable[[], tuple[str, str]] | None = self.__dict__.get("_fingerprints")
        if make is None:
            return self.segmented.fingerprint, self.segmented.head_fingerprint
        return make()

    @property
    def fingerprint(self) -> str:
        """Request fingerprint: covers the cache-key parameters (model, tool_choice, thinking,
        reasoning effort, response schema) and every segment."""
        return self._chained[0]

    @property
    def head_fingerprint(self) -> str:
        """Model-scoped head fingerprint: the cache lineage of this request."""
        return self._chained[1]


public(ProviderRequest)
