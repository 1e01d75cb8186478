"""Google Gemini ``generateContent`` / ``streamGenerateContent`` (wire format ``"gemini"``).

Requests: endpoint (the model is in the URL path, not the body), cache-key params, tool and
part shapes, body assembly (``systemInstruction`` -> ``tools.functionDeclarations`` ->
``contents``, the tail last), segmenting, and requests that reference an explicit cache
(``cachedContent``). Gemini has no breakpoint markers: implicit caching reads the longest
cached prefix, explicit caches are created by the client (``_wire.gemini_cache``).
Responses: usage parsing and stream accumulation.

Semantics (PROVIDERS.md §4.1; ``googleapis/python-genai`` ``types.py``
``GenerateContentResponseUsageMetadata``): ``promptTokenCount`` *includes* the cached content;
``cachedContentTokenCount`` is the cache read, for implicit and explicit caches. Gemini reports
no cache writes (explicit caches are created through the ``cachedContents`` API), so
``cache_write_tokens`` is ``None``.

Zero values: the REST API speaks proto3 JSON, which omits integer fields equal to 0; Firebase's
reference says ``cachedContentTokenCount`` "will be 0" without caching and PROVIDERS.md §4.1
says to "parse a missing value as 0". So an absent ``cachedContentTokenCount``,
``candidatesTokenCount`` or ``thoughtsTokenCount`` is read as 0 — that is how Gemini says 0 —
while ``promptTokenCount`` is required. ``output_tokens = candidatesTokenCount +
thoughtsTokenCount`` (both billed as output); ``toolUsePromptTokenCount`` stays in ``raw``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._canonical import canonical_json, checked_json
from .._exceptions import CaptureError, HistoryError, InputError, UsageParseError
from .._sse import SSEEvent
from .._usage import CacheUsage
from ._base import Clock, Sighting, SSEStreamAccumulator
from ._fields import as_mapping, inclusive_usage, opt_int, req_int
from ._parts import (
    AssistantTurn,
    HeadParts,
    MessageParts,
    PromptParts,
    ToolParts,
    TurnPart,
    body_pieces,
    check_reasoning,
    chosen,
    joined,
    memo,
    response_text,
    role_groups,
    tool_json,
)
from ._segmenter import SegmentBuilder, require_list, tool_label

__all__ = ["WIRE_FORMAT", "GeminiStreamAccumulator", "assistant_turn", "cache_operation",
           "duration", "endpoint_for", "model_from_path", "parse_response", "parse_usage", "render"]

WIRE_FORMAT = "gemini"


def parse_usage(usage: object, pointer: str = "") -> CacheUsage:
    """Normalize a Gemini ``usageMetadata`` object.

    Args:
        usage: ``{"promptTokenCount", "cachedContentTokenCount"?, "candidatesTokenCount"?,
            "thoughtsTokenCount"?, "toolUsePromptTokenCount"?, "totalTokenCount"?,
            "cacheTokensDetails"?}`` (camelCase, as on the wire).
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).

    Returns:
        CacheUsage with ``input_tokens_total = promptTokenCount``,
        ``cache_read = cachedContentTokenCount`` (absent = 0, see module docstring),
        ``cache_write = None``.

    Raises:
        UsageParseError: ``promptTokenCount`` missing, or a count negative / not an integer.
    """
    obj = as_mapping(usage, pointer, "Gemini usageMetadata")
    total = req_int(obj, "promptTokenCount", pointer)
    read = opt_int(obj, "cachedContentTokenCount", pointer) or 0
    candidates = opt_int(obj, "candidatesTokenCount", pointer) or 0
    thoughts = opt_int(obj, "thoughtsTokenCount", pointer) or 0
    return inclusive_usage(
        WIRE_FORMAT, obj, total=total, read=read, write=None, output=candidates + thoughts
    )


def parse_response(body: object) -> CacheUsage:
    """Normalize the usage of a Gemini response body (``body["usageMetadata"]``).

    Args:
        body: A ``GenerateContentResponse`` object, or the JSON array that
            ``streamGenerateContent`` returns without ``alt=sse`` (the last element carrying
            ``usageMetadata`` is used).

    Raises:
        UsageParseError: ``usage-missing`` at ``/usageMetadata`` (or ``/0/usageMetadata``)
            when there is none, else as :func:`parse_usage` with pointers into the body.
    """
    if isinstance(body, Sequence) and not isinstance(body, (str, bytes, bytearray)):
        for index in range(len(body) - 1, -1, -1):
            item = as_mapping(body[index], f"/{index}", "Gemini response chunk")
            if item.get("usageMetadata") is not None:
                return parse_usage(item["usageMetadata"], f"/{index}/usageMetadata")
        raise UsageParseError(
            "no chunk carries usageMetadata", code="usage-missing", pointer="/0/usageMetadata"
        )
    obj = as_mapping(body, "", "Gemini response body")
    if obj.get("usageMetadata") is None:
        raise UsageParseError(
            "response body has no usageMetadata", code="usage-missing", pointer="/usageMetadata"
        )
    return parse_usage(obj["usageMetadata"], "/usageMetadata")


def _has_content(candidate: Mapping[str, Any]) -> bool:
    content = candidate.get("content")
    if not isinstance(content, Mapping):
        return False
    parts = content.get("parts")
    if not isinstance(parts, list):
        return False
    for part in parts:
        if isinstance(part, Mapping) and (
            part.get("text") or part.get("functionCall") or part.get("inlineData")
        ):
            return True
    return False


class GeminiStreamAccumulator(SSEStreamAccumulator):
    """Accumulate usage from ``streamGenerateContent?alt=sse`` (``data:`` lines, each a
    ``GenerateContentResponse``).

    Rule (PROVIDERS.md §4.1): take the last chunk that carries ``usageMetadata``. Whether
    intermediate chunks repeat the prompt counts is UNVERIFIED, so if the stream ends before a
    candidate's ``finishReason`` (or a ``promptFeedback.blockReason``) the input side is kept
    and ``output_tokens`` is unknown. ``response_id`` is ``responseId``; ``model`` is
    ``modelVersion``. Content-bearing chunks (TTFT): a part with text (thoughts included),
    a ``functionCall`` or inline data.
    """

    wire_format = WIRE_FORMAT

    def __init__(self, *, clock: Clock | None = None, start: float | None = None) -> None:
        super().__init__(clock=clock, start=start)
        self._usage: Sighting | None = None
        self._finished_seen = False

    def _event(self, event: SSEEvent) -> None:
        obj = self._decode_object(event.data, event.offset)
        if obj is None:
            return
        self._identify(obj, "responseId", "modelVersion", keep_first=True)
        candidates = obj.get("candidates")
        if isinstance(candidates, list):
            self._finished_seen |= self._scan_choices(candidates, _has_content, "finishReason")
        feedback = obj.get("promptFeedback")
        if isinstance(feedback, Mapping) and feedback.get("blockReason"):
            self._finished_seen = True
        error = obj.get("error")
        if isinstance(error, Mapping):
            self.error = str(error.get("status") or error.get("message"))
        if obj.get("usageMetadata") is not None:
            self._usage = Sighting(
                obj["usageMetadata"], event.offset, "/usageMetadata", self._finished_seen
            )

    def _finish(self) -> CacheUsage:
        if self._usage is None:
            return self._unknown("stream ended without a chunk carrying usageMetadata")
        usage = self._parse_at(parse_usage, self._usage)
        if not self._usage.final:
            return self._partial(usage, "stream ended before finishReason: output_tokens unknown")
        return usage


# -- requests: endpoint, cache key, shapes, body assembly, segmenting -------------------------

ENDPOINT = "/v1beta/models/{model}:generateContent"
"""URL path template of ``generateContent`` (the model id is a path parameter: the body has
no ``model``; ``googleapis/python-genai`` ``models.py`` builds ``{model}:generateContent``)."""
STREAM_ENDPOINT = "/v1beta/models/{model}:streamGenerateContent"
"""URL path template of ``streamGenerateContent`` (sent with ``?alt=sse``)."""

#: Request parameters that are part of the cache key, ``model`` (from the URL) first: the
#: explicit cache a request reads (``cachedContent``: the cache name is the key) and the tool
#: configuration (function-calling mode and allowed names are rendered before the contents).
CACHE_KEY_PARAMS = ("model", "cachedContent", "toolConfig")

HISTORY_KEY = "contents"
"""The body key holding the conversation history."""

CONTENT_KEYS = ("systemInstruction", "contents")
"""Top-level body keys besides the cache-key params and ``tools`` that this format reads."""

MARKER_KEY = "\x00gemini-has-no-breakpoint-marker"
"""Gemini has no cache breakpoint marker (the segmenter strips nothing)."""

ROLES = {"user": "user", "tool": "user", "assistant": "model"}
"""Canonical role -> Gemini ``Content.role`` (function responses are sent as ``user``)."""


def endpoint_for(model: str, *, stream: bool = False) -> str:
    """The URL path of a (streaming) ``generateContent`` call to ``model``; a model id
    already prefixed ``models/`` (as the SDK accepts it) is not prefixed twice."""
    name = model[len("models/"):] if model.startswith("models/") else model
    if stream:
        return STREAM_ENDPOINT.format(model=name) + "?alt=sse"
    return ENDPOINT.format(model=name)


def model_from_path(path: str) -> str | None:
    """The model id of a ``.../models/{model}:generateContent`` (or stream) URL path (query
    ignored), ``None`` for any other path or a path that is still the template."""
    path = path.split("?", 1)[0]
    marker = "/models/"
    at = path.rfind(marker)
    colon = path.rfind(":")
    if at < 0 or colon < at:
        return None
    if path[colon + 1:].rstrip("/") not in _GENERATE_METHODS:
        return None  # countTokens, embedContent, batchGenerateContent...: no prompt request
    name = path[at + len(marker):colon]
    return name if name and "{" not in name and "/" not in name else None


_GENERATE_METHODS = frozenset({"generateContent", "streamGenerateContent"})
"""The methods after ``models/{model}:`` that are prompt requests."""


def cache_operation(method: str, path: str) -> str | None:
    """What a call does to an explicit cache: ``"create"`` (``POST .../cachedContents``),
    ``"update"`` (``PATCH .../cachedContents/{id}``: a new ``ttl`` / ``expireTime``) or
    ``"delete"`` (``DELETE .../cachedContents/{id}``); ``None`` for any other call (a ``GET``
    changes nothing billed). The path may carry a version and a proxy prefix; the query is
    ignored.

    Source: the ``cachedContents`` REST resource (ai.google.dev/api/caching), as
    ``google.genai`` ``caches.create`` / ``update`` / ``delete`` call it.
    """
    path = path.split("?", 1)[0].rstrip("/")
    head, _, last = path.rpartition("/")
    verb = method.upper()
    if last == "cachedContents":
        return "create" if verb == "POST" else None
    if head.endswith("/cachedContents") and last and "{" not in last:
        return {"PATCH": "update", "DELETE": "delete"}.get(verb)
    return None


def tool(t: ToolParts) -> dict[str, Any]:
    """A ``functionDeclarations[]`` entry: ``{"name", "description"?,
    "parametersJsonSchema"}``. The canonical JSON Schema is sent as
    ``parametersJsonSchema`` (``google.genai.types.FunctionDeclaration
    .parameters_json_schema``), never converted to the OpenAPI-subset ``parameters``: a
    conversion would change what the request means."""
    shaped: dict[str, Any] = {"name": t.name}
    if t.description is not None:
        shaped["description"] = t.description
    shaped["parametersJsonSchema"] = t.input_schema
    return shaped


def tool_name(entry: dict[str, Any]) -> Any:
    """A sent function declaration's name (any value: the caller checks it is a str)."""
    return entry.get("name")


def tool_schema(entry: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Where a function declaration keeps its schema: ``parametersJsonSchema`` or
    ``parameters``, ``None`` when it has none."""
    for key in ("parametersJsonSchema", "parameters"):
        if isinstance(entry.get(key), dict):
            return entry, key
    return None


def part(canonical: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """The ``Part`` for one canonical block: ``{"text"}``, ``{"functionCall": {"id", "name",
    "args"}}`` or ``{"functionResponse": {"id", "name", "response": {"output" | "error"}}}``
    (Gemini names the function of a response; ``names`` maps call ids to names: the id alone
    does not). A kept Gemini reasoning part is replayed as received; a block's Gemini
    ``signature`` goes back on its part as ``thoughtSignature``, unchanged.

    Source: ``google.genai.types`` ``Part`` / ``FunctionCall`` / ``FunctionResponse`` ("Use
    'output' key to specify function output and 'error' key to specify error details").

    Raises:
        HistoryError: reasoning of another format, or a tool result whose call is not in the
            history (code ``history-tool-result``).
    """
    kind = canonical["type"]
    if kind == "text":
        return _signed({"text": canonical["text"]}, canonical)
    if kind == "reasoning":
        if canonical["format"] != WIRE_FORMAT:
            raise HistoryError(f"{canonical['format']} reasoning content cannot be sent to "
                               "Gemini", code="history-reasoning-format")
        return dict(canonical["item"])
    if kind == "tool_call":
        return _signed({"functionCall": {"args": canonical["arguments"], "id": canonical["id"],
                                         "name": canonical["name"]}}, canonical)
    call_id = canonical["tool_call_id"]
    name = names.get(call_id)
    if name is None:
        raise HistoryError(f"tool result {call_id!r} answers no tool call in the history: "
                           "Gemini's functionResponse needs the function's name",
                           code="history-tool-result")
    key = "error" if canonical.get("is_error") else "output"
    return {"functionResponse": {"id": call_id, "name": name,
                                 "response": {key: canonical["content"]}}}


def _signed(part: dict[str, Any], canonical: Mapping[str, Any]) -> dict[str, Any]:
    """``part`` with the block's Gemini ``thoughtSignature`` back on it, as received (a
    signature of another format is not Gemini's to read)."""
    signature = canonical.get("signature")
    if isinstance(signature, Mapping) and signature.get("format") == WIRE_FORMAT:
        part["thoughtSignature"] = signature["value"]
    return part


def _call_names(messages: Sequence[MessageParts], count: int) -> dict[str, str]:
    names: dict[str, str] = {}
    for i in range(count):
        for block in messages[i].wire_blocks:
            if block.get("type") == "tool_call":
                names[block["id"]] = block["name"]
    return names


def _message_parts(message: MessageParts, names: Mapping[str, str]) -> tuple[bytes, ...]:
    """A message's parts as canonical bytes, serialized once per message."""
    cache = message.wire_memo
    found: tuple[bytes, ...] | None = cache.get(WIRE_FORMAT)
    if found is None:
        found = cache[WIRE_FORMAT] = tuple(
            [checked_json(part(b, names)) for b in message.wire_blocks])
    return found


def contents(prompt: Any, start: int = 0) -> list[bytes]:
    """The ``contents`` entries of history messages ``[start, count)`` plus the tail (text
    parts at the end of the last user content, or one user content of its own), as canonical
    bytes. Consecutive messages of one Gemini role are one ``Content`` (function responses
    answer the calls of the model turn before them together)."""
    messages, count = prompt.message_list, prompt.message_count
    names = _call_names(messages, count)
    groups = role_groups(
        ((ROLES[messages[i].role], list(_message_parts(messages[i], names)))
         for i in range(start, count)),
        [checked_json({"text": t}) for t in prompt.tail_texts])
    return [b'{"parts":' + joined(parts) + b',"role":' + canonical_json(role) + b"}"
            for role, parts in groups]


def head_fields(head: HeadParts) -> dict[str, bytes]:
    """The head's body fields, each left out when empty: ``systemInstruction``
    (``{"parts": [{"text"}, ...]}``, one part per system block) and ``tools`` (one ``Tool``
    holding every function declaration in canonical order). A request and a
    ``cachedContents`` create body send the same bytes for them."""
    fields: dict[str, bytes] = {}
    if head.system:
        fields["systemInstruction"] = b'{"parts":' + joined(
            [checked_json({"text": t}) for t in head.system]) + b"}"
    if len(head.tools):
        fields["tools"] = memo(head, WIRE_FORMAT + "-tools", lambda: b'[{"functionDeclarations":'
                               + joined([tool_json(tool, t) for t in head.tools]) + b"}]")
    return fields


_RESERVED = frozenset({"tools", "cachedContent", *CONTENT_KEYS})


def render(prompt: PromptParts, *, params: Mapping[str, Any], cached_content: str | None = None,
           cached_messages: int = 0) -> bytes:
    """The ``generateContent`` body as exact bytes: ``systemInstruction``, ``tools`` and
    ``contents`` (history, tail last), ``params`` canonicalized, keys sorted.

    With ``cached_content`` (a ``cachedContents/...`` name) the body references that explicit
    cache instead: no ``systemInstruction``, ``tools`` or ``toolConfig`` (they are in the
    cache: "Requests using a cache must not send systemInstruction/tools/toolConfig",
    PROVIDERS.md §15) and only the history after the ``cached_messages`` it holds.

    Raises:
        InputError: a param names a field the renderer sets (``cachedContent`` included: code
            ``render-param-clash``), or ``toolConfig`` with a cache (code ``render-param``).
        HistoryError: the cache holds every message and there is no tail: ``contents``
            would be empty, which google-genai itself refuses ("contents are required.",
            ``_transformers.t_contents``, 2.34.0) (code ``history-empty``).
    """
    check_reasoning(prompt, WIRE_FORMAT)
    if "cachedContent" in params:
        raise InputError("cachedContent is set by the renderer: pass cache=GeminiCache(...) "
                         "(the body then leaves out systemInstruction / tools, as the API "
                         "requires)", code="render-param-clash", pointer="/cachedContent")
    fields: dict[str, bytes] = {}
    if cached_content is not None:
        if cached_messages >= prompt.message_count and not prompt.tail_texts:
            raise HistoryError(f"the cache {cached_content} holds the whole history and there "
                               "is no tail: a request needs contents after it (add the next "
                               "user turn first)", code="history-empty", pointer="/contents")
        if "toolConfig" in params:
            raise InputError("toolConfig cannot be sent with cachedContent: it belongs in the "
                             "cache (GeminiCache(tool_config=...))", code="render-param",
                             pointer="/toolConfig")
        fields["cachedContent"] = canonical_json(cached_content)
    else:
        fields.update(head_fields(prompt.head))
    fields["contents"] = joined(contents(prompt, cached_messages))
    return b"".join(body_pieces(fields, params))


def segment(body: Mapping[str, Any], b: SegmentBuilder) -> None:
    """Add the segments of a ``generateContent`` body: function declarations (and other
    tools), system parts, then one per content part."""
    segment_head(body, b)
    for i, content in enumerate(require_list(body, HISTORY_KEY, required=True)):
        segment_item(b, content, i, False)


def segment_head(body: Mapping[str, Any], b: SegmentBuilder) -> None:
    """Add the segments before the history: each function declaration (a tool without
    declarations, e.g. ``googleSearch``, is one segment), then each system part."""
    for i, entry in enumerate(require_list(body, "tools", required=False)):
        declarations = entry.get("functionDeclarations") if isinstance(entry, Mapping) else None
        if isinstance(declarations, list):
            for j, declaration in enumerate(declarations):
                b.add("tool", f"tools[{i}].functionDeclarations[{j}]", declaration,
                      f"/tools/{i}/functionDeclarations/{j}", tool_label(declaration))
        else:
            b.add("tool", f"tools[{i}]", entry, f"/tools/{i}", tool_label(entry))
    system = body.get("systemInstruction")
    if isinstance(system, Mapping) and isinstance(system.get("parts"), list):
        for i, item in enumerate(system["parts"]):
            b.add("system", f"systemInstruction.parts[{i}]", item,
                  f"/systemInstruction/parts/{i}")
    elif system is not None:
        b.add("system", "systemInstruction", system, "/systemInstruction")


def segment_item(b: SegmentBuilder, content: Any, i: int, leading: bool) -> bool:
    """Add the segments of ``contents[i]``: one ``{"role", "block"}`` per part (``leading``
    unused: always False)."""
    if not isinstance(content, Mapping):
        raise CaptureError("a content must be an object", code="capture-shape",
                           pointer=f"/contents/{i}")
    role = content.get("role")
    parts = content.get("parts")
    if not isinstance(parts, list):
        b.add("message", f"contents[{i}]", {"role": role, "parts": parts}, f"/contents/{i}",
              str(role))
        return False
    for j, item in enumerate(parts):
        b.add("message", f"contents[{i}].parts[{j}]", {"role": role, "block": item},
              f"/contents/{i}/parts/{j}", str(role))
    return False


def session_hint(body: Mapping[str, Any]) -> str | None:
    """Gemini bodies carry no session id (``labels`` are Vertex-only): ``None``."""
    return None


_INCOMPLETE = frozenset({"MAX_TOKENS"})
_SIGNATURE_ONLY = frozenset({"thoughtSignature", "partMetadata"})
"""Keys of a part that carries no content of its own (``google.genai.types.Part``)."""


def assistant_turn(response: Mapping[str, Any], *, choice: int | None = None) -> AssistantTurn:
    """The assistant turn of a ``GenerateContentResponse`` (candidate ``choice``; ``None``
    requires exactly one, as ``candidateCount`` > 1 answers several): text parts
    joined, ``functionCall`` parts as tool calls in the stableprompt shape ``{"id", "name",
    "arguments"}`` (a call without an ``id`` gets ``<responseId>-<i>``: Gemini 2.x sends
    none; ``add_response`` suffixes ``.<n>`` when that id is already used in the
    conversation), thought parts (``"thought": true``) as reasoning kept as received, in
    order in ``parts``; a part's ``thoughtSignature`` rides on its piece
    (``TurnPart.signature``), as received; ``incomplete`` is a ``MAX_TOKENS`` finish.

    Source: thought signatures "must be returned unchanged" on the ``functionCall`` part of a
    function-calling turn, else 400 "Function call is missing a thought_signature in
    functionCall parts" (Gemini 3 and later; https://ai.google.dev/gemini-api/docs/thought-signatures,
    read through https://docs.apiyi.com/en/faq/gemini-thought-signature-missing, 2026-10-15);
    the SDK's ``Part.thought_signature`` (``google.genai.types``).

    Raises:
        HistoryError: several candidates and no ``choice`` (code ``history-choices``), no
            candidate ``choice`` with ``content.parts``, a content role other than
            ``model``, a signature that is not a string, or a part of another kind
            (``inlineData``, ``executableCode``, ``fileData``..., or no content at all: never
            dropped in silence); code ``history-response``, pointer into the answer.
    """
    candidates = response.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        raise HistoryError("a Gemini response needs a 'candidates' list",
                           code="history-response", pointer="/candidates")
    candidate = chosen(candidates, choice, member="candidates", many=(
        f"the Gemini answer has {len(candidates)} candidates (candidateCount > 1)"))
    choice = choice or 0
    base = f"/candidates/{choice}"
    if not isinstance(candidate, Mapping):
        raise HistoryError(f"the Gemini answer has no candidate {choice}",
                           code="history-response", pointer=base)
    content = candidate.get("content")
    items = content.get("parts") if isinstance(content, Mapping) else None
    if not isinstance(items, list):
        raise HistoryError("a Gemini candidate needs 'content.parts'",
                           code="history-response", pointer=f"{base}/content/parts")
    role = content.get("role", "model") if isinstance(content, Mapping) else None
    if role != "model":
        raise HistoryError(f"a Gemini answer's content must have role 'model', got {role!r}",
                           code="history-response", pointer=f"{base}/content/role")
    parts: list[TurnPart] = []
    for i, item in enumerate(items):
        where = f"{base}/content/parts/{i}"
        if not isinstance(item, Mapping):
            raise HistoryError("a part must be an object", code="history-response",
                               pointer=where)
        signature = item.get("thoughtSignature")
        if signature is not None and not isinstance(signature, str):
            raise HistoryError("a thoughtSignature must be a (base64) string",
                               code="history-response", pointer=f"{where}/thoughtSignature")
        if "functionCall" in item:
            fc = item["functionCall"]
            if not isinstance(fc, Mapping):
                raise HistoryError("a functionCall must be an object", code="history-response",
                                   pointer=f"{where}/functionCall")
            call = {"id": fc.get("id") or f"{response.get('responseId', 'gemini')}-{i}",
                    "name": fc.get("name"), "arguments": fc.get("args", {})}
            parts.append(TurnPart("tool_call", f"{where}/functionCall", call, signature))
        elif item.get("thought") is True:
            parts.append(TurnPart("reasoning", where, dict(item)))
        elif "text" in item:
            parts.append(TurnPart("text", where, response_text(item, where, "a text part's"),
                                  signature))
        elif signature is not None and set(item) <= _SIGNATURE_ONLY:
            # a signature alone (an empty part): kept as received
            parts.append(TurnPart("reasoning", where, dict(item)))
        else:  # inlineData, executableCode, fileData...: never dropped in silence
            kinds = sorted(set(item) - _SIGNATURE_ONLY) or ["(no content)"]
            raise HistoryError(f"unsupported part {', '.join(kinds)} in a Gemini answer: "
                               "add_response keeps text, functionCall and thought parts",
                               code="history-response", pointer=where)
    finish = candidate.get("finishReason")
    return AssistantTurn.of(parts, f"finishReason {finish}" if finish in _INCOMPLETE else None)


def cache_body(prompt: PromptParts, *, model: str, ttl_s: float | None,
               messages: int = 0, tool_config: Mapping[str, Any] | None = None) -> bytes:
    """The ``cachedContents`` create body for ``prompt``'s head and its first ``messages``
    history messages: ``{"model": "models/<m>", "systemInstruction"?, "tools"?,
    "toolConfig"?, "contents"?, "ttl"?}`` (``ttl`` as a protobuf Duration, ``"300s"``), the
    same bytes a request would send for them (``google.genai.types.CreateCachedContentConfig``).

    Raises:
        InputError: ``ttl_s`` is not a valid duration (:func:`duration`).
    """
    name = model if model.startswith("models/") else f"models/{model}"
    fields = {"model": canonical_json(name), **head_fields(prompt.head)}
    if tool_config is not None:
        fields["toolConfig"] = checked_json(dict(tool_config))
    if messages:
        lead = _Leading(prompt, messages)
        fields["contents"] = joined(contents(lead))
    if ttl_s is not None:
        fields["ttl"] = canonical_json(duration(ttl_s))
    return b"".join(body_pieces(fields, {}))


MAX_DURATION_S = 315_576_000_000
"""The largest ``google.protobuf.Duration`` (about 10,000 years, ``duration.proto``)."""


def duration(seconds: float) -> str:
    """``seconds`` as a protobuf Duration in its JSON form: decimal seconds, at most 9
    fractional digits, suffix ``s`` (``"300s"``, ``"1234.56789s"``, never ``"2e+06s"``,
    which the API's JSON parser refuses: decimal seconds, protobuf ``json_format``).

    Raises:
        InputError: not a finite number of seconds in ``(0, MAX_DURATION_S]`` (code
            ``gemini-cache-ttl``, pointer ``/ttl``).
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not 0 < seconds <= MAX_DURATION_S:  # NaN fails the comparison
        raise InputError(f"a cache TTL must be a number of seconds in (0, {MAX_DURATION_S}], "
                         f"got {seconds!r}", code="gemini-cache-ttl", pointer="/ttl")
    text = f"{seconds:.9f}".rstrip("0").rstrip(".")
    return f"{text}s"


class _Leading:
    """``prompt`` cut to its first ``count`` messages, without a tail (what a cache holds)."""

    def __init__(self, prompt: PromptParts, count: int) -> None:
        self.head = prompt.head
        self.message_list = prompt.message_list
        self.message_count = min(count, prompt.message_count)
        self.tail_texts: tuple[str, ...] = ()
