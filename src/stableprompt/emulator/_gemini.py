"""Emulated Gemini API: ``generateContent``, ``streamGenerateContent`` and ``cachedContents``.

This is an emulator, not Google. Routes (``/v1beta``, as ``google-genai`` sends them):

* ``POST /v1beta/models/{model}:generateContent`` (JSON) and
  ``POST /v1beta/models/{model}:streamGenerateContent`` (``?alt=sse``: SSE ``data:`` chunks;
  without it, one JSON array of chunks);
* ``POST /v1beta/cachedContents`` (create), ``GET /v1beta/cachedContents`` (list),
  ``GET`` / ``PATCH`` (``ttl`` or ``expireTime`` only) / ``DELETE``
  ``/v1beta/cachedContents/{id}``.

Cache rules (ai.google.dev/gemini-api/docs/caching; PROVIDERS.md §4, §15; numbers from
``_policy``, provider ``gemini``):

* **Implicit**: the prompt is rendered to blocks (each function declaration, each system part,
  each content part, JSON as received) and chained; entries can end only at every multiple of
  the policy's ``implicit_interval_tokens`` (2,048), wherever it falls in a block, as real
  traffic shows (reads of 2,037 / 4,085 / 6,134 tokens on gemini-3-flash-preview,
  googleapis/python-genai#2064; 200,658 = 98 x 2,048 - 46 on gemini-2.5-flash,
  simonwillison.net 2025-05-09: each a multiple of 2,048 less the few template tokens the
  server keeps out of ``promptTokenCount``; the docs state no granularity). A request reads
  the longest live such prefix of at least the model's minimum and leaves an entry at every
  new multiple past it. Gemini reports no writes. Each turn's role header (``\nrole\n``)
  plays the template tokens: held in the cache, left out of every reported count
  (``promptTokenCount``, ``cachedContentTokenCount``, a cache's ``totalTokenCount``), so a
  read is reported a few tokens under its 2,048 multiple, as Gemini's are. Implicit entries
  live for the policy's default TTL (how long Google keeps them is UNVERIFIED; refreshed on
  read).
* **Explicit**: ``cachedContents`` hold a model's system instruction, tools, tool config and
  leading contents for ``ttl`` (default one hour, "no minimum or maximum bounds"); creation
  below the model's minimum is a 400, on a model without explicit caching (Gemini 4 Argon and
  later) a 400. A request naming one (``cachedContent``) must not send ``systemInstruction``,
  ``tools`` or ``toolConfig`` (400), must use the cache's model (400) and reads all of it while
  it lives (an expired or deleted cache is a 404); the rest of the prompt may read implicitly.
* Usage is Gemini's: ``promptTokenCount`` is inclusive, ``cachedContentTokenCount`` is the read
  (omitted when 0, as proto3 JSON omits zeros), ``candidatesTokenCount`` the output.

The responder sees a Messages-shaped view of the request (``text`` and ``tool_result`` blocks,
``metadata.user_id`` from the ``x-stableprompt-session`` header), so one responder serves
every format.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from hashlib import sha256
from typing import Any

from .._canonical import loads
from .._policy import cache_rules, explicit_cache_rule
from ._answers import Usage, WireContext, WireError, WireResult, json_result, render, sse_data
from ._checks import expect_list, expect_object, expect_str
from ._prompt import PromptChain
from ._responders import fit_turn
from ._store import PendingWrite

__all__ = ["ExplicitCaches", "handle_cached_contents", "handle_generate", "match"]

_GENERATE_PARAMS = frozenset({"contents", "systemInstruction", "tools", "toolConfig",
                              "generationConfig", "safetySettings", "cachedContent", "labels"})
_CACHE_PARAMS = frozenset({"model", "systemInstruction", "tools", "toolConfig", "contents",
                           "ttl", "expireTime", "displayName"})
_HEAD_FIELDS = ("systemInstruction", "tools", "toolConfig")


@dataclass(slots=True)
class _Cached:
    name: str
    model: str
    display_name: str
    blocks: list[tuple[bytes, str, str]]  # (rendered bytes, where, kind), in prompt order
    tool_config: bytes
    tokens: int
    created: float
    updated: float
    expires: float
    scope: bytes


@dataclass
class ExplicitCaches:
    """The emulator's ``cachedContents`` (one per emulator, shared by its threads)."""

    entries: dict[str, _Cached] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    created: int = 0
    deleted: int = 0

    def live(self, name: str, now: float, scope: bytes) -> _Cached | None:
        with self.lock:
            entry = self.entries.get(name)
            if entry is None or entry.scope != scope:
                return None
            if now >= entry.expires:
                del self.entries[name]
                return None
            return entry


def match(method: str, path: str) -> tuple[str, str, str] | None:
    """``(kind, model or cache id, action)`` of a Gemini path, ``None`` for another path:
    ``("generate", model, "generateContent" | "streamGenerateContent")`` or
    ``("caches", id or "", method)``."""
    if path.startswith("/v1beta/models/") and ":" in path:
        model, _, action = path[len("/v1beta/models/"):].rpartition(":")
        if action in ("generateContent", "streamGenerateContent") and model:
            return "generate", model, action
        return None
    if path.rstrip("/") == "/v1beta/cachedContents":
        return "caches", "", method
    if path.startswith("/v1beta/cachedContents/"):
        return "caches", path[len("/v1beta/cachedContents/"):], method
    return None


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _duration(value: Any, where: str) -> float:
    """A protobuf Duration string (``"300s"``, ``"1.5s"``) in seconds: decimal seconds, at
    most 9 fractional digits, suffix ``s``, as protobuf's JSON parser reads it (``"2e+06s"``,
    ``"infs"`` and ``"nans"`` are refused, as the API refuses them)."""
    text = expect_str(value, where)
    if _DURATION.fullmatch(text) is None or text.startswith("-"):
        if text.startswith("-"):
            raise WireError(f"{where}: a duration must not be negative")
        raise WireError(f"{where}: invalid duration {text!r} (expected e.g. '300s')")
    return float(text[:-1])


_DURATION = re.compile(r"-?[0-9]+(\.[0-9]{1,9})?s")


def _expiry(req: Mapping[str, Any], now: float, default_s: float) -> float:
    if "expireTime" in req:
        text = expect_str(req["expireTime"], "expireTime")
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise WireError(f"expireTime: invalid timestamp {text!r}") from None
    if "ttl" in req:
        return now + _duration(req["ttl"], "ttl")
    return now + default_s


def _head_blocks(req: Mapping[str, Any]) -> list[tuple[bytes, str, str]]:
    """The blocks of tools and system instruction, in Gemini's prompt order."""
    out: list[tuple[bytes, str, str]] = []
    tools = req.get("tools")
    for i, tool in enumerate(expect_list(tools, "tools") if tools is not None else ()):
        obj = expect_object(tool, f"tools[{i}]")
        declarations = obj.get("functionDeclarations")
        if isinstance(declarations, list):
            for j, declaration in enumerate(declarations):
                where = f"tools[{i}].functionDeclarations[{j}]"
                expect_str(expect_object(declaration, where).get("name"), f"{where}.name",
                           empty=False)
                out.append((b"\ntool\n" + render(declaration, where), where, "tool"))
        else:
            out.append((b"\ntool\n" + render(obj, f"tools[{i}]"), f"tools[{i}]", "tool"))
    system = req.get("systemInstruction")
    if system is not None:
        obj = expect_object(system, "systemInstruction")
        for i, item in enumerate(expect_list(obj.get("parts", []), "systemInstruction.parts")):
            where = f"systemInstruction.parts[{i}]"
            out.append((b"\nsystem\n" + render(expect_object(item, where), where), where,
                        "system"))
    return out


def _content_blocks(contents: Any, where: str) -> list[tuple[bytes, str, str]]:
    out: list[tuple[bytes, str, str]] = []
    for i, content in enumerate(expect_list(contents, where)):
        cwhere = f"{where}[{i}]"
        obj = expect_object(content, cwhere)
        role = obj.get("role", "user")
        if role not in ("user", "model"):
            raise WireError(f"{cwhere}.role: Please use a valid role: user, model.")
        parts = expect_list(obj.get("parts"), f"{cwhere}.parts")
        if not parts:
            raise WireError(f"{cwhere}.parts: must not be empty")
        for j, part in enumerate(parts):
            pwhere = f"{cwhere}.parts[{j}]"
            head = b"\n" + role.encode() + b"\n" if j == 0 else b"\n"
            out.append((head + render(expect_object(part, pwhere), pwhere), pwhere, "message"))
    return out


def handle_cached_contents(body: Any, ctx: WireContext, *, caches: ExplicitCaches,
                           name: str, method: str) -> WireResult:
    """Create, get, list, update (``ttl`` / ``expireTime``) or delete an explicit cache.

    Raises:
        WireError: 400 for a bad body, a model without explicit caching or content below
            the minimum; 404 for an unknown (or expired) cache; 405 for another method.
    """
    now = ctx.now
    if not name:
        if method == "GET":
            with caches.lock:
                live = [e for e in caches.entries.values()
                        if e.scope == ctx.scope and now < e.expires]
            return json_result({"cachedContents": [_cache_json(e) for e in live]})
        if method != "POST":
            raise WireError(f"Method {method} not allowed", status=405)
        return _create(body, ctx, caches)
    full = f"cachedContents/{name}"
    entry = caches.live(full, now, ctx.scope)
    if entry is None:
        raise WireError(f"CachedContent not found (or permission denied): {full}", status=404)
    if method == "GET":
        return json_result(_cache_json(entry))
    if method == "DELETE":
        with caches.lock:
            caches.entries.pop(full, None)
            caches.deleted += 1
        return json_result({})
    if method == "PATCH":
        req = expect_object(body, "body")
        extra = sorted(set(req) - {"ttl", "expireTime", "name"})
        if extra:
            raise WireError(f"{extra[0]}: only ttl or expireTime can be updated on a "
                            "CachedContent")
        with caches.lock:
            entry.expires = _expiry(req, now, 3600.0)
            entry.updated = now
        return json_result(_cache_json(entry))
    raise WireError(f"Method {method} not allowed", status=405)


def _create(body: Any, ctx: WireContext, caches: ExplicitCaches) -> WireResult:
    req = expect_object(body, "body")
    for key in sorted(req):
        if key not in _CACHE_PARAMS:
            raise WireError(f'Invalid JSON payload received. Unknown name "{key}"')
    model = expect_str(req.get("model"), "model", empty=False)
    model = model[len("models/"):] if model.startswith("models/") else model
    rule = explicit_cache_rule(model, ctx.policies)
    if not rule.supported:
        raise WireError(f"Explicit context caching is not supported for model {model} "
                        f"({rule.source}); implicit caching applies")
    blocks = _head_blocks(req)
    if req.get("contents") is not None:
        blocks += _content_blocks(req["contents"], "contents")
    chain = PromptChain(ctx.tokenizer, b"")
    template = _Template(ctx)
    for data, where, kind in blocks:
        template.add(chain, data, where=where, kind=kind)
    tokens = template.counted(chain.total_tokens)
    minimum = cache_rules("gemini", model, ctx.policies).min_cacheable_tokens
    if tokens < minimum:
        raise WireError(f"Cached content is too small. total_token_count={tokens}, "
                        f"min_total_token_count={minimum}")
    with caches.lock:
        caches.created += 1
        name = f"cachedContents/emu-{caches.created:06d}"
        entry = _Cached(name, model, str(req.get("displayName", "")), blocks,
                        render(req.get("toolConfig"), "toolConfig"), tokens, ctx.now, ctx.now,
                        _expiry(req, ctx.now, float(rule.default_ttl_s or 3600)), ctx.scope)
        caches.entries[name] = entry
    return json_result(_cache_json(entry))


def _cache_json(entry: _Cached) -> dict[str, Any]:
    return {"name": entry.name, "displayName": entry.display_name,
            "model": f"models/{entry.model}", "createTime": _stamp(entry.created),
            "updateTime": _stamp(entry.updated), "expireTime": _stamp(entry.expires),
            "usageMetadata": {"totalTokenCount": entry.tokens}}


def handle_generate(body: Any, ctx: WireContext, *, model: str, stream: bool, sse: bool,
                    caches: ExplicitCaches, session: str | None) -> WireResult:
    """Answer one ``generateContent`` / ``streamGenerateContent`` request for ``model``.

    Raises:
        WireError: 400 for a bad body or a misuse of ``cachedContent``, 404 for a cache
            that does not exist (any more).
    """
    req = expect_object(body, "body")
    for key in sorted(req):
        if key not in _GENERATE_PARAMS:
            raise WireError(f'Invalid JSON payload received. Unknown name "{key}": '
                            "Cannot find field.")
    if "contents" not in req:
        raise WireError("* GenerateContentRequest.contents: contents is not specified")
    policy = cache_rules("gemini", model, ctx.policies)
    chain = PromptChain(ctx.tokenizer, b"gemini\x00" + ctx.scope + b"\x00" + model.encode(),
                        interval=policy.implicit_interval_tokens)
    explicit = 0
    name = req.get("cachedContent")
    if name is not None:
        name = expect_str(name, "cachedContent", empty=False)
        clash = [key for key in _HEAD_FIELDS if key in req]
        if clash:
            raise WireError("CachedContent can not be used with GenerateContent request "
                            "setting system_instruction, tools or tool_config.\n\nProposed "
                            "fix: move those values to CachedContent from GenerateContent "
                            "request.")
        entry = caches.live(name, ctx.now, ctx.scope)
        if entry is None:
            raise WireError(f"CachedContent not found (or permission denied): {name}",
                            status=404)
        if entry.model != model:
            raise WireError(f"Model used by GenerateContent request ({model}) and "
                            f"CachedContent ({entry.model}) has to be the same.")
        chain.mix(b"cachedContent\x00" + name.encode())
        chain.mix(entry.tool_config)
        template = _Template(ctx)
        for data, where, kind in entry.blocks:
            template.add(chain, data, where=f"cachedContent.{where}", kind=kind)
        explicit = chain.total_tokens  # in chain tokens: counted, it is entry.tokens
    else:
        template = _Template(ctx)
        chain.mix(render(req.get("toolConfig"), "toolConfig"))
        for data, where, kind in _head_blocks(req):
            template.add(chain, data, where=where, kind=kind)
    for data, where, kind in _content_blocks(req["contents"], "contents"):
        template.add(chain, data, where=where, kind=kind)
    read, pending = _implicit(chain, policy.min_cacheable_tokens, explicit,
                              float(policy.default_ttl_s or 3600), ctx)
    read = template.counted(read)
    prompt_tokens = template.counted(chain.total_tokens)
    limit = None
    config = req.get("generationConfig")
    if isinstance(config, Mapping) and config.get("maxOutputTokens") is not None:
        limit = int(config["maxOutputTokens"])
    fitted = fit_turn(ctx.responder(responder_view(req, session)), tokenizer=ctx.tokenizer,
                      max_tokens=limit, call_id=lambda k: f"call_emu_{ctx.seq:06d}_{k}")
    parts: list[dict[str, Any]] = []
    if fitted.text:
        parts.append({"text": fitted.text})
    for call in fitted.tool_calls:
        parts.append({"functionCall": {"id": call.id, "name": call.name,
                                       "args": loads(call.arguments)}})
    finish = "MAX_TOKENS" if fitted.truncated else "STOP"
    usage = Usage(prompt_tokens, read, 0, fitted.output_tokens)
    metadata: dict[str, Any] = {"promptTokenCount": prompt_tokens,
                                "candidatesTokenCount": fitted.output_tokens,
                                "totalTokenCount": prompt_tokens + fitted.output_tokens}
    if read:
        metadata["cachedContentTokenCount"] = read
        metadata["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": read}]
    response = {"candidates": [{"content": {"role": "model", "parts": parts},
                                "finishReason": finish, "index": 0}],
                "usageMetadata": metadata, "modelVersion": model,
                "responseId": f"resp_emu_{ctx.seq:06d}"}
    if not stream:
        return json_result(response, pending=pending, model=model, usage=usage)
    chunks = _chunks(response)
    if sse:
        return WireResult(200, "text/event-stream", tuple(sse_data(c) for c in chunks),
                          pending=pending, model=model, usage=usage, streamed=True)
    return json_result(chunks, pending=pending, model=model, usage=usage)


class _Template:
    """The template tokens of a rendered prompt: each turn's role header (``\\nrole\\n``),
    which the cache holds but ``promptTokenCount`` and ``cachedContentTokenCount`` leave out,
    as Gemini leaves its turn-template tokens out (reads reported a few tokens under a 2,048
    multiple: 8-11 under for a system prompt and one user turn in python-genai#2064, 46
    under after a long chain of turns in the simonwillison.net sample)."""

    def __init__(self, ctx: WireContext) -> None:
        self._tokenizer = ctx.tokenizer
        self._starts: list[int] = []  # chain tokens before each block
        self._frames: list[int] = []  # template tokens at the start of each block

    def add(self, chain: PromptChain, data: bytes, *, where: str, kind: str) -> None:
        """Add the block to ``chain`` and note its template tokens: the role header
        (``\\nuser\\n``, ``\\nmodel\\n``, ``\\nsystem\\n``) that opens a turn; a tool
        declaration's or a later part's framing is counted as prompt."""
        frame = data[:data.index(b"{")] if b"{" in data else b""
        if kind == "tool" or frame == b"\n":
            frame = b""
        self._starts.append(chain.total_tokens)
        self._frames.append(self._tokenizer.count_block(frame, sha256(frame).digest())
                            if frame else 0)
        chain.add(data, where=where, kind=kind)

    def counted(self, tokens: int) -> int:
        """The reported count of the chain's first ``tokens`` tokens: less the framing inside
        them."""
        hidden = sum(min(frame, tokens - start)
                     for start, frame in zip(self._starts, self._frames, strict=True)
                     if start < tokens)
        return max(tokens - hidden, 0)


def _implicit(chain: PromptChain, minimum: int, explicit: int, ttl_s: float,
              ctx: WireContext) -> tuple[int, tuple[PendingWrite, ...]]:
    """Reads: the explicit cache's tokens, or more when a longer implicit prefix lives;
    writes: an implicit entry at every place (interval point, else block end) past the read
    and the minimum."""
    store, now = ctx.store, ctx.now
    places = ([(p.prefix_hash, p.end_tokens) for p in chain.points]
              if chain.interval is not None
              else [(b.prefix_hash, b.end_tokens) for b in chain.blocks])
    eligible = [p for p in places if p[1] >= minimum and p[1] > explicit]
    read = store.read(reversed(eligible), now)
    for digest, tokens in eligible:  # a read uses every block of its prefix: all refreshed
        if tokens < read:
            store.refresh(digest, now)
    read = max(read, explicit)
    pending = tuple(PendingWrite(digest, tokens, ttl_s, now)
                    for digest, tokens in eligible if tokens > read)
    return read, pending


def _chunks(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream chunks of ``response``: one per part (text pieces of 24 characters), the
    last with ``finishReason`` and ``usageMetadata`` (Gemini's final chunk carries the
    complete counts, PROVIDERS.md §4.1)."""
    candidate = response["candidates"][0]
    base = {"modelVersion": response["modelVersion"], "responseId": response["responseId"]}
    out: list[dict[str, Any]] = []
    for part in candidate["content"]["parts"]:
        pieces = ([{"text": part["text"][i:i + 24]} for i in range(0, len(part["text"]), 24)]
                  if "text" in part else [part])
        out.extend({**base, "candidates": [{"content": {"role": "model", "parts": [p]},
                                            "index": 0}]} for p in pieces)
    last = {**base, "candidates": [{"content": {"role": "model", "parts": []},
                                    "finishReason": candidate["finishReason"], "index": 0}],
            "usageMetadata": response["usageMetadata"]}
    return [*out, last]


def responder_view(req: Mapping[str, Any], session: str | None) -> dict[str, Any]:
    """A Messages-shaped view for the responder: user texts as ``text`` blocks, function
    responses as ``tool_result`` blocks (their call ``id``), ``metadata.user_id``."""
    messages: list[dict[str, Any]] = []
    for content in req.get("contents") or ():
        if not isinstance(content, Mapping):
            continue
        blocks: list[dict[str, Any]] = []
        for part in content.get("parts") or ():
            if not isinstance(part, Mapping):
                continue
            if isinstance(part.get("text"), str):
                blocks.append({"type": "text", "text": part["text"]})
            response = part.get("functionResponse")
            if isinstance(response, Mapping) and isinstance(response.get("id"), str):
                blocks.append({"type": "tool_result", "tool_use_id": response["id"]})
        role = "user" if content.get("role", "user") == "user" else "assistant"
        messages.append({"role": role, "content": blocks})
    view: dict[str, Any] = {"messages": messages}
    if session is not None:
        view["metadata"] = {"user_id": session}
    return view


Handler = Callable[[Any, WireContext], WireResult]
