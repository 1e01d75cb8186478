"""Opt-in request stabilizing: rewrites that cannot change a request's meaning, only its order.

:func:`stabilize` takes a request body as sent (Anthropic Messages, Chat Completions or
Responses) and returns it with

- **tools sorted by name** (``tool-order``), when every tool has a name and the names are
  unique (else the order is kept). Cache breakpoints stay where they were *by position*: the
  ``cache_control`` of the i-th tool goes to the i-th tool after sorting, so a client that
  marked its last tool still marks the end of its tools;
- **schemas in canonical form** (``schema-key-order``): each tool's input schema as
  :func:`~stableprompt._prompt._tool_schema.canonical_schema` writes it (object keys sorted,
  set-like arrays such as ``required`` sorted, order-bearing arrays such as ``enum`` kept). A
  schema that is not valid JSON Schema is left as it is;
- for OpenAI (Chat Completions, Responses), a ``prompt_cache_key`` when the client sent
  none (``prompt-cache-key``): the lineage key of the (stabilized) head, as
  ``prompt_cache_key=True`` renders it (``sp-`` + 24 hex digits of the head fingerprint), so
  requests sharing tools and system prompt are routed to the same cache.

JSON object key order and ``required`` order carry no meaning for a provider, and tool order
none for the model's choice, but all of them reach the prompt's tokens: a harness that lists
its tools in another order after an MCP reconnect loses its whole cached prefix.

Idempotent: a body already in this form (for OpenAI: with a ``prompt_cache_key`` of its own)
is returned as the *same bytes* (no re-serialization), and stabilizing a stabilized body
changes nothing. A rewritten body is the parsed body
re-serialized compactly with every other key in its original order
(:func:`~stableprompt._canonical.wire_json`); providers tokenize the parsed value, not the
whitespace. Anything unexpected (not JSON, another format, numbers orjson cannot write) leaves
the body untouched. Which rewrites were made is returned, for the ledger row
(``verdict_detail["stabilized"]``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._canonical import loads, wire_json
from .._prompt._tool_schema import canonical_schema
from .._wire._formats import REQUEST_FORMATS, detect, segment_request
from .._wire._openai import lineage_key

__all__ = ["STABILIZE_REWRITES", "stabilize"]

STABILIZE_REWRITES = ("tool-order", "schema-key-order", "prompt-cache-key")
"""The rewrites :func:`stabilize` may make, as named in ``verdict_detail["stabilized"]``."""

_Tool = dict[str, Any]


def _anthropic_name(tool: _Tool) -> Any:
    return tool.get("name")


def _chat_name(tool: _Tool) -> Any:
    function = tool.get("function")
    return function.get("name") if isinstance(function, dict) else None


def _anthropic_schema(tool: _Tool) -> tuple[dict[str, Any], str] | None:
    return (tool, "input_schema") if isinstance(tool.get("input_schema"), dict) else None


def _chat_schema(tool: _Tool) -> tuple[dict[str, Any], str] | None:
    function = tool.get("function")
    if isinstance(function, dict) and isinstance(function.get("parameters"), dict):
        return function, "parameters"
    return None


def _responses_schema(tool: _Tool) -> tuple[dict[str, Any], str] | None:
    return (tool, "parameters") if isinstance(tool.get("parameters"), dict) else None


#: Wire format -> (tool name, (holder of the schema, its key)). Shapes: Anthropic
#: ``tools[].input_schema``; Chat ``tools[].function.parameters``; Responses
#: ``tools[].parameters`` (docs.claude.com tool use; platform.openai.com function calling).
_SHAPES: dict[str, tuple[Callable[[_Tool], Any],
                         Callable[[_Tool], tuple[dict[str, Any], str] | None]]] = {
    "anthropic": (_anthropic_name, _anthropic_schema),
    "openai-chat": (_chat_name, _chat_schema),
    "openai-responses": (_anthropic_name, _responses_schema),
}


def _sorted_tools(tools: list[_Tool], name_of: Callable[[_Tool], Any]) -> list[_Tool] | None:
    """``tools`` sorted by name, breakpoints kept by position; ``None`` when they are in
    order already or cannot be sorted (a tool without a string name, duplicate names)."""
    names = [name_of(tool) for tool in tools]
    if not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
        return None
    order = sorted(range(len(tools)), key=lambda i: names[i])
    if order == list(range(len(tools))):
        return None
    markers = [tool.get("cache_control") for tool in tools]
    out = []
    for position, index in enumerate(order):
        tool = {k: v for k, v in tools[index].items() if k != "cache_control"}
        if markers[position] is not None:
            tool["cache_control"] = markers[position]
        out.append(tool)
    return out


@functools.lru_cache(maxsize=4096)
def _canonical_of(raw: bytes, name: str) -> bytes | None:
    """The canonical bytes of the schema written ``raw`` (``None``: not valid JSON Schema);
    memoized, as a harness sends the same schemas on every call."""
    try:
        return canonical_schema(loads(raw), name, False, [])
    except Exception:  # not valid JSON Schema: not ours to rewrite
        return None


def _canonical_schemas(tools: list[_Tool], name_of: Callable[[_Tool], Any],
                       schema_of: Callable[[_Tool], tuple[dict[str, Any], str] | None]
                       ) -> bool:
    """Replace each valid schema by its canonical form, in place; whether any changed."""
    changed = False
    for tool in tools:
        where = schema_of(tool)
        if where is None:
            continue
        holder, key = where
        raw = wire_json(holder[key])
        canonical = _canonical_of(raw, str(name_of(tool)))
        if canonical is not None and canonical != raw:
            holder[key] = loads(canonical)
            changed = True
    return changed


def stabilize(body: bytes, path: str | None = None) -> tuple[bytes, list[str]]:
    """The stabilized body and the rewrites made (see the module docstring).

    Args:
        body: The request body as sent.
        path: The URL path, for the wire format (else the body's shape decides).

    Returns:
        ``(body, [])`` when nothing was rewritten (the very same bytes), else the new body
        and the names of the rewrites made, from :data:`STABILIZE_REWRITES`. Never raises.
    """
    try:
        parsed = loads(body)
        if not isinstance(parsed, dict):
            return body, []
        wire = detect(parsed, path)
        if wire not in REQUEST_FORMATS or wire not in _SHAPES:
            return body, []
        done: list[str] = []
        tools = parsed.get("tools")
        if isinstance(tools, list) and all(isinstance(tool, dict) for tool in tools):
            name_of, schema_of = _SHAPES[wire]
            ordered = _sorted_tools(tools, name_of)  # the parsed body is ours: edited in place
            if ordered is not None:
                parsed["tools"] = tools = ordered
                done.append("tool-order")
            if _canonical_schemas(tools, name_of, schema_of):
                done.append("schema-key-order")
        if wire != "anthropic" and "prompt_cache_key" not in parsed:
            parsed["prompt_cache_key"] = lineage_key(
                segment_request(wire, parsed).head_fingerprint)
            done.append("prompt-cache-key")
        if not done:
            return body, []
        return wire_json(parsed), done
    except Exception:
        return body, []
