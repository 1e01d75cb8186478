"""Emulated Anthropic Messages API: ``POST /v1/messages``, JSON or ``stream: true`` SSE.

This is an emulator, not Anthropic. Its prompt cache follows the documented rules
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching, Oct 2025 and 2026
versions; ``anthropics/skills@0da71c3b:skills/claude-api/shared/prompt-caching.md``):

* The prompt is ``tools`` -> ``system`` -> ``messages``; blocks are each tool, each system block
  (a string system prompt is one block) and each message content block (string content is one
  block), rendered from the JSON as received (key order included) with ``cache_control``
  removed, so markers are not part of the cached content.
* Writes happen only at breakpoints (a hash of the prefix ending at the marked block). Reads
  look back at most 20 block positions per breakpoint, counting the breakpoint itself, for an
  entry an earlier request wrote.
* At most 4 breakpoints (top-level ``cache_control``, automatic caching, marks the last
  cacheable block and uses a slot unless that block is already marked); a fifth is a 400.
  ``ttl`` is ``"5m"`` (default) or ``"1h"``; a longer TTL after a shorter one is a 400.
* A breakpoint whose prefix is shorter than the model's minimum (``cache_rules``) is ignored:
  no write, no read, both counters 0.
* Lifetimes start at the request's start and are refreshed on read.
* With ``thinking`` enabled the answer starts with a signed ``thinking`` block, and the
  history's thinking blocks are checked as the API does (``_reasoning``).
* Caches are scoped by API key and model; ``tool_choice``, ``thinking``, ``output_config`` and
  ``speed`` are folded into the hash before the first message, so changing them invalidates
  the messages tier only (the documented invalidation table).

Usage follows the documented shape: ``input_tokens`` is the uncached remainder
(total - read - write), plus ``cache_creation_input_tokens``, ``cache_read_input_tokens``,
``cache_creation.{ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}`` and
``output_tokens``. A write spans from the end of the read prefix to the last written
breakpoint; each span between written breakpoints is billed at the TTL of the breakpoint
that ends it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._canonical import loads
from .._policy import TTL_LABELS_S, cache_rules, text_block_of
from ._answers import Usage, WireContext, WireError, WireResult, render, split_text, sse_event
from ._checks import (
    expect_bool,
    expect_list,
    expect_messages,
    expect_object,
    expect_output_limit,
    expect_str,
)
from ._diagnostics import Fingerprint, anthropic_diagnostics, digest, fingerprint_of
from ._endpoint import Endpoint, answer, open_request, reply
from ._prompt import Block, PromptChain
from ._reasoning import check_thinking, thinking_block, thinking_enabled
from ._store import PendingWrite
from ._system_messages import check_system_message, declared_tools

__all__ = ["handle_messages"]

_ENDPOINT = Endpoint(
    # Every top-level field of ``MessageCreateParams`` and of the beta ``MessageCreateParams``
    # (``anthropic`` SDK 2.17.0; ``betas`` is sent as the ``anthropic-beta`` header, not in the
    # body), plus the sampling fields older SDKs send (``temperature``, ``top_k``, ``top_p``).
    # Only ``model``, ``speed``, ``tools``, ``system``, ``messages`` and the messages-tier
    # fields below are part of the cache key.
    params=frozenset({
        "billing_policy", "cache_control", "compaction", "container", "context_management",
        "diagnostics", "fallback_credit_token", "fallbacks", "inference_geo", "max_tokens",
        "mcp_servers", "messages", "metadata", "model", "output_config", "service_tier",
        "speed", "stop_sequences", "stream", "system", "temperature", "thinking", "thread",
        "tool_choice", "tools", "top_k", "top_p", "user_profile_id", "workspace_id",
    }),
    required=("model", "max_tokens", "messages"),
    unknown=lambda name: WireError(f"{name}: Extra inputs are not permitted", param=name),
    missing=lambda name: WireError(f"{name}: Field required", param=name),
    call_prefix="toolu_emu",
)
_MESSAGES_TIER = ("tool_choice", "thinking", "output_config")
#: The TTL labels Anthropic accepts, in seconds (the values from the one policy table).
_TTL_S = {label: TTL_LABELS_S[label] for label in ("5m", "1h")}
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})
DIAGNOSTICS_BETA = "cache-diagnosis-2026-04-07"
"""The beta header that turned diagnostics on before they were GA: with it, every request's
fingerprint is kept (https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics)."""


@dataclass(frozen=True, slots=True)
class _Marker:
    index: int
    ttl: str
    where: str


@dataclass(frozen=True, slots=True)
class _Accounting:
    read: int
    write_5m: int
    write_1h: int
    pending: tuple[PendingWrite, ...]


def handle_messages(body: Any, ctx: WireContext) -> WireResult:
    """Answer one ``POST /v1/messages`` request.

    Raises:
        WireError: Invalid request (400, Anthropic ``invalid_request_error``).
    """
    req, model = open_request(body, _ENDPOINT)
    max_tokens = expect_output_limit(req["max_tokens"], "max_tokens", model, "anthropic",
                                     minimum=0)
    stream = expect_bool(req.get("stream", False), "stream")
    if stream and max_tokens == 0:
        raise WireError("max_tokens: 0 (cache pre-warming) cannot be combined with stream",
                        param="max_tokens")
    chain = PromptChain(ctx.tokenizer, b"anthropic\x00" + ctx.scope + b"\x00" + model.encode())
    compare = _diagnostics_request(req, ctx)
    rendered = _render(req, chain, model=model, betas=ctx.betas)
    markers = rendered.markers
    policy = cache_rules("anthropic", model, ctx.policies)
    budget = policy.breakpoint_budget or 4
    if len(markers) > budget:
        raise WireError(f"A maximum of {budget} blocks with cache_control may be provided. "
                        f"Found {len(markers)}.")
    seen_short = False
    for marker in markers:
        if _TTL_S[marker.ttl] not in policy.ttls_s:
            raise WireError(f"{marker.where}.cache_control.ttl: {marker.ttl!r} is not "
                            f"available for {model}")
        if marker.ttl == "5m":
            seen_short = True
        elif seen_short:
            raise WireError(f"{marker.where}.cache_control.ttl: a breakpoint with ttl='1h' "
                            "cannot come after one with ttl='5m'; longer TTLs must appear "
                            "before shorter ones")
    thinking = thinking_enabled(req)
    if thinking:
        check_thinking(req["messages"])
    fitted = reply(req, ctx, _ENDPOINT, max_tokens=max_tokens)
    acc = _account(chain.blocks, markers, policy.min_cacheable_tokens,
                   policy.lookback_blocks or 20, ctx)
    write = acc.write_5m + acc.write_1h
    content: list[dict[str, Any]] = []
    output_tokens = fitted.output_tokens
    if thinking and max_tokens:
        block = thinking_block(ctx.seq)
        content.append(block)
        output_tokens += ctx.tokenizer.count(block["thinking"])
    usage = Usage(chain.total_tokens, acc.read, write, output_tokens)
    if fitted.text:
        content.append({"type": "text", "text": fitted.text})
    for call in fitted.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name,
                        "input": loads(call.arguments)})
    stop = "max_tokens" if fitted.truncated else "tool_use" if fitted.tool_calls else "end_turn"
    wire_usage: dict[str, Any] = {
        "input_tokens": usage.input_tokens_total - acc.read - write,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": acc.read,
        "cache_creation": {"ephemeral_5m_input_tokens": acc.write_5m,
                           "ephemeral_1h_input_tokens": acc.write_1h},
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }
    message_id = f"msg_emu_{ctx.seq:06d}"
    message = {"id": message_id, "type": "message", "role": "assistant",
               "model": model, "content": content, "stop_reason": stop,
               "stop_sequence": None, "usage": wire_usage}
    if compare is not None:
        fingerprint = _fingerprint(chain, rendered, model, ctx)
        ctx.fingerprints.put(message_id, fingerprint)
        if compare is not _OPT_IN:
            previous = ctx.fingerprints.get(str(compare), ctx.scope)
            message["diagnostics"] = anthropic_diagnostics(previous, fingerprint)
        else:
            message["diagnostics"] = None
    return answer(message, stream=stream, events=_events, model=model, usage=usage,
                  pending=acc.pending)


_OPT_IN = object()
"""``diagnostics.previous_message_id`` was ``null`` (or the beta header alone): keep this
request's fingerprint, compare nothing."""


def _diagnostics_request(req: dict[str, Any], ctx: WireContext) -> object | None:
    """The message id to compare with, :data:`_OPT_IN`, or ``None`` (no diagnostics).

    Raises:
        WireError: ``diagnostics`` is not ``{"previous_message_id": str | null}``.
    """
    value = req.get("diagnostics")
    if value is None:
        return _OPT_IN if DIAGNOSTICS_BETA in ctx.betas else None
    obj = expect_object(value, "diagnostics")
    extra = sorted(set(obj) - {"previous_message_id"})
    if extra:
        raise WireError(f"diagnostics.{extra[0]}: Extra inputs are not permitted")
    previous = obj.get("previous_message_id")
    if previous is None:
        return _OPT_IN
    return expect_str(previous, "diagnostics.previous_message_id", empty=False)


def _fingerprint(chain: PromptChain, rendered: _Rendered, model: str, ctx: WireContext
                 ) -> Fingerprint:
    """This request's diagnostics fingerprint: the model, then the chain's blocks with the
    speed and the messages-tier settings as zero-token entries where messages begin."""
    start = rendered.messages_start
    end = chain.blocks[start - 1].end_tokens if start else 0
    settings = [Block("speed", 0, end, b"", "speed", digest(rendered.speed)),
                Block("params", 0, end, b"", "params", digest(rendered.tier))]
    blocks = [*chain.blocks[:start], *settings, *chain.blocks[start:]]
    return fingerprint_of(blocks, scope=ctx.scope, wire="anthropic",
                          settings=[("model_changed", digest(model.encode()))],
                          total_tokens=chain.total_tokens)


@dataclass(frozen=True, slots=True)
class _Rendered:
    """What rendering found: the breakpoints, the index of the first message block, and the
    bytes of the speed and of the messages-tier settings."""

    markers: list[_Marker]
    messages_start: int
    speed: bytes
    tier: bytes


def _render(req: dict[str, Any], chain: PromptChain, *, model: str,
            betas: frozenset[str]) -> _Rendered:
    """Add every block to ``chain`` in provider order; return the breakpoints and the rest of
    :class:`_Rendered`."""
    markers: list[_Marker] = []
    last_cacheable: tuple[int, str] | None = None
    tools = req.get("tools")
    for i, tool in enumerate(expect_list(tools, "tools") if tools is not None else ()):
        where = f"tools.{i}"
        obj = expect_object(tool, where)
        expect_str(obj.get("name"), f"{where}.name", empty=False)
        stripped, ttl = _strip(obj, where, markers_ok=True)
        index = chain.add(b"\ntool\n" + render(stripped, where), where=where, kind="tool")
        last_cacheable = (index, where)
        if ttl:
            markers.append(_Marker(index, ttl, where))
    system = req.get("system")
    if isinstance(system, str) and system and text_block_of("anthropic", system) is not None:
        system = [text_block_of("anthropic", system)]  # the content-shape rule: cache alike
    if isinstance(system, str):
        if system:
            index = chain.add(b"\nsystem\n" + render(system, "system"), where="system",
                              kind="system")
            last_cacheable = (index, "system")
    elif system is not None:
        for i, block in enumerate(expect_list(system, "system")):
            where = f"system.{i}"
            obj = expect_object(block, where)
            if obj.get("type") != "text":
                raise WireError(f"{where}.type: system blocks must be of type 'text'")
            expect_str(obj.get("text"), f"{where}.text")
            stripped, ttl = _strip(obj, where, markers_ok=bool(obj["text"]))
            index = chain.add(b"\nsystem\n" + render(stripped, where), where=where,
                              kind="system")
            last_cacheable = (index, where)
            if ttl:
                markers.append(_Marker(index, ttl, where))
    tier = render({name: req[name] for name in _MESSAGES_TIER if name in req}, "tool_choice")
    speed = render(req.get("speed"), "speed")
    chain.mix(speed + b"\x00" + tier)
    messages_start = len(chain.blocks)
    messages = expect_messages(req["messages"])
    tools, servers = declared_tools(req)
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        obj = expect_object(message, where)
        role = obj.get("role")
        if role == "system":
            check_system_message(messages, i, model=model, betas=betas, tools=tools,
                                 servers=servers)
        elif role not in ("user", "assistant"):
            raise WireError(f"{where}.role: must be 'user', 'assistant' or 'system', got "
                            f"{role!r}")
        if "content" not in obj:
            raise WireError(f"{where}.content: Field required")
        content = obj["content"]
        final_assistant = role == "assistant" and i == len(messages) - 1
        head = b"\n" + role.encode() + b"\n"
        if isinstance(content, str) and content:  # the content-shape rule (_policy): a
            block = text_block_of("anthropic", content)  # string is its own bytes unless
            if block is not None:  # the provider documents that it caches like one block
                content = [block]
        if isinstance(content, str):
            if not content and not final_assistant:
                raise WireError(f"{where}.content: text content must be non-empty")
            index = chain.add(head + render(content, f"{where}.content"), where=where,
                              kind="message")
            last_cacheable = (index, where)
            continue
        blocks = expect_list(content, f"{where}.content")
        if not blocks and not final_assistant:
            raise WireError(f"{where}.content: at least one content block is required")
        for k, block in enumerate(blocks):
            bwhere = f"{where}.content.{k}"
            obj = expect_object(block, bwhere)
            kind = expect_str(obj.get("type"), f"{bwhere}.type", empty=False)
            empty_text = kind == "text" and obj.get("text") == ""
            stripped, ttl = _strip(obj, bwhere, markers_ok=kind not in _UNCACHEABLE
                                   and not empty_text)
            index = chain.add((head if k == 0 else b"\n") + render(stripped, bwhere),
                              where=bwhere, kind="message")
            if kind not in _UNCACHEABLE:
                last_cacheable = (index, bwhere)
            if ttl:
                markers.append(_Marker(index, ttl, bwhere))
    auto = req.get("cache_control")
    if auto is not None:
        ttl = _ttl(auto, "cache_control")
        if last_cacheable is None:
            raise WireError("cache_control: the request has no cacheable block")
        if all(m.index != last_cacheable[0] for m in markers):
            markers.append(_Marker(last_cacheable[0], ttl, last_cacheable[1]))
    return _Rendered(markers, messages_start, speed, tier)


def _strip(obj: dict[str, Any], where: str, *, markers_ok: bool) -> tuple[dict[str, Any], str]:
    """Copy ``obj`` without ``cache_control`` (also inside a ``tool_result``'s content);
    return the copy and the marker's TTL (``""`` when unmarked)."""
    ttl = ""
    if "cache_control" in obj:
        if not markers_ok:
            raise WireError(f"{where}.cache_control: cache_control cannot be set on this block "
                            "(thinking blocks and empty text blocks cannot be cached)")
        ttl = _ttl(obj["cache_control"], f"{where}.cache_control")
        obj = {k: v for k, v in obj.items() if k != "cache_control"}
    nested = obj.get("content") if obj.get("type") == "tool_result" else None
    if isinstance(nested, list) and any(isinstance(p, dict) and "cache_control" in p
                                        for p in nested):
        parts = []
        for j, part in enumerate(nested):
            if isinstance(part, dict) and "cache_control" in part:
                inner = _ttl(part["cache_control"], f"{where}.content.{j}.cache_control")
                ttl = ttl or inner
                part = {k: v for k, v in part.items() if k != "cache_control"}
            parts.append(part)
        obj = {**obj, "content": parts}
    return obj, ttl


def _ttl(value: Any, where: str) -> str:
    obj = expect_object(value, where)
    extra = sorted(set(obj) - {"type", "ttl"})
    if extra:
        raise WireError(f"{where}.{extra[0]}: Extra inputs are not permitted")
    if obj.get("type") != "ephemeral":
        raise WireError(f"{where}.type: must be 'ephemeral', got {obj.get('type')!r}")
    ttl = obj.get("ttl", "5m")
    if not isinstance(ttl, str) or ttl not in _TTL_S:
        raise WireError(f"{where}.ttl: must be '5m' or '1h', got {ttl!r}")
    return str(ttl)


def _account(
    blocks: list[Block], markers: list[_Marker], minimum: int, lookback: int, ctx: WireContext
) -> _Accounting:
    """Reads via lookback from each eligible breakpoint, then staged writes past the read."""
    eligible = [m for m in markers if blocks[m.index].end_tokens >= minimum]
    store, now = ctx.store, ctx.now
    read = 0
    with store.lock:  # one request's reads are atomic
        for marker in eligible:
            window = range(marker.index, max(-1, marker.index - lookback), -1)
            read = max(read, store.read(
                ((blocks[j].prefix_hash, blocks[j].end_tokens) for j in window), now))
    covered, spans = read, {"5m": 0, "1h": 0}
    pending = []
    for marker in eligible:
        end = blocks[marker.index].end_tokens
        if end <= covered:
            continue
        spans[marker.ttl] += end - covered
        covered = end
        pending.append(PendingWrite(blocks[marker.index].prefix_hash, end,
                                    _TTL_S[marker.ttl], now))
    return _Accounting(read, spans["5m"], spans["1h"], tuple(pending))


def _events(message: dict[str, Any]) -> tuple[bytes, ...]:
    """The SSE event sequence of ``message`` as Anthropic streams it."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}
    out = [sse_event("message_start", {"type": "message_start", "message": start}),
           sse_event("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        first: dict[str, Any]
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in split_text(block["text"])]
        elif block["type"] == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": piece}
                      for piece in split_text(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            first = {**block, "input": {}}
            args = render(block["input"], "input").decode()
            deltas = [{"type": "input_json_delta", "partial_json": piece}
                      for piece in split_text(args)]
        out.append(sse_event("content_block_start", {"type": "content_block_start",
                                                     "index": index, "content_block": first}))
        out.extend(sse_event("content_block_delta", {"type": "content_block_delta",
                                                     "index": index, "delta": delta})
                   for delta in deltas)
        out.append(sse_event("content_block_stop", {"type": "content_block_stop",
                                                    "index": index}))
    delta_usage = {k: usage[k] for k in ("input_tokens", "cache_creation_input_tokens",
                                         "cache_read_input_tokens", "output_tokens")}
    out.append(sse_event("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": delta_usage,
    }))
    out.append(sse_event("message_stop", {"type": "message_stop"}))
    return tuple(out)
