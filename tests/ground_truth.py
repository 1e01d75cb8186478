"""An independent ground truth for miss attribution: a plain JSON diff of two request bodies in
the provider's cache order (issue 26's acceptance).

It imports nothing of stableprompt: no segmenter, no ``_diff``, no attribution. Two bodies of a
conversation are walked in the order the provider caches them, with the cache breakpoint
markers removed (they are not cached content), and the first difference is named by where it
is (a JSON pointer into the predecessor's body) and by a coarse class that any correct
explanation must fall in:

- Anthropic Messages: the cache-key parameters, then ``tools``, then ``system``, then
  ``messages`` ("Cache prefixes are created in the following order: tools, system, then
  messages"; changes to ``tool_choice`` or the thinking parameters invalidate the cache:
  platform.claude.com/docs/en/build-with-claude/prompt-caching).
- OpenAI Responses: the prefix settings (``model``, ``reasoning``, ``text``,
  ``parallel_tool_calls``, the ``prompt_cache_key`` that routes the request), then ``tools``,
  ``instructions``, ``input`` (developers.openai.com/api/docs/guides/prompt-caching: "tool
  definitions ... and conversation history" are cached; ``text.format`` and
  ``reasoning.effort`` are prefix settings).
- OpenAI Chat Completions: the same settings (``reasoning_effort``, ``response_format``,
  ``verbosity``), then ``tools``, then ``messages``.

History is compared item by item; an item of the predecessor that the later request re-sends
(the same value, keys in any order) one or more places further on, after other items, was
preceded by an *insertion*; an item that is gone while the next one moved up was *deleted*;
items re-sent in another order were *moved*. The class of the first difference is one of
``model``, ``param``, ``tool-removed``, ``tool-added``, ``tool-order``, ``tool``, ``system``,
``history-insert``, ``history-delete``, ``history-move``, ``history``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PARAMS: Mapping[str, tuple[str, ...]] = {
    "anthropic": ("model", "tool_choice", "thinking", "output_config", "speed",
                  "output_format"),
    "openai-responses": ("model", "parallel_tool_calls", "reasoning", "text",
                         "prompt_cache_key", "context_management"),
    "openai-chat": ("model", "parallel_tool_calls", "reasoning_effort", "response_format",
                    "verbosity", "prompt_cache_key", "cache_salt"),
}
"""Cache-key parameters per wire format, in the order compared (model first)."""

MARKERS = ("cache_control", "prompt_cache_breakpoint")
"""Breakpoint marker keys: not cached content, removed before comparing."""

_CLASSES: Mapping[str, frozenset[str]] = {
    "model": frozenset({"model-change"}),
    "param": frozenset({"param-change"}),
    "tool-removed": frozenset({"tool-removed"}),
    "tool-added": frozenset({"tool-added"}),
    "tool-order": frozenset({"tool-reorder"}),
    "tool": frozenset({"content-edit", "key-order", "property-order", "whitespace",
                       "volatile-token"}),
    "system": frozenset({"content-edit", "key-order", "whitespace", "volatile-token"}),
    "history-insert": frozenset({"history-insert"}),
    "history-delete": frozenset({"history-delete", "breakpoint-on-per-turn-block"}),
    "history-move": frozenset({"history-move"}),
    "history": frozenset({"history-rewrite", "volatile-token", "whitespace", "key-order",
                          "breakpoint-on-per-turn-block", "content-edit"}),
}
"""The stableprompt causes each ground-truth class admits (its slugs, kept here as data)."""


@dataclass(frozen=True)
class FirstDifference:
    """The first difference of two bodies in cache order.

    Attributes:
        kind: The coarse class (see the module docstring).
        path: JSON pointer of the first differing value in the predecessor (for an inserted
            or deleted history item: the item's pointer).
    """

    kind: str
    path: str

    def admits(self, cause: str) -> bool:
        """Whether a stableprompt cause slug is an explanation of this class."""
        return cause in _CLASSES[self.kind]

    def same_place(self, path: str) -> bool:
        """Whether ``path`` names the same place: one pointer contains the other, down to
        at least the item (``/tools/3``, ``/system/0``, ``/messages/5``) or the parameter."""
        mine, theirs = _tokens(self.path), _tokens(path)
        n = min(len(mine), len(theirs))
        if not mine or mine[:n] != theirs[:n]:
            return False
        listed = mine[0] in ("tools", "messages", "input") or (
            mine[0] == "system" and len(mine) > 1)
        return n >= (2 if listed else 1)


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k not in MARKERS}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _same(x: Any, y: Any) -> bool:
    """Equal as sent: key order, number types and all."""
    return json.dumps(x, ensure_ascii=False) == json.dumps(y, ensure_ascii=False) and \
        type(x) is type(y)


def _alike(x: Any, y: Any) -> bool:
    """The same value, keys in any order: an item re-sent elsewhere, re-serialized or not."""
    return json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True)


def first_json_difference(x: Any, y: Any, pointer: str = "") -> str:
    """The pointer of the first difference of two JSON values, in order (keys in the order
    sent; a key or item present on one side only is a difference at its place)."""
    if isinstance(x, dict) and isinstance(y, dict):
        kx, ky = list(x), list(y)
        for a, b in zip(kx, ky, strict=False):
            if a != b:
                return pointer
            if not _same(x[a], y[b]):
                return first_json_difference(x[a], y[b], f"{pointer}/{_escape(a)}")
        if len(kx) != len(ky):
            longer = kx if len(kx) > len(ky) else ky
            return f"{pointer}/{_escape(longer[min(len(kx), len(ky))])}"
        return pointer
    if isinstance(x, list) and isinstance(y, list):
        for i, (a, b) in enumerate(zip(x, y, strict=False)):
            if not _same(a, b):
                return first_json_difference(a, b, f"{pointer}/{i}")
        return f"{pointer}/{min(len(x), len(y))}"
    return pointer


def _tool_name(tool: Any) -> str:
    if not isinstance(tool, dict):
        return json.dumps(tool)
    function = tool.get("function")
    if isinstance(function, dict) and "name" in function:
        return str(function["name"])
    return str(tool.get("name", tool.get("type", "")))


def _history(wire: str, body: Mapping[str, Any]) -> tuple[str, list[Any]]:
    key = "input" if wire == "openai-responses" else "messages"
    items = body.get(key)
    if isinstance(items, str):  # Responses: a plain string input is one user message
        items = [{"role": "user", "content": items}]
    return key, list(items or [])


def _history_kind(a: Sequence[Any], b: Sequence[Any], i: int) -> str:
    """``history-insert`` / ``-delete`` / ``-move`` / ``history`` for the first differing
    item index ``i``."""
    ai = a[i] if i < len(a) else None
    if i >= len(b):
        return "history-delete"
    if ai is None:  # pragma: no cover - the predecessor is a prefix then
        return "history"
    later_b = [k for k in range(i + 1, len(b)) if _alike(b[k], ai)]
    later_a = [k for k in range(i + 1, len(a)) if _alike(a[k], b[i])]
    if later_b and not later_a:
        return "history-insert"
    if later_a and not later_b:
        # the item at i was left out (the next one moved up), unless it is re-sent later
        return "history-move" if any(_alike(x, ai) for x in b[i + 1:]) else "history-delete"
    if later_a and later_b:
        return "history-move"
    return "history"


def first_difference(wire: str, a: Mapping[str, Any], b: Mapping[str, Any]
                     ) -> FirstDifference | None:
    """The first difference of predecessor ``a`` and later request ``b`` in cache order,
    ``None`` when ``a``'s cached parts are a prefix of ``b``'s (history only grew)."""
    a, b = _unmarked(a), _unmarked(b)
    for name in PARAMS[wire]:
        if (name in a or name in b) and (
                name not in a or name not in b or not _same(a[name], b[name])):
            path = f"/{name}"
            if name in a and name in b:
                path = first_json_difference(a[name], b[name], path)
            return FirstDifference("model" if name == "model" else "param", path)
    tools_a, tools_b = list(a.get("tools") or []), list(b.get("tools") or [])
    for i in range(max(len(tools_a), len(tools_b))):
        x = tools_a[i] if i < len(tools_a) else None
        y = tools_b[i] if i < len(tools_b) else None
        if x is not None and y is not None and _same(x, y):
            continue
        names_a = [_tool_name(t) for t in tools_a]
        names_b = [_tool_name(t) for t in tools_b]
        path = f"/tools/{i}" if x is None or y is None else first_json_difference(
            x, y, f"/tools/{i}")
        if set(names_a) - set(names_b):
            return FirstDifference("tool-removed", path)
        if set(names_b) - set(names_a):
            return FirstDifference("tool-added", path)
        if names_a != names_b:
            return FirstDifference("tool-order", path)
        return FirstDifference("tool", path)
    system_key = "instructions" if wire == "openai-responses" else "system"
    if wire != "openai-chat":
        sa, sb = a.get(system_key), b.get(system_key)
        if not _same(sa, sb):
            if isinstance(sa, list) and isinstance(sb, list):
                return FirstDifference("system", first_json_difference(sa, sb, f"/{system_key}"))
            return FirstDifference("system", f"/{system_key}")
    key, ha = _history(wire, a)
    _, hb = _history(wire, b)
    for i, x in enumerate(ha):
        if i < len(hb) and _same(x, hb[i]):
            continue
        kind = _history_kind(ha, hb, i)
        if kind != "history":
            return FirstDifference(kind, f"/{key}/{i}")
        return FirstDifference(kind, first_json_difference(x, hb[i], f"/{key}/{i}"))
    return None
