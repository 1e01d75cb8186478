"""Emulated OpenAI Responses API: ``POST /v1/responses``, JSON or SSE events.

This is an emulator, not OpenAI; cache rules are in :mod:`._openai`. It keeps no server-side
state, so ``previous_response_id``, ``conversation``, ``prompt`` and ``background`` are
rejected with a 400 that says so. A ``reasoning`` effort other than ``none`` puts a reasoning
item first in the output (``_reasoning``). Usage is OpenAI's shape: ``input_tokens`` includes
``input_tokens_details.cached_tokens`` and ``cache_write_tokens`` (0 before GPT-5.6, where
writes are not reported); streamed usage arrives only on ``response.completed``
(``openai-python@e43b4224:src/openai/types/responses/response_usage.py``).
"""

from __future__ import annotations

from typing import Any

from ._answers import Usage, WireContext, WireError, WireResult, render, split_text, sse_event
from ._checks import (
    expect_bool,
    expect_list,
    expect_object,
    expect_output_limit,
    expect_str,
)
from ._diagnostics import Fingerprint, digest, fingerprint_of, openai_diagnostics
from ._endpoint import Endpoint, answer, open_request, reply
from ._openai import CacheRequest, account, add_message, cache_request
from ._reasoning import check_reasoning_items, reasoning_item, wants_reasoning

__all__ = ["handle_responses"]

_ENDPOINT = Endpoint(
    # Every top-level field of ``ResponseCreateParams`` (``openai`` SDK 3.63.0), plus
    # ``client_metadata``: string pairs the Codex CLI sends on every request (``openai/codex``
    # ``codex-rs`` ``CodexRequestIdentity::client_metadata``; seen from 0.171.0). Only the
    # model, ``prompt_cache_key``, ``tools``, ``instructions``, ``input`` and the scope fields
    # below are part of the cache key.
    params=frozenset({
        "access_programs", "background", "background_options", "client_metadata",
        "context_management", "conversation", "image", "include", "input", "instructions",
        "max_output_tokens",
        "max_tool_calls", "metadata", "model", "moderation", "parallel_tool_calls",
        "previous_response_id", "prompt", "prompt_cache_key", "prompt_cache_options",
        "prompt_cache_retention", "reasoning", "safety_identifier", "service_tier", "store",
        "stream", "stream_options", "temperature", "text", "tool_choice", "tools",
        "top_logprobs", "top_p", "truncation", "user",
    }),
    required=("model", "input"),
    unknown=lambda name: WireError(f"Unknown parameter: '{name}'.", param=name,
                                   code="unknown_parameter"),
    missing=lambda name: WireError(f"Missing required parameter: '{name}'.", param=name,
                                   code="missing_required_parameter"),
    call_prefix="call_emu",
    stateful=("previous_response_id", "conversation", "prompt", "background"),
)
_SCOPE = ("parallel_tool_calls", "text", "reasoning", "context_management")
_TOOL_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output",
                           "local_shell_call_output", "shell_call_output",
                           "apply_patch_call_output", "mcp_call"})
"""Input items that answer a tool call: the latest one ends the implicit breakpoint."""
_ITEM_KINDS = {"additional_tools": "tool", "compaction": "compaction"}
"""Block kinds of input items that are not plain items, for diagnostics: tools declared in
the input (``additional_tools``) and compaction summaries."""


def handle_responses(body: Any, ctx: WireContext) -> WireResult:
    """Answer one ``POST /v1/responses`` request.

    Raises:
        WireError: Invalid or stateful request (400, OpenAI ``invalid_request_error``).
    """
    req, model = open_request(body, _ENDPOINT)
    stream = expect_bool(req.get("stream", False), "stream")
    limit = None
    if req.get("max_output_tokens") is not None:
        limit = expect_output_limit(req["max_output_tokens"], "max_output_tokens", model,
                                    "openai", minimum=1)
    if req.get("client_metadata") is not None:
        metadata = expect_object(req["client_metadata"], "client_metadata")
        for key, value in metadata.items():
            expect_str(value, f"client_metadata.{key}")
    cache = cache_request(req, model, ctx, scope_params=_SCOPE)
    for i, tool in enumerate(expect_list(req["tools"], "tools") if req.get("tools") else ()):
        where = f"tools[{i}]"
        obj = expect_object(tool, where)
        expect_str(obj.get("type"), f"{where}.type", empty=False)
        cache.chain.add(b"\ntool\n" + render(obj, where), where=where, kind="tool")
    instructions = req.get("instructions")
    if instructions is not None:
        expect_str(instructions, "instructions")
        cache.chain.add(b"\ninstructions\n" + render(instructions, "instructions"),
                        where="instructions", kind="system")
    items = req["input"]
    if isinstance(items, str):  # shorthand for one user message, rendered the same way
        cache.implicit = add_message(cache, {"role": "user", "content": items}, "input",
                                     wire_format="openai-responses")
    else:
        for i, item in enumerate(expect_list(items, "input")):
            where = f"input[{i}]"
            obj = expect_object(item, where)
            if "content" in obj and "role" in obj:
                last = add_message(cache, obj, where, wire_format="openai-responses")
                if obj["role"] == "user":
                    cache.implicit = last
                continue
            kind = expect_str(obj.get("type"), f"{where}.type", empty=False)
            last = cache.chain.add(b"\n" + render(obj, where), where=where,
                                   kind=_ITEM_KINDS.get(kind, "item"))
            if kind in _TOOL_OUTPUTS:
                cache.implicit = last
    if not isinstance(items, str):
        check_reasoning_items(items)
    fitted = reply(req, ctx, _ENDPOINT, max_tokens=limit)
    acc = account(cache, ctx)
    output: list[dict[str, Any]] = []
    reasoning_tokens = 0
    if wants_reasoning(req):
        item = reasoning_item(req, ctx.seq)
        output.append(item)
        reasoning_tokens = sum(ctx.tokenizer.count(part["text"]) for part in item["summary"])
    usage = Usage(cache.chain.total_tokens, acc.reported_read, acc.write,
                  fitted.output_tokens + reasoning_tokens)
    if fitted.text:
        output.append({"id": f"msg_emu_{ctx.seq:06d}", "type": "message",
                       "status": "incomplete" if fitted.truncated else "completed",
                       "role": "assistant", "content": [_text_part(fitted.text)]})
    for k, call in enumerate(fitted.tool_calls):
        call_item: dict[str, Any]
        if call.input is not None:
            call_item = {"id": f"ctc_emu_{ctx.seq:06d}_{k}", "type": "custom_tool_call",
                    "status": "completed", "call_id": call.id, "name": call.name,
                    "input": call.input}
        else:
            call_item = {"id": f"fc_emu_{ctx.seq:06d}_{k}", "type": "function_call",
                    "status": "completed", "call_id": call.id, "name": call.name,
                    "arguments": call.arguments}
        if call.namespace is not None:
            call_item["namespace"] = call.namespace
        output.append(call_item)
    response = {
        "id": f"resp_emu_{ctx.seq:06d}", "object": "response", "created_at": int(ctx.now),
        "status": "incomplete" if fitted.truncated else "completed",
        "completed_at": int(ctx.now), "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if fitted.truncated else None,
        "instructions": instructions, "max_output_tokens": limit, "model": model,
        "output": output, "parallel_tool_calls": req.get("parallel_tool_calls", True),
        "previous_response_id": None, "prompt_cache_key": req.get("prompt_cache_key"),
        "prompt_cache_retention": req.get("prompt_cache_retention"),
        "reasoning": req.get("reasoning", {"effort": None, "summary": None}),
        "store": req.get("store", False), "temperature": req.get("temperature", 1.0),
        "text": req.get("text", {"format": {"type": "text"}}),
        "tool_choice": req.get("tool_choice", "auto"), "tools": req.get("tools") or [],
        "top_p": req.get("top_p", 1.0), "truncation": req.get("truncation", "disabled"),
        "metadata": req.get("metadata") or {},
        "usage": {
            "input_tokens": usage.input_tokens_total,
            "input_tokens_details": {"cached_tokens": acc.reported_read,
                                     "cache_write_tokens": acc.write},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": usage.input_tokens_total + usage.output_tokens,
        },
    }
    if "prompt_cache_options" in req:
        response["prompt_cache_options"] = req["prompt_cache_options"]
    fingerprint = _fingerprint(req, cache, model, ctx)
    ctx.fingerprints.put(response["id"], fingerprint)
    compare = (req.get("prompt_cache_options") or {}).get("comparison_response_id")
    if compare is not None:
        previous = ctx.fingerprints.get(expect_str(
            compare, "prompt_cache_options.comparison_response_id"), ctx.scope)
        response["prompt_cache_diagnostics"] = openai_diagnostics(previous, fingerprint)
    return answer(response, stream=stream, events=_events, model=model, usage=usage,
                  pending=acc.pending)


def _fingerprint(req: dict[str, Any], cache: CacheRequest, model: str, ctx: WireContext
                 ) -> Fingerprint:
    """This request's diagnostics fingerprint (see ``_diagnostics``): model and key, the
    blocks, then text format, reasoning effort, verbosity and the other scope fields."""
    text: dict[str, Any] = req["text"] if isinstance(req.get("text"), dict) else {}
    reasoning: dict[str, Any] = (req["reasoning"] if isinstance(req.get("reasoning"), dict)
                                 else {})
    rest = {name: req.get(name) for name in _SCOPE if name not in ("text", "reasoning")}
    rest["text"] = {k: v for k, v in text.items() if k not in ("format", "verbosity")}
    rest["reasoning"] = {k: v for k, v in reasoning.items() if k != "effort"}

    def setting(reason: str, value: Any) -> tuple[str, bytes]:
        return reason, digest(render(value, "body"))

    return fingerprint_of(
        cache.chain.blocks, scope=ctx.scope, wire="openai-responses",
        settings=[setting("model_changed", model),
                  setting("prompt_cache_key_changed", req.get("prompt_cache_key"))],
        later_settings=[setting("text_format_changed", text.get("format")),
                        setting("reasoning_effort_changed", reasoning.get("effort")),
                        setting("verbosity_changed", text.get("verbosity")),
                        setting("unavailable", rest)],
        total_tokens=cache.chain.total_tokens, diagnosable=cache.modern)


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _events(response: dict[str, Any]) -> tuple[bytes, ...]:
    """The SSE event sequence of ``response``: created ... completed."""
    out: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        out.append(sse_event(kind, {"type": kind, "sequence_number": len(out), **fields}))

    pending = {**response, "status": "in_progress", "completed_at": None,
               "incomplete_details": None, "output": [], "usage": None}
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        item_id = item["id"]
        if item["type"] == "message":
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "content": []})
            text = item["content"][0]["text"]
            where = {"item_id": item_id, "output_index": index, "content_index": 0}
            emit("response.content_part.added", **where, part=_text_part(""))
            for piece in split_text(text):
                emit("response.output_text.delta", **where, delta=piece, logprobs=[])
            emit("response.output_text.done", **where, text=text, logprobs=[])
            emit("response.content_part.done", **where, part=_text_part(text))
        elif item["type"] == "reasoning":
            emit("response.output_item.added", output_index=index,
                 item={**item, "summary": []})
        elif item["type"] == "custom_tool_call":
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "input": ""})
            for piece in split_text(item["input"]):
                emit("response.custom_tool_call_input.delta", item_id=item_id,
                     output_index=index, delta=piece)
            emit("response.custom_tool_call_input.done", item_id=item_id,
                 output_index=index, input=item["input"])
        else:
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "arguments": ""})
            for piece in split_text(item["arguments"]):
                emit("response.function_call_arguments.delta", item_id=item_id,
                     output_index=index, delta=piece)
            emit("response.function_call_arguments.done", item_id=item_id,
                 output_index=index, name=item["name"], arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    final = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    emit(final, response=response)
    return tuple(out)

