"""OpenAI Responses API (wire format ``"openai-responses"``): everything the SDK knows about it.

Requests: endpoint, cache-key params, tool and item shapes, body assembly and segmenting
(shared OpenAI rules in :mod:`._openai`). Responses: usage parsing and streaming.

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

from .._canonical import canonical_json, checked_json
from .._exceptions import CaptureError, HistoryError
from .._sse import SSEEvent
from .._usage import CacheUsage
from . import _openai
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
from ._openai import render_checks, segment_message
from ._openai import tail_role as default_tail_role
from ._parts import (
    AssistantTurn,
    Fingerprints,
    HeadParts,
    MessageParts,
    PromptParts,
    ToolParts,
    TurnPart,
    response_text,
    tool_fields,
)
from ._segmenter import SegmentBuilder, require_list, tool_label

__all__ = [
    "WIRE_FORMAT",
    "OpenAIResponsesStreamAccumulator",
    "assistant_turn",
    "parse_response",
    "parse_usage",
]

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

    @property
    def terminal(self) -> bool:
        """See :attr:`StreamAccumulator.terminal`."""
        return self._terminal is not None

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


# -- requests: endpoint, cache key, shapes, body assembly, segmenting ---------------------------

ENDPOINT = "/v1/responses"
"""URL path of the Responses API."""

HISTORY_KEY = "input"
"""The body key holding the conversation history."""

CONTENT_KEYS = ("instructions", "input")
"""Top-level body keys besides the cache-key params and ``tools`` that this format reads."""

#: Request parameters that are part of the cache key, ``model`` first. Not ``tool_choice``:
#: the prompt-caching guide's list of prefix-changing settings does not name it, and its
#: ``allowed_tools`` form exists to restrict the callable tools while the ``tools`` list (the
#: cached prefix) stays the same (developers.openai.com/api/docs/guides/prompt-caching;
#: the emulator follows the same reading).
CACHE_KEY_PARAMS = (
    "model", "parallel_tool_calls", "reasoning", "text", "prompt_cache_key",
    "context_management",
)


def tool(t: ToolParts) -> dict[str, Any]:
    """A ``tools[]`` entry: ``{"type": "function", "name", "description", "parameters"}``
    (plus ``"strict"`` when set). Source: ``openai.types.responses.FunctionToolParam`` (SDK
    3.57), which types ``strict`` as ``Required[Optional[bool]]``; it is omitted here unless
    the caller set it, so the server default applies."""
    return {"type": "function", **tool_fields(t, "parameters")}


def tool_name(entry: dict[str, Any]) -> Any:
    """A sent ``tools[]`` entry's name (any value: the caller checks it is a str)."""
    return entry.get("name")


def tool_schema(entry: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Where a sent ``tools[]`` entry keeps its schema: ``(entry, "parameters")``, ``None``
    when it has none (a built-in tool such as ``web_search``)."""
    return (entry, "parameters") if isinstance(entry.get("parameters"), dict) else None


def items(message: MessageParts) -> list[dict[str, Any]]:
    """The input items for one canonical message.

    Source: openai-python ``responses/response_input_item_param.py``.
    """
    if message.role == "system":  # operator instructions; tool changes are left out
        if any(b["type"] != "text" for b in message.wire_blocks):
            raise HistoryError("tool changes have no OpenAI message form (they are sent as "
                               "tool_choice allowed_tools)", code="history-role")
        return [{"content": [{"text": b["text"], "type": "input_text"}
                             for b in message.wire_blocks], "role": "developer",
                 "type": "message"}]
    out: list[dict[str, Any]] = []
    blocks = message.wire_blocks
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    texts_done = False
    for b in blocks:  # in block order: a kept reasoning item stays where the response had it
        kind = b["type"]
        if kind == "text":
            if texts_done:
                continue  # the texts are one message item, at the first text's place
            texts_done = True
            if message.role == "assistant":
                # Input items replaying assistant text take string content (EasyInputMessage);
                # output_text parts would need the output message's id/status/annotations.
                out.append({"content": "\n\n".join(texts), "role": "assistant",
                            "type": "message"})
            else:
                out.append({"content": [{"text": t, "type": "input_text"} for t in texts],
                            "role": message.role, "type": "message"})
        elif kind == "tool_call":
            out.append({"arguments": canonical_json(b["arguments"]).decode(),
                        "call_id": b["id"], "name": b["name"], "type": "function_call"})
        elif kind == "tool_result":
            out.append({"call_id": b["tool_call_id"], "output": b["content"],
                        "type": "function_call_output"})
        elif kind == "reasoning":
            if b["format"] != WIRE_FORMAT:
                raise HistoryError(f"{b['format']} reasoning content cannot be sent to the "
                                   "Responses API", code="history-reasoning-format")
            out.append(dict(b["item"]))  # the reasoning item exactly as received
    return out


def item_bytes(message: MessageParts) -> tuple[bytes, ...]:
    """:func:`items` as canonical bytes, serialized once per message."""
    cache = message.wire_memo
    found: tuple[bytes, ...] | None = cache.get(WIRE_FORMAT)
    if found is None:  # the message's canonical blocks were checked when it was made
        found = cache[WIRE_FORMAT] = tuple([checked_json(i) for i in items(message)])
    return found


def render(prompt: PromptParts, *, model: str, prompt_cache_key: bool | str | None,
           system_role: str, tail_role: str | None, params: Mapping[str, Any],
           prompt_cache_ttl: str | None = None, prompt_cache_mode: str | None = None,
           history_ttl: str | None = None) -> tuple[bytes, Fingerprints | None]:
    """The Responses body: system as the first input message, then history items, tail last.

    See :meth:`RenderedPrompt.to_openai_responses
    <stableprompt.RenderedPrompt.to_openai_responses>`.

    Returns:
        ``(body bytes, fingerprints)``: ``fingerprints`` gives ``(fingerprint,
        head_fingerprint)`` chained incrementally, lazily (see :func:`._openai.fingerprints`).

    Raises:
        InputError: see :func:`._openai.render_checks`, or a param clash.
    """
    head = prompt.head
    key = render_checks(head.fingerprint, model, prompt_cache_key, system_role, tail_role)
    explicit = _openai.explicit_cache(
        prompt, wire_format=WIRE_FORMAT, model=model, ttl=prompt_cache_ttl,
        mode=prompt_cache_mode, history_ttl=history_ttl, params=params)
    system = (_system(head, system_role) if explicit is None else
              _openai.system_parts(head, system_role, explicit, 'input_text', {"type": "message"}))
    tail = _tail(prompt, model, tail_role)
    return _openai.render(
        prompt, wire_format=WIRE_FORMAT, history_key=HISTORY_KEY, serialize=item_bytes,
        system=system, tail=tail, tool=tool, tools_memo_key=_TOOLS_MEMO_KEY, segment=segment,
        names=CACHE_KEY_PARAMS, reserved=_RESERVED, model=model, key=key, params=params,
        system_role=system_role, explicit=explicit, text_type='input_text')


_RESERVED = frozenset({"tools", *CONTENT_KEYS})
"""Params the segmenter reads as content: with one, the fingerprint comes from the body."""
_TOOLS_MEMO_KEY = WIRE_FORMAT + "-tools"
"""Head memo key: the ``tools`` array, serialized once per head."""


def _system(head: HeadParts, system_role: str) -> bytes | None:
    """The system item for ``system_role``, serialized once per head and role."""
    return _openai.system_item(head, WIRE_FORMAT, system_role, _system_bytes)


def _system_bytes(head: HeadParts, system_role: str) -> bytes:
    return canonical_json({
        "content": [{"text": t, "type": "input_text"} for t in head.system],
        "role": system_role, "type": "message"})


def _tail(prompt: PromptParts, model: str, tail_role: str | None) -> bytes | None:
    tail = prompt.tail_texts
    if not tail:
        return None
    return checked_json({  # the texts were checked by the render
        "content": [{"text": "\n".join(tail), "type": "input_text"}],
        "role": tail_role or default_tail_role(model), "type": "message"})


def segment(body: Mapping[str, Any], b: SegmentBuilder) -> None:
    """Add the segments of a Responses body: tools, ``instructions`` and leading
    system/developer items as ``system``, then one per input item content block."""
    segment_head(body, b)
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
        leading = segment_item(b, item, i, leading)


def segment_head(body: Mapping[str, Any], b: SegmentBuilder) -> None:
    """Add the segments before the history: tools, then ``instructions``."""
    for i, entry in enumerate(require_list(body, "tools", required=False)):
        b.add("tool", f"tools[{i}]", entry, f"/tools/{i}", tool_label(entry))
    if body.get("instructions") is not None:
        b.add("system", "instructions", body["instructions"], "/instructions")


def segment_item(b: SegmentBuilder, item: Any, i: int, leading: bool) -> bool:
    """Add the segments of ``input[i]`` (a list item); ``leading``: every earlier item was a
    leading system/developer one. Returns whether this one still is."""
    return segment_message(b, item, f"input[{i}]", f"/input/{i}", leading)


# -- cache diagnostics ------------------------------------------------------------------------

DIAGNOSTICS_OPTION = _openai.DIAGNOSTICS_OPTION

DIAGNOSTIC_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
"""Stream events that may carry the response's ``prompt_cache_diagnostics``."""

diagnostics_request = _openai.diagnostics_request


def assistant_turn(response: Mapping[str, Any]) -> AssistantTurn:
    """The assistant turn of a Responses response: ``message`` items' ``output_text`` parts
    joined, ``function_call`` items as tool calls (``call_id``, ``name``, JSON-string
    ``arguments``), ``reasoning`` items (kept exactly: ``id``, ``summary``,
    ``encrypted_content``), all in response order in ``parts``; ``incomplete`` is set for
    ``status: "incomplete"`` (with ``incomplete_details.reason``).

    Raises:
        HistoryError: ``output`` is not a list, a message item's role is not ``assistant``
            or its text is not a string, or an item type is not one of those (code
            ``history-response``, pointer ``/output/<i>...``).
    """
    output = response.get("output")
    if not isinstance(output, list):
        raise HistoryError("a Responses response needs an 'output' list",
                           code="history-response", pointer="/output")
    parts: list[TurnPart] = []
    for i, item in enumerate(output):
        where = f"/output/{i}"
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == "message" and isinstance(item.get("content"), list):
            role = item.get("role", "assistant")
            if role != "assistant":
                raise HistoryError(f"an output message must have role 'assistant', got "
                                   f"{role!r}", code="history-response", pointer=f"{where}/role")
            for j, part in enumerate(item["content"]):
                if not isinstance(part, Mapping) or part.get("type") != "output_text":
                    continue  # refusals and other parts carry no replayable text
                text = response_text(part, f"{where}/content/{j}", "output_text")
                parts.append(TurnPart("text", f"{where}/content/{j}", text))
        elif kind == "function_call":
            # every key: a typo is named (tool_call_of)
            parts.append(TurnPart("tool_call", where, dict(item)))
        elif kind == "reasoning":
            parts.append(TurnPart("reasoning", where, dict(item)))
        else:
            raise HistoryError(f"unsupported output item type {kind!r} in a Responses "
                               "response", code="history-response", pointer=where)
    incomplete = None
    if response.get("status") == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        incomplete = f"status incomplete ({reason or 'no reason given'})"
    return AssistantTurn.of(parts, incomplete)
