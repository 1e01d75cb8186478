"""Segment a provider request body (as sent on the wire) in the provider's cache order.

Used for every request stableprompt sees, whoever rendered it: the SDK's own bodies, bodies
captured by :class:`RecordingTransport` under the official SDKs, and captures given to
``stableprompt lint``. Segments keep the JSON **as received** (key order included, as the
providers tokenize it), compacted; cache breakpoint markers (Anthropic ``cache_control``,
OpenAI ``prompt_cache_breakpoint``) are removed from the bytes and recorded on the segment,
because markers are not cached content.

Order: cache-key parameters (``model`` first), then tools, then system, then messages.
Sources: Anthropic "Cache prefixes are created in the following order: tools, system, then
messages" (platform.claude.com/docs/en/build-with-claude/prompt-caching); OpenAI caches
"tool definitions, and conversation history" and lists ``model``, ``tools``,
``parallel_tool_calls``, ``text.format``, ``reasoning.effort``, ``text.verbosity`` as prefix
settings (developers.openai.com/api/docs/guides/prompt-caching).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .._canonical import wire_json
from .._exceptions import CaptureError
from .._public import public
from .._segment import Segment, SegmentSpec, build_segments, fingerprint_of, tag

__all__ = [
    "CACHE_KEY_PARAMS",
    "WIRE_FORMATS_WITH_REQUESTS",
    "SegmentedRequest",
    "detect_wire_format",
    "segment_request",
]

#: Request parameters that are part of each wire format's cache key, ``model`` first.
CACHE_KEY_PARAMS: Mapping[str, tuple[str, ...]] = {
    "anthropic": ("model", "tool_choice", "thinking", "output_config", "speed", "output_format"),
    "openai-chat": (
        "model", "tool_choice", "parallel_tool_calls", "reasoning_effort", "response_format",
        "verbosity", "prompt_cache_key", "cache_salt",
    ),
    "openai-responses": (
        "model", "tool_choice", "parallel_tool_calls", "reasoning", "text", "prompt_cache_key",
        "context_management",
    ),
}
WIRE_FORMATS_WITH_REQUESTS = tuple(CACHE_KEY_PARAMS)

_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True)
class SegmentedRequest:
    """A provider request body split into cache-order segments.

    Attributes:
        wire_format: ``anthropic``, ``openai-chat`` or ``openai-responses``.
        segments: Segments in cache order (params, tools, system, messages).
        data: Concatenated segment bytes; ``data[s.start:s.end]`` is segment ``s``.
        body: The parsed request body.
    """

    wire_format: str
    segments: tuple[Segment, ...]
    data: bytes
    body: Mapping[str, Any] = field(repr=False)

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the whole request (``sp1:<hex>``)."""
        return fingerprint_of(self.segments)

    @cached_property
    def head_fingerprint(self) -> str:
        """Fingerprint through the last param/tool/system segment: names the cache lineage
        (model-scoped, since provider caches are model-scoped)."""
        head = [s for s in self.segments if s.kind in ("param", "tool", "system")]
        return fingerprint_of(head) if head else tag(b"")

    @property
    def model(self) -> str | None:
        """The request's ``model`` parameter, if present."""
        value = self.body.get("model")
        return value if isinstance(value, str) else None

    @property
    def breakpoints(self) -> tuple[Segment, ...]:
        """Segments that carry a cache breakpoint marker, in order."""
        return tuple(s for s in self.segments if s.breakpoint is not None)


def detect_wire_format(body: Mapping[str, Any], path: str | None = None) -> str | None:
    """Guess the wire format of a request from its URL path and/or body.

    A path decides when it names a known endpoint (``/v1/messages``, ``/chat/completions``,
    ``/v1/responses``, also behind a proxy prefix); any other ``/v1/...`` path (Assistants
    ``/v1/threads/t/messages``, files, batches) returns ``None``: not a prompt request.

    Returns ``anthropic``, ``openai-chat``, ``openai-responses`` or ``None`` when unsure.
    """
    if path is not None:
        path = path.rstrip("/")
        if path == "/v1/messages" or path.endswith("/v1/messages") or path == "/messages":
            return "anthropic"
        if path.endswith("/chat/completions"):
            return "openai-chat"
        if path == "/v1/responses" or path.endswith("/v1/responses") or path == "/responses":
            return "openai-responses"
        if "/v1/" in path or path.startswith("/v1"):  # another endpoint (threads, files, ...)
            return None
    if "input" in body or "instructions" in body:
        return "openai-responses"
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    if "system" in body or "anthropic_version" in body:
        return "anthropic"
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        if message.get("role") in ("system", "developer", "tool") or "tool_calls" in message:
            return "openai-chat"
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping):
                    kind = block.get("type")
                    if kind in ("tool_use", "tool_result", "thinking", "image", "document"):
                        return "anthropic"
                    if kind in ("image_url", "input_audio"):
                        return "openai-chat"
    tools = body.get("tools")
    if isinstance(tools, list) and tools and isinstance(tools[0], Mapping):
        return "anthropic" if "input_schema" in tools[0] else "openai-chat"
    return "anthropic" if "max_tokens" in body and "stream_options" not in body else "openai-chat"


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


class _Builder:
    def __init__(self, marker_key: str) -> None:
        self.specs: list[SegmentSpec] = []
        self.marker_key = marker_key

    def add(self, kind: str, name: str, value: Any, path: str, label: str = "") -> None:
        stripped, ttl = _marker(value, self.marker_key)
        self.specs.append(SegmentSpec(kind, name, _dump(stripped, path), path, ttl, label))

    def params(self, body: Mapping[str, Any], names: tuple[str, ...]) -> None:
        for name in names:
            if name in body:
                self.specs.append(
                    SegmentSpec("param", f"param:{name}", _dump(body[name], f"/{name}"),
                                f"/{name}", None, name)
                )

    def content(self, kind: str, base: str, path: str, role: Any, content: Any) -> None:
        """Add one segment per content block (or one for string content), role included."""
        if isinstance(content, list):
            for j, block in enumerate(content):
                stripped, ttl = _marker(block, self.marker_key)
                data = _dump({"role": role, "block": stripped}, f"{path}/content/{j}", "/block")
                self.specs.append(
                    SegmentSpec(kind, f"{base}.content[{j}]", data, f"{path}/content/{j}",
                                ttl, str(role))
                )
        else:
            data = _dump({"role": role, "content": content}, path)
            self.specs.append(SegmentSpec(kind, base, data, path, None, str(role)))


def _require_list(body: Mapping[str, Any], key: str, *, required: bool) -> list[Any]:
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


def _tool_label(tool: Any) -> str:
    if isinstance(tool, Mapping):
        fn = tool.get("function")
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            return str(fn["name"])
        if isinstance(tool.get("name"), str):
            return str(tool["name"])
    return ""


def _anthropic(body: Mapping[str, Any], b: _Builder) -> None:
    for i, tool in enumerate(_require_list(body, "tools", required=False)):
        b.add("tool", f"tools[{i}]", tool, f"/tools/{i}", _tool_label(tool))
    system = body.get("system")
    if isinstance(system, list):
        for i, block in enumerate(system):
            b.add("system", f"system[{i}]", block, f"/system/{i}")
    elif system is not None:
        b.add("system", "system", system, "/system")
    for i, message in enumerate(_require_list(body, "messages", required=True)):
        if not isinstance(message, Mapping):
            raise CaptureError("message must be an object", code="capture-shape",
                               pointer=f"/messages/{i}")
        b.content("message", f"messages[{i}]", f"/messages/{i}", message.get("role"),
                  message.get("content"))


def _openai_message(b: _Builder, i: int, message: Any, base: str, path: str, leading: bool) -> bool:
    """Add one chat/responses message; returns whether it still counts as leading system."""
    if not isinstance(message, Mapping):
        if isinstance(message, str):  # Responses allows bare strings? keep as content
            b.content("message", base, path, "user", message)
            return False
        raise CaptureError("input item must be an object", code="capture-shape", pointer=path)
    role = message.get("role")
    is_system = leading and role in _SYSTEM_ROLES
    kind = "system" if is_system else "message"
    rest = {k: v for k, v in message.items() if k not in ("role", "content")}
    if "content" in message or "role" in message:
        b.content(kind, base, path, role, message.get("content"))
    if rest:
        b.specs.append(SegmentSpec(kind, f"{base}.rest", _dump(rest, path), path, None, str(role)))
    return is_system


def _openai_chat(body: Mapping[str, Any], b: _Builder) -> None:
    for i, tool in enumerate(_require_list(body, "tools", required=False)):
        b.add("tool", f"tools[{i}]", tool, f"/tools/{i}", _tool_label(tool))
    leading = True
    for i, message in enumerate(_require_list(body, "messages", required=True)):
        leading = _openai_message(b, i, message, f"messages[{i}]", f"/messages/{i}", leading)


def _openai_responses(body: Mapping[str, Any], b: _Builder) -> None:
    for i, tool in enumerate(_require_list(body, "tools", required=False)):
        b.add("tool", f"tools[{i}]", tool, f"/tools/{i}", _tool_label(tool))
    if body.get("instructions") is not None:
        b.add("system", "instructions", body["instructions"], "/instructions")
    raw = body.get("input")
    if isinstance(raw, str):
        b.content("message", "input", "/input", "user", raw)
        return
    if raw is None:
        raise CaptureError("request has no 'input'", code="capture-shape", pointer="/input")
    if not isinstance(raw, list):
        raise CaptureError("'input' must be a string or a list", code="capture-shape",
                           pointer="/input")
    leading = True
    for i, item in enumerate(raw):
        leading = _openai_message(b, i, item, f"input[{i}]", f"/input/{i}", leading)


_SEGMENTERS = {
    "anthropic": (_anthropic, "cache_control"),
    "openai-chat": (_openai_chat, "prompt_cache_breakpoint"),
    "openai-responses": (_openai_responses, "prompt_cache_breakpoint"),
}


def segment_request(wire_format: str, body: Mapping[str, Any]) -> SegmentedRequest:
    """Split a request body into cache-order segments.

    Args:
        wire_format: ``anthropic``, ``openai-chat`` or ``openai-responses``
            (``openai-compatible`` is treated as ``openai-chat``).
        body: The decoded JSON request body (dict key order as received).

    Returns:
        SegmentedRequest; segment bytes are compact JSON in the body's own key order, with
        breakpoint markers removed and recorded on ``Segment.breakpoint``.

    Raises:
        CaptureError: unknown wire format (code ``capture-format``), or a body whose shape the
            format does not allow (code ``capture-shape``, with the JSON pointer).
    """
    if wire_format == "openai-compatible":
        wire_format = "openai-chat"
    try:
        segmenter, marker = _SEGMENTERS[wire_format]
    except KeyError:
        raise CaptureError(
            f"unknown wire format {wire_format!r}; expected one of {', '.join(_SEGMENTERS)}",
            code="capture-format",
        ) from None
    if not isinstance(body, Mapping):
        raise CaptureError("request body must be a JSON object", code="capture-shape", pointer="")
    builder = _Builder(marker)
    builder.params(body, CACHE_KEY_PARAMS[wire_format])
    segmenter(body, builder)
    specs = builder.specs
    top = body.get("cache_control") if wire_format == "anthropic" else None
    if isinstance(top, Mapping):  # automatic caching: marker on the last cacheable block
        for index in range(len(specs) - 1, -1, -1):
            if specs[index].kind != "param":
                last = specs[index]
                ttl = str(top.get("ttl", "5m"))
                specs[index] = SegmentSpec(last.kind, last.name, last.data, last.path, ttl,
                                           last.label)
                break
    segments, data, _ = build_segments(specs)
    return SegmentedRequest(wire_format, segments, data, body)


public(SegmentedRequest, segment_request)
