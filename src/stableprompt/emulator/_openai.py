"""Prompt-cache rules shared by the emulated OpenAI endpoints (Chat Completions, Responses).

This is an emulator, not OpenAI. It follows the documented behaviour
(https://developers.openai.com/api/docs/guides/prompt-caching, version of 2026-06-27 and the
newest guide listing GPT-5.6; SDK docstrings of ``openai-python@e43b4224``):

* Caching is automatic. The prompt is rendered as blocks in the model's order: each tool, the
  instructions, then each message (its non-content fields as one header, then one block per
  content part; string content is one block; Responses items other than messages are one
  block each), from the JSON as received, key order included, with
  ``prompt_cache_breakpoint`` markers removed.
* Caches are scoped by API key, model, ``prompt_cache_key`` (routing: different keys never
  share) and the prefix-changing settings the guide lists (``parallel_tool_calls``,
  structured-output format, reasoning effort, verbosity, context management). ``tool_choice``
  is not listed there and is not part of the key.
* Models with a breakpoint budget in the policy table (GPT-5.6 and later): one implicit
  breakpoint at the end of the latest user or tool message, plus explicit
  ``prompt_cache_breakpoint`` parts (the latest 3 with the implicit one, the latest 4 in
  ``explicit`` mode; explicit mode without markers disables caching). Writes are reported as
  ``cache_write_tokens``; ``cached_tokens`` is exact.
* GPT-5.5 ("implicit breakpoints every 2,048 tokens"; no explicit breakpoints): an entry at
  every multiple of 2,048 tokens, wherever it falls in a block, written for free and never
  reported. ``cached_tokens`` is the longest such live prefix, already a multiple of 128
  (the guide's reporting step). In policy terms: ``CacheRules.implicit_interval_tokens``.
* Other earlier models ("model-dependent intervals"): the emulator's choice is an entry at
  every block boundary at or above the minimum, written for free and never reported;
  ``cached_tokens`` is floored to the policy granularity (128 tokens).
* A read is the longest prefix, at block (GPT-5.5: interval) granularity, whose entry is live
  (no lookback limit). Prefixes below the model's minimum (``cache_rules``) are neither read
  nor written.
* TTL: the policy default (5 min idle for earlier models, 30 min for GPT-5.5 and GPT-5.6+),
  ``prompt_cache_retention: "24h"`` on earlier models (the only value GPT-5.5 accepts),
  ``prompt_cache_options.ttl`` / breakpoint ``ttl`` (``"30m"``, ``"12h"``) on GPT-5.6+;
  refreshed on read.
* Hidden OpenAI-provided system tokens and overflow routing are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any

from .._policy import TTL_LABELS_S, CacheRules, cache_rules, takes_cache_options, text_block_of
from ._answers import WireContext, WireError, render
from ._checks import expect_list, expect_object, expect_str
from ._prompt import PromptChain
from ._store import PendingWrite

__all__ = ["CacheRequest", "OpenAIAccounting", "account", "add_message", "cache_request"]

#: The TTL labels OpenAI accepts (the values from the one policy table), in seconds.
_TTL_S = {label: TTL_LABELS_S[label] for label in ("30m", "12h")}
_RETENTION_S = {"in_memory": TTL_LABELS_S["5m"], "24h": TTL_LABELS_S["24h"]}
# Before GPT-5.6, cached_tokens is "rounded down to a multiple of 128" (guide, model table); a
# coarser policy granularity (GPT-5.5: 2,048) is the spacing of fixed implicit breakpoints.


@dataclass(slots=True)
class CacheRequest:
    """Cache settings and marks of one request, filled while rendering.

    Attributes:
        chain: The rendered blocks.
        policy: The model's cache policy.
        modern: GPT-5.6+ rules (the policy has a breakpoint budget).
        mode: ``"implicit"`` or ``"explicit"``.
        ttl_s: Lifetime (seconds) of writes without their own TTL.
        implicit: Block index ending the latest user/tool message, or ``None``.
        explicit: ``(block index, ttl_s)`` of each explicit breakpoint, in order.
    """

    chain: PromptChain
    policy: CacheRules
    modern: bool
    mode: str
    ttl_s: float
    implicit: int | None = None
    explicit: list[tuple[int, float]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OpenAIAccounting:
    """Cache outcome of one request (tokens): raw and reported reads, reported writes."""

    read: int
    reported_read: int
    write: int
    pending: tuple[PendingWrite, ...]


def cache_request(
    req: dict[str, Any], model: str, ctx: WireContext, *, scope_params: tuple[str, ...]
) -> CacheRequest:
    """Validate the cache parameters and start the chain with the request's scope.

    Raises:
        WireError: A cache parameter is malformed or not supported by the model (400).
    """
    policy = cache_rules("openai", model, ctx.policies)
    modern = takes_cache_options(policy)  # GPT-5.6+: the one rule, in _policy
    key = req.get("prompt_cache_key")
    if key is not None:
        expect_str(key, "prompt_cache_key")
    ttl_s = float(policy.default_ttl_s or 300)
    retention = req.get("prompt_cache_retention")
    if retention is not None:
        if not isinstance(retention, str) or retention not in _RETENTION_S:
            raise WireError("prompt_cache_retention: must be 'in_memory' or '24h', got "
                            f"{retention!r}", param="prompt_cache_retention")
        if not modern:
            if _RETENTION_S[retention] not in policy.ttls_s:
                raise WireError(f"prompt_cache_retention: {retention!r} is not supported for "
                                f"{model}", param="prompt_cache_retention")
            ttl_s = float(_RETENTION_S[retention])
    mode = "implicit"
    options = req.get("prompt_cache_options")
    if options is not None:
        if not modern:
            raise WireError(f"prompt_cache_options: not supported for {model}; it requires "
                            "gpt-5.6 or later", param="prompt_cache_options")
        opts = expect_object(options, "prompt_cache_options")
        extra = sorted(set(opts) - {"mode", "ttl", "comparison_response_id", "prewarm"})
        if extra:
            raise WireError(f"prompt_cache_options.{extra[0]}: unknown parameter",
                            param=f"prompt_cache_options.{extra[0]}")
        mode = opts.get("mode", "implicit")
        if mode not in ("implicit", "explicit"):
            raise WireError(f"prompt_cache_options.mode: must be 'implicit' or 'explicit', got "
                            f"{mode!r}", param="prompt_cache_options.mode")
        ttl_s = _ttl(opts.get("ttl", "30m"), "prompt_cache_options.ttl")
    scope = {name: req[name] for name in scope_params if name in req}
    head = (b"openai\x00" + ctx.scope + b"\x00" + model.encode() + b"\x00"
            + (key or "").encode() + b"\x00" + render(scope, "body"))
    interval = None if modern else policy.implicit_interval_tokens
    chain = PromptChain(ctx.tokenizer, head, interval=interval)
    return CacheRequest(chain, policy, modern, str(mode), ttl_s)


def add_message(
    cache: CacheRequest, message: dict[str, Any], where: str, *, kind: str = "message",
    wire_format: str = "openai-chat",
) -> int:
    """Render one message (header, then content parts) into the chain; return its last index.

    String content is its own bytes, unless the content-shape rule
    (:data:`stableprompt._policy.CONTENT_SHAPES`) says the provider caches it like one text
    part, in which case it is rendered as that part.

    Raises:
        WireError: Content is not a string, array of objects or null; a breakpoint is
            malformed or used on a model without explicit breakpoints.
    """
    header = {k: v for k, v in message.items() if k != "content"}
    head = b"\n" + render(header, where)
    content = message.get("content")
    if isinstance(content, str) and content:
        block = text_block_of(wire_format, content)
        if block is not None:
            content = [block]
    if content is None or content == []:
        return cache.chain.add(head, where=where, kind=kind)
    if isinstance(content, str):
        return cache.chain.add(head + b"\n" + render(content, f"{where}.content"),
                               where=where, kind=kind)
    index = -1
    for k, part in enumerate(expect_list(content, f"{where}.content")):
        pwhere = f"{where}.content[{k}]"
        obj = expect_object(part, pwhere)
        expect_str(obj.get("type"), f"{pwhere}.type", empty=False)
        mark = obj.get("prompt_cache_breakpoint")
        if mark is not None:
            ttl_s = _breakpoint(cache, mark, f"{pwhere}.prompt_cache_breakpoint")
            obj = {key: v for key, v in obj.items() if key != "prompt_cache_breakpoint"}
        data = (head if k == 0 else b"") + b"\n" + render(obj, pwhere)
        index = cache.chain.add(data, where=pwhere, kind=kind)
        if mark is not None:
            cache.explicit.append((index, ttl_s))
    return index


def account(cache: CacheRequest, ctx: WireContext) -> OpenAIAccounting:
    """Find the longest live prefix, then stage this request's writes."""
    chain, policy, now = cache.chain, cache.policy, ctx.now
    minimum = policy.min_cacheable_tokens
    if cache.modern and cache.mode == "explicit" and not cache.explicit:
        return OpenAIAccounting(0, 0, 0, ())
    # Where entries can be, in prompt order: interval points (GPT-5.5) or every block end.
    places = ([(p.prefix_hash, p.end_tokens) for p in chain.points]
              if chain.interval is not None
              else [(b.prefix_hash, b.end_tokens) for b in chain.blocks])
    read = ctx.store.read(takewhile(lambda place: place[1] >= minimum, reversed(places)), now)
    writes: dict[int, float] = {}  # index into places -> TTL (s) of the write
    if cache.modern:
        for index, ttl_s in cache.explicit[-(4 if cache.mode == "explicit" else 3):]:
            writes[index] = max(ttl_s, writes.get(index, 0.0))
        if cache.mode == "implicit" and cache.implicit is not None:
            writes[cache.implicit] = max(cache.ttl_s, writes.get(cache.implicit, 0.0))
    else:
        writes = dict.fromkeys(range(len(places)), cache.ttl_s)
    pending = tuple(
        PendingWrite(places[i][0], places[i][1], ttl_s, now)
        for i, ttl_s in sorted(writes.items())
        if places[i][1] >= minimum and places[i][1] > read
    )
    write = pending[-1].tokens - read if pending and cache.modern else 0
    granularity = policy.granularity_tokens
    return OpenAIAccounting(read, read // granularity * granularity, write, pending)


def _breakpoint(cache: CacheRequest, value: Any, where: str) -> float:
    if not cache.modern:
        raise WireError(f"{where}: explicit cache breakpoints require gpt-5.6 or later",
                        param=where)
    obj = expect_object(value, where)
    extra = sorted(set(obj) - {"mode", "ttl"})
    if extra:
        raise WireError(f"{where}.{extra[0]}: unknown parameter", param=f"{where}.{extra[0]}")
    if obj.get("mode") != "explicit":
        raise WireError(f"{where}.mode: must be 'explicit', got {obj.get('mode')!r}",
                        param=f"{where}.mode")
    return _ttl(obj["ttl"], f"{where}.ttl") if "ttl" in obj else cache.ttl_s


def _ttl(value: Any, where: str) -> float:
    if not isinstance(value, str) or value not in _TTL_S:
        raise WireError(f"{where}: must be '30m' or '12h', got {value!r}", param=where)
    return float(_TTL_S[value])
