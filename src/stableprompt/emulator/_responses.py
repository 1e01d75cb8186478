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
from ._endpoint import Endpoint, answer, open_request, reply
from ._openai import account, add_message, cache_request
from ._reasoning import check_reasoning_items, reasoning_item, wants_reasoning

__all__ = ["handle_responses"]

_ENDPOINT = Endpoint(
    params=frozenset({
        "access_programs", "background", "background_options", "context_management",
        "conversation", "image", "include", "input", "instructions", "max_output_tokens",
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
            last = cache.chain.add(b"\n" + render(obj, where), where=where, kind="item")
            if kind == "function_call_output":
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
    for k, (cid, name, args) in enumerate(fitted.tool_calls):
        output.append({"id": f"fc_emu_{ctx.seq:06d}_{k}", "type": "function_call",
                       "status": "completed", "call_id": cid, "name": name,
                       "arguments": args})
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
    return answer(response, stream=stream, events=_events, model=model, usage=usage,
                  pending=acc.pending)


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

