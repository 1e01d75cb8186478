"""AWS Bedrock Converse / ConverseStream requests (wire format ``"bedrock-converse"``).

Requests: endpoint (the model id is in the URL path, not the body), cache-key params, tool and
block shapes, ``cachePoint`` breakpoint placement, body assembly and segmenting. Responses:
usage parsing and stream accumulation live in :mod:`._wire.bedrock` (re-exported here), the
usage dialect this format had first.

Shapes (``botocore`` ``data/bedrock-runtime/2023-09-30/service-2.json``): ``ConverseRequest``
``{"messages", "system"?, "toolConfig"?: {"tools", "toolChoice"?}, "inferenceConfig"?,
"additionalModelRequestFields"?, ...}``; a ``SystemContentBlock`` / ``ContentBlock`` /
``Tool`` is a one-key union (``{"text"}``, ``{"toolUse"}``, ``{"toolResult"}``,
``{"toolSpec"}``, ``{"cachePoint"}``). A breakpoint is not a key on a block, as Anthropic's
``cache_control`` is, but a block of its own, ``{"cachePoint": {"type": "default", "ttl"?:
"5m" | "1h"}}``, placed after the content it ends (in ``system``, in a message's ``content``
or in ``toolConfig.tools``). At most 4 per request, per-model minimums and TTLs
(docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html; PROVIDERS.md §6.3, §15):
the numbers are in ``_policy`` (provider ``bedrock``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, unquote

from .._canonical import canonical_json, checked_json
from .._exceptions import BreakpointError, CaptureError, HistoryError, InputError
from .._policy import TTL_LABELS_S, CacheRules
from . import anthropic
from ._breakpoints import check_sdk_marks
from ._parts import (
    AssistantTurn,
    HeadParts,
    MessageParts,
    PromptParts,
    ToolParts,
    TurnPart,
    body_pieces,
    check_model,
    check_reasoning,
    joined,
    memo,
    response_text,
    role_groups,
    tool_json,
)
from ._segmenter import SegmentBuilder, require_list, tool_label
from .bedrock import (
    WIRE_FORMAT,
    BedrockStreamAccumulator,
    encode_event,
    parse_response,
    parse_usage,
)

__all__ = [
    "WIRE_FORMAT",
    "BedrockStreamAccumulator",
    "assistant_turn",
    "cache_point",
    "encode_event",
    "endpoint_for",
    "model_from_path",
    "parse_response",
    "parse_usage",
    "render",
]

ENDPOINT = "/model/{modelId}/converse"
"""URL path template of Converse (``requestUri`` in the service model)."""
STREAM_ENDPOINT = "/model/{modelId}/converse-stream"
"""URL path template of ConverseStream."""

#: Request parameters that are part of the cache key, ``model`` (from the URL) first: the
#: model-specific fields (Claude ``thinking`` and the like travel in
#: ``additionalModelRequestFields``) and structured output. ``toolConfig.toolChoice`` is a
#: param segment of its own (see :func:`segment_head`).
CACHE_KEY_PARAMS = ("model", "additionalModelRequestFields", "outputConfig")

HISTORY_KEY = "messages"
"""The body key holding the conversation history."""

CONTENT_KEYS = ("system", "messages", "toolConfig")
"""Top-level body keys besides the cache-key params and ``tools`` that this format reads."""

MARKER_KEY = "cachePoint"
"""The breakpoint block's key."""

MAX_BREAKPOINTS = 4
"""Checkpoints per request ("All models listed allow 4 checkpoints per request",
PROVIDERS.md §6.3); a model's own budget is its policy's ``breakpoint_budget``."""

ROLES = {"user": "user", "tool": "user", "assistant": "assistant"}
"""Canonical role -> Converse ``ConversationRole`` (tool results travel in user turns)."""


def endpoint_for(model_id: str, *, stream: bool = False) -> str:
    """The URL path of a Converse (``stream``: ConverseStream) call to ``model_id``,
    percent-encoded as botocore sends it (``:`` and ``/`` of ARNs and versions escaped)."""
    template = STREAM_ENDPOINT if stream else ENDPOINT
    return template.format(modelId=quote(model_id, safe=""))


def model_from_path(path: str) -> str | None:
    """The model id of a ``/model/{modelId}/converse(-stream)`` URL path (decoded), ``None``
    for any other path or the template itself."""
    path = path.split("?", 1)[0].rstrip("/")
    for suffix in ("/converse", "/converse-stream"):
        if path.endswith(suffix):
            head = path[: -len(suffix)]
            at = head.rfind("/model/")
            if at < 0:
                return None
            name = unquote(head[at + len("/model/"):])
            return name if name and "{" not in name else None
    return None


def cache_point(ttl: str) -> dict[str, Any]:
    """A ``cachePoint`` block: ``{"type": "default"}`` for 5 minutes (the default TTL),
    ``"ttl": "1h"`` for an hour (``CachePointBlock``, ``CacheTTL`` in the service model)."""
    inner: dict[str, str] = {"type": "default"}
    if ttl != "5m":
        inner["ttl"] = ttl
    return {"cachePoint": inner}


_POINTS = {ttl: canonical_json(cache_point(ttl)) for ttl in ("5m", "1h")}


def tool(t: ToolParts) -> dict[str, Any]:
    """A ``toolConfig.tools[]`` entry: ``{"toolSpec": {"name", "description"?,
    "inputSchema": {"json": <schema>}, "strict"?}}`` (``ToolSpecification``)."""
    spec: dict[str, Any] = {"name": t.name}
    if t.description is not None:
        spec["description"] = t.description
    spec["inputSchema"] = {"json": t.input_schema}
    if t.strict is not None:
        spec["strict"] = t.strict
    return {"toolSpec": spec}


def tool_name(entry: dict[str, Any]) -> Any:
    """A sent tool entry's name (``toolSpec.name``; any value)."""
    spec = entry.get("toolSpec")
    return spec.get("name") if isinstance(spec, Mapping) else None


def tool_schema(entry: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Where a sent tool keeps its schema: ``(toolSpec.inputSchema, "json")``."""
    spec = entry.get("toolSpec")
    schema = spec.get("inputSchema") if isinstance(spec, Mapping) else None
    if isinstance(schema, dict) and isinstance(schema.get("json"), dict):
        return schema, "json"
    return None


def block(canonical: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ContentBlock`` of one canonical block: ``{"text"}``, ``{"toolUse": {"toolUseId",
    "name", "input"}}`` or ``{"toolResult": {"toolUseId", "content": [{"text"}],
    "status"?: "error"}}``; a kept Converse reasoning block as received.

    Raises:
        HistoryError: reasoning of another format (code ``history-reasoning-format``).
    """
    kind = canonical["type"]
    if kind == "text":
        return {"text": canonical["text"]}
    if kind == "reasoning":
        if canonical["format"] != WIRE_FORMAT:
            raise HistoryError(f"{canonical['format']} reasoning content cannot be sent to "
                               "Bedrock Converse", code="history-reasoning-format")
        return dict(canonical["item"])
    if kind == "tool_call":
        return {"toolUse": {"input": canonical["arguments"], "name": canonical["name"],
                            "toolUseId": canonical["id"]}}
    result: dict[str, Any] = {"content": [{"text": canonical["content"]}],
                              "toolUseId": canonical["tool_call_id"]}
    if canonical.get("is_error"):
        result["status"] = "error"
    return {"toolResult": result}


def message_blocks(message: MessageParts) -> tuple[bytes, ...]:
    """A message's content blocks as canonical bytes, serialized once per message."""
    cache = message.wire_memo
    found: tuple[bytes, ...] | None = cache.get(WIRE_FORMAT)
    if found is None:
        found = cache[WIRE_FORMAT] = tuple([checked_json(block(b)) for b in message.wire_blocks])
    return found


def _tool_bytes(head: HeadParts) -> tuple[bytes, ...]:
    return memo(head, WIRE_FORMAT + "-tools", lambda: tuple(
        tool_json(tool, t) for t in head.tools))


def check_policy_ttls(marks: Mapping[tuple[str, int], str], policy: CacheRules | None,
                      model_id: str) -> None:
    """Refuse a TTL the model does not offer (Bedrock: 1h only on some models).

    Raises:
        BreakpointError: a mark's TTL is not in the policy's ``ttls_s`` (code
            ``breakpoint-ttl``, naming the model and the policy's source).
    """
    if policy is None or not policy.ttls_s:
        return
    for (where, index), ttl in marks.items():
        if TTL_LABELS_S[ttl] not in policy.ttls_s:
            offered = ", ".join(f"{s // 60}m" if s < 3600 else f"{s // 3600}h"
                                for s in policy.ttls_s)
            raise BreakpointError(
                f"a {ttl} cache point is not available for {model_id} (offered: {offered}; "
                f"{policy.source}, as of {policy.as_of}): use history_ttl/head_ttl '5m'",
                code="breakpoint-ttl", segment=f"{where}[{index}]")


def render(prompt: PromptParts, *, model_id: str, history_ttl: str, max_breakpoints: int,
           params: Mapping[str, Any], policy: CacheRules | None = None,
           short: frozenset[tuple[str, int]] = frozenset(),
           tool_choice: Mapping[str, Any] | None = None) -> bytes:
    """The Converse body as exact bytes: ``toolConfig.tools`` -> ``system`` -> ``messages``
    (role groups, the tail last), ``cachePoint`` blocks where :func:`anthropic.breakpoints`
    places breakpoints (the same rules: user-placed kept, end of head, end of stable history,
    a carry past the 20-block lookback, dropped past the budget), ``params`` canonicalized,
    keys sorted. ``model_id`` goes in the URL (see :func:`endpoint_for`), not the body.

    Raises:
        InputError: a param clash (code ``render-param-clash``).
        BreakpointError: bad ``history_ttl`` / ``max_breakpoints``, a TTL the model does not
            offer, or see :func:`anthropic.breakpoints`.
    """
    check_model(model_id)
    check_sdk_marks(history_ttl, max_breakpoints, MAX_BREAKPOINTS,
                    "Bedrock's checkpoint budget")
    check_reasoning(prompt, WIRE_FORMAT)
    marks, _ = anthropic.breakpoints(prompt, history_ttl, max_breakpoints, short=short)
    check_policy_ttls(marks, policy, model_id)
    head = prompt.head
    fields: dict[str, bytes] = {}
    tools = list(_tool_bytes(head))
    if tools or tool_choice is not None:
        with_points: list[bytes] = []
        for i, data in enumerate(tools):
            with_points.append(data)
            ttl = marks.get(("tool", i))
            if ttl:
                with_points.append(_POINTS[ttl])
        config = b'{"tools":' + joined(with_points)
        if tool_choice is not None:
            config = b'{"toolChoice":' + checked_json(dict(tool_choice)) + b',"tools":' + \
                joined(with_points)
        fields["toolConfig"] = config + b"}"
    if head.system:
        system: list[bytes] = []
        for i, text in enumerate(head.system):
            system.append(checked_json({"text": text}))
            ttl = marks.get(("system", i))
            if ttl:
                system.append(_POINTS[ttl])
        fields["system"] = joined(system)
    fields["messages"] = joined(_messages(prompt, marks))
    if "toolConfig" in params:
        raise InputError("toolConfig is set by the renderer: pass tool_choice=...",
                         code="render-param-clash")
    return b"".join(body_pieces(fields, params))


def _messages(prompt: PromptParts, marks: Mapping[tuple[str, int], str]) -> list[bytes]:
    messages, count = prompt.message_list, prompt.message_count
    def entries() -> Iterator[tuple[str, list[bytes]]]:
        for i in range(count):
            blocks = list(message_blocks(messages[i]))
            ttl = marks.get(("message", i))
            if ttl:
                blocks.append(_POINTS[ttl])
            yield ROLES[messages[i].role], blocks

    groups = role_groups(entries(), [checked_json({"text": t}) for t in prompt.tail_texts])
    return [b'{"content":' + joined(blocks) + b',"role":' + canonical_json(role) + b"}"
            for role, blocks in groups]


def _marker_ttl(item: Any) -> str | None:
    """The TTL label of a ``cachePoint`` block (``"5m"`` by default), ``None`` for any
    other value."""
    if isinstance(item, Mapping) and MARKER_KEY in item and len(item) == 1:
        point = item[MARKER_KEY]
        ttl = point.get("ttl", "5m") if isinstance(point, Mapping) else "5m"
        return str(ttl)
    return None


def segment(body: Mapping[str, Any], b: SegmentBuilder) -> None:
    """Add the segments of a Converse body: tools, system, then one per content block; a
    ``cachePoint`` block is no segment: it puts a breakpoint on the segment before it."""
    segment_head(body, b)
    for i, message in enumerate(require_list(body, HISTORY_KEY, required=True)):
        segment_item(b, message, i, False)


def segment_head(body: Mapping[str, Any], b: SegmentBuilder) -> None:
    """Add the segments before the history: ``toolConfig.toolChoice`` (a param), each
    ``toolConfig.tools[]`` entry, each ``system`` block; ``cachePoint`` blocks mark."""
    config = body.get("toolConfig")
    if config is not None and not isinstance(config, Mapping):
        raise CaptureError("toolConfig must be an object", code="capture-shape",
                           pointer="/toolConfig")
    if config is not None:
        if "toolChoice" in config:
            b.add("param", "param:toolChoice", config["toolChoice"], "/toolConfig/toolChoice",
                  "toolChoice")
        for i, entry in enumerate(require_list(config, "tools", required=False)):
            ttl = _marker_ttl(entry)
            if ttl is not None:
                b.mark_last(ttl)
                continue
            name = tool_name(entry) if isinstance(entry, dict) else None
            b.add("tool", f"toolConfig.tools[{i}]", entry, f"/toolConfig/tools/{i}",
                  name if isinstance(name, str) else tool_label(entry))
    for i, item in enumerate(require_list(body, "system", required=False)):
        ttl = _marker_ttl(item)
        if ttl is not None:
            b.mark_last(ttl)
            continue
        b.add("system", f"system[{i}]", item, f"/system/{i}")


def segment_item(b: SegmentBuilder, message: Any, i: int, leading: bool) -> bool:
    """Add the segments of ``messages[i]``: one ``{"role", "block"}`` per content block, a
    ``cachePoint`` marking the one before it (``leading`` unused: always False)."""
    if not isinstance(message, Mapping):
        raise CaptureError("message must be an object", code="capture-shape",
                           pointer=f"/messages/{i}")
    role = message.get("role")
    content = message.get("content")
    if not isinstance(content, list):
        b.add("message", f"messages[{i}]", {"role": role, "content": content},
              f"/messages/{i}", str(role))
        return False
    for j, item in enumerate(content):
        ttl = _marker_ttl(item)
        if ttl is not None:
            b.mark_last(ttl)
            continue
        b.add("message", f"messages[{i}].content[{j}]", {"role": role, "block": item},
              f"/messages/{i}/content/{j}", str(role))
    return False


def session_hint(body: Mapping[str, Any]) -> str | None:
    """``requestMetadata.session_id`` (or ``sessionId``) when the harness sets one
    (``RequestMetadata`` is a free string map used for invocation-log filtering)."""
    metadata = body.get("requestMetadata")
    if isinstance(metadata, Mapping):
        for key in ("session_id", "sessionId"):
            if isinstance(metadata.get(key), str):
                return str(metadata[key])
    return None


_INCOMPLETE = frozenset({"max_tokens", "model_context_window_exceeded"})


def _bytes_at(value: Any, where: str) -> str | None:
    """The JSON pointer of the first ``bytes`` value inside ``value``, ``None`` if none."""
    if isinstance(value, (bytes, bytearray)):
        return where
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, inner in items:
        found = _bytes_at(inner, f"{where}/{key}")
        if found is not None:
            return found
    return None


def assistant_turn(response: Mapping[str, Any]) -> AssistantTurn:
    """The assistant turn of a ``ConverseResponse``: ``output.message.content`` text blocks
    joined, ``toolUse`` blocks as tool calls in the stableprompt shape ``{"id", "name",
    "arguments"}``, ``reasoningContent`` blocks (``reasoningText: {text, signature}`` or
    ``redactedContent``, botocore ``ReasoningContentBlock``) as reasoning kept as received,
    in order in ``parts``; ``incomplete`` is a cut ``stopReason``.

    Raises:
        HistoryError: no ``output.message.content`` list, a role other than ``assistant``,
            a reasoning block holding raw bytes (boto3's ``redactedContent``), or a block of
            another kind (``image``, ``citationsContent``..., never dropped in
            silence); code ``history-response``, pointer into the answer.
    """
    output = response.get("output")
    message = output.get("message") if isinstance(output, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        raise HistoryError("a Converse response needs 'output.message.content'",
                           code="history-response", pointer="/output/message/content")
    role = message.get("role", "assistant") if isinstance(message, Mapping) else None
    if role != "assistant":
        raise HistoryError(f"a Converse answer must have role 'assistant', got {role!r}",
                           code="history-response", pointer="/output/message/role")
    parts: list[TurnPart] = []
    for i, item in enumerate(content):
        where = f"/output/message/content/{i}"
        if not isinstance(item, Mapping):
            raise HistoryError("a content block must be an object", code="history-response",
                               pointer=where)
        if "toolUse" in item:
            use = item["toolUse"]
            if not isinstance(use, Mapping):
                raise HistoryError("a toolUse must be an object", code="history-response",
                                   pointer=f"{where}/toolUse")
            call = {"id": use.get("toolUseId"), "name": use.get("name"),
                    "arguments": use.get("input", {})}
            parts.append(TurnPart("tool_call", f"{where}/toolUse", call))
        elif isinstance(item.get("reasoningContent"), Mapping):
            raw = _bytes_at(item, where)
            if raw is not None:
                raise HistoryError(
                    "this reasoning block holds raw bytes (boto3 returns a blob such as "
                    "redactedContent as bytes): its JSON form is base64, which boto3 would "
                    "encode again if sent back through it, so it cannot be kept unchanged; "
                    "add the answer's JSON (HTTP) form, or reasoning='drop' on a turn "
                    "without tool calls", code="history-response", pointer=raw)
            parts.append(TurnPart("reasoning", where, dict(item)))
        elif "text" in item:
            parts.append(TurnPart("text", where, response_text(item, where, "a text block's")))
        else:  # image, document, citationsContent...: never dropped in silence
            kinds = sorted(map(str, item)) or ["(no content)"]
            raise HistoryError(f"unsupported content block {', '.join(kinds)} in a Converse "
                               "answer: add_response keeps text, toolUse and reasoningContent",
                               code="history-response", pointer=where)
    stop = response.get("stopReason")
    return AssistantTurn.of(parts, f"stopReason {stop}" if stop in _INCOMPLETE else None)

