"""llama-server's request conversions, ported: Anthropic Messages and OpenAI Responses bodies
as the chat completions body the server renders with its chat template.

llama-server (llama.cpp 0c1e570 via llama-cpp-python 0.3.36, ``tools/server/server-chat.cpp``)
serves ``/v1/messages`` and ``/v1/responses`` (and their token-count endpoints) by converting
the body to a chat completions body first (``server_chat_convert_anthropic_to_oai``,
``server_chat_convert_responses_to_chatcmpl``) and then calling ``oaicompat_chat_params_parse``
(``server-common.cpp``), the same path as ``/v1/chat/completions`` and ``/apply-template``. So
``POST /apply-template`` of :func:`to_chat_completions` of a body gives the prompt text the
server would tokenize for that body. The port keeps the C++ exactly: the keys it writes and
their order, which values it copies as they are (a text block keeps its ``cache_control``; the
server's message parser reads only ``type`` and ``text``), how it joins strings, what it
drops, and where it throws. The C++ reads values with ``json_value``: a missing, ``null`` or
wrongly typed value gives the default (``""`` for a string, the stated number), which this
port mirrors in :func:`_str` / :func:`_int`.

What reaches the prompt: after the conversion the server reads (``oaicompat_chat_params_parse``)
``messages``, ``tools``, ``tool_choice``, ``parallel_tool_calls``, ``response_format`` /
``json_schema`` / ``grammar``, ``chat_template_kwargs`` (``enable_thinking``),
``reasoning_effort``, ``reasoning_format``, ``add_generation_prompt`` and
``continue_final_message`` into the template inputs. A Responses body keeps every key it has
(so all of these pass through; Responses' own ``text.format`` is not converted, as in the
C++); an Anthropic body keeps only ``chat_template_kwargs`` of them, besides ``messages``,
``tools`` and ``tool_choice`` (``thinking`` only sets a sampling budget).

Only the three request formats are known: ``"anthropic"``, ``"openai-responses"``,
``"openai-chat"`` (the body as it is, copied).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._exceptions import EngineRequestError
from . import anthropic, openai_chat, openai_responses
from ._fields import child
from ._nlohmann import dump

__all__ = ["WIRE_FORMATS", "to_chat_completions"]

WIRE_FORMATS = (anthropic.WIRE_FORMAT, openai_responses.WIRE_FORMAT, openai_chat.WIRE_FORMAT)
"""The request formats :func:`to_chat_completions` converts."""

_BILLING_HEADER = b"x-anthropic-billing-header:"
_PASS_THROUGH = ("temperature", "top_p", "top_k", "stream", "chat_template_kwargs")
"""Anthropic body keys the server copies as they are (``server_chat_convert_anthropic_to_oai``)."""


# --- nlohmann/json semantics -------------------------------------------------------------

def _copy(value: Any) -> Any:
    """A deep copy of decoded JSON (the C++ copies every value it keeps); Mappings become
    dicts and tuples lists."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(item) for item in value]
    return value


def _has(obj: Any, key: str) -> bool:
    """``obj.contains(key)``: false for anything but an object."""
    return isinstance(obj, dict) and key in obj


def _value(obj: Any, key: str, default: Any) -> Any:
    """``json_value<json>(obj, key, default)``: the value, or ``default`` when missing/null."""
    if _has(obj, key) and obj[key] is not None:
        return obj[key]
    return default


def _str(obj: Any, key: str, default: str = "") -> str:
    """``json_value<std::string>``: a string value, else ``default`` (wrong types too)."""
    value = _value(obj, key, None)
    return value if isinstance(value, str) else default


def _int(obj: Any, key: str, default: int) -> int:
    """``json_value<int>``: nlohmann converts any number or boolean with ``static_cast<int>``
    (integers wrap to 32 bits; doubles truncate, out of range gives INT_MIN as on x86)."""
    value = _value(obj, key, None)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return ((value + 2**31) % 2**32) - 2**31
    if isinstance(value, float):
        return int(value) if -(2**31) <= value < 2**31 else -(2**31)
    return default


def _is_str(obj: Any, key: str) -> bool:
    return _has(obj, key) and isinstance(obj[key], str)


def _is_array(obj: Any, key: str) -> bool:
    return _has(obj, key) and isinstance(obj[key], list)


def _fail(message: str, pointer: str, code: str = "engine-request-invalid") -> EngineRequestError:
    return EngineRequestError(message, code=code, pointer=pointer)


# --- public entry ---------------------------------------------------------------------------

def to_chat_completions(wire_format: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat completions body llama-server renders for a request body of ``wire_format``.

    Args:
        wire_format: ``"anthropic"`` (``/v1/messages``), ``"openai-responses"``
            (``/v1/responses``) or ``"openai-chat"`` (``/v1/chat/completions``).
        body: The request body as decoded JSON. Not modified.

    Returns:
        A new dict (no value shared with ``body``), ready for ``POST /apply-template``.

    Raises:
        EngineRequestError: ``wire_format`` is not one of the three (code
            ``engine-format-unknown``), or the server would reject the body while converting
            it: the message is the server's, ``pointer`` names the value (codes
            ``engine-field-missing``, ``engine-type-invalid``, ``engine-unsupported``; the
            server answers 400, or 500 for a missing Anthropic ``messages``).
        CanonicalizationError: an Anthropic ``tool_use.input`` with no JSON form.

    Source: ``server_chat_convert_anthropic_to_oai`` and
    ``server_chat_convert_responses_to_chatcmpl`` (llama.cpp 0c1e570 via llama-cpp-python
    0.3.36, ``tools/server/server-chat.cpp``).
    """
    if wire_format == anthropic.WIRE_FORMAT:
        return anthropic_to_chat(body)
    if wire_format == openai_responses.WIRE_FORMAT:
        return responses_to_chat(body)
    if wire_format == openai_chat.WIRE_FORMAT:
        copied: dict[str, Any] = _copy(body)
        return copied
    raise _fail(f"unknown wire format {wire_format!r}: llama-server converts "
                f"{', '.join(WIRE_FORMATS)}", "", "engine-format-unknown")


# --- OpenAI Responses -> chat completions ---------------------------------------------------

def responses_to_chat(response_body: Mapping[str, Any]) -> dict[str, Any]:
    """Port of ``server_chat_convert_responses_to_chatcmpl``: the body copied, ``input`` (and
    ``instructions``, a leading system message) become ``messages`` (appended at the end of
    the keys), function ``tools`` are wrapped as ``{"type": "function", "function": tool}``
    with ``strict`` defaulting to true (other tool types are skipped),
    ``max_output_tokens`` becomes ``max_tokens`` and ``reasoning.effort`` becomes
    ``reasoning_effort``. Consecutive assistant items (message, function call, reasoning)
    merge into one assistant message.

    Raises:
        EngineRequestError: where the C++ throws ``std::invalid_argument`` (see
            :func:`to_chat_completions`).
    """
    body: dict[str, Any] = _copy(response_body)
    if "input" not in body:
        raise _fail("'input' is required", "/input", "engine-field-missing")
    if _str(body, "previous_response_id"):
        raise _fail("llama.cpp does not support 'previous_response_id'.",
                    "/previous_response_id", "engine-unsupported")
    input_value = body["input"]
    chat = dict(body)
    del chat["input"]
    messages: list[Any] = []
    if "instructions" in body:
        messages.append({"role": "system", "content": _str(body, "instructions")})
        del chat["instructions"]
    if isinstance(input_value, str):
        messages.append({"role": "user", "content": input_value})
    elif isinstance(input_value, list):
        for index, item in enumerate(input_value):
            _responses_item(item, child("/input", index), messages)
    else:
        raise _fail("'input' must be a string or array of objects", "/input",
                    "engine-type-invalid")
    chat["messages"] = messages
    if "tools" in body:
        if not isinstance(body["tools"], list):
            raise _fail("'tools' must be an array of objects", "/tools", "engine-type-invalid")
        tools = []
        for tool in body["tools"]:
            if _str(tool, "type") != "function":
                continue  # SRV_WRN: no chat completions equivalent
            del tool["type"]
            if "strict" not in tool:
                tool["strict"] = True
            tools.append({"type": "function", "function": tool})
        del chat["tools"]
        if tools:
            chat["tools"] = tools
    if "max_output_tokens" in body:
        del chat["max_output_tokens"]
        chat["max_tokens"] = body["max_output_tokens"]
    if "reasoning" in body:
        reasoning = body["reasoning"]
        if _has(reasoning, "effort"):
            chat["reasoning_effort"] = reasoning["effort"]
        del chat["reasoning"]
    return chat


def _responses_item(item: Any, pointer: str, messages: list[Any]) -> None:
    """One ``input`` item appended to (or merged into the last of) ``messages``."""
    merge_prev = bool(messages) and _str(messages[-1], "role") == "assistant"
    if _is_str(item, "content"):  # "Input message" with text content
        item["content"] = [{"text": item["content"], "type": "input_text"}]
    role = item.get("role") if _is_str(item, "role") else None
    kind = item.get("type") if _is_str(item, "type") else None
    if _is_array(item, "content") and role in ("user", "system", "developer"):
        item.pop("type", None)
        item.pop("status", None)
        item["content"] = _input_content(item["content"], child(pointer, "content"))
        messages.append(item)
    elif role == "assistant" and kind == "message":
        content = _output_content(item, child(pointer, "content"))
        if merge_prev:
            prev = messages[-1]
            if not _is_array(prev, "content"):
                prev["content"] = []
            prev["content"].extend(content)
        else:
            item.pop("status", None)
            item.pop("type", None)
            item["content"] = content
            messages.append(item)
    elif (_is_str(item, "arguments") and _is_str(item, "call_id") and _is_str(item, "name")
          and kind == "function_call"):
        call = {"function": {"arguments": item["arguments"], "name": item["name"]},
                "id": item["call_id"], "type": "function"}
        if merge_prev:
            prev = messages[-1]
            if not _is_array(prev, "tool_calls"):
                prev["tool_calls"] = []
            prev["tool_calls"].append(call)
        else:
            messages.append({"role": "assistant", "tool_calls": [call]})
    elif (_is_str(item, "call_id") and (_is_str(item, "output") or _is_array(item, "output"))
          and kind == "function_call_output"):
        output = item["output"]
        if not isinstance(output, str):
            output = _tool_output(output, child(pointer, "output"))
        messages.append({"content": output, "role": "tool", "tool_call_id": item["call_id"]})
    elif _is_array(item, "summary") and kind == "reasoning":
        content_pointer = child(pointer, "content")
        if not _is_array(item, "content"):
            raise _fail("item['content'] is not an array", content_pointer,
                        "engine-type-invalid")
        if not item["content"]:
            raise _fail("item['content'] is empty", content_pointer, "engine-field-missing")
        if not _is_str(item["content"][0], "text"):
            raise _fail("item['content']['text'] is not a string",
                        child(child(content_pointer, 0), "text"), "engine-type-invalid")
        text = item["content"][0]["text"]
        if merge_prev:
            messages[-1]["reasoning_content"] = text
        else:
            messages.append({"role": "assistant", "content": [], "reasoning_content": text})
    else:
        raise _fail("Cannot determine type of 'item'", pointer, "engine-type-invalid")


def _input_content(parts: list[Any], pointer: str) -> list[Any]:
    """The content parts of an input message (``input_text``, ``input_image``)."""
    out: list[Any] = []
    for index, part in enumerate(parts):
        where = child(pointer, index)
        kind = _str(part, "type")
        if kind == "input_text":
            if not _has(part, "text"):
                raise _fail("'Input text' requires 'text'", where, "engine-field-missing")
            out.append({"text": part["text"], "type": "text"})
        elif kind == "input_image":
            if not _has(part, "image_url"):
                raise _fail("'image_url' is required", where, "engine-field-missing")
            out.append({"image_url": {"url": part["image_url"]}, "type": "image_url"})
        elif kind == "input_file":
            raise _fail("'input_file' is not supported by llamacpp at this moment", where,
                        "engine-unsupported")
        else:
            raise _fail("'type' must be one of 'input_text', 'input_image', or 'input_file'",
                        child(where, "type"), "engine-type-invalid")
    return out


def _output_content(item: dict[str, Any], pointer: str) -> list[Any]:
    """The content parts of an assistant output message (``output_text``, ``refusal``; a
    string content was already made an ``input_text`` part)."""
    out: list[Any] = []
    if not _is_array(item, "content"):
        return out
    for index, part in enumerate(item["content"]):
        where = child(pointer, index)
        kind = _str(part, "type")
        if kind in ("output_text", "input_text"):
            if not _is_str(part, "text"):
                raise _fail("'Output text' requires 'text'", where, "engine-field-missing")
            out.append({"text": part["text"], "type": "text"})
        elif kind == "refusal":
            if not _is_str(part, "refusal"):
                raise _fail("'Refusal' requires 'refusal'", where, "engine-field-missing")
            out.append({"refusal": part["refusal"], "type": "refusal"})
        else:
            raise _fail("'type' must be one of 'output_text' or 'refusal'",
                        child(where, "type"), "engine-type-invalid")
    return out


def _tool_output(outputs: list[Any], pointer: str) -> list[Any]:
    """A function call output given as parts: ``input_text`` -> ``text``, ``input_image`` ->
    ``image_url`` (edited in place, other keys kept)."""
    for index, part in enumerate(outputs):
        where = child(pointer, index)
        if not _has(part, "type"):
            raise _fail("Output of tool call missing 'type' field", where,
                        "engine-field-missing")
        kind = part["type"]
        if kind not in ("input_text", "input_image"):
            raise _fail("Output of tool call should be 'Input text' or 'Input image'",
                        child(where, "type"), "engine-type-invalid")
        if kind == "input_text":
            part["type"] = "text"
        else:
            if "image_url" not in part:
                raise _fail("'image_url' is required", where, "engine-field-missing")
            part["type"] = "image_url"
            part["image_url"] = {"url": part["image_url"]}
    return outputs


# --- Anthropic Messages -> chat completions -------------------------------------------------

def normalize_billing_header(text: str) -> str:
    """Port of ``normalize_anthropic_billing_header``: in a system text starting with
    ``x-anthropic-billing-header:``, the 5 bytes after the first ``cch=`` become ``fffff``
    when a ``;`` follows them (the per-request stamp would break prefix caching); any other
    text is returned unchanged.

    Raises:
        EngineRequestError: the 5 bytes split a UTF-8 character (``engine-unsupported``: the
            server would render invalid UTF-8, which no JSON request can carry).
    """
    data = text.encode("utf-8")
    if not data.startswith(_BILLING_HEADER):
        return text
    index = data.find(b"cch=", len(_BILLING_HEADER))
    start = index + 4
    if index < 0 or not (start + 5 < len(data) and data[start + 5] == ord(";")):
        return text  # LOG_ERR("anthropic string not as expected") when cch= is there
    try:
        return (data[:start] + b"fffff" + data[start + 5:]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail("the billing header's cch stamp splits a UTF-8 character", "/system",
                    "engine-unsupported") from exc


def _image_url(source: Any) -> dict[str, Any] | None:
    """An Anthropic image ``source`` as an ``image_url`` part (``base64`` -> data URL,
    ``url`` -> the URL), or ``None`` for another source type (the block is dropped)."""
    kind = _str(source, "type")
    if kind == "base64":
        media_type = _str(source, "media_type", "image/jpeg")
        url = f"data:{media_type};base64,{_str(source, 'data')}"
    elif kind == "url":
        url = _str(source, "url")
    else:
        return None
    return {"type": "image_url", "image_url": {"url": url}}


def anthropic_to_chat(body: Mapping[str, Any]) -> dict[str, Any]:
    """Port of ``server_chat_convert_anthropic_to_oai``.

    ``system`` (a string, or the ``text`` of its text blocks joined with nothing between)
    becomes the first message; each message with block content becomes one message (text
    blocks kept as they are, images as ``image_url`` parts, ``tool_use`` as ``tool_calls``
    with ``arguments = input.dump()``, thinking joined into ``reasoning_content``) followed by
    one ``tool`` message per ``tool_result`` (text-only results joined with nothing between,
    results with images kept as parts). Then ``tools`` (``input_schema`` -> ``parameters``),
    ``tool_choice`` (``auto`` -> ``"auto"``, ``any``/``tool`` -> ``"required"``, others
    dropped), ``stop_sequences`` -> ``stop``, ``max_tokens`` (default 4096), the pass-through
    keys, ``thinking.budget_tokens`` -> ``thinking_budget_tokens`` and ``metadata.user_id``
    -> ``__metadata_user_id``. Every other key is dropped.

    Raises:
        EngineRequestError: no ``messages`` (``engine-field-missing`` at ``/messages``).
        CanonicalizationError: a ``tool_use.input`` with no JSON form.
    """
    src: dict[str, Any] = _copy(body)
    messages: list[Any] = []
    system = _value(src, "system", None)
    if system is not None:
        content = ""
        if isinstance(system, str):
            content = normalize_billing_header(system)
        elif isinstance(system, list):
            content = "".join(normalize_billing_header(_str(block, "text"))
                              for block in system if _str(block, "type") == "text")
        messages.append({"role": "system", "content": content})
    if "messages" not in src:
        raise _fail("'messages' is required", "/messages", "engine-field-missing")
    if isinstance(src["messages"], list):
        for index, msg in enumerate(src["messages"]):
            _anthropic_message(msg, child("/messages", index), messages)
    chat: dict[str, Any] = {"messages": messages}
    if isinstance(src.get("tools"), list):
        chat["tools"] = [
            {"type": "function", "function": {
                "name": _str(tool, "name"), "description": _str(tool, "description"),
                "parameters": tool["input_schema"] if _has(tool, "input_schema") else {}}}
            for tool in src["tools"]]
    choice = src.get("tool_choice")
    if isinstance(choice, dict):
        kind = _str(choice, "type")
        if kind == "auto":
            chat["tool_choice"] = "auto"
        elif kind in ("any", "tool"):
            chat["tool_choice"] = "required"
    if "stop_sequences" in src:
        chat["stop"] = src["stop_sequences"]
    chat["max_tokens"] = src.get("max_tokens", 4096)  # a null max_tokens stays null
    for key in _PASS_THROUGH:
        if key in src:
            chat[key] = src[key]
    if "thinking" in src:
        thinking = _value(src, "thinking", {})
        if _str(thinking, "type") == "enabled":
            chat["thinking_budget_tokens"] = _int(thinking, "budget_tokens", 10000)
    if "metadata" in src:
        user_id = _str(_value(src, "metadata", {}), "user_id")
        if user_id:
            chat["__metadata_user_id"] = user_id
    return chat


def _anthropic_message(msg: Any, pointer: str, messages: list[Any]) -> None:
    """One Anthropic message appended as zero or more chat messages."""
    role = _str(msg, "role")
    if not _has(msg, "content"):
        if role != "assistant":
            messages.append(msg)
        return
    content = msg["content"]
    if not isinstance(content, list):  # a string (or anything else) goes through as it is
        messages.append(msg)
        return
    tool_calls: list[Any] = []
    parts: list[Any] = []
    results: list[Any] = []
    reasoning = ""
    for index, block in enumerate(content):
        kind = _str(block, "type")
        if kind == "text":
            parts.append(block)
        elif kind == "thinking":
            reasoning += _str(block, "thinking")
        elif kind == "image":
            part = _image_url(_value(block, "source", {}))
            if part is not None:
                parts.append(part)
        elif kind == "tool_use":
            arguments = dump(_value(block, "input", {}),
                             child(child(child(pointer, "content"), index), "input"))
            tool_calls.append({"id": _str(block, "id"), "type": "function",
                               "function": {"name": _str(block, "name"),
                                            "arguments": arguments}})
        elif kind == "tool_result":
            results.append({"role": "tool", "tool_call_id": _str(block, "tool_use_id"),
                            "content": _tool_result(_value(block, "content", None))})
    if parts or tool_calls or reasoning:
        new: dict[str, Any] = {"role": role, "content": parts if parts else ""}
        if tool_calls:
            new["tool_calls"] = tool_calls
        if reasoning:
            new["reasoning_content"] = reasoning
        messages.append(new)
    messages.extend(results)


def _tool_result(content: Any) -> Any:
    """A ``tool_result`` content: a string as it is; blocks as their texts joined with
    nothing between, or as ``text``/``image_url`` parts when an image is among them; anything
    else ``""``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    text = ""
    parts: list[Any] = []
    has_images = False
    for block in content:
        kind = _str(block, "type")
        if kind == "text":
            piece = _str(block, "text")
            text += piece
            parts.append({"type": "text", "text": piece})
        elif kind == "image":
            has_images = True
            part = _image_url(_value(block, "source", {}))
            if part is not None:
                parts.append(part)
    return parts if has_images else text
