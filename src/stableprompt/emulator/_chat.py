"""Emulated OpenAI Chat Completions: ``POST /v1/chat/completions``, JSON or SSE chunks.

This is an emulator, not OpenAI; cache rules are in :mod:`._openai`. Usage is OpenAI's shape:
``prompt_tokens`` includes cached tokens; ``prompt_tokens_details.cached_tokens`` (and
``cache_write_tokens`` for GPT-5.6+) are subsets. With ``stream_options.include_usage`` a final
chunk with ``choices: []`` carries the usage and every other chunk has ``usage: null``
(``openai-python@e43b4224:src/openai/types/chat/chat_completion_stream_options_param.py``).
"""

from __future__ import annotations

from typing import Any

from ._answers import Usage, WireContext, WireError, WireResult, render, split_text, sse_data
from ._checks import (
    expect_bool,
    expect_list,
    expect_messages,
    expect_object,
    expect_output_limit,
    expect_str,
)
from ._endpoint import Endpoint, answer, open_request, reply
from ._openai import OpenAIAccounting, account, add_message, cache_request

__all__ = ["handle_chat"]

_ENDPOINT = Endpoint(
    params=frozenset({
        "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
        "max_completion_tokens", "max_tokens", "messages", "metadata", "modalities", "model",
        "moderation", "n", "parallel_tool_calls", "prediction", "presence_penalty",
        "prompt_cache_key", "prompt_cache_options", "prompt_cache_retention",
        "reasoning_effort", "response_format", "safety_identifier", "seed", "service_tier",
        "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "tools",
        "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
    }),
    required=("model", "messages"),
    unknown=lambda name: WireError(f"Unrecognized request argument supplied: {name}",
                                   param=name),
    missing=lambda name: (
        WireError("you must provide a model parameter", param="model") if name == "model"
        else WireError(f"Missing required parameter: '{name}'.", param=name,
                       code="missing_required_parameter")),
    call_prefix="call_emu",
)
_SCOPE = ("parallel_tool_calls", "response_format", "reasoning_effort", "verbosity")
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_CHUNK_KEYS = ("id", "created", "model", "system_fingerprint")


def handle_chat(body: Any, ctx: WireContext) -> WireResult:
    """Answer one ``POST /v1/chat/completions`` request.

    Raises:
        WireError: Invalid request (400, OpenAI ``invalid_request_error`` with ``param``).
    """
    req, model = open_request(body, _ENDPOINT)
    stream = expect_bool(req.get("stream", False), "stream")
    include_usage = False
    if req.get("stream_options") is not None:
        if not stream:
            raise WireError("The 'stream_options' parameter is only allowed when 'stream' is "
                            "enabled.", param="stream_options")
        options = expect_object(req["stream_options"], "stream_options")
        include_usage = expect_bool(options.get("include_usage", False),
                                    "stream_options.include_usage")
    if req.get("n", 1) != 1:
        raise WireError("n: the emulator answers with exactly one choice (n=1)", param="n")
    limit = None
    for name in ("max_tokens", "max_completion_tokens"):  # the newer name wins
        if req.get(name) is not None:
            limit = expect_output_limit(req[name], name, model, "openai", minimum=1)
    cache = cache_request(req, model, ctx, scope_params=_SCOPE)
    for key in ("functions", "tools"):
        for i, tool in enumerate(expect_list(req[key], key) if req.get(key) is not None else ()):
            where = f"{key}[{i}]"
            obj = expect_object(tool, where)
            if key == "tools":
                fn = expect_object(obj.get("function"), f"{where}.function")
                expect_str(fn.get("name"), f"{where}.function.name", empty=False)
            cache.chain.add(b"\ntool\n" + render(obj, where), where=where, kind="tool")
    messages = expect_messages(req["messages"])
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        obj = expect_object(message, where)
        role = obj.get("role")
        if role not in _ROLES:
            raise WireError(f"{where}.role: must be one of {', '.join(_ROLES)}; got {role!r}",
                            param=f"{where}.role")
        content = obj.get("content")
        nullable = role == "assistant" and (obj.get("tool_calls") or obj.get("function_call"))
        if not isinstance(content, (str, list)) and not (content is None and nullable):
            raise WireError(f"{where}.content: expected a string or an array of content parts, "
                            f"got {type(content).__name__ if content is not None else 'null'}",
                            param=f"{where}.content")
        last = add_message(cache, obj, where)
        if role in ("user", "tool", "function"):
            cache.implicit = last
    fitted = reply(req, ctx, _ENDPOINT, max_tokens=limit)
    acc = account(cache, ctx)
    usage = Usage(cache.chain.total_tokens, acc.reported_read, acc.write, fitted.output_tokens)
    finish = "length" if fitted.truncated else "tool_calls" if fitted.tool_calls else "stop"
    message_out: dict[str, Any] = {"role": "assistant", "content": fitted.text or None,
                                   "refusal": None, "annotations": []}
    if fitted.tool_calls:
        message_out["tool_calls"] = [_call(c.id, c.name, c.arguments)
                                     for c in fitted.tool_calls]
    completion = {"id": f"chatcmpl-emu-{ctx.seq:06d}", "created": int(ctx.now), "model": model,
                  "system_fingerprint": "fp_stableprompt_emulator", "object": "chat.completion",
                  "choices": [{"index": 0, "message": message_out, "logprobs": None,
                               "finish_reason": finish}],
                  "usage": _usage(usage, acc, cache.modern), "service_tier": "default"}
    return answer(completion, stream=stream,
                  events=lambda done: _chunks(done, include_usage=include_usage),
                  model=model, usage=usage, pending=acc.pending)


def _usage(usage: Usage, acc: OpenAIAccounting, modern: bool) -> dict[str, Any]:
    details: dict[str, int] = {"cached_tokens": acc.reported_read, "audio_tokens": 0}
    if modern:
        details["cache_write_tokens"] = acc.write
    return {
        "prompt_tokens": usage.input_tokens_total,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens_total + usage.output_tokens,
        "prompt_tokens_details": details,
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0,
                                      "rejected_prediction_tokens": 0},
    }


def _call(cid: str, name: str, args: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def _chunks(completion: dict[str, Any], *, include_usage: bool) -> tuple[bytes, ...]:
    """The SSE chunk sequence of ``completion`` (a ``chat.completion`` object), ``[DONE]`` last.

    With ``include_usage`` every chunk carries ``usage: null`` and one more chunk with
    ``choices: []`` carries the usage.
    """
    base = {**{key: completion[key] for key in _CHUNK_KEYS}, "object": "chat.completion.chunk"}
    choice = completion["choices"][0]
    message = choice["message"]
    usage = completion["usage"] if include_usage else None

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        data = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": reason}]}
        if usage is not None:
            data["usage"] = None
        return sse_data(data)

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if message["content"]:
        out.extend(chunk({"content": piece}) for piece in split_text(message["content"]))
    for k, call in enumerate(message.get("tool_calls", ())):
        function = call["function"]
        out.append(chunk({"tool_calls": [{"index": k, "id": call["id"], "type": "function",
                                          "function": {"name": function["name"],
                                                       "arguments": ""}}]}))
        out.extend(chunk({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
                   for piece in split_text(function["arguments"]))
    out.append(chunk({}, choice["finish_reason"]))
    if usage is not None:
        out.append(sse_data({**base, "choices": [], "usage": usage}))
    out.append(sse_data("[DONE]"))
    return tuple(out)
