"""The smallest request that reads a conversation's cached prefix: a keep-alive ping's body.

:func:`ping_plan` takes the last real request of a conversation (its body as sent) and returns
the ping: the same body up to its **last cache breakpoint**, asking for the fewest output
tokens the API takes, not streamed. Everything before that breakpoint (model, tools, system,
every parameter that is part of the cache key: ``tool_choice``, ``thinking``,
``reasoning``...) is kept byte for byte in the same key order, so the ping *reads* the entry
the breakpoint wrote, which restarts its TTL (a read refreshes: Anthropic "refreshed for no
additional cost each time the cached content is used"; OpenAI GPT-5.6+ ">= 30 minutes after
the latest write or reuse"), and writes nothing new (it carries no marker past the read one).

Per wire format:

- **Anthropic Messages**: the last marker in prompt order (tools, system, messages, the
  top-level ``cache_control`` last: automatic caching marks the last cacheable block).
  A block marker at message ``k``, block ``l``: messages ``[:k]`` plus message ``k`` cut after
  block ``l`` (kept whole when a ``tool_result`` follows in it: every ``tool_use`` needs its
  result); while the last message is not a user turn (an assistant turn, a mid-conversation
  system message) the next message follows whole, so the request ends with a user turn as the
  API requires (or as the original ended). A top-level marker: every message, as sent. Only
  head markers (tools, system): one user message ``"."`` (a few uncached tokens). ``max_tokens``
  1; ``stream`` removed. Refused: no marker at all (nothing is cached explicitly), and
  ``thinking`` other than ``disabled`` (``max_tokens`` must then exceed ``budget_tokens``: a
  ping could bill up to that many output tokens, and dropping ``thinking`` changes the cache
  key of the messages).
- **OpenAI Chat Completions / Responses**, models with explicit caching only (GPT-5.6 and
  later, :func:`~stableprompt._policy.takes_cache_options`: a documented TTL refreshed by a
  read; earlier models keep prefixes "5-10 minutes idle" with no control): the last message
  (Chat) or input item (Responses) holding a ``prompt_cache_breakpoint``, else (implicit mode)
  the last user or tool message / ``function_call_output``, "the end of the latest eligible
  user or tool message"; messages after it dropped, then (Chat) an assistant turn with
  ``tool_calls`` is followed by its tool messages and (Responses) a ``function_call`` by its
  output, as the API requires (every call answered). Chat: ``max_tokens`` or
  ``max_completion_tokens`` 1, ``n`` and ``stream_options`` removed; Responses:
  ``max_output_tokens`` 16 (the API's minimum).
  A Responses string ``input`` is kept whole.

Sources: platform.claude.com/docs/en/build-with-claude/prompt-caching (breakpoints, automatic
caching, "Changes to thinking parameters ... invalidate message cache", TTL refresh);
developers.openai.com/api/docs/guides/prompt-caching (implicit breakpoint, lifetime);
``shared/reference/PROVIDERS.md`` §1-3.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._policy import KEEPALIVE_OUTPUT_TOKENS, TTL_LABELS_S, CacheRules, keepalive_unsupported
from .._wire import anthropic
from .._wire._openai import MARKER_KEY as OPENAI_MARKER
from .._wire._openai import OPTIONS_KEY

__all__ = ["RESPONSES_MIN_OUTPUT_TOKENS", "NoPing", "PingPlan", "ping_plan"]

RESPONSES_MIN_OUTPUT_TOKENS = KEEPALIVE_OUTPUT_TOKENS["openai-responses"]
"""The smallest ``max_output_tokens`` the Responses API accepts (``KEEPALIVE_OUTPUT_TOKENS``)."""

_HEAD_ONLY_MESSAGE: dict[str, Any] = {"role": "user", "content": "."}


class NoPing(Exception):
    """No ping can be made for this request; ``code`` says why (a slug, shown in
    :class:`~stableprompt.KeepAliveStatus`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class PingPlan:
    """A ping for one request.

    Attributes:
        body: The ping's body (a new dict; the request's own is not changed).
        ttl_s: Seconds the entry it refreshes lives after a read (the last breakpoint's TTL).
        ttl_label: That TTL's label (``"5m"``, ``"1h"``, ``"30m"``): the write price the ping
            saves.
        output_tokens: The most output tokens the ping may bill.
    """

    body: dict[str, Any]
    ttl_s: int
    ttl_label: str
    output_tokens: int


def ping_plan(wire_format: str, body: Mapping[str, Any], rules: CacheRules) -> PingPlan:
    """The keep-alive ping of the request ``body`` (module docstring).

    Args:
        wire_format: ``"anthropic"``, ``"openai-chat"`` or ``"openai-responses"``.
        body: The request as sent (decoded JSON).
        rules: The model's cache rules (TTLs, refresh on read).

    Raises:
        NoPing: the request cannot be kept alive (code: ``wire-format``, ``no-ttl``,
            ``no-breakpoint``, ``thinking``, ``no-explicit-ttl``, ``shape``).
    """
    unsupported = keepalive_unsupported(wire_format, rules)
    if unsupported is not None:
        raise NoPing(*unsupported)
    if wire_format == "anthropic":
        return _anthropic(body, rules)
    return _openai(wire_format, body, rules)


# --------------------------------------------------------------------------- Anthropic


def _label(control: Any, rules: CacheRules) -> tuple[int, str]:
    label = control.get("ttl", "5m") if isinstance(control, dict) else None
    if not isinstance(label, str) or label not in TTL_LABELS_S:
        raise NoPing("shape", f"unreadable cache_control {control!r}")
    return TTL_LABELS_S[label], label


def _last_marker(body: Mapping[str, Any]) -> tuple[str, int, int, Any] | None:
    """``(place, message index, block index, cache_control)`` of the last marker in prompt
    order: place ``"top"``, ``"message"`` or ``"head"`` (indices ``-1`` where none)."""
    key = anthropic.MARKER_KEY
    if key in body:
        return "top", -1, -1, body[key]
    messages = body.get("messages")
    if isinstance(messages, list):
        for k in range(len(messages) - 1, -1, -1):
            content = messages[k].get("content") if isinstance(messages[k], dict) else None
            if not isinstance(content, list):
                continue
            for i in range(len(content) - 1, -1, -1):
                block = content[i]
                if not isinstance(block, dict):
                    continue
                if key in block:
                    return "message", k, i, block[key]
                inner = block.get("content")
                if isinstance(inner, list):
                    for part in reversed(inner):
                        if isinstance(part, dict) and key in part:
                            return "message", k, i, part[key]
    for holder in (body.get("system"), body.get("tools")):
        if isinstance(holder, list):
            for item in reversed(holder):
                if isinstance(item, dict) and key in item:
                    return "head", -1, -1, item[key]
    return None


def _anthropic(body: Mapping[str, Any], rules: CacheRules) -> PingPlan:
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") != "disabled":
        raise NoPing("thinking", "thinking is on: max_tokens must exceed its budget, so a "
                     "ping could bill that many output tokens (and turning it off changes "
                     "the messages' cache key)")
    found = _last_marker(body)
    if found is None:
        raise NoPing("no-breakpoint", "the request has no cache_control: nothing is cached "
                     "explicitly to keep alive")
    place, k, i, control = found
    ttl_s, label = _label(control, rules)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise NoPing("shape", "the request has no messages")
    if place == "top":
        kept = copy.deepcopy(messages)
    elif place == "head":
        kept = [dict(_HEAD_ONLY_MESSAGE)]
    else:
        kept = _cut_messages(messages, k, i)
    output = KEEPALIVE_OUTPUT_TOKENS["anthropic"]
    ping = _replaced(body, {"messages": kept, "max_tokens": output}, drop=("stream",))
    return PingPlan(ping, ttl_s, label, output)


def _cut_messages(messages: list[Any], k: int, i: int) -> list[Any]:
    """Messages through block ``i`` of message ``k``, completed to end with a user turn."""
    kept = copy.deepcopy(messages[:k + 1])
    last = kept[-1]
    content = last.get("content")
    if last.get("role") == "user" and isinstance(content, list) and not any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content[i + 1:]):
        last["content"] = content[:i + 1]
    n = k + 1
    while kept[-1].get("role") != "user" and n < len(messages):
        kept.append(copy.deepcopy(messages[n]))
        n += 1
    return kept


def _replaced(body: Mapping[str, Any], values: Mapping[str, Any],
              drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """``body`` with ``values`` set (in place where the key exists, else appended) and the
    ``drop`` keys removed; other keys in their order, deep-copied."""
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key in drop:
            continue
        out[key] = values[key] if key in values else copy.deepcopy(value)
    for key, value in values.items():
        out.setdefault(key, value)
    return out


# --------------------------------------------------------------------------- OpenAI


def _openai_ttl(body: Mapping[str, Any], rules: CacheRules) -> tuple[int, str]:
    options = body.get(OPTIONS_KEY)
    label = options.get("ttl") if isinstance(options, Mapping) else None
    if isinstance(label, str) and label in TTL_LABELS_S:
        return TTL_LABELS_S[label], label
    default = rules.ttls_s[0]
    labels = [name for name, s in TTL_LABELS_S.items() if s == default]
    return default, labels[0] if labels else f"{default}s"


def _has_marker(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    for key in ("content", "output"):
        parts = item.get(key)
        if isinstance(parts, list) and any(isinstance(p, dict) and OPENAI_MARKER in p
                                           for p in parts):
            return True
    return False


def _eligible(item: Any) -> bool:
    """A user or tool message (Chat), a user message or ``function_call_output`` (Responses):
    where GPT-5.6's implicit breakpoint goes."""
    if not isinstance(item, dict):
        return False
    return item.get("role") in ("user", "tool") or item.get("type") == "function_call_output"


def _openai(wire_format: str, body: Mapping[str, Any], rules: CacheRules) -> PingPlan:
    ttl_s, label = _openai_ttl(body, rules)
    key = "messages" if wire_format == "openai-chat" else "input"
    items = body.get(key)
    if wire_format == "openai-responses" and isinstance(items, str):
        kept: Any = items
    elif isinstance(items, list) and items:
        options = body.get(OPTIONS_KEY)
        explicit_only = isinstance(options, Mapping) and options.get("mode") == "explicit"
        end = next((n for n in range(len(items) - 1, -1, -1) if _has_marker(items[n])), None)
        if end is None and not explicit_only:
            end = next((n for n in range(len(items) - 1, -1, -1) if _eligible(items[n])), None)
        if end is None:
            raise NoPing("no-breakpoint", "no prompt_cache_breakpoint and no user or tool "
                         "message for the implicit one")
        kept = copy.deepcopy(items[:end + 1])
        n = end + 1
        while n < len(items) and _open_calls(wire_format, kept):
            kept.append(copy.deepcopy(items[n]))
            n += 1
    else:
        raise NoPing("shape", f"the request has no {key}")
    if wire_format == "openai-chat":
        limit = "max_tokens" if "max_tokens" in body else "max_completion_tokens"
        ping = _replaced(body, {key: kept, limit: KEEPALIVE_OUTPUT_TOKENS[wire_format]},
                         drop=("stream", "stream_options", "n"))
        return PingPlan(ping, ttl_s, label, KEEPALIVE_OUTPUT_TOKENS[wire_format])
    ping = _replaced(body, {key: kept, "max_output_tokens": RESPONSES_MIN_OUTPUT_TOKENS},
                     drop=("stream",))
    return PingPlan(ping, ttl_s, label, RESPONSES_MIN_OUTPUT_TOKENS)


def _open_calls(wire_format: str, items: list[Any]) -> set[str]:
    """Tool calls in ``items`` without their answer yet (a request may not end there): Chat
    assistant ``tool_calls`` ids without a ``tool`` message, Responses ``function_call``
    ``call_id`` values without a ``function_call_output``."""
    open_ids: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        if wire_format == "openai-chat":
            if item.get("role") == "assistant":
                calls = item.get("tool_calls")
                open_ids |= {str(c.get("id")) for c in calls or [] if isinstance(c, dict)}
            elif item.get("role") == "tool":
                open_ids.discard(str(item.get("tool_call_id")))
        elif item.get("type") == "function_call":
            open_ids.add(str(item.get("call_id")))
        elif item.get("type") == "function_call_output":
            open_ids.discard(str(item.get("call_id")))
    return open_ids
