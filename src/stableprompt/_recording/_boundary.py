"""Where a request stands in its user turn: inside a tool loop, or the first call of a turn.

A user turn starts with a user message and goes on with tool-loop calls, each sent after a tool
result. Production traces cache very differently on either side (a code assistant: ~90% hit
rate within a turn, ~55% across turn boundaries, DESIGN.md), so the recorder stores the side in
``verdict_detail["turn_boundary"]`` and the report splits the hit rate on it.

:func:`turn_boundary` reads the last input message of a request body:

- ``"intra"``: it is a tool result (Anthropic: a ``user`` message holding a ``tool_result``
  block; Chat Completions: role ``tool`` or ``function``; Responses: an item of type
  ``*_call_output``; Gemini: a ``user`` content holding a ``functionResponse`` part;
  Converse: a ``user`` message holding a ``toolResult`` block), so the call continues a
  turn;
- ``"cross"``: it is a user message without tool results (Responses: also a string
  ``input``), so the call is the first after a new user message;
- ``None``: anything else (no messages, a trailing assistant prefill after a non-user
  message, an unknown shape). Trailing ``assistant`` messages (prefill) are skipped, and so
  are trailing mid-conversation instructions (a ``system`` / ``developer`` message after the
  first: Anthropic's mid-conversation system messages, ``Conversation.system``, tool
  changes), which neither start nor continue a user turn.

On the OpenAI formats the SDK renders its volatile tail as one more message at the end
(role ``user``, ``developer`` or ``system``) whose text is only tail slots,
``<slot>\nvalue\n</slot>`` joined by newlines (``RenderedPrompt.tail_texts``): such a last
message is skipped too, so a tool-loop call with a clock tail still counts as ``"intra"``
(Anthropic's tail is a block inside the last user message, which holds the tool result).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

__all__ = ["Boundary", "turn_boundary"]

Boundary = Literal["intra", "cross"]


_TAIL_TEXT = re.compile(r"<([\w.-]+)>\n.*?\n</\1>(?:\n<([\w.-]+)>\n.*?\n</\2>)*", re.DOTALL)
_TAIL_ROLES = ("user", "developer", "system")


def _is_tail(item: Mapping[str, Any]) -> bool:
    """An OpenAI message holding only the SDK's tail slots (see the module docstring)."""
    if item.get("role") not in _TAIL_ROLES:
        return False
    content = item.get("content")
    if isinstance(content, Sequence) and not isinstance(content, str) and len(content) == 1 \
            and isinstance(content[0], Mapping):
        content = content[0].get("text")
    if not isinstance(content, str):
        return False
    return _TAIL_TEXT.fullmatch(content) is not None


def _last_input(items: Sequence[Any], *, tail: bool = False) -> Mapping[str, Any] | None:
    """The last item that is not an assistant message (prefill), a mid-conversation
    instruction (``system`` / ``developer`` after the first item) nor, with ``tail``, the
    SDK's trailing tail message, if it is an object."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if not isinstance(item, Mapping):
            return None
        if tail and index == len(items) - 1 and index > 0 and _is_tail(item):
            continue
        role = item.get("role")
        if index > 0 and role in ("system", "developer"):
            continue  # operator instructions appended after the turn's input
        if role != "assistant":
            return item
    return None


def _anthropic(body: Mapping[str, Any]) -> Boundary | None:
    messages = body.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return None
    last = _last_input(messages)
    if last is None or last.get("role") != "user":
        return None
    content = last.get("content")
    if isinstance(content, Sequence) and not isinstance(content, str) and any(
            isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content):
        return "intra"
    return "cross"


def _openai_chat(body: Mapping[str, Any]) -> Boundary | None:
    messages = body.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return None
    last = _last_input(messages, tail=True)
    role = None if last is None else last.get("role")
    if role in ("tool", "function"):
        return "intra"
    return "cross" if role == "user" else None


def _openai_responses(body: Mapping[str, Any]) -> Boundary | None:
    items = body.get("input")
    if isinstance(items, str):
        return "cross"
    if not isinstance(items, Sequence):
        return None
    last = _last_input(items, tail=True)
    if last is None:
        return None
    kind = last.get("type")
    if isinstance(kind, str) and kind.endswith("_call_output"):
        return "intra"
    return "cross" if last.get("role") == "user" else None


def _blocks_of(items_key: str, parts_key: str, result_key: str, model_role: str
               ) -> Callable[[Mapping[str, Any]], Boundary | None]:
    """A reader for the formats whose messages hold one-key blocks (Gemini ``contents`` of
    ``parts``, Converse ``messages`` of ``content``): the last non-``model_role`` message
    holding a ``result_key`` block (``functionResponse`` / ``toolResult``) is ``"intra"``,
    another ``user`` message ``"cross"``. The SDK's tail rides in that last user message as
    text blocks, so it changes nothing."""
    def read(body: Mapping[str, Any]) -> Boundary | None:
        items = body.get(items_key)
        if not isinstance(items, Sequence) or isinstance(items, str):
            return None
        for index in range(len(items) - 1, -1, -1):
            item = items[index]
            if not isinstance(item, Mapping):
                return None
            if item.get("role") == model_role:
                continue  # prefill
            if item.get("role", "user") != "user":
                return None
            blocks = item.get(parts_key)
            if isinstance(blocks, Sequence) and not isinstance(blocks, str) and any(
                    isinstance(b, Mapping) and result_key in b for b in blocks):
                return "intra"
            return "cross"
        return None
    return read


_READERS = {"anthropic": _anthropic, "openai-chat": _openai_chat,
            "openai-responses": _openai_responses,
            "gemini": _blocks_of("contents", "parts", "functionResponse", "model"),
            "bedrock-converse": _blocks_of("messages", "content", "toolResult", "assistant")}


def turn_boundary(wire_format: str, body: Mapping[str, Any]) -> Boundary | None:
    """``"intra"`` / ``"cross"`` / ``None`` for a request body (see the module docstring).

    Args:
        wire_format: The request format (``anthropic``, ``openai-chat``,
            ``openai-responses``, ``gemini``, ``bedrock-converse``); any other gives
            ``None``.
        body: The decoded request body.
    """
    reader = _READERS.get(wire_format)
    return None if reader is None else reader(body)
