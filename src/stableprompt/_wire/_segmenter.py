"""Segment a provider request body (as sent on the wire) in the provider's cache order.

Used for every request stableprompt sees, whoever rendered it: the SDK's own bodies, bodies
captured by :class:`RecordingTransport` under the official SDKs, and captures given to
``stableprompt lint``. Segments keep the JSON **as received** (key order included, as the
providers tokenize it), compacted; cache breakpoint markers (Anthropic ``cache_control``,
OpenAI ``prompt_cache_breakpoint``) are removed from the bytes and recorded on the segment,
because markers are not cached content.

This module holds the generic part (:class:`SegmentBuilder`: markers, ``{"role", "block"}``
wrappers, error pointers); each request format's ``segment(body, builder)`` in its ``_wire``
module walks its own body shape, and the registry's ``segment_request`` dispatches.

Order: cache-key parameters (``model`` first), then tools, then system, then messages.
Sources: Anthropic "Cache prefixes are created in the following order: tools, system, then
messages" (platform.claude.com/docs/en/build-with-claude/prompt-caching); OpenAI caches
"tool definitions, and conversation history" and lists ``model``, ``tools``,
``parallel_tool_calls``, ``text.format``, ``reasoning.effort``, ``text.verbosity`` as prefix
settings (developers.openai.com/api/docs/guides/prompt-caching).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .._canonical import wire_json
from .._exceptions import CaptureError
from .._frozen import frozen_instance
from .._policy import text_block_of
from .._public import public
from .._segment import (
    HEAD_KINDS,
    Segment,
    SegmentBytes,
    SegmentSpec,
    build_segments,
    fingerprint_of,
    new_spec,
    tag,
)

__all__ = ["SegmentBuilder", "SegmentedRequest", "require_list", "tool_label"]


@dataclass(frozen=True)
class SegmentedRequest:
    """A provider request body split into cache-order segments.

    Attributes:
        wire_format: ``anthropic``, ``openai-chat`` or ``openai-responses``.
        segments: Segments in cache order (params, tools, system, messages): a tuple, or
            (a request the recorder or lint segmented from its lineage's previous one,
            ``_resegment``) a read-only :class:`~stableprompt._segment.Snapshot` that
            shares the previous request's list of segments and compares equal to the tuple
            (slices and ``tuple()`` give tuples; pickled as the tuple).
        segment_bytes: The concatenated segment bytes as shared pieces
            (``segment_bytes[s.start:s.end]`` is segment ``s``'s bytes): a request that
            repeats its predecessor's segments shares its pieces, so making it costs what is
            new (see :class:`~stableprompt._segment.SegmentBytes`).
        body: The parsed request body (a request rebuilt from its lineage's previous one,
            :meth:`_rebuilt`, makes it when it is first read: :attr:`_body_view` reads its
            fields without making it).
    """

    wire_format: str
    segments: Sequence[Segment]
    segment_bytes: SegmentBytes = field(repr=False)
    body: Mapping[str, Any] = field(repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.segment_bytes, bytes):  # one piece (as unpickled)
            object.__setattr__(self, "segment_bytes", SegmentBytes((self.segment_bytes,)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (SegmentedRequest, (self.wire_format, tuple(self.segments), self.data,
                                   self.body))

    @classmethod
    def _rebuilt(cls, wire_format: str, segments: Sequence[Segment],
                segment_bytes: SegmentBytes, view: Mapping[str, Any],
                history_key: str) -> SegmentedRequest:
        """A request whose :attr:`body` is made when first read, from ``view``: the body's
        fields in order, its history (``view[history_key]``) a read-only sequence of the
        items (``_resegment``'s :class:`~stableprompt._segment.Snapshot`, sharing its
        conversation's list), which becomes a list of them. A recorder reads only
        :attr:`_body_view` of a rendered turn, so no list of every item is made (and kept,
        by the predecessor index) per turn; once read, ``body`` is that dict for good."""
        return frozen_instance(cls, {"wire_format": wire_format, "segments": segments,
                                     "segment_bytes": segment_bytes, _VIEW: view,
                                     _HISTORY_KEY: history_key})

    @property
    def _body_view(self) -> Mapping[str, Any]:
        """The body's fields without making :attr:`body`: :attr:`body`, or for a request
        made by :meth:`_rebuilt`, its view (the history a read-only sequence equal to the
        list: read it as a ``Sequence``)."""
        view: Mapping[str, Any] | None = self.__dict__.get(_VIEW)
        return self.body if view is None else view

    @cached_property
    def data(self) -> bytes:
        """Concatenated segment bytes (one join of :attr:`segment_bytes`, on first use);
        ``data[s.start:s.end]`` is segment ``s``."""
        return bytes(self.segment_bytes)

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the whole request (``sp2:<hex>``)."""
        return fingerprint_of(self.segments)

    @cached_property
    def head_fingerprint(self) -> str:
        """Fingerprint through the last param/tool/system segment: names the cache lineage
        (model-scoped, since provider caches are model-scoped)."""
        head = [s for s in self.segments if s.kind in HEAD_KINDS]
        return fingerprint_of(head) if head else tag(b"")

    @property
    def model(self) -> str | None:
        """The request's ``model`` parameter, if present."""
        value = self._body_view.get("model")
        return value if isinstance(value, str) else None

    @property
    def breakpoints(self) -> tuple[Segment, ...]:
        """Segments that carry a cache breakpoint marker, in order."""
        return tuple(s for s in self.segments if s.breakpoint is not None)


_VIEW, _HISTORY_KEY = "_view", "_history_key"
"""Where a request made by :meth:`SegmentedRequest._rebuilt` keeps its view and history key."""

_MAKING = threading.Lock()
"""Held while a rebuilt request's body is made (two threads reading it get one dict)."""


class _RebuiltBody:
    """:attr:`SegmentedRequest.body` of a request made by :meth:`SegmentedRequest._rebuilt`
    (a non-data descriptor: any other request has its body in its ``__dict__``, which a
    read finds first, so this runs once per rebuilt request, on its first read)."""

    def __get__(self, obj: SegmentedRequest | None, owner: type | None = None
                ) -> Mapping[str, Any]:
        if obj is None:
            raise AttributeError("body")  # a field without default, as dataclass leaves it
        with _MAKING:
            body: Mapping[str, Any] | None = obj.__dict__.get("body")
            if body is None:
                view, key = obj.__dict__[_VIEW], obj.__dict__[_HISTORY_KEY]
                body = obj.__dict__["body"] = {  # the history: a Snapshot (its as_list)
                    name: value.as_list() if name == key else value
                    for name, value in view.items()}
        return body


# set after @dataclass, so that the field keeps no default value
SegmentedRequest.body = _RebuiltBody()  # type: ignore[assignment]


def _marker(block: Any, key: str) -> tuple[Any, str | None]:
    """Return ``(block without the marker key, ttl label or None)``."""
    if not isinstance(block, Mapping) or key not in block:
        return block, None
    marker = block[key]
    ttl = "5m"
    if isinstance(marker, Mapping):
        ttl = str(marker.get("ttl", "5m") if key == "cache_control" else marker.get("mode", "on"))
    return {k: v for k, v in block.items() if k != key}, ttl


def _dump(value: Any, where: str, strip: str = "") -> bytes:
    """wire_json with errors located in the body: ``where`` + the inner pointer (minus the
    ``strip`` prefix of a wrapper object)."""
    try:
        return wire_json(value)
    except Exception as exc:  # CanonicalizationError carries the inner pointer
        inner = getattr(exc, "pointer", "") or ""
        if strip and inner.startswith(strip):
            inner = inner[len(strip):]
        raise CaptureError(
            f"request body value is not JSON-serializable: {exc}",
            code="capture-json",
            pointer=f"{where}{inner}",
        ) from exc


class SegmentBuilder:
    """Collects the segment specs of one request body, in cache order.

    Args:
        marker_key: The body key of this format's breakpoint marker (``cache_control``,
            ``prompt_cache_breakpoint``): removed from segment bytes, recorded as the TTL.
        wire_format: The request's wire format, for the content-shape rule
            (:data:`stableprompt._policy.CONTENT_SHAPES`): where the provider documents that
            string content caches like one text block, string content is segmented as that
            block (today no provider does, so string content keeps its own bytes).
    """

    def __init__(self, marker_key: str, wire_format: str | None = None, *,
                 known: dict[int, tuple[Any, bytes | SegmentSpec]] | None = None) -> None:
        self.specs: list[SegmentSpec] = []
        self.marker_key = marker_key
        self.wire_format = wire_format
        # ``known``: the dumps (a param's) and specs (:meth:`add`'s) of values earlier
        # builders of this marker key made, by the value's id (with the value, so the id
        # stays its own): a value that is the same object is not dumped again. Only for
        # values nothing changes in place (a capture's, decoded once: lint). ``dumped``:
        # this builder's, for the next one.
        self.known = known
        self.dumped: dict[int, tuple[Any, bytes | SegmentSpec]] = {}
        # a marker (:meth:`mark_last`) found no segment of this builder's to mark: it marks
        # one added before (by another builder: ``_resegment``'s reused segments)
        self.unplaced = False

    def _dump(self, value: Any, where: str) -> bytes:
        """:func:`_dump` of ``value``, the known dump when ``value`` is that same object."""
        known = self.known
        if known is None:
            return _dump(value, where)
        hit = known.get(id(value))
        data = hit[1] if hit is not None and hit[0] is value and type(hit[1]) is bytes \
            else _dump(value, where)
        self.dumped[id(value)] = (value, data)
        return data

    def build(self, wire_format: str, body: Mapping[str, Any]) -> SegmentedRequest:
        """The segmented request of everything added."""
        segments, data, _ = build_segments(self.specs)
        return SegmentedRequest(wire_format, segments, SegmentBytes((data,)), body)

    def mark_last(self, ttl: str) -> None:
        """Put a breakpoint of ``ttl`` on the last non-param segment (automatic caching);
        none added yet: :attr:`unplaced`."""
        for index in range(len(self.specs) - 1, -1, -1):
            last = self.specs[index]
            if last.kind != "param":
                self.specs[index] = SegmentSpec(last.kind, last.name, last.data, last.path, ttl,
                                                last.label)
                return
        self.unplaced = True

    def add(self, kind: str, name: str, value: Any, path: str, label: str = "") -> None:
        """Add one segment: ``value`` without its marker, located at ``path``."""
        known = self.known
        if known is not None:  # the spec made of this same value at the same place
            hit = known.get(id(value))
            if hit is not None and hit[0] is value:
                spec = hit[1]
                if type(spec) is SegmentSpec and spec.name == name and spec.path == path \
                        and spec.kind == kind and spec.label == label:
                    self.specs.append(spec)
                    self.dumped[id(value)] = hit
                    return
        stripped, ttl = _marker(value, self.marker_key)
        spec = new_spec(kind, name, _dump(stripped, path), path, ttl, label)
        self.specs.append(spec)
        if known is not None:
            self.dumped[id(value)] = (value, spec)

    def params(self, body: Mapping[str, Any], names: tuple[str, ...]) -> None:
        """Add a ``param`` segment per cache-key parameter present in ``body``."""
        for name in names:
            if name in body:
                self.specs.append(
                    SegmentSpec("param", f"param:{name}", self._dump(body[name], f"/{name}"),
                                f"/{name}", None, name)
                )

    def content(self, kind: str, base: str, path: str, role: Any, content: Any) -> None:
        """Add one segment per content block (or one for string content), role included."""
        if isinstance(content, str) and self.wire_format is not None:
            block = text_block_of(self.wire_format, content)
            if block is not None:  # the provider caches both shapes alike: one form
                content = [block]
        if isinstance(content, list):
            for j, block in enumerate(content):
                stripped, ttl = _marker(block, self.marker_key)
                data = _dump({"role": role, "block": stripped}, f"{path}/content/{j}", "/block")
                self.specs.append(
                    new_spec(kind, f"{base}.content[{j}]", data, f"{path}/content/{j}", ttl,
                             str(role))
                )
        else:
            data = _dump({"role": role, "content": content}, path)
            self.specs.append(new_spec(kind, base, data, path, None, str(role)))

    def rest(self, kind: str, base: str, path: str, role: Any, rest: Mapping[str, Any]) -> None:
        """Add the fields of an item beside ``role``/``content`` as one ``.rest`` segment."""
        self.specs.append(new_spec(kind, f"{base}.rest", _dump(rest, path), path, None,
                                   str(role)))


def require_list(body: Mapping[str, Any], key: str, *, required: bool) -> list[Any]:
    """``body[key]`` as a list (``[]`` when absent and not required).

    Raises:
        CaptureError: absent but required, or not a list (code ``capture-shape``).
    """
    value = body.get(key)
    if value is None:
        if required:
            raise CaptureError(f"request has no {key!r} list", code="capture-shape",
                               pointer=f"/{key}")
        return []
    if not isinstance(value, list):
        raise CaptureError(
            f"{key!r} must be a list, got {type(value).__name__}", code="capture-shape",
            pointer=f"/{key}",
        )
    return value


def tool_label(tool: Any) -> str:
    """The tool's name in any format's shape (``""`` when it has none)."""
    if type(tool) is dict or isinstance(tool, Mapping):  # dict first: an ABC check is slow
        fn = tool.get("function")
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            return str(fn["name"])
        if isinstance(tool.get("name"), str):
            return str(tool["name"])
    return ""


public(SegmentedRequest)
