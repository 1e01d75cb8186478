"""A divergence in user terms: the differing JSON value, and whether it is the volatile tail.

:func:`stableprompt._diff.diff` locates the first divergence in *segment data* (the request
re-serialized as compact JSON in cache order, breakpoint markers removed, each message block
wrapped as ``{"role": ..., "block": ...}``): its ``offset`` is a byte offset into that buffer
(equal to the common prefix length in bytes), not into the body the harness sent. This module
adds what a user can act on:

- :class:`ValueSnippet`: the JSON value at the divergence's body pointer (``path``) on each
  side, and ``value_offset``: the **character** (code point) offset of the first differing
  character inside that value (a string as is; any other value as its compact JSON text, keys
  in the order sent), with up to 32 characters either side of it.
- :func:`is_expected_divergence`: whether a divergence is the predecessor's volatile tail:
  the rule of :func:`stableprompt._diff.is_expected_divergence`, plus stableprompt's own tail
  message re-sent with a new value after the same history (both requests end in it, and it
  holds only ``<slot>\nvalue\n</slot>`` texts, the shape the SDK renders its tail in: the
  OpenAI formats send it as a final developer/user message that the plain rule would call an
  edited last message).
- :func:`describe_divergence`: the one message ``stableprompt lint`` and
  ``assert_prefix_stable`` both use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .._canonical import loads, pointer_get, wire_json
from .._diff import Divergence, Segmented, common_prefix_len
from .._diff import is_expected_divergence as _expected_by_position
from .._redact import redact_slice

__all__ = ["ValueSnippet", "describe_divergence", "is_expected_divergence", "value_snippet"]

SNIPPET_CHARS = 32
_MISSING = object()
#: One tail slot as the SDK renders it (``RenderedPrompt.tail_texts``): ``<name>\nvalue\n</name>``.
_SLOT = re.compile(r"<([A-Za-z0-9_.:-]{1,64})>\n.*?\n</\1>", re.DOTALL)


def is_expected_divergence(a: Segmented, b: Segmented, divergence: Divergence) -> bool:
    """Whether ``divergence`` (from ``diff(a, b)``) lies in ``a``'s volatile tail (see the
    module docstring: the positional rule, or the SDK's tail message re-sent)."""
    if _expected_by_position(a, b, divergence):
        return True
    i = divergence.segment_index
    if divergence.segment_kind != "message" or not (_ends_in(a, i) and _ends_in(b, i)):
        return False
    slots_a = _tail_slots(a, i)
    return slots_a is not None and slots_a == _tail_slots(b, i)


def _message_of(path: str) -> str:
    """``/messages/3`` for ``/messages/3/content/1``: the message a segment belongs to."""
    return "/".join(path.split("/")[:3])


def _ends_in(req: Segmented, i: int) -> bool:
    """Whether segment ``i`` of ``req`` is in its last message (only that message's
    segments, e.g. a Responses item's ``rest``, follow it)."""
    segments = req.segments
    if i >= len(segments):
        return False
    key = _message_of(segments[i].path)
    return all(_message_of(s.path) == key for s in segments[i + 1:])


def _tail_slots(req: Segmented, i: int) -> tuple[str, ...] | None:
    """The slot names of segment ``i`` when it is a non-assistant message made only of
    SDK tail texts, else ``None``."""
    s = req.segments[i]
    try:
        value = loads(req.data[s.start:s.end])
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    role = value.get("role")
    content = value["block"] if "block" in value else value.get("content")
    if role == "assistant":
        return None
    parts = content if isinstance(content, list) else [content]
    texts: list[str] = []
    for part in parts:
        text = part if isinstance(part, str) else part.get("text") if isinstance(
            part, dict) else None
        if not isinstance(text, str):
            return None
        texts.append(text)
    names: list[str] = []
    for text in texts:
        pos = 0
        for m in _SLOT.finditer(text):
            if text[pos:m.start()] not in ("", "\n"):
                return None
            names.append(m.group(1))
            pos = m.end()
        if pos != len(text) or not names:
            return None
    return tuple(names)


@dataclass(frozen=True, slots=True)
class ValueSnippet:
    """The differing JSON value at a divergence's ``path``, on both sides.

    Attributes:
        value_offset: Character (code point) offset of the first differing character inside
            the value at ``path`` (strings as is; other values as compact JSON text in the key
            order sent). Equal to the shorter length when one is a prefix of the other; 0
            when the value is absent on one side.
        snippet_a: Up to 32 characters either side of ``value_offset`` in the predecessor's
            value. When a side has no value at ``path``, its snippet is the start of the
            nearest enclosing value below the top-level key (e.g. the string content where the
            other side has a block list), or ``""`` (a tool or parameter that is absent).
        snippet_b: The same for the later request.
    """

    value_offset: int
    snippet_a: str
    snippet_b: str


def _resolve(prompt: Segmented, pointer: str) -> Any:
    """The JSON value at body pointer ``pointer`` of a segmented request, or ``_MISSING``.

    Message blocks are unwrapped from the segment's ``{"role", "block"}`` wrapper; a block
    list message's ``/role`` is read from its blocks' wrapper.
    """
    data = prompt.data
    role_of = pointer.rsplit("/role", 1)[0] + "/content/" if pointer.endswith("/role") else None
    for s in prompt.segments:
        if not s.path or s.kind == "tail":
            continue
        inside = pointer == s.path or pointer.startswith(s.path + "/")
        if not inside and not (role_of and s.path.startswith(role_of)):
            continue
        try:
            value = loads(data[s.start:s.end])
        except ValueError:  # pragma: no cover - segment bytes are JSON
            continue
        if not inside:  # /messages/i/role of a block-list message
            found = value.get("role", _MISSING) if isinstance(value, dict) else _MISSING
            if found is not _MISSING:
                return found
            continue
        rest = pointer[len(s.path):]
        if ".content[" in s.name and isinstance(value, dict) and "block" in value:
            value = value["block"]
        elif s.name.endswith(".rest"):
            if rest.split("/")[1:2] in (["role"], ["content"]):
                continue
        elif s.kind in ("message", "system") and rest and isinstance(value, dict) and (
                rest.split("/")[1] not in value):
            continue  # a key the message's ``.rest`` segment holds
        found = pointer_get(value, rest, _MISSING)
        if found is not _MISSING:
            return found
    return _MISSING


def _text(value: Any) -> str:
    if value is _MISSING:
        return ""
    if isinstance(value, str):
        return value
    return wire_json(value).decode("utf-8", "replace")


def value_snippet(a: Segmented, b: Segmented, divergence: Divergence) -> ValueSnippet:
    """The differing value at ``divergence.path`` in ``a`` and ``b`` (see :class:`ValueSnippet`).

    For SDK renders the path is resolved the same way against their segments' JSON.
    """
    va, vb = _resolve(a, divergence.path), _resolve(b, divergence.path)
    if va is _MISSING or vb is _MISSING:
        ta, tb = _text(_enclosing(a, divergence.path)), _text(_enclosing(b, divergence.path))
        return ValueSnippet(0, redact_slice(ta, 0, 2 * SNIPPET_CHARS),
                            redact_slice(tb, 0, 2 * SNIPPET_CHARS))
    ta, tb = _text(va), _text(vb)
    k = common_prefix_len(ta, tb)
    lo = max(0, k - SNIPPET_CHARS)
    return ValueSnippet(k, redact_slice(ta, lo, k + SNIPPET_CHARS),
                        redact_slice(tb, lo, k + SNIPPET_CHARS))


def _enclosing(prompt: Segmented, pointer: str) -> Any:
    """The value at ``pointer``, else at its nearest ancestor at least two tokens deep
    (``/messages/0``), else ``_MISSING``."""
    while pointer.count("/") >= 2:
        value = _resolve(prompt, pointer)
        if value is not _MISSING:
            return value
        pointer = pointer.rsplit("/", 1)[0]
    return _MISSING


def describe_divergence(
    divergence: Divergence, snippet: ValueSnippet, *, expected: bool = False
) -> str:
    """The message for one divergence (the same in ``stableprompt lint`` and
    ``assert_prefix_stable``)::

        prefix diverges at /system/0/text (segment system[0], character 42 of the value;
        common prefix 310 bytes of segment data): volatile-token (timestamp)
          before: '... 10:00:00Z ...'
          after:  '... 10:05:00Z ...'
    """
    d = divergence
    detail = f" ({d.detail})" if d.detail else ""
    tail = " [expected: the predecessor's volatile tail]" if expected else ""
    return (
        f"prefix diverges at {d.path or '/'} (segment {d.segment}, character "
        f"{snippet.value_offset} of the value; common prefix {d.offset} bytes of segment "
        f"data): {d.cause}{detail}{tail}\n"
        f"  before: {snippet.snippet_a!r}\n  after:  {snippet.snippet_b!r}"
    )
