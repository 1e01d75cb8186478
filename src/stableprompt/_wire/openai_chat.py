"""OpenAI Chat Completions (wire format ``"openai-chat"``): everything the SDK knows about it.

Requests: endpoint, cache-key params, tool and message shapes, body assembly and segmenting
(shared OpenAI rules in :mod:`._openai`). Responses: usage parsing and stream accumulation.

Semantics (PROVIDERS.md §2; ``openai-python`` ``types/completion_usage.py``;
developers.openai.com/api/docs/guides/prompt-caching): ``prompt_tokens`` *includes* cached
tokens; ``prompt_tokens_details.cached_tokens`` (cache read) and
``prompt_tokens_details.cache_write_tokens`` (GPT-5.6+, 2026-07) are subsets of it.

The stream accumulator here is also the base for the other chat-shaped formats (DeepSeek,
OpenAI-compatible servers, llama.cpp), which differ only in how the usage object is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._canonical import canonical_json, checked_json
from .._exceptions import HistoryError
from .._sse import SSEEvent
from .._usage import CacheUsage
from . import _openai
from ._base import Clock, Sighting, SSEStreamAccumulator
from ._fields import as_mapping, cache_details, inclusive_usage, opt_int, req_int, response_usage
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
    chosen,
    tool_fields,
)
from ._segmenter import SegmentBuilder, require_list, tool_label

__all__ = [
    "WIRE_FORMAT",
    "ChatStreamAccumulator",
    "OpenAIChatStreamAccumulator",
    "assistant_turn",
    "chat_usage",
    "delta_has_content",
    "parse_response",
    "parse_usage",
    "prompt_details",
    "response_usage",
]

WIRE_FORMAT = "openai-chat"

_TEXT_DELTA_KEYS = ("content", "refusal", "reasoning_content", "reasoning")


def prompt_details(obj: Mapping[str, Any], pointer: str) -> tuple[int | None, int | None]:
    """``(cached_tokens, cache_write_tokens)`` from ``prompt_tokens_details`` (None if absent)."""
    return cache_details(obj, "prompt_tokens_details", pointer)


def parse_usage(usage: object, pointer: str = "") -> CacheUsage:
    """Normalize a Chat Completions ``usage`` object.

    Args:
        usage: ``{"prompt_tokens", "completion_tokens"?, "total_tokens"?,
            "prompt_tokens_details"?: {"cached_tokens"?, "cache_write_tokens"?, ...}}``; a
            ``dict`` or an SDK ``CompletionUsage`` model.
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).

    Returns:
        CacheUsage with ``input_tokens_total = prompt_tokens``, ``cache_read = cached_tokens``
        and ``cache_write = cache_write_tokens``; a detail the server did not send is ``None``
        (e.g. models before GPT-5.6 report no writes; ``uncached`` then is total - read).

    Raises:
        UsageParseError: ``prompt_tokens`` missing (``usage-missing``), or a count negative
            (``usage-negative``) or not an integer (``usage-type``), with its pointer.
    """
    return chat_usage(WIRE_FORMAT, usage, pointer, "OpenAI chat usage")


def chat_usage(
    wire_format: str,
    usage: object,
    pointer: str,
    what: str,
    *,
    read_fallbacks: tuple[str, ...] = (),
) -> CacheUsage:
    """Normalize a chat-shaped ``usage`` object (see :func:`parse_usage`).

    Args:
        wire_format: The wire format name recorded in the result.
        usage: The usage object (a JSON object or an SDK model).
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).
        what: How error messages name the object (``"OpenAI chat usage"``, ...).
        read_fallbacks: Top-level keys read in order, each only while the cache read is still
            unknown, when ``prompt_tokens_details.cached_tokens`` is absent.

    Raises:
        UsageParseError: as :func:`parse_usage`.
    """
    obj = as_mapping(usage, pointer, what)
    total = req_int(obj, "prompt_tokens", pointer)
    read, write = prompt_details(obj, pointer)
    for key in read_fallbacks:
        if read is not None:
            break
        read = opt_int(obj, key, pointer)
    output = opt_int(obj, "completion_tokens", pointer)
    return inclusive_usage(wire_format, obj, total=total, read=read, write=write, output=output)


def parse_response(body: object) -> CacheUsage:
    """Normalize the usage of a non-streaming chat completion body (``body["usage"]``).

    Raises:
        UsageParseError: ``usage-missing`` at ``/usage`` when absent, else as
            :func:`parse_usage` with pointers under ``/usage``.
    """
    return response_usage(body, parse_usage)


def delta_has_content(delta: object) -> bool:
    """True when a chat ``choices[].delta`` carries generated content: non-empty ``content``,
    ``refusal``, ``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (OpenRouter) text, or
    tool/function-call data."""
    if not isinstance(delta, Mapping):
        return False
    for key in _TEXT_DELTA_KEYS:
        value = delta.get(key)
        if isinstance(value, str) and value:
            return True
    return bool(delta.get("tool_calls")) or bool(delta.get("function_call"))


def _choice_has_content(choice: Mapping[str, Any]) -> bool:
    return delta_has_content(choice.get("delta"))


class ChatStreamAccumulator(SSEStreamAccumulator):
    """Accumulate usage from a chat-completions-shaped SSE stream (``data: {chunk}`` lines
    ending with ``data: [DONE]``).

    Rule (PROVIDERS.md §2.2): with ``stream_options.include_usage`` the usage arrives on a final
    chunk whose ``choices`` is ``[]``; other chunks carry ``"usage": null``. Some servers (vLLM
    ``continuous_usage_stats``) put cumulative usage on *every* chunk: the last non-null
    ``usage`` wins; counts are never summed. If the stream ends without any usage, the result
    is :meth:`CacheUsage.unknown`. If the last usage came from a mid-stream chunk and the
    stream never reached ``finish_reason``/``[DONE]``, the input side is kept and
    ``output_tokens`` is unknown. ``response_id`` is the chunk ``id``.
    """

    wire_format = WIRE_FORMAT

    def __init__(self, *, clock: Clock | None = None, start: float | None = None) -> None:
        super().__init__(clock=clock, start=start)
        self._done = False
        self._finish_seen = False
        self._usage: Sighting | None = None
        self._timings: Sighting | None = None

    @property
    def terminal(self) -> bool:
        """See :attr:`StreamAccumulator.terminal`."""
        return self._done

    def _parse(self, usage: Any, pointer: str) -> CacheUsage:
        return parse_usage(usage, pointer)

    def _event(self, event: SSEEvent) -> None:
        data = event.data
        if data.strip() == "[DONE]":
            self._done = True
            return
        obj = self._decode_object(data, event.offset)
        if obj is None:
            return
        self._identify(obj, "id", "model", keep_first=True)
        error = obj.get("error")
        if error is not None:
            self.error = (
                str(error.get("message", error)) if isinstance(error, Mapping) else str(error)
            )
        choices = obj.get("choices")
        if isinstance(choices, list):
            self._finish_seen |= self._scan_choices(choices, _choice_has_content, "finish_reason")
        else:  # llama.cpp native /completion chunks: {"content": "...", "stop": bool}
            content = obj.get("content")
            if isinstance(content, str) and content:
                self._mark_content()
            if obj.get("stop") is True:
                self._finish_seen = True
        final = self._finish_seen or not choices
        if obj.get("usage") is not None:
            self._usage = Sighting(obj["usage"], event.offset, "/usage", final)
        if obj.get("timings") is not None:
            self._timings = Sighting(obj["timings"], event.offset, "/timings", final)

    def _no_usage_reason(self) -> str:
        if self._done:
            return (
                "stream completed without a usage chunk "
                "(request stream_options={'include_usage': true})"
            )
        return "stream ended before its usage chunk (interrupted)"

    def _finish(self) -> CacheUsage:
        if self._usage is None:
            return self._unknown(self._no_usage_reason(), interrupted=not self._done)
        usage = self._parse_at(self._parse, self._usage)
        if not (self._done or self._usage.final):
            return self._partial(
                usage,
                "stream ended before finish_reason/[DONE]: output_tokens unknown "
                "(last cumulative usage was mid-stream)",
            )
        return usage


class OpenAIChatStreamAccumulator(ChatStreamAccumulator):
    """Stream accumulator for OpenAI Chat Completions (see :class:`ChatStreamAccumulator`)."""

    wire_format = WIRE_FORMAT


# -- requests: endpoint, cache key, shapes, body assembly, segmenting ---------------------------

ENDPOINT = "/v1/chat/completions"
"""URL path of the Chat Completions API."""

HISTORY_KEY = "messages"
"""The body key holding the conversation history."""

CONTENT_KEYS = ("messages",)
"""Top-level body keys besides the cache-key params and ``tools`` that this format reads."""

STREAM_FIELDS: Mapping[str, Any] = {"stream_options": {"include_usage": True}}
"""Added to a streamed request that did not set them: without ``include_usage`` a Chat stream
carries no usage (openai-python ``chat/completion_create_params.py``, ``stream_options``)."""

#: Request parameters that are part of the cache key, ``model`` first. Not ``tool_choice``:
#: the prompt-caching guide's list of prefix-changing settings does not name it, and its
#: ``allowed_tools`` form exists to restrict the callable tools while the ``tools`` list (the
#: cached prefix) stays the same (developers.openai.com/api/docs/guides/prompt-caching;
#: the emulator follows the same reading).
CACHE_KEY_PARAMS = (
    "model", "parallel_tool_calls", "reasoning_effort", "response_format",
    "verbosity", "prompt_cache_key", "cache_salt",
)


def tool(t: ToolParts) -> dict[str, Any]:
    """A ``tools[]`` entry: ``{"type": "function", "function": {"name", "description",
    "parameters"}}`` (plus ``"strict"`` in ``function`` when set).
    Source: ``openai.types.chat.ChatCompletionFunctionToolParam`` and
    ``openai.types.shared_params.FunctionDefinition`` (SDK 3.57)."""
    return {"type": "function", "function": tool_fields(t, "parameters")}


def tool_name(entry: dict[str, Any]) -> Any:
    """A sent ``tools[]`` entry's name: ``function.name`` (any value, or ``None``)."""
    function = entry.get("function")
    return function.get("name") if isinstance(function, dict) else None


def tool_schema(entry: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Where a sent ``tools[]`` entry keeps its schema: ``(entry["function"], "parameters")``,
    ``None`` when it has none (a custom tool)."""
    function = entry.get("function")
    if isinstance(function, dict) and isinstance(function.get("parameters"), dict):
        return function, "parameters"
    return None


def message_dicts(message: MessageParts) -> list[dict[str, Any]]:
    """The Chat messages for one canonical message (one, or one per tool result).

    Source: openai-python ``chat/completion_create_params.py`` message params.
    """
    if message.role == "system":  # operator instructions; tool changes are left out
        if any(b["type"] != "text" for b in message.wire_blocks):
            raise HistoryError("tool changes have no OpenAI message form (they are sent as "
                               "tool_choice allowed_tools)", code="history-role")
        texts = [b["text"] for b in message.wire_blocks]
        return [{"content": texts[0] if len(texts) == 1 else [
            {"text": t, "type": "text"} for t in texts], "role": "developer"}]
    blocks = message.wire_blocks
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    if message.role == "tool":
        return [{"content": b["content"], "role": "tool", "tool_call_id": b["tool_call_id"]}
                for b in blocks]
    if message.role == "user":
        content: Any = texts[0] if len(texts) == 1 else [
            {"text": t, "type": "text"} for t in texts]
        return [{"content": content, "role": "user"}]
    out: dict[str, Any] = {"content": "\n\n".join(texts) if texts else None,
                           "role": "assistant"}
    calls = [
        {"function": {"arguments": canonical_json(b["arguments"]).decode(), "name": b["name"]},
         "id": b["id"], "type": "function"}
        for b in blocks if b["type"] == "tool_call"
    ]
    if calls:
        out["tool_calls"] = calls
    for b in blocks:  # a kept reasoning_content field, replayed on the same message
        if b["type"] == "reasoning":
            if b["format"] != WIRE_FORMAT:
                raise HistoryError(f"{b['format']} reasoning content cannot be sent to Chat "
                                   "Completions", code="history-reasoning-format")
            out.update(b["item"])
    return [out]


def message_bytes(message: MessageParts) -> tuple[bytes, ...]:
    """:func:`message_dicts` as canonical bytes, serialized once per message."""
    cache = message.wire_memo
    found: tuple[bytes, ...] | None = cache.get(WIRE_FORMAT)
    if found is None:  # the message's canonical blocks were checked when it was made
        found = cache[WIRE_FORMAT] = tuple([checked_json(m) for m in message_dicts(message)])
    return found


def render(prompt: PromptParts, *, model: str, prompt_cache_key: bool | str | None,
           system_role: str, tail_role: str | None, params: Mapping[str, Any],
           prompt_cache_ttl: str | None = None, prompt_cache_mode: str | None = None,
           history_ttl: str | None = None) -> tuple[bytes, Fingerprints | None]:
    """The Chat Completions body (tools, system, history, tail last) as exact bytes.

    See :meth:`RenderedPrompt.to_openai_chat <stableprompt.RenderedPrompt.to_openai_chat>`.

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
              _openai.system_parts(head, system_role, explicit, 'text', {}))
    tail = _tail(prompt, model, tail_role)
    return _openai.render(
        prompt, wire_format=WIRE_FORMAT, history_key=HISTORY_KEY, serialize=message_bytes,
        system=system, tail=tail, tool=tool, tools_memo_key=_TOOLS_MEMO_KEY, segment=segment,
        names=CACHE_KEY_PARAMS, reserved=_RESERVED, model=model, key=key, params=params,
        system_role=system_role, explicit=explicit, text_type='text')


_RESERVED = frozenset({"tools", *CONTENT_KEYS})
"""Params the segmenter reads as content: with one, the fingerprint comes from the body."""
_TOOLS_MEMO_KEY = WIRE_FORMAT + "-tools"
"""Head memo key: the ``tools`` array, serialized once per head."""


def _system(head: HeadParts, system_role: str) -> bytes | None:
    """The system item for ``system_role``, serialized once per head and role."""
    return _openai.system_item(head, WIRE_FORMAT, system_role, _system_bytes)


def _system_bytes(head: HeadParts, system_role: str) -> bytes:
    content: Any = head.system[0] if len(head.system) == 1 else [
        {"text": t, "type": "text"} for t in head.system]
    return canonical_json({"content": content, "role": system_role})


def _tail(prompt: PromptParts, model: str, tail_role: str | None) -> bytes | None:
    tail = prompt.tail_texts
    if not tail:
        return None
    role = tail_role or default_tail_role(model)  # the texts were checked by the render
    return checked_json({"content": "\n".join(tail), "role": role})


def segment(body: Mapping[str, Any], b: SegmentBuilder) -> None:
    """Add the segments of a Chat body: tools, then leading system/developer messages as
    ``system``, then one per message content block."""
    segment_head(body, b)
    leading = True
    for i, message in enumerate(require_list(body, "messages", required=True)):
        leading = segment_item(b, message, i, leading)


def segment_head(body: Mapping[str, Any], b: SegmentBuilder) -> None:
    """Add the segments before the history: the tools."""
    for i, entry in enumerate(require_list(body, "tools", required=False)):
        b.add("tool", f"tools[{i}]", entry, f"/tools/{i}", tool_label(entry))


def segment_item(b: SegmentBuilder, message: Any, i: int, leading: bool) -> bool:
    """Add the segments of ``messages[i]``; ``leading``: every earlier message was a leading
    system/developer one. Returns whether this one still is."""
    return segment_message(b, message, f"messages[{i}]", f"/messages/{i}", leading)


def assistant_turn(response: Mapping[str, Any], *, choice: int | None = None) -> AssistantTurn:
    """The assistant turn of a Chat Completion: ``choices[choice].message`` ``content`` and
    ``tool_calls``; a ``reasoning_content`` / ``reasoning`` text (DeepSeek, vLLM,
    OpenRouter) is reported as reasoning at its pointer; ``incomplete`` is a ``finish_reason``
    of ``length`` or ``content_filter``.

    Args:
        response: The Chat Completion body.
        choice: Index of the choice to read; ``None`` requires exactly one choice.

    Raises:
        HistoryError: several choices and no ``choice`` (code ``history-choices``), no such
            choice or no message in it, a message role other than ``assistant``, content
            that is not a string (code ``history-response``, pointer into the response).
    """
    choices = response.get("choices")
    if not isinstance(choices, list):
        raise HistoryError("a Chat Completion needs a 'choices' list", code="history-response",
                           pointer="/choices")
    picked = chosen(choices, choice, member="choices",
                    many=f"the Chat Completion has {len(choices)} choices (n > 1)")
    choice = choice or 0
    base = f"/choices/{choice}"
    message = picked.get("message") if isinstance(picked, Mapping) else None
    if not isinstance(message, Mapping):
        raise HistoryError(f"a Chat Completion needs choices[{choice}].message",
                           code="history-response", pointer=f"{base}/message")
    role = message.get("role", "assistant")
    if role != "assistant":
        raise HistoryError(f"choices[{choice}].message.role must be 'assistant', got {role!r}",
                           code="history-response", pointer=f"{base}/message/role")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise HistoryError(f"choices[{choice}].message.content must be a string or null, got "
                           f"{type(content).__name__}", code="history-response",
                           pointer=f"{base}/message/content")
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise HistoryError(f"choices[{choice}].message.tool_calls must be a list",
                           code="history-response", pointer=f"{base}/message/tool_calls")
    parts = [TurnPart("reasoning", f"{base}/message/{key}", {key: message[key]})
             for key in ("reasoning_content", "reasoning") if message.get(key)]
    if content:
        parts.append(TurnPart("text", f"{base}/message/content", content))
    parts.extend(TurnPart("tool_call", f"{base}/message/tool_calls/{i}", call)
                 for i, call in enumerate(calls))
    finish = picked.get("finish_reason") if isinstance(picked, Mapping) else None
    return AssistantTurn.of(parts, f"finish_reason {finish}"
                            if finish in ("length", "content_filter") else None)
