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
- for OpenAI (Chat Completions, Responses, when the call goes to OpenAI itself: ``provider``
  is in :data:`PROMPT_CACHE_KEY_PROVIDERS`), a ``prompt_cache_key`` when the client sent
  none (``prompt-cache-key``): the lineage key of the (stabilized) head, as
  ``prompt_cache_key=True`` renders it (``sp-`` + 24 hex digits of the head fingerprint), so
  requests sharing tools and system prompt are routed to the same cache. Another server
  speaking the OpenAI wire (vLLM, llama.cpp, DeepSeek, a gateway of unknown kind) gets none:
  the key does nothing there, and a strict server may reject a field it does not know;
- for Anthropic, when the client placed **no cache breakpoint** at all (no ``cache_control``
  key anywhere in the body: on a tool, a system block, a content block, nested in a tool
  result, or at the top level), the two the SDK's own
  renders carry (``RenderedPrompt.to_anthropic``): one at the end of the stable head
  (``head-breakpoint``: on the last system block when ``system`` is a list of blocks, else on
  the last tool; a string ``system`` with no tools gets none) and one at the end of history
  (``history-breakpoint``: on the last content block of the last message, or, when that
  message's content is a string or its last block cannot carry a marker (``thinking``, an
  empty text), as top-level ``cache_control``, Anthropic's automatic caching, which marks the
  last cacheable block). Both are 5-minute markers (``{"type": "ephemeral"}``), so the TTL
  order (longer first) holds, and two fit the 4-marker budget. Content shapes are never
  changed (a string content is not turned into a text block: the policy's content-shape rule
  says the two are not documented to cache alike). A breakpoint whose prefix is surely below
  the model's minimum cacheable length is not placed, by the builder's rule
  (:func:`~stableprompt._policy.surely_below_minimum`), when a token counter is given (the
  transport passes the recorder's); without one, both are placed. A request without messages
  gets none. A client that placed any breakpoint of its own is left as it is, so a
  stabilized body (which now has markers) is not rewritten again.

JSON object key order and ``required`` order carry no meaning for a provider, and tool order
none for the model's choice, but all of them reach the prompt's tokens: a harness that lists
its tools in another order after an MCP reconnect loses its whole cached prefix.

Idempotent: a body already in this form (for OpenAI: with a ``prompt_cache_key`` of its own;
for Anthropic: with a breakpoint of its own) is returned as the *same bytes* (no
re-serialization), and stabilizing a stabilized body changes nothing. A rewritten body is the
parsed body re-serialized compactly with every other key in its original order
(:func:`~stableprompt._canonical.wire_json`); providers tokenize the parsed value, not the
whitespace. Anything unexpected (not JSON, another format, numbers orjson cannot write) leaves
the body untouched. Which rewrites were made is returned, for the ledger row
(``verdict_detail["stabilized"]``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from .._canonical import INT_MAX, INT_MIN, loads, wire_json
from .._policy import CachePolicy, cache_policy, surely_below_minimum
from .._prompt._tool_schema import canonical_schema
from .._wire import anthropic, openai_chat, openai_responses
from .._wire._formats import REQUEST_FORMATS, detect, segment_request
from .._wire._openai import lineage_key
from .._wire._segmenter import SegmentedRequest

__all__ = ["PROMPT_CACHE_KEY_PROVIDERS", "STABILIZE_REWRITES", "SegmentCounter", "stabilize",
           "stabilize_with_evidence"]

PROMPT_CACHE_KEY_PROVIDERS = frozenset({"openai"})
"""Provider families whose API documents ``prompt_cache_key`` as a routing key and so get one
from :func:`stabilize` (``shared/reference/PROVIDERS.md``, OpenAI's prompt-caching guide)."""

STABILIZE_REWRITES = ("tool-order", "schema-key-order", "prompt-cache-key", "head-breakpoint",
                      "history-breakpoint")
"""The rewrites :func:`stabilize` may make, as named in ``verdict_detail["stabilized"]``."""

SegmentCounter = Callable[[SegmentedRequest], Sequence[int]]
"""Estimated tokens of each segment of a request, in segment order (``Recorder.segment_tokens``)."""

_Tool = dict[str, Any]

#: Wire format -> the module whose ``tool_name`` / ``tool_schema`` read a sent ``tools[]``
#: entry (Anthropic ``tools[].input_schema``; Chat ``tools[].function.parameters``; Responses
#: ``tools[].parameters``).
_SHAPES: dict[str, ModuleType] = {
    "anthropic": anthropic, "openai-chat": openai_chat, "openai-responses": openai_responses}

#: The TTL of both breakpoints placed (the same label, so longer-TTL-first holds).
_TTL = "5m"
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


_DIGITS = re.compile(rb"\d{19,}")
_STRING_OR_WIDE_NUMBER = re.compile(rb'"(?:[^"\\]|\\.)*"|(?<![\w.])-?\d{19,}(?![\d.eE])')
"""A JSON string (skipped whole) or an integer literal of 19+ digits outside strings."""


def _wide_integer_at(body: bytes) -> int | None:
    """Byte offset of a JSON integer literal outside ``INT_MIN..INT_MAX`` (-2**63..2**64-1),
    which orjson parses as a float: a rewrite could not keep it exact; else ``None``. Digits
    inside strings (a nanosecond timestamp, an id in a message) do not count; the string-aware
    scan runs only when the body holds a run of 19+ digits at all (every wider literal has
    one)."""
    if _DIGITS.search(body) is None:
        return None
    for match in _STRING_OR_WIDE_NUMBER.finditer(body):
        literal = match.group()
        if literal[:1] != b'"' and not INT_MIN <= int(literal) <= INT_MAX:
            return match.start()
    return None


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


def _canonical_schemas(tools: list[_Tool], shape: ModuleType
                       ) -> list[tuple[int, dict[str, Any], str, bytes]]:
    """The schemas to replace by their canonical form: ``(tool index, holder, key, canonical
    bytes)`` per valid schema not already canonical (nothing is changed here)."""
    out = []
    for index, tool in enumerate(tools):
        where = shape.tool_schema(tool)
        if where is None:
            continue
        holder, key = where
        raw = wire_json(holder[key])
        canonical = _canonical_of(raw, str(shape.tool_name(tool)))
        if canonical is not None and canonical != raw:
            out.append((index, holder, key, canonical))
    return out


def _first_moved(before: list[_Tool], after: list[_Tool], shape: ModuleType) -> int:
    """The first position whose tool the sort changed."""
    return next(i for i, (a, b) in enumerate(zip(before, after, strict=True))
                if shape.tool_name(a) != shape.tool_name(b))


def _prefix_before_tool(segmented: SegmentedRequest, counts: Sequence[int], first: int) -> int:
    """Estimated tokens of the segments before ``tools[first]`` (the params and the tools
    before it): the prefix a tool rewrite left as the client sent it."""
    total = 0
    name = f"tools[{first}]"
    for segment, tokens in zip(segmented.segments, counts, strict=True):
        if segment.name == name:
            break
        total += tokens
    return total


def _markable(block: Any) -> bool:
    """Whether a content or system block may carry ``cache_control`` (not reasoning, not an
    empty text, which Anthropic rejects a marker on)."""
    if not isinstance(block, dict) or block.get("type") in _UNMARKABLE:
        return False
    return block.get("type") != "text" or bool(block.get("text"))


def _prefix_tokens(segmented: SegmentedRequest, counts: Sequence[int] | None
                   ) -> tuple[int, int, int] | None:
    """Estimated tokens through the tools, through the system, and through the history."""
    if counts is None:
        return None
    tools = system = history = 0
    for segment, tokens in zip(segmented.segments, counts, strict=True):
        if segment.kind == "tool":
            tools += tokens
        elif segment.kind == "system":
            system += tokens
        elif segment.kind == "message":
            history += tokens
    return tools, tools + system, tools + system + history


def _breakpoints(parsed: dict[str, Any], segmented: SegmentedRequest,
                 counts: Sequence[int] | None,
                 policy_of: Callable[[str], CachePolicy]) -> list[str]:
    """Place the head and history breakpoints of a Messages body without any (see the module
    docstring), in place; the rewrites made. ``segmented``: the body as it is now (markers
    are not segment bytes, so placing them does not change it); ``counts``: its tokens."""
    messages = parsed.get("messages")
    if not isinstance(messages, list) or not messages or anthropic.MARKER_KEY in parsed:
        return []
    if segmented.breakpoints:
        return []
    model = parsed.get("model")
    try:
        policy: CachePolicy | None = policy_of(model) if isinstance(model, str) else None
    except Exception:  # no policy for this provider: nothing known to be too short
        policy = None
    budget = policy.breakpoint_budget if policy is not None and policy.breakpoint_budget \
        else anthropic.MAX_BREAKPOINTS
    prefixes = _prefix_tokens(segmented, counts)

    def short(tokens: int) -> bool:
        return policy is not None and surely_below_minimum(policy, tokens)

    done: list[str] = []
    marker = anthropic.cache_control(_TTL)
    last = messages[-1]
    content = last.get("content") if isinstance(last, dict) else None
    if prefixes is None or not short(prefixes[2]):
        if isinstance(content, list) and content and _markable(content[-1]):
            content[-1][anthropic.MARKER_KEY] = dict(marker)
        else:  # automatic caching: the provider marks the last cacheable block
            parsed[anthropic.MARKER_KEY] = dict(marker)
        done.append("history-breakpoint")
    if len(done) >= budget:
        return done
    system, tools = parsed.get("system"), parsed.get("tools")
    head: tuple[dict[str, Any], int] | None = None
    if isinstance(system, list) and system and _markable(system[-1]):
        head = system[-1], 1
    elif isinstance(tools, list) and tools and isinstance(tools[-1], dict) \
            and not isinstance(system, list):
        head = tools[-1], 0
    if head is not None and (prefixes is None or not short(prefixes[head[1]])):
        head[0][anthropic.MARKER_KEY] = dict(marker)
        done.insert(0, "head-breakpoint")
    return done


def stabilize(body: bytes, path: str | None = None, *, count: SegmentCounter | None = None,
              policy: Callable[[str], CachePolicy] | None = None,
              provider: str | None = None) -> tuple[bytes, list[str]]:
    """The stabilized body and the rewrites made (see the module docstring).

    Args:
        body: The request body as sent.
        path: The URL path, for the wire format (else the body's shape decides).
        provider: The provider family the call goes to when known (an override, or a known
            API host: :func:`~stableprompt._wire._formats.known_provider`), else ``None``;
            only one in :data:`PROMPT_CACHE_KEY_PROVIDERS` gets a ``prompt_cache_key``.
        count: Estimated tokens per segment of a request, for the model minimum of the
            Anthropic breakpoints (``None``: they are placed whatever the prefix length).
        policy: The cache policy of a model id (default: the shipped table's
            ``anthropic`` entry); a lookup that raises means no minimum is known.

    Returns:
        ``(body, [])`` when nothing was rewritten (the very same bytes), else the new body
        and the names of the rewrites made, in :data:`STABILIZE_REWRITES` order. A body
        holding an integer literal of 19 or more digits (one that may not fit 64 bits, which
        a rewrite would turn into a float; digits inside strings do not count) is left as
        sent. Never raises.
    """
    out, rewrites, _ = stabilize_with_evidence(body, path, count=count, policy=policy,
                                               provider=provider)
    return out, rewrites


def stabilize_with_evidence(body: bytes, path: str | None = None, *,
                            count: SegmentCounter | None = None,
                            policy: Callable[[str], CachePolicy] | None = None,
                            provider: str | None = None
                            ) -> tuple[bytes, list[str], dict[str, Any]]:
    """:func:`stabilize`, plus the evidence ``stableprompt report`` estimates savings from,
    for the ledger row's ``verdict_detail`` (empty when no tool was rewritten):

    - ``stabilized_tools``: a digest (16 hex digits, BLAKE2b) of the ``tools`` list as the
      client sent it, so consecutive calls can tell whether the client itself changed them;
    - ``stabilized_prefix_tokens``: estimated tokens (``count``; absent without it) of what
      precedes the first tool the rewrite changed: the prefix the request as sent shares
      with its stabilized form;
    - ``stabilize_skipped``: why a body was left as sent although it may have needed
      rewrites (an integer literal a rewrite could not keep exact, at which byte).
    """
    try:
        wide = _wide_integer_at(body)
        if wide is not None:
            # orjson reads an integer beyond 64 bits as a float: re-serialized, its value
            # would change. Left as sent, and the row says why.
            return body, [], {"stabilize_skipped": f"an integer literal of 19 or more digits "
                              f"at byte {wide} (a rewrite could not keep it exact)"}
        parsed = loads(body)
        if not isinstance(parsed, dict):
            return body, [], {}
        wire = detect(parsed, path)
        if wire not in REQUEST_FORMATS or wire not in _SHAPES:
            return body, [], {}
        done: list[str] = []
        evidence: dict[str, Any] = {}
        first: int | None = None
        tools = parsed.get("tools")
        if isinstance(tools, list) and tools and all(isinstance(tool, dict) for tool in tools):
            shape = _SHAPES[wire]
            # the parsed body is ours: edited in place, after the digest of the tools as sent
            ordered = _sorted_tools(tools, shape.tool_name)
            schemas = _canonical_schemas(ordered if ordered is not None else tools, shape)
            if ordered is not None or schemas:
                sent = wire_json(tools)
                evidence["stabilized_tools"] = hashlib.blake2b(sent, digest_size=8).hexdigest()
            if ordered is not None:
                first = _first_moved(tools, ordered, shape)
                parsed["tools"] = tools = ordered
                done.append("tool-order")
            for _, holder, key, canonical in schemas:
                holder[key] = loads(canonical)
            if schemas:
                first = min(schemas[0][0], first if first is not None else len(tools))
                done.append("schema-key-order")
        segmented: SegmentedRequest | None = None
        counts: Sequence[int] | None = None
        if first is not None and count is not None:
            with contextlib.suppress(Exception):  # no estimate: the rewrites still stand
                segmented = segment_request(wire, parsed)
                counts = count(segmented)
                evidence["stabilized_prefix_tokens"] = _prefix_before_tool(segmented, counts,
                                                                           first)
        if wire == "anthropic":
            # any cache_control key anywhere (nested blocks too) is the client's own breakpoint
            if b'"cache_control"' not in body:
                with contextlib.suppress(Exception):  # a body the segmenter refuses: the rest
                    if segmented is None:
                        segmented = segment_request(wire, parsed)
                        counts = count(segmented) if count is not None else None
                    done += _breakpoints(parsed, segmented, counts, policy or functools.partial(
                        cache_policy, "anthropic"))
        elif provider in PROMPT_CACHE_KEY_PROVIDERS and "prompt_cache_key" not in parsed:
            if segmented is None:
                segmented = segment_request(wire, parsed)
            parsed["prompt_cache_key"] = lineage_key(segmented.head_fingerprint)
            done.append("prompt-cache-key")
        if not done:
            return body, [], {}
        return wire_json(parsed), done, evidence
    except Exception:
        return body, [], {}
