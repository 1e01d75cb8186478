"""Deterministic reasoning output for the emulator: Anthropic thinking blocks, Responses
reasoning items, and the checks a provider makes when they are sent back.

The emulator runs no model, so its "reasoning" is a fixed sentence naming the request number.
What it emulates is the *contract* around reasoning, as documented:

* Anthropic (``thinking: {"type": "enabled", "budget_tokens": N}`` or ``"adaptive"``): the
  response starts with a ``thinking`` block carrying a ``signature``. When the request has
  thinking enabled and its last assistant message called tools, that message must start with
  a ``thinking`` or ``redacted_thinking`` block ("Expected `thinking` or `redacted_thinking`,
  but found `tool_use`"), and a thinking block's signature must match its text: the emulator
  signs with a digest of the text, so a block edited in any byte is a 400
  (https://platform.claude.com/docs/en/build-with-claude/extended-thinking, "Preserving
  thinking blocks").
* OpenAI Responses (``reasoning: {"effort": ...}``, effort other than ``"none"``): the output
  starts with a ``reasoning`` item (``id`` ``rs_emu_<request>``, a ``summary`` when
  ``reasoning.summary`` is set, ``encrypted_content`` when ``include`` lists
  ``"reasoning.encrypted_content"``); a reasoning input item whose ``encrypted_content`` does
  not match its ``id`` is a 400 (https://developers.openai.com/api/docs/guides/reasoning).

Signatures and encrypted contents are SHA-256 digests, so runs are deterministic.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from ._answers import WireError

__all__ = [
    "check_reasoning_items",
    "check_thinking",
    "reasoning_item",
    "thinking_block",
    "thinking_enabled",
    "wants_reasoning",
]

_ENCRYPTED_PREFIX = "emu1."


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return base64.b64encode(h.digest()).decode()


def thinking_enabled(req: dict[str, Any]) -> bool:
    """The request turns extended thinking on (``type`` ``enabled`` or ``adaptive``)."""
    thinking = req.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def thinking_block(seq: int) -> dict[str, Any]:
    """The signed thinking block of request ``seq``."""
    text = f"Request {seq}: read the conversation, then decide the next step."
    return {"type": "thinking", "thinking": text, "signature": _digest("thinking", text)}


def check_thinking(messages: list[Any]) -> None:
    """The checks of a thinking-enabled request's history (see the module docstring).

    Raises:
        WireError: a thinking block whose signature does not match its text, or a last
            assistant message that called tools without starting with a thinking block.
    """
    last: int | None = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        last = i
        content = message.get("content")
        for k, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict) and block.get("type") == "thinking":
                text, signature = block.get("thinking"), block.get("signature")
                if not isinstance(text, str) or signature != _digest("thinking", text):
                    raise WireError(f"messages.{i}.content.{k}: Invalid `signature` in "
                                    "`thinking` block")
    if last is None:
        return
    content = messages[last].get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    if any(b.get("type") == "tool_use" for b in blocks) and (
            not blocks or blocks[0].get("type") not in ("thinking", "redacted_thinking")):
        first = blocks[0].get("type") if blocks else None
        raise WireError(f"messages.{last}.content.0.type: Expected `thinking` or "
                        f"`redacted_thinking`, but found `{first}`. When `thinking` is enabled, "
                        "a final `assistant` message must start with a thinking block.")


def wants_reasoning(req: dict[str, Any]) -> bool:
    """The Responses request asks a reasoning effort other than ``none``."""
    reasoning = req.get("reasoning")
    return isinstance(reasoning, dict) and reasoning.get("effort") not in (None, "none")


def reasoning_item(req: dict[str, Any], seq: int) -> dict[str, Any]:
    """The reasoning output item of Responses request ``seq``."""
    item_id = f"rs_emu_{seq:06d}"
    summary = req["reasoning"].get("summary")
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": [
        {"type": "summary_text", "text": f"Request {seq}: decide the next step."}]
        if summary else []}
    include = req.get("include")
    if isinstance(include, list) and "reasoning.encrypted_content" in include:
        item["encrypted_content"] = _ENCRYPTED_PREFIX + _digest("reasoning", item_id)
    return item


def check_reasoning_items(items: list[Any]) -> None:
    """Reasoning input items must carry the ``encrypted_content`` the emulator gave them.

    Raises:
        WireError: an ``encrypted_content`` that does not belong to the item's ``id``.
    """
    for i, item in enumerate(items):
        if not isinstance(item, dict) or item.get("type") != "reasoning":
            continue
        content = item.get("encrypted_content")
        if content is not None and content != _ENCRYPTED_PREFIX + _digest(
                "reasoning", str(item.get("id"))):
            raise WireError(f"input[{i}].encrypted_content: the encrypted content of this "
                            "reasoning item could not be verified", param=f"input[{i}]",
                            code="invalid_encrypted_content")
