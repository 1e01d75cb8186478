"""ProviderRequest: a rendered provider request body, ready to send."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .._canonical import canonical_json, loads
from .._frozen import frozen_instance
from .._public import public
from .._segment import Segment
from ._formats import HISTORY_KEYS, segment_request, with_path_model
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
        tail_count: How many trailing parts of the history are the volatile tail, as the SDK
            rendered it: Anthropic content blocks at the end of the last message, OpenAI
            items (0 or 1) at the end of ``messages`` / ``input``. 0 for a body built
            elsewhere (then nothing is known to be tail). See :attr:`tail_segments`.
        headers: HTTP headers the request needs besides authentication, e.g.
            ``{"anthropic-beta": "mid-conversation-tool-changes-2026-07-01"}`` when the body
            holds tool-change blocks; empty for most requests. The SDK's clients send them;
            with an official SDK pass them as ``extra_headers=request.headers``.
    """

    wire_format: str
    path: str
    content: bytes = field(repr=False)
    tail_count: int = field(default=0, repr=False, compare=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def body(self) -> dict[str, Any]:
        """The body as a fresh dict (decoded from ``content``)."""
        value: dict[str, Any] = loads(self.content)
        return value

    @cached_property
    def params(self) -> dict[str, Any] | None:
        """``model`` and the extra body fields the SDK rendered this request with
        (``to_anthropic(..., **params)``: ``stream``, ``metadata``, ``tool_choice``, ...), as
        they decode from :attr:`content`, known without decoding the body (what a client
        recording in thread reads before sending); ``None`` for a request the SDK did not
        render (or one unpickled): read :attr:`body`."""
        given: Mapping[str, Any] | None = self.__dict__.get("_params")
        if given is None:
            return None
        return {key: loads(canonical_json(value)) for key, value in given.items()}

    @cached_property
    def segmented(self) -> SegmentedRequest:
        """The body split into cache-order segments, exactly as a recorder or linter sees it."""
        return segment_request(self.wire_format,
                               with_path_model(self.wire_format, self.body, self.path))

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Cache-order segments of the body (params, tools, system, messages)."""
        return tuple(self.segmented.segments)  # the tuple itself: segment_request made it

    @property
    def data(self) -> bytes:
        """Concatenated segment bytes: the coordinate system of every byte offset stableprompt
        reports for a request (``Divergence.offset``, lint findings): ``data[s.start:s.end]``
        is segment ``s``."""
        return self.segmented.data

    @cached_property
    def tail_segments(self) -> tuple[Segment, ...]:
        """The trailing segments that hold the volatile tail (never part of a cached prefix),
        in order; ``()`` without a tail or for a body the SDK did not render.

        :func:`~stableprompt.diff` ignores them in the predecessor, so two consecutive
        append-only turns compare as a prefix (``None``) in every format, although the next
        request has new history where this one had its tail.
        """
        if not self.tail_count:
            return ()
        key = HISTORY_KEYS[self.wire_format]
        history = self.body.get(key)
        if not isinstance(history, list) or not history:
            return ()
        last = len(history) - 1
        if self.wire_format in ("anthropic", "bedrock-converse", "gemini"):
            inner = "parts" if self.wire_format == "gemini" else "content"
            content = history[last].get(inner) if isinstance(history[last], dict) else None
            count = len(content) if isinstance(content, list) else 0
            paths = [f"/{key}/{last}/{inner}/{j}"
                     for j in range(max(0, count - self.tail_count), count)]
        else:
            paths = [f"/{key}/{last}"]
        return tuple(s for s in self.segments
                     if any(s.path == p or s.path.startswith(p + "/") for p in paths))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.wire_format, self.path, self.content, self.tail_count,
                             dict(self.headers)))

    @classmethod
    def _rendered(cls, wire_format: str, path: str, content: bytes,
                  fingerprints: Callable[[], tuple[str, str]] | None,
                  tail_count: int = 0, params: Mapping[str, Any] | None = None,
                  headers: Mapping[str, str] | None = None) -> ProviderRequest:
        """A request the SDK rendered: ``fingerprints`` gives ``(fingerprint,
        head_fingerprint)`` equal to the segmented body's, computed incrementally by the
        renderer (``None``: from the segmented body); ``tail_count`` as the attribute;
        ``params`` the model and extra params it was rendered with (:attr:`params`)."""
        return frozen_instance(cls, {
            "wire_format": wire_format, "path": path, "content": content,
            "tail_count": tail_count, "headers": dict(headers or {}),
            "_fingerprints": fingerprints, "_params": params})

    @property
    def _chained(self) -> tuple[str, str]:
        # cached by hand: functools.cached_property takes an RLock per read on CPython 3.11
        found: tuple[str, str] | None = self.__dict__.get("_chained_pair")
        if found is None:
            make: Callable[[], tuple[str, str]] | None = self.__dict__.get("_fingerprints")
            found = ((self.segmented.fingerprint, self.segmented.head_fingerprint)
                     if make is None else make())
            self.__dict__["_chained_pair"] = found
        return found

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
