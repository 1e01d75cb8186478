"""Provider responses into history: the assistant turn of a response as one canonical message.

:meth:`Conversation.add_response <stableprompt.Conversation.add_response>` reads an Anthropic
Messages response, a Chat Completion or a Responses response (a dict, or an official SDK
object) through the wire format's ``assistant_turn`` and builds the assistant message here,
blocks in response order:

- text (text blocks / output text joined) as one ``text`` block, where the first text was;
- tool calls as ``tool_call`` blocks, arguments parsed once into canonical form;
- a signature the provider attached to a tool call or to the text (Gemini
  ``thoughtSignature``), on that block as ``"signature": {"format", "value"}``, the value as
  received; the format's renderer puts it back on its part, unchanged (other formats have
  no place for it and leave it out);
- reasoning, by default kept exactly as received, in its place, as
  ``{"format": <wire format>, "item": <block or item>, "type": "reasoning"}``: an Anthropic
  ``thinking`` block with its ``signature`` or a ``redacted_thinking`` block, a Responses
  ``reasoning`` item with its ``id``, ``summary`` and ``encrypted_content``, or a Chat
  message's ``reasoning_content`` field. The values are never touched (the signature and the
  encrypted content stay valid); like every stableprompt block, the keys are in canonical
  order, so the bytes are the same on every later request. A render to the format that
  produced it replays it there; a render to another format raises (see
  ``_wire._parts.check_reasoning``).

Every error names its place as a JSON pointer into the response (``/content/1/input``,
``/choices/0/message/tool_calls/0/function/arguments``, ``/output/2``). A tool call is read
in its format's shape with every key the provider sent: a typo (``args`` for ``input``) is
named with the field it was meant as, and a provider's own extra fields (``caller``,
``namespace``) are ignored once the call has every field.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping
from typing import Any

from .._exceptions import HistoryError, IncompleteResponseWarning
from .._policy import reasoning_rule
from .._wire._formats import assistant_turn, response_format
from .._wire._parts import check_ttl
from ._messages import Message, ToolCall, tool_call_of

__all__ = ["REASONING_MODES", "response_body", "response_message"]

REASONING_MODES = ("keep", "drop", "error")
"""What ``add_response`` may do with reasoning content."""

#: Where a tool call's id and name are, per shape (what ``tool_call_of`` accepts).
_ID_NAME = {"call_id": ("/call_id", "/name"), "function": ("/id", "/function/name")}
#: The tool-call shape of each response format (``tool_call_of``'s ``shape``).
_CALL_SHAPES = {"anthropic": "Anthropic tool_use", "openai-responses": "Responses function_call",
                "gemini": "stableprompt", "bedrock-converse": "stableprompt"}


def response_body(response: Any) -> Mapping[str, Any]:
    """The JSON body of a response: a mapping as is; an SDK object through
    ``model_dump(mode="json", by_alias=True, exclude_unset=True)`` (the fields the provider
    sent, with their wire names, so a reasoning item is replayed with exactly its fields).

    Raises:
        HistoryError: neither, or an SDK object that cannot be dumped (code
            ``history-response``).
    """
    if isinstance(response, Mapping):
        return response
    dump = getattr(response, "model_dump", None)
    if callable(dump):
        try:
            body = dump(mode="json", by_alias=True, exclude_unset=True)
        except Exception as exc:  # a broken or foreign SDK object: say which
            raise HistoryError(
                f"cannot read the {type(response).__name__} response object: its "
                f"model_dump(mode='json') raised {type(exc).__name__}: {exc}; pass the "
                "response JSON as a dict instead", code="history-response") from exc
        if isinstance(body, Mapping):
            return body
    raise HistoryError(f"a provider response must be a dict or an SDK response object, got "
                       f"{type(response).__name__}", code="history-response")


def _call_places(call: Mapping[str, Any], pointer: str) -> tuple[str, str]:
    """Pointers of a tool call's id and name in the response."""
    for key, (id_at, name_at) in _ID_NAME.items():
        if key in call:
            return pointer + id_at, pointer + name_at
    return pointer + "/id", pointer + "/name"


def _id_made_up(body: Mapping[str, Any], pointer: str) -> bool:
    """Whether the Gemini ``functionCall`` at ``pointer`` in ``body`` came without an ``id``
    (its id is then made from the response's, ``_wire.gemini.assistant_turn``)."""
    node: Any = body
    for token in pointer.split("/")[1:]:
        if isinstance(node, Mapping):
            node = node.get(token)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return isinstance(node, Mapping) and not node.get("id")


def response_message(response: Any, *, reasoning: str, choice: int | None,
                     breakpoint: str | None, tool_names: Collection[str],
                     seen_calls: Collection[str]) -> Message:
    """The assistant message of a provider response (see the module docstring).

    Args:
        response: The response body or SDK object.
        reasoning: ``"keep"``, ``"drop"`` or ``"error"`` (see ``add_response``).
        choice: The Chat Completion choice to read (``None``: exactly one).
        breakpoint: User breakpoint TTL on the message, or ``None``.
        tool_names: Tool names of the pinned head.
        seen_calls: Tool call ids the conversation already used.

    Raises:
        HistoryError: see ``Conversation.add_response``.

    Warns:
        IncompleteResponseWarning: the response was cut short.
    """
    if reasoning not in REASONING_MODES:
        raise HistoryError(f"reasoning must be one of {', '.join(map(repr, REASONING_MODES))}, "
                           f"got {reasoning!r}", code="history-type", pointer="/reasoning")
    body = response_body(response)
    wire_format = response_format(body)
    turn = assistant_turn(wire_format, body, choice=choice)
    if turn.reasoning and reasoning == "error":
        raise HistoryError("the response holds reasoning content and reasoning='error': pass "
                           "reasoning='keep' (the default) to replay it exactly, or 'drop'",
                           code="history-reasoning", pointer=turn.reasoning[0])
    if turn.reasoning and reasoning == "drop" and turn.tool_calls:
        rule = reasoning_rule(wire_format)
        if rule.required_in_tool_turn:
            raise HistoryError(
                "reasoning='drop' on a turn that calls tools: the provider needs this turn's "
                f"reasoning sent back, unmodified, with the tool results ({rule.source}); "
                "keep it (reasoning='keep')", code="history-reasoning-required",
                pointer=turn.reasoning[0])
    if turn.incomplete:
        where = {"anthropic": "/stop_reason", "openai-responses": "/status",
                 "gemini": f"/candidates/{choice or 0}/finishReason",
                 "bedrock-converse": "/stopReason"}.get(
            wire_format, f"/choices/{choice or 0}/finish_reason")
        warnings.warn(IncompleteResponseWarning(
            f"the response was cut short ({turn.incomplete}): its turn is added as it is, but "
            "text may end mid-sentence and tool calls may be missing; raise the output limit "
            "or continue the turn", reason=turn.incomplete, pointer=where), stacklevel=3)
    blocks: list[dict[str, Any] | None] = []
    text_at: int | None = None
    text_signature: dict[str, str] | None = None
    ids: set[str] = set()
    for part in turn.parts:
        signature = (None if part.signature is None
                     else {"format": wire_format, "value": part.signature})
        if part.kind == "text":
            if text_at is None:
                text_at = len(blocks)
                blocks.append(None)  # the joined text goes here
            if signature is not None:
                if text_signature is not None:
                    raise HistoryError(
                        "two text parts carry a signature: joined into one text block they "
                        "could not both go back on their parts; add the response's parts "
                        "with Conversation.assistant, one text block each",
                        code="history-response", pointer=part.pointer)
                text_signature = signature
        elif part.kind == "tool_call":
            call = tool_call_of(part.value, part.pointer,
                                shape=_CALL_SHAPES.get(wire_format, "OpenAI tool call"))
            id_at, name_at = _call_places(part.value, part.pointer)
            if not isinstance(call.id, str) or not call.id:
                raise HistoryError("tool call id must be a non-empty string",
                                   code="history-tool-call", pointer=id_at)
            if (call.id in ids or call.id in seen_calls) and wire_format == "gemini" \
                    and _id_made_up(body, part.pointer):
                # Gemini 2.x sends calls without ids (and an answer may lack responseId): the
                # id made for it must still be new in the conversation; deterministic
                n = 1
                while f"{call.id}.{n}" in ids or f"{call.id}.{n}" in seen_calls:
                    n += 1
                call = ToolCall(f"{call.id}.{n}", call.name, call.arguments)
            if call.id in ids or call.id in seen_calls:
                raise HistoryError(f"tool call id {call.id!r} already used",
                                   code="history-duplicate-call", pointer=id_at)
            if call.name not in tool_names:
                raise HistoryError(f"tool {call.name!r} is not in the pinned head",
                                   code="history-unknown-tool", pointer=name_at)
            ids.add(call.id)
            block: dict[str, Any] = {"arguments": dict(call.arguments), "id": call.id,
                                     "name": call.name,
                     "type": "tool_call"}
            if signature is not None:
                block["signature"] = signature
            blocks.append(block)
        elif reasoning == "keep":
            blocks.append({"format": wire_format, "item": part.value, "type": "reasoning"})
    if text_at is not None:
        text: dict[str, Any] = {"text": turn.text or "", "type": "text"}
        if text_signature is not None:
            text["signature"] = text_signature
        blocks[text_at] = text if turn.text or text_signature is not None else None
    kept = [b for b in blocks if b is not None]
    if not kept:
        raise HistoryError("the response has no text, tool call or kept reasoning to add",
                           code="history-empty", pointer="")
    return Message("assistant", kept, breakpoint=check_ttl(breakpoint, "assistant"))
