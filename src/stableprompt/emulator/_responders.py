"""Deterministic assistant output for the emulator: scripted turns, echo mode, ids, truncation.

The emulator never generates text. Each call asks a *responder* (a callable taking the request
body as decoded JSON and returning an :class:`AssistantTurn`) what to answer. The default
responder echoes the text of the last user message. Ids are counter-based
(``msg_emu_000001``), so identical request sequences give identical responses.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._canonical import loads, wire_json
from .._exceptions import InputError
from ._tokens import BlockTokenizer

__all__ = [
    "AssistantTurn",
    "FittedCall",
    "FittedTurn",
    "Responder",
    "ScriptedResponder",
    "ToolCall",
    "counter",
    "echo_responder",
    "fit_turn",
    "last_user_text",
    "load_script",
]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One scripted tool call.

    Attributes:
        name: Tool name.
        arguments: Arguments object; serialized in insertion order.
        id: Call id to report; ``None`` lets the emulator assign a counter-based one.
        input: Free-form input of a custom (grammar) tool, e.g. Codex's ``apply_patch``: the
            Responses wire answers a ``custom_tool_call`` carrying it instead of a
            ``function_call``; the other wires ignore it and send ``arguments``.
        namespace: Responses only: the namespace of a tool declared inside a
            ``{"type": "namespace"}`` tool group (the call item's ``namespace``).
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    input: str | None = None
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class AssistantTurn:
    """One scripted assistant turn: optional text, then tool calls in order.

    Attributes:
        text: Assistant text (``""`` for none).
        tool_calls: Tool calls, in order.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


Responder = Callable[[Mapping[str, Any]], AssistantTurn]
"""Request body (decoded JSON, key order as received) -> the assistant turn to answer."""


def last_user_text(body: Mapping[str, Any]) -> str:
    """Text of the last user message that has text, for any of the three wire formats.

    Reads Anthropic/OpenAI Chat ``messages`` or OpenAI Responses ``input`` (a string, or items
    with ``role: "user"``). Text parts are ``text``/``input_text`` blocks, joined with newlines.
    Returns ``""`` when there is none.
    """
    source = body.get("messages", body.get("input"))
    if isinstance(source, str):
        return source
    if not isinstance(source, list):
        return ""
    for message in reversed(source):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [
                part["text"]
                for part in content
                if isinstance(part, dict)
                and part.get("type") in ("text", "input_text")
                and isinstance(part.get("text"), str)
            ]
            if texts:
                return "\n".join(texts)
    return ""


def echo_responder(body: Mapping[str, Any]) -> AssistantTurn:
    """The default responder: answer with the last user text (or ``"ok"`` if there is none)."""
    return AssistantTurn(text=last_user_text(body) or "ok")


class ScriptedResponder:
    """Serves a fixed list of turns in order, one per call.

    Args:
        turns: The turns.
        cycle: Start again from the first turn when exhausted (else raise ``LookupError``).
    """

    def __init__(self, turns: Sequence[AssistantTurn], *, cycle: bool = False) -> None:
        if not turns:
            raise InputError("a scripted responder needs at least one turn",
                             code="emulator-script")
        self._turns = tuple(turns)
        self._cycle = cycle
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, body: Mapping[str, Any]) -> AssistantTurn:
        with self._lock:
            index = self._next
            if index >= len(self._turns):
                if not self._cycle:
                    raise LookupError(f"scripted responder exhausted after {index} turns")
                index = 0
            self._next = index + 1
            return self._turns[index]


def load_script(data: bytes) -> list[AssistantTurn]:
    """Parse a script file: a JSON array of ``{"text": str, "tool_calls": [{"name": str,
    "arguments": {...}, "id": str?, "input": str?, "namespace": str?}]}`` objects (see
    :class:`ToolCall`).

    Raises:
        InputError: Malformed JSON or a wrong field, naming its JSON pointer
            (code ``emulator-script``).
    """
    try:
        doc = loads(data)
    except ValueError as exc:
        raise InputError(f"script is not valid JSON: {exc}", code="emulator-script") from exc
    if not isinstance(doc, list) or not doc:
        raise InputError("script must be a non-empty JSON array of turns",
                         code="emulator-script", pointer="")
    turns = []
    for i, item in enumerate(doc):
        if not isinstance(item, dict) or set(item) - {"text", "tool_calls"}:
            raise _bad(f"/{i}", "a turn is an object with 'text' and/or 'tool_calls'")
        text = item.get("text", "")
        if not isinstance(text, str):
            raise _bad(f"/{i}/text", "must be a string")
        calls = item.get("tool_calls", [])
        if not isinstance(calls, list):
            raise _bad(f"/{i}/tool_calls", "must be an array")
        parsed = []
        for k, call in enumerate(calls):
            where = f"/{i}/tool_calls/{k}"
            if not isinstance(call, dict) or set(call) - _CALL_FIELDS:
                raise _bad(where, "a tool call is an object with 'name', 'arguments', 'id', "
                           "'input', 'namespace'")
            name, args, cid = call.get("name"), call.get("arguments", {}), call.get("id")
            if not isinstance(name, str) or not name:
                raise _bad(f"{where}/name", "must be a non-empty string")
            if not isinstance(args, dict):
                raise _bad(f"{where}/arguments", "must be an object")
            for key in ("id", "input", "namespace"):
                if call.get(key) is not None and not isinstance(call[key], str):
                    raise _bad(f"{where}/{key}", "must be a string")
            parsed.append(ToolCall(name, args, cid, call.get("input"), call.get("namespace")))
        turns.append(AssistantTurn(text, tuple(parsed)))
    return turns


_CALL_FIELDS = frozenset({"name", "arguments", "id", "input", "namespace"})


def _bad(pointer: str, what: str) -> InputError:
    return InputError(f"bad script turn: {what}", code="emulator-script", pointer=pointer)


@dataclass(frozen=True, slots=True)
class FittedCall:
    """One tool call as sent.

    Attributes:
        id: Call id.
        name: Tool name.
        arguments: Arguments as JSON text.
        input: Custom-tool input (Responses ``custom_tool_call``), else ``None``.
        namespace: Tool namespace (Responses), else ``None``.
    """

    id: str
    name: str
    arguments: str
    input: str | None = None
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class FittedTurn:
    """A turn after applying the request's output limit.

    Attributes:
        text: Text to send.
        tool_calls: The calls, in order.
        output_tokens: Tokens of text plus each call's name and arguments JSON.
        truncated: The output limit cut the turn (text shortened, tool calls dropped).
    """

    text: str
    tool_calls: tuple[FittedCall, ...]
    output_tokens: int
    truncated: bool


def fit_turn(
    turn: AssistantTurn,
    *,
    tokenizer: BlockTokenizer,
    max_tokens: int | None,
    call_id: Callable[[int], str],
) -> FittedTurn:
    """Assign call ids, count output tokens and apply ``max_tokens``.

    Raises:
        TypeError: The responder returned something other than an :class:`AssistantTurn`.
    """
    if not isinstance(turn, AssistantTurn):
        raise TypeError(f"responder must return AssistantTurn, got {type(turn).__name__}")
    calls = tuple(
        FittedCall(call.id or call_id(k), call.name, wire_json(dict(call.arguments)).decode(),
                   call.input, call.namespace)
        for k, call in enumerate(turn.tool_calls)
    )
    text_tokens = tokenizer.count(turn.text)
    total = text_tokens + sum(
        tokenizer.count(c.name) + tokenizer.count(c.input if c.input is not None
                                                  else c.arguments) for c in calls)
    if max_tokens is None or total <= max_tokens:
        return FittedTurn(turn.text, calls, total, False)
    text = tokenizer.truncate(turn.text, max_tokens)
    return FittedTurn(text, (), tokenizer.count(text), True)


def counter() -> Callable[[], int]:
    """A thread-safe counter starting at 1."""
    lock = threading.Lock()
    numbers = itertools.count(1)

    def next_number() -> int:
        with lock:
            return next(numbers)

    return next_number
