"""Emulated AWS Bedrock Converse: ``POST /model/{modelId}/converse`` (JSON) and
``/converse-stream`` (``application/vnd.amazon.eventstream``).

This is an emulator, not AWS; it checks no SigV4 signature (any ``Authorization`` is a key
scope). Cache rules (docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html;
PROVIDERS.md §6, §15; numbers from ``_policy``, provider ``bedrock``):

* The prompt is ``toolConfig.tools`` -> ``system`` -> ``messages``; blocks are each tool, each
  system block and each message content block, JSON as received.
* A ``cachePoint`` block is a breakpoint on the block before it (it is no block itself): the
  Anthropic rules apply (emulator ``_anthropic``): writes only at cache points, reads looking
  back at most 20 blocks from each, at most the model's ``breakpoint_budget`` (4) per request
  (a fifth is a ValidationException), ``ttl`` ``5m`` (default) or ``1h`` only where the model
  offers it, a cache point below the model's minimum is ignored, lifetimes refreshed on read.
* ``toolConfig.toolChoice`` and ``additionalModelRequestFields`` are folded into the hash
  before the first message (the messages tier).
* Usage is Converse's: ``inputTokens`` is the uncached remainder, plus
  ``cacheReadInputTokens``, ``cacheWriteInputTokens`` and ``cacheDetails`` (``[{ttl,
  inputTokens}]``, 1h before 5m, empty without writes), ``outputTokens``, ``totalTokens``.

The responder sees a Messages-shaped view (``text`` / ``tool_result`` blocks) with
``metadata.user_id`` from ``requestMetadata.session_id``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from .._canonical import loads, wire_json
from .._policy import TTL_LABELS_S, cache_rules
from ._answers import Usage, WireContext, WireError, WireResult, json_result, render, split_text
from ._anthropic import _account, _Marker
from ._checks import expect_list, expect_object, expect_str
from ._prompt import PromptChain
from ._responders import fit_turn

__all__ = ["encode_event", "handle_converse", "match"]

_PARAMS = frozenset({"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig",
                     "additionalModelRequestFields", "promptVariables",
                     "additionalModelResponseFieldPaths", "requestMetadata",
                     "performanceConfig", "serviceTier", "outputConfig"})
_BLOCK_KEYS = frozenset({"text", "image", "document", "video", "audio", "toolUse", "toolResult",
                         "guardContent", "cachePoint", "reasoningContent", "citationsContent",
                         "searchResult"})


def match(path: str) -> tuple[str, bool] | None:
    """``(model id, stream)`` of a ``/model/{modelId}/converse(-stream)`` path, else ``None``."""
    for suffix, stream in (("/converse-stream", True), ("/converse", False)):
        if path.startswith("/model/") and path.endswith(suffix):
            model = unquote(path[len("/model/"):-len(suffix)])
            return (model, stream) if model else None
    return None


def _header(name: str, value: str) -> bytes:
    raw, data = name.encode(), value.encode()
    return bytes([len(raw)]) + raw + b"\x07" + struct.pack(">H", len(data)) + data


def encode_event(event_type: str, payload: Mapping[str, Any], *,
                 message_type: str = "event") -> bytes:
    """One ``application/vnd.amazon.eventstream`` message: prelude (total and header
    lengths, CRC32), headers ``:event-type`` (or ``:exception-type``), ``:content-type``,
    ``:message-type``, the JSON payload, message CRC32."""
    kind = ":event-type" if message_type == "event" else ":exception-type"
    headers = (_header(kind, event_type) + _header(":content-type", "application/json")
               + _header(":message-type", message_type))
    body = wire_json(dict(payload))
    prelude = struct.pack(">II", 12 + len(headers) + len(body) + 4, len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


def _point(value: Any, where: str, offered: tuple[int, ...], model: str) -> str:
    obj = expect_object(value, where)
    extra = sorted(set(obj) - {"type", "ttl"})
    if extra:
        raise WireError(f"{where}.{extra[0]}: extraneous key [{extra[0]}] is not permitted")
    if obj.get("type") != "default":
        raise WireError(f"{where}.type: must be 'default'")
    ttl = obj.get("ttl", "5m")
    if ttl not in ("5m", "1h"):
        raise WireError(f"{where}.ttl: must be one of [5m, 1h]")
    if offered and TTL_LABELS_S[ttl] not in offered:
        raise WireError(f"{where}.ttl: {ttl} is not supported for model {model}")
    return str(ttl)


def handle_converse(body: Any, ctx: WireContext, *, model: str, stream: bool) -> WireResult:
    """Answer one Converse / ConverseStream request for ``model``.

    Raises:
        WireError: ValidationException (400).
    """
    req = expect_object(body, "body")
    for key in sorted(req):
        if key not in _PARAMS:
            raise WireError(f"Unknown parameter in input: \"{key}\", must be one of: "
                            + ", ".join(sorted(_PARAMS)))
    if "messages" not in req:
        raise WireError("A conversation must start with a user message.")
    policy = cache_rules("bedrock", model, ctx.policies)
    chain = PromptChain(ctx.tokenizer, b"bedrock\x00" + ctx.scope + b"\x00" + model.encode())
    markers: list[_Marker] = []

    def add(data: bytes, where: str, kind: str) -> None:
        chain.add(data, where=where, kind=kind)

    def mark(item: Any, where: str) -> bool:
        if not (isinstance(item, Mapping) and "cachePoint" in item):
            return False
        if not chain.blocks:
            raise WireError(f"{where}: a cachePoint must follow cacheable content")
        ttl = _point(item["cachePoint"], f"{where}.cachePoint", policy.ttls_s, model)
        markers.append(_Marker(len(chain.blocks) - 1, ttl, where))
        return True

    config = req.get("toolConfig")
    tier: dict[str, Any] = {}
    if config is not None:
        config = expect_object(config, "toolConfig")
        for i, tool in enumerate(expect_list(config.get("tools"), "toolConfig.tools")):
            where = f"toolConfig.tools[{i}]"
            if mark(tool, where):
                continue
            spec = expect_object(expect_object(tool, where).get("toolSpec"), f"{where}.toolSpec")
            expect_str(spec.get("name"), f"{where}.toolSpec.name", empty=False)
            add(b"\ntool\n" + render(tool, where), where, "tool")
        if "toolChoice" in config:
            tier["toolChoice"] = config["toolChoice"]
    for i, item in enumerate(expect_list(req.get("system", []), "system")):
        where = f"system[{i}]"
        if not mark(item, where):
            add(b"\nsystem\n" + render(expect_object(item, where), where), where, "system")
    if "additionalModelRequestFields" in req:
        tier["additionalModelRequestFields"] = req["additionalModelRequestFields"]
    chain.mix(render(tier, "toolConfig"))
    messages = expect_list(req["messages"], "messages")
    if not messages:
        raise WireError("A conversation must start with a user message.")
    previous = None
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        obj = expect_object(message, where)
        role = obj.get("role")
        if role not in ("user", "assistant"):
            raise WireError(f"{where}.role: must be one of [user, assistant]")
        if role == previous:
            raise WireError("A conversation must alternate between user and assistant roles.")
        previous = role
        content = expect_list(obj.get("content"), f"{where}.content")
        head = b"\n" + str(role).encode() + b"\n"
        for j, item in enumerate(content):
            bwhere = f"{where}.content[{j}]"
            if mark(item, bwhere):
                continue
            block = expect_object(item, bwhere)
            if len(block) != 1 or not block.keys() <= _BLOCK_KEYS:
                raise WireError(f"{bwhere}: a content block must set exactly one member")
            add((head if j == 0 else b"\n") + render(block, bwhere), bwhere, "message")
    budget = policy.breakpoint_budget or 4
    if len(markers) > budget:
        raise WireError(f"The number of cache points ({len(markers)}) exceeds the maximum "
                        f"of {budget} per request.")
    acc = _account(chain.blocks, markers, policy.min_cacheable_tokens,
                   policy.lookback_blocks or 20, ctx)
    limit = None
    inference = req.get("inferenceConfig")
    if isinstance(inference, Mapping) and inference.get("maxTokens") is not None:
        limit = int(inference["maxTokens"])
    fitted = fit_turn(ctx.responder(responder_view(req)), tokenizer=ctx.tokenizer,
                      max_tokens=limit, call_id=lambda k: f"tooluse_emu_{ctx.seq:06d}_{k}")
    write = acc.write_5m + acc.write_1h
    usage = Usage(chain.total_tokens, acc.read, write, fitted.output_tokens)
    details = [{"ttl": ttl, "inputTokens": tokens}
               for ttl, tokens in (("1h", acc.write_1h), ("5m", acc.write_5m)) if tokens]
    wire_usage: dict[str, Any] = {
        "inputTokens": chain.total_tokens - acc.read - write,
        "outputTokens": fitted.output_tokens,
        "totalTokens": chain.total_tokens + fitted.output_tokens,
        "cacheReadInputTokens": acc.read, "cacheWriteInputTokens": write,
        "cacheDetails": details,
    }
    content_out: list[dict[str, Any]] = []
    if fitted.text:
        content_out.append({"text": fitted.text})
    for call in fitted.tool_calls:
        content_out.append({"toolUse": {"toolUseId": call.id, "name": call.name,
                                        "input": loads(call.arguments)}})
    stop = "max_tokens" if fitted.truncated else "tool_use" if fitted.tool_calls else "end_turn"
    metrics = {"latencyMs": 100}
    if not stream:
        return json_result({"output": {"message": {"role": "assistant", "content": content_out}},
                            "stopReason": stop, "usage": wire_usage, "metrics": metrics},
                           pending=acc.pending, model=model, usage=usage)
    events = [encode_event("messageStart", {"role": "assistant"})]
    for index, block in enumerate(content_out):
        if "text" in block:
            events.extend(encode_event("contentBlockDelta", {
                "contentBlockIndex": index, "delta": {"text": piece}})
                for piece in split_text(block["text"]))
        else:
            use = block["toolUse"]
            events.append(encode_event("contentBlockStart", {
                "contentBlockIndex": index,
                "start": {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}}))
            events.extend(encode_event("contentBlockDelta", {
                "contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}})
                for piece in split_text(wire_json(use["input"]).decode()))
        events.append(encode_event("contentBlockStop", {"contentBlockIndex": index}))
    events.append(encode_event("messageStop", {"stopReason": stop}))
    events.append(encode_event("metadata", {"usage": wire_usage, "metrics": metrics}))
    return WireResult(200, "application/vnd.amazon.eventstream", tuple(events),
                      pending=acc.pending, model=model, usage=usage, streamed=True)


def responder_view(req: Mapping[str, Any]) -> dict[str, Any]:
    """A Messages-shaped view for the responder: ``text`` and ``tool_result`` blocks,
    ``metadata.user_id`` from ``requestMetadata.session_id``."""
    messages: list[dict[str, Any]] = []
    for message in req.get("messages") or ():
        if not isinstance(message, Mapping):
            continue
        blocks: list[dict[str, Any]] = []
        for item in message.get("content") or ():
            if not isinstance(item, Mapping):
                continue
            if isinstance(item.get("text"), str):
                blocks.append({"type": "text", "text": item["text"]})
            result = item.get("toolResult")
            if isinstance(result, Mapping) and isinstance(result.get("toolUseId"), str):
                blocks.append({"type": "tool_result", "tool_use_id": result["toolUseId"]})
        messages.append({"role": message.get("role"), "content": blocks})
    view: dict[str, Any] = {"messages": messages}
    metadata = req.get("requestMetadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("session_id"), str):
        view["metadata"] = {"user_id": metadata["session_id"]}
    return view
