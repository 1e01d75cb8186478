"""History messages: canonicalized once, their bytes kept, wire forms rendered once per format.

The provider-neutral canonical form of a message (what its segment bytes are)::

    {"content": [<block>, ...], "role": "user" | "assistant" | "tool" | "system"}

with blocks ``{"text", "type": "text"}``, ``{"arguments", "id", "name", "type": "tool_call"}``,
``{"content", "is_error", "tool_call_id", "type": "tool_result"}`` and, in assistant messages
added from a response, ``{"format", "item", "type": "reasoning"}`` (reasoning content kept
exactly as the provider sent it, replayed only to that wire format; see ``_responses``).
A ``system`` message holds only tool changes ``{"change": "addition" | "removal", "name",
"type": "tool_change"}`` (``Conversation.enable_tools`` / ``disable_tools``) or only text
blocks (``Conversation.system``: operator instructions).
Wire forms per provider are derived lazily, once per message, and cached on the message:
replaying history (resume, retry, fork) reuses those bytes and never re-renders from a lossy
form.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._canonical import canonical_json, loads
from .._exceptions import CanonicalizationError, HistoryError
from .._public import public
from .._wire import anthropic, openai_chat, openai_responses
from .._wire._parts import check_ttl
from ._suggest import did_you_mean, suggestion

__all__ = ["Message", "ToolCall"]

ROLES = ("user", "assistant", "tool", "system")
TOOL_CHANGES = ("addition", "removal")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call made by the assistant.

    Attributes:
        id: Provider call id (``toolu_...`` / ``call_...``), unique within a conversation.
        name: Tool name; must exist in the pinned head.
        arguments: JSON object of arguments (canonicalized; key order does not matter).
    """

    id: str
    name: str
    arguments: Mapping[str, Any]


class Message:
    """One history message with its canonical bytes (immutable).

    Build messages through :class:`~stableprompt.Conversation` (``user``, ``assistant``,
    ``tool_result``); the constructor validates and canonicalizes once.

    Attributes:
        role: ``user``, ``assistant``, ``tool`` or ``system`` (tool changes or operator
            instructions).
        data: Canonical JSON bytes (the segment bytes).
        breakpoint: User-placed cache breakpoint TTL (``"5m"``/``"1h"``) or ``None``.
    """

    __slots__ = ("breakpoint", "data", "role", "wire_blocks", "wire_memo")

    role: str
    data: bytes
    breakpoint: str | None
    wire_blocks: tuple[Mapping[str, Any], ...]
    """The canonical content blocks (shared, read-only: never mutate them); what the wire
    renderers read (``_wire._parts.MessageParts``): slots, not properties, since the renderers
    read them every turn (a property is not specialized by CPython 3.11: ~6x the cost)."""
    wire_memo: dict[str, Any]
    """Per-format wire bytes of this message, serialized once (``_wire`` modules' memo)."""

    def __init__(self, role: str, blocks: Sequence[Mapping[str, Any]], *,
                 breakpoint: str | None = None) -> None:
        if role not in ROLES:
            raise HistoryError(f"role must be one of {ROLES}, got {role!r}", code="history-role")
        if not blocks:
            raise HistoryError("a message needs at least one content block", code="history-empty")
        if role == "system" and not (all(
                isinstance(b, Mapping) and b.get("type") == "tool_change"
                and b.get("change") in TOOL_CHANGES and isinstance(b.get("name"), str)
                and len(b) == 3 for b in blocks) or all(
                isinstance(b, Mapping) and b.get("type") == "text"
                and isinstance(b.get("text"), str) and b["text"] and len(b) == 2
                for b in blocks)):
            raise HistoryError("a system history message holds only tool changes "
                               "({'change', 'name', 'type': 'tool_change'}) or only text "
                               "blocks", code="history-role")
        try:
            data = canonical_json({"content": list(blocks), "role": role})
        except CanonicalizationError as exc:  # pointer is relative to {"content", "role"}
            raise HistoryError(f"message content is not canonical JSON: {exc.message}",
                               code=exc.code, pointer=exc.pointer) from exc
        object.__setattr__(self, "role", role)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "breakpoint", breakpoint)
        # Re-parse the canonical bytes: internal blocks never alias the caller's objects.
        object.__setattr__(self, "wire_blocks", tuple(loads(data)["content"]))
        object.__setattr__(self, "wire_memo", {})

    def __setattr__(self, name: str, value: object) -> None:
        raise HistoryError("messages are immutable; history is append-only",
                           code="history-immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Message.from_bytes, (self.data, self.breakpoint))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Message) and self.data == other.data
                and self.breakpoint == other.breakpoint)

    def __hash__(self) -> int:
        return hash((self.data, self.breakpoint))

    @classmethod
    def from_bytes(cls, data: bytes, breakpoint: str | None = None) -> Message:
        """Rebuild a message from its stored canonical bytes (resume, unpickle).

        Raises:
            HistoryError: ``data`` is not a canonical message (code ``history-bytes``): the
                stored bytes must be reused exactly, never re-rendered from a lossy form.
        """
        try:
            value = loads(data)
            message = cls(value["role"], value["content"], breakpoint=breakpoint)
        except (ValueError, KeyError, TypeError) as exc:
            raise HistoryError(f"stored message bytes are not a message: {exc}",
                               code="history-bytes") from exc
        if message.data != bytes(data):
            raise HistoryError("stored message bytes are not canonical (edited or produced "
                               "elsewhere)", code="history-bytes")
        return message

    def __repr__(self) -> str:
        return f"Message(role={self.role!r}, bytes={len(self.data)})"

    def to_dict(self) -> dict[str, Any]:
        """A fresh copy of the canonical message dict."""
        value: dict[str, Any] = loads(self.data)
        return value

    @property
    def text(self) -> str:
        """Concatenated text of the message's text blocks and tool results."""
        parts = [b.get("text") or b.get("content") or "" for b in self.wire_blocks
                 if b.get("type") in ("text", "tool_result")]
        return "\n".join(p if isinstance(p, str) else str(p) for p in parts)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls in this (assistant) message."""
        return tuple(
            ToolCall(b["id"], b["name"], copy.deepcopy(b["arguments"]))
            for b in self.wire_blocks if b.get("type") == "tool_call"
        )

    @property
    def tool_changes(self) -> tuple[tuple[str, str], ...]:
        """``(change, tool name)`` of each tool change in this (system) message, ``change``
        being ``addition`` or ``removal``."""
        return tuple((b["change"], b["name"]) for b in self.wire_blocks
                     if b.get("type") == "tool_change")

    @property
    def tool_result_ids(self) -> tuple[str, ...]:
        """Tool call ids answered by this (tool) message."""
        return tuple(b["tool_call_id"] for b in self.wire_blocks if b.get("type") == "tool_result")

    # -- wire forms -------------------------------------------------------------------------

    def anthropic_blocks(self) -> tuple[bytes, ...]:
        """Anthropic content blocks (canonical bytes, no ``cache_control``), cached.
        See :func:`stableprompt._wire.anthropic.block` for the shapes."""
        return anthropic.message_blocks(self)

    def anthropic_block_with_breakpoint(self, index: int, ttl: str) -> bytes:
        """Block ``index`` rendered with a ``cache_control`` marker of ``ttl``."""
        return anthropic.block_with_breakpoint(self, index, ttl)

    def openai_chat(self) -> tuple[bytes, ...]:
        """OpenAI Chat Completions messages for this message (one, or one per tool result),
        cached. See :func:`stableprompt._wire.openai_chat.message_dicts`."""
        return openai_chat.message_bytes(self)

    def openai_responses(self) -> tuple[bytes, ...]:
        """OpenAI Responses input items for this message, cached.
        See :func:`stableprompt._wire.openai_responses.items`."""
        return openai_responses.item_bytes(self)


REMINDER_TAG = "system-reminder"
"""The tag a system message's text is wrapped in where it is sent as user text."""


def as_user_text(message: Message) -> Message:
    """A text ``system`` message as the user text a model without mid-conversation system
    messages gets (each block wrapped in ``<system-reminder>`` tags), made once per message."""
    found: Message | None = message.wire_memo.get("as-user")
    if found is None:
        found = message.wire_memo["as-user"] = Message("user", [
            {"text": f"<{REMINDER_TAG}>\n{b['text']}\n</{REMINDER_TAG}>", "type": "text"}
            for b in message.wire_blocks])
    return found


def system_message(text: str) -> Message:
    """A ``system`` message of operator instructions (one non-empty text block)."""
    if not isinstance(text, str) or not text:
        raise HistoryError("system text must be a non-empty str", code="history-empty-text",
                           pointer="/content/0/text")
    return Message("system", [{"text": text, "type": "text"}])


def tool_change_message(changes: Sequence[tuple[str, str]]) -> Message:
    """A ``system`` message of tool changes (``(change, name)`` pairs, in order)."""
    return Message("system", [{"change": change, "name": name, "type": "tool_change"}
                              for change, name in changes])


def user_message(content: str | Sequence[str], *, breakpoint: str | None = None) -> Message:
    """Build a user message from text (or several text blocks)."""
    if not isinstance(content, (str, list, tuple)):
        raise HistoryError(f"user content must be str or a list of str, got "
                           f"{type(content).__name__}", code="history-type", pointer="/content")
    texts = [content] if isinstance(content, str) else list(content)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise HistoryError(f"user text must be str, got {type(text).__name__}",
                               code="history-type", pointer=f"/content/{i}/text")
        if not text:
            raise HistoryError("user text must not be empty (providers reject empty text "
                               "blocks)", code="history-empty-text", pointer=f"/content/{i}/text")
    return Message("user", [{"text": t, "type": "text"} for t in texts],
                   breakpoint=check_ttl(breakpoint, "user"))


def assistant_message(text: str | None, tool_calls: Sequence[ToolCall | Mapping[str, Any]],
                      *, breakpoint: str | None = None) -> Message:
    """Build an assistant message from optional text and tool calls."""
    blocks: list[dict[str, Any]] = []
    if text is not None:
        if not isinstance(text, str):
            raise HistoryError("assistant text must be str", code="history-type",
                               pointer="/content/0/text")
        if not text:
            raise HistoryError("assistant text must not be empty (providers reject empty text "
                               "blocks); pass text=None", code="history-empty-text",
                               pointer="/content/0/text")
        blocks.append({"text": text, "type": "text"})
    seen: set[str] = set()
    for i, call in enumerate(tool_calls):
        if isinstance(call, Mapping):
            call = tool_call_of(call, f"/tool_calls/{i}")
        if not isinstance(call.id, str) or not call.id:
            raise HistoryError("tool call id must be a non-empty string",
                               code="history-tool-call", pointer=f"/tool_calls/{i}/id")
        if not isinstance(call.arguments, Mapping):
            raise HistoryError("tool call arguments must be a JSON object",
                               code="history-tool-call", pointer=f"/tool_calls/{i}/arguments")
        if call.id in seen:
            raise HistoryError(f"tool call id {call.id!r} repeated in one message",
                               code="history-duplicate-call", pointer=f"/tool_calls/{i}/id")
        seen.add(call.id)
        blocks.append({"arguments": dict(call.arguments), "id": call.id, "name": call.name,
                       "type": "tool_call"})
    return Message("assistant", blocks, breakpoint=check_ttl(breakpoint, "assistant"))


class _Shape(NamedTuple):
    """One tool-call dict shape ``tool_call_of`` accepts."""

    name: str  #: what messages call the shape, e.g. ``"Anthropic tool_use"``
    noun: str  #: what messages call one such dict, e.g. ``"tool_use block"``
    type: str | None  #: its ``type`` value, ``None`` for ours
    required: frozenset[str]
    optional: frozenset[str]


_SHAPES: tuple[_Shape, ...] = (  # a full match is tried in this order
    _Shape("Responses function_call", "function_call item", "function_call",
           frozenset({"call_id", "name", "arguments"}), frozenset({"type", "id", "status"})),
    _Shape("stableprompt", "tool call", None, frozenset({"id", "name", "arguments"}),
           frozenset()),
    _Shape("Anthropic tool_use", "tool_use block", "tool_use",
           frozenset({"id", "name", "input"}), frozenset({"type"})),
    _Shape("OpenAI tool call", "Chat tool call", "function", frozenset({"id", "function"}),
           frozenset({"type", "index"})),
)
_BY_NAME = {s.name: s for s in _SHAPES}
_BY_TYPE = {s.type: s for s in _SHAPES if s.type is not None}
#: A key only one shape has: a dict with it is meant as that shape.
_TELLING_KEYS = (("call_id", _BY_NAME["Responses function_call"]),
                 ("function", _BY_NAME["OpenAI tool call"]),
                 ("input", _BY_NAME["Anthropic tool_use"]))
#: Other names for the arguments field (another provider's, or a first guess).
_ARGUMENT_NAMES = ("args", "arguments", "input", "params", "parameters", "kwargs")
SHAPE_NAMES = tuple(s.name for s in _SHAPES)
"""The shapes :func:`tool_call_of` reads (its ``shape=`` values)."""


def _meant_shape(call: Mapping[str, Any], keys: set[str], shape: str | None) -> _Shape:
    """The shape an incomplete dict is meant as: the caller's, its ``type``, a key only one
    shape has, else the one with the fewest missing fields (ours on a tie)."""
    if shape is not None:
        return _BY_NAME[shape]
    kind = call.get("type")
    if isinstance(kind, str) and kind in _BY_TYPE:
        return _BY_TYPE[kind]
    for key, telling in _TELLING_KEYS:
        if key in keys:
            return telling
    return min(_SHAPES, key=lambda s: (len(s.required - keys), s.name != "stableprompt"))


def _field_hint(unknown: str, missing: Sequence[str], allowed: frozenset[str]) -> str:
    """``" (did you mean 'x'?)"`` for a key that is not one of ``allowed``: the closest
    missing field, the one missing arguments field for another name of it (``args`` ->
    ``input``), else the closest allowed key."""
    found = suggestion(unknown, missing)
    if found is None and unknown in _ARGUMENT_NAMES:
        found = next((m for m in missing if m in _ARGUMENT_NAMES), None)
    if found is None and len(missing) == 1:
        found = missing[0]
    if found is None:
        found = suggestion(unknown, allowed)
    return f" (did you mean {found!r}?)" if found is not None else ""


def _fields(shape: _Shape) -> str:
    return f"{shape.name}: {', '.join(sorted(shape.required | shape.optional))}"


def tool_call_of(call: Mapping[str, Any], pointer: str = "", *,
                 shape: str | None = None) -> ToolCall:
    """A :class:`ToolCall` from a dict in one of four shapes: ours ``{"id", "name",
    "arguments"}``, an Anthropic ``tool_use`` block ``{"type": "tool_use", "id", "name",
    "input"}``, an OpenAI Chat tool call ``{"id", "type": "function", "function": {"name",
    "arguments"}}``, or a Responses ``function_call`` item ``{"type": "function_call",
    "call_id", "name", "arguments"}`` (``arguments`` a JSON string, parsed once, or an
    object).

    Args:
        call: The dict.
        pointer: JSON pointer of ``call`` (errors point under it).
        shape: The shape the caller knows ``call`` is in (one of :data:`SHAPE_NAMES`: a
            provider response's block or item), else ``None``. With a shape, keys beyond it
            are a provider's own fields (``caller``, ``namespace``, ...) and are ignored once
            every field the shape reads is there; without one, any unknown key is an error.

    Raises:
        HistoryError: an unknown key (a typo such as ``args`` is never taken for empty
            arguments: the message says which field it was meant as and lists the keys
            given), a missing field, or arguments that are not a JSON object; code
            ``history-tool-call``, ``pointer`` names the key under ``pointer``.
    """
    keys = set(call)
    got = f"got keys {sorted(keys)}"
    known = _BY_NAME.get(shape) if shape is not None else None
    if known is not None:  # a provider's block: only its own shape
        found: _Shape | None = known if known.required <= keys else None
    else:
        found = next((s for s in _SHAPES if s.required <= keys), None)
    if found is None:
        meant = _meant_shape(call, keys, known.name if known is not None else None)
        missing = sorted(meant.required - keys)
        unknown = sorted(keys - meant.required - meant.optional)
        needs = f"a {meant.noun} needs {', '.join(map(repr, missing))} ({_fields(meant)}); {got}"
        if unknown:
            key = next((u for u in unknown if _field_hint(u, missing, frozenset())), unknown[0])
            raise HistoryError(
                f"unknown key {key!r}{_field_hint(key, missing, meant.required | meant.optional)}"
                f": {needs}", code="history-tool-call", pointer=f"{pointer}/{key}")
        raise HistoryError(needs, code="history-tool-call", pointer=pointer)
    allowed = found.required | found.optional
    unknown = sorted(keys - allowed)
    if unknown and shape is None:
        raise HistoryError(f"unknown key {unknown[0]!r}{did_you_mean(unknown[0], allowed)} in "
                           f"a {found.noun} ({_fields(found)}); {got}",
                           code="history-tool-call", pointer=f"{pointer}/{unknown[0]}")
    if found.type is not None and call.get("type", found.type) != found.type:
        raise HistoryError(f"tool call type {call['type']!r} is not {found.type!r}",
                           code="history-tool-call", pointer=f"{pointer}/type")
    if found.name == "Responses function_call":
        return ToolCall(call["call_id"], call["name"],
                        _arguments(call["arguments"], f"{pointer}/arguments"))
    if found.name != "OpenAI tool call":
        key = "arguments" if "arguments" in call else "input"
        return ToolCall(call["id"], call["name"], _arguments(call[key], f"{pointer}/{key}"))
    function = call["function"]
    where = f"{pointer}/function"
    if not isinstance(function, Mapping):
        raise HistoryError("a Chat tool call's function must be an object with 'name' and "
                           "'arguments'", code="history-tool-call", pointer=where)
    extra = sorted(set(function) - {"name", "arguments"})
    if extra or "name" not in function:
        fn_got = f"got keys {sorted(function)}"
        if extra:
            missing = sorted({"name", "arguments"} - set(function))
            hint = _field_hint(extra[0], missing, frozenset({"name", "arguments"}))
            raise HistoryError(f"unknown key {extra[0]!r}{hint} in a Chat tool call's function "
                               f"(name, arguments); {fn_got}", code="history-tool-call",
                               pointer=f"{where}/{extra[0]}")
        raise HistoryError(f"a Chat tool call's function needs 'name' (and 'arguments'); "
                           f"{fn_got}", code="history-tool-call", pointer=where)
    return ToolCall(call["id"], function["name"],
                    _arguments(function.get("arguments", "{}"), f"{where}/arguments"))


def _arguments(value: Any, pointer: str) -> Mapping[str, Any]:
    """Tool-call arguments as a JSON object: a JSON string is parsed once."""
    if isinstance(value, str):
        try:
            value = loads(value or "{}")
        except ValueError as exc:
            raise HistoryError(f"tool call arguments are not JSON: {exc}",
                               code="history-tool-call", pointer=pointer) from exc
    if not isinstance(value, Mapping):
        raise HistoryError("tool call arguments must be a JSON object",
                           code="history-tool-call", pointer=pointer)
    return value


def tool_result_message(tool_call_id: str, content: Any, *, is_error: bool = False,
                        breakpoint: str | None = None) -> Message:
    """Build a tool-result message; non-string content is stored as canonical JSON text."""
    if not isinstance(is_error, bool):
        raise HistoryError(f"is_error must be a bool, got {type(is_error).__name__}",
                           code="history-type", pointer="/is_error")
    if not isinstance(content, str):
        try:
            content = canonical_json(content).decode()
        except CanonicalizationError as exc:
            raise HistoryError(f"tool result is not JSON: {exc.message}", code=exc.code,
                               pointer=f"/content{exc.pointer or ''}") from exc
    return Message("tool", [{"content": content, "is_error": is_error,
                             "tool_call_id": tool_call_id, "type": "tool_result"}],
                   breakpoint=check_ttl(breakpoint, "tool"))


public(Message, ToolCall)
