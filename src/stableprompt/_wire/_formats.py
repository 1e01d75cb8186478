"""The request-format registry: which format a path or body is, and per-format dispatch.

One place answers "which wire format is this call": :func:`endpoint` from the URL path alone
(so a transport decides before reading a body), :func:`detect` from path and body (captures,
bodies without a path). Each request format's own facts (endpoint, cache-key params, marker
key, segmenter, session hint) live in its module; this module only dispatches.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from .._exceptions import CaptureError, ConfigurationError, HistoryError
from .._policy import provider_of_wire_format
from .._public import public
from .._redact import redact
from . import _openai, anthropic, bedrock_converse, gemini, openai_chat, openai_responses
from ._parts import AssistantTurn, a_or_an
from ._registry import WIRE_FORMATS
from ._segmenter import SegmentBuilder, SegmentedRequest

__all__ = [
    "BODY_KEYS",
    "CACHE_KEY_PARAMS",
    "DIAGNOSTIC_EVENTS",
    "HISTORY_KEYS",
    "REQUEST_FORMATS",
    "WIRE_FORMATS_WITH_REQUESTS",
    "SegmentSteps",
    "UsageDialects",
    "assistant_turn",
    "chosen_dialect",
    "detect",
    "diagnostics_request",
    "endpoint",
    "endpoint_path",
    "known_provider",
    "model_from_path",
    "provider_for",
    "reply_text",
    "request_format",
    "response_format",
    "segment_request",
    "segment_steps",
    "session_hint",
    "usage_dialects",
    "usage_format",
    "with_path_model",
]


class RequestFormat(Protocol):
    """What a request format module declares (``_wire.anthropic``, ``openai_chat``, ...)."""

    WIRE_FORMAT: str
    ENDPOINT: str
    CACHE_KEY_PARAMS: tuple[str, ...]

    def segment(self, body: Mapping[str, Any], b: SegmentBuilder) -> None: ...

    def segment_head(self, body: Mapping[str, Any], b: SegmentBuilder) -> None: ...

    def segment_item(self, b: SegmentBuilder, item: Any, index: int, leading: bool) -> bool: ...

    def assistant_turn(self, response: Mapping[str, Any]) -> AssistantTurn: ...


_MODULES: dict[str, Any] = {
    m.WIRE_FORMAT: m for m in (anthropic, openai_chat, openai_responses, gemini,
                               bedrock_converse)
}
_MARKERS = {
    anthropic.WIRE_FORMAT: anthropic.MARKER_KEY,
    gemini.WIRE_FORMAT: gemini.MARKER_KEY,
    bedrock_converse.WIRE_FORMAT: bedrock_converse.MARKER_KEY,
    openai_chat.WIRE_FORMAT: _openai.MARKER_KEY,
    openai_responses.WIRE_FORMAT: _openai.MARKER_KEY,
}

WIRE_FORMATS_WITH_REQUESTS: tuple[str, ...] = tuple(_MODULES)
"""The request formats stableprompt renders, segments and records."""
REQUEST_FORMATS = frozenset(WIRE_FORMATS_WITH_REQUESTS)
"""The same, as a set."""
#: Request parameters that are part of each format's cache key, ``model`` first.
CACHE_KEY_PARAMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name: m.CACHE_KEY_PARAMS for name, m in _MODULES.items()})
#: Every top-level body key each format reads: cache-key params, ``tools`` and content.
BODY_KEYS: Mapping[str, frozenset[str]] = MappingProxyType(
    {name: frozenset({*m.CACHE_KEY_PARAMS, "tools", *m.CONTENT_KEYS})
     for name, m in _MODULES.items()})
#: The body key holding each format's history (``messages``, Responses ``input``).
HISTORY_KEYS: Mapping[str, str] = MappingProxyType(
    {name: m.HISTORY_KEY for name, m in _MODULES.items()})

DIAGNOSTIC_EVENTS = anthropic.DIAGNOSTIC_EVENTS | openai_responses.DIAGNOSTIC_EVENTS
"""Stream event names that may carry a provider's cache diagnostics, any format."""

#: Endpoint suffix -> format, longest-ambiguity first.
_SUFFIXES = (
    ("/chat/completions", openai_chat.WIRE_FORMAT),
    ("/responses", openai_responses.WIRE_FORMAT),
    ("/messages", anthropic.WIRE_FORMAT),
)
_HOSTS = {
    "generativelanguage.googleapis.com": "gemini",
    "api.anthropic.com": "anthropic",
    "api.openai.com": "openai",
    "api.deepseek.com": "deepseek",
    "openrouter.ai": "openrouter",
    "api.x.ai": "xai",
}
_COMPATIBLE = {"vllm", "sglang", "openrouter", "xai"}
_PATH_MODELS = {gemini.WIRE_FORMAT: gemini.model_from_path,
                bedrock_converse.WIRE_FORMAT: bedrock_converse.model_from_path}
"""Formats whose model id is a URL path parameter, not a body field."""
BREAKPOINT_FORMATS = frozenset({anthropic.WIRE_FORMAT, bedrock_converse.WIRE_FORMAT})
"""Formats that cache only at explicit breakpoints (a body without one caches nothing)."""


def _module(wire_format: str) -> RequestFormat:
    try:
        module: RequestFormat = _MODULES[wire_format]
    except (KeyError, TypeError):
        # never the value itself when it is no name: a body passed first holds the prompt
        # (and whatever keys it carries)
        given = (redact(repr(wire_format[:40])) if isinstance(wire_format, str)
                 else f"a {type(wire_format).__name__} (the wire format comes first)")
        raise CaptureError(
            f"unknown wire format {given}; expected one of "
            f"{', '.join(WIRE_FORMATS_WITH_REQUESTS)}", code="capture-format") from None
    return module


def endpoint_path(wire_format: str) -> str:
    """The URL path a request of ``wire_format`` is POSTed to (``/v1/messages``, ...)."""
    return _module(wire_format).ENDPOINT


def endpoint(path: str) -> str | None:
    """The request format a URL path names, or ``None`` for any other endpoint.

    A path ending in ``/chat/completions``, ``/responses`` or ``/messages`` names that format,
    also behind a proxy prefix (``/proxy/messages``); ``.../messages`` is Anthropic only
    directly after ``/v1`` or without any ``/v1`` before it: ``/v1/threads/{id}/messages``
    (OpenAI Assistants) and ``/v1/chat/completions/{id}/messages`` are not.
    """
    path = path.split("?", 1)[0].rstrip("/")
    if gemini.model_from_path(path) is not None or path.endswith(
            (":generateContent", ":streamGenerateContent")):
        return gemini.WIRE_FORMAT
    if path.endswith(("/converse", "/converse-stream")) and "/model/" in path:
        return bedrock_converse.WIRE_FORMAT
    for suffix, wire in _SUFFIXES:
        if path.endswith(suffix):
            prefix = path[: -len(suffix)]
            if wire == anthropic.WIRE_FORMAT and "/v1" in prefix and not prefix.endswith("/v1"):
                return None
            return wire
    return None


def detect(body: Mapping[str, Any], path: str | None = None, *,
           plain: PlainMessages | None = None) -> str | None:
    """The wire format of a request, from its URL path and/or body.

    A path decides when it names an endpoint (:func:`endpoint`); any other API path (one with
    a ``/v1`` segment: Assistants, files, batches) returns ``None``: not a prompt request.
    Without a deciding path the body's shape decides.

    Returns ``anthropic``, ``openai-chat``, ``openai-responses``, ``gemini``,
    ``bedrock-converse`` or ``None`` when unsure. A Converse body (``toolConfig``,
    ``inferenceConfig``, or content blocks that are one-key unions without ``type``:
    ``{"text"}``, ``{"toolUse"}``, ``{"cachePoint"}``) is never taken for Anthropic.

    ``plain``: message lists known to hold no such block (lint's, whose bodies never change
    once decoded): a body repeating the first messages of one is read from the next on.
    """
    if path is not None:
        named = endpoint(path)
        if named is not None:
            return named
        if "/v1/" in path or path.startswith("/v1"):
            return None
    if "contents" in body or "systemInstruction" in body or "cachedContent" in body:
        return gemini.WIRE_FORMAT
    if _is_converse(body, plain):
        return bedrock_converse.WIRE_FORMAT
    if "input" in body or "instructions" in body:
        return openai_responses.WIRE_FORMAT
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    if "system" in body or "anthropic_version" in body:
        return anthropic.WIRE_FORMAT
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        if message.get("role") in ("system", "developer", "tool") or "tool_calls" in message:
            return openai_chat.WIRE_FORMAT
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping):
                    kind = block.get("type")
                    if kind in ("tool_use", "tool_result", "thinking", "image", "document"):
                        return anthropic.WIRE_FORMAT
                    if kind in ("image_url", "input_audio"):
                        return openai_chat.WIRE_FORMAT
    tools = body.get("tools")
    if isinstance(tools, list) and tools and isinstance(tools[0], Mapping):
        return anthropic.WIRE_FORMAT if "input_schema" in tools[0] else openai_chat.WIRE_FORMAT
    if "max_tokens" in body and "stream_options" not in body:
        return anthropic.WIRE_FORMAT
    return openai_chat.WIRE_FORMAT


_CONVERSE_BLOCKS = frozenset({"text", "toolUse", "toolResult", "cachePoint", "image",
                              "document", "reasoningContent", "guardContent"})


def _is_converse(body: Mapping[str, Any], plain: PlainMessages | None = None) -> bool:
    """A Converse body: Converse-only top-level keys, or ``system`` / message content blocks
    that are one-key unions (no ``type``), as ``ContentBlock`` is.

    Lint detects the format of every request of a capture, so this reads every block of a
    body in C when it can: plain ``dict`` messages and blocks that all have a ``type`` (every
    Anthropic body) answer ``False`` after three passes of ``map`` over them; any other body
    is read block by block (the same answer: ``tests/test_formats_detect.py``). With
    ``plain``, the messages a known list holds are not read again, and a list answered
    ``False`` for is kept there."""
    if any(key in body for key in ("toolConfig", "inferenceConfig",
                                   "additionalModelRequestFields", "guardrailConfig")):
        return True
    blocks: list[Any] = []
    system = body.get("system")
    if isinstance(system, list):
        blocks.extend(system)
    messages = body.get("messages")
    if isinstance(messages, list):
        unread: list[Any] = messages
        known = 0 if plain is None else plain.known(messages)
        if known:
            unread = messages[known:]
        contents: Iterable[Any]
        if _all_of_type(unread, dict):
            contents = map(dict.get, unread, _CONTENT)
        else:  # dict first: Mapping's ABC check costs ~0.6 us a call
            contents = (message.get("content") for message in unread
                        if isinstance(message, (dict, Mapping)))
        blocks.extend(itertools.chain.from_iterable(
            [content for content in contents if isinstance(content, list)]))
    if not (_all_of_type(blocks, dict) and all(map(dict.__contains__, blocks, _TYPE))):
        for item in blocks:
            if (type(item) is dict and "type" in item) or not isinstance(item, Mapping):
                continue  # a block with a type (every Anthropic block), or not an object
            if "type" not in item and item.keys() & _CONVERSE_BLOCKS:
                return True
    # else every block a plain object with a type
    if plain is not None and isinstance(messages, list) and messages:
        plain.add(messages)
    return False


class PlainMessages:
    """Message lists :func:`_is_converse` read no Converse block in, by the id of their
    first message (the latest :data:`_PLAIN` kept, each with its list, so the id stays its
    own): :meth:`known` tells how many leading messages of another list are those (the same
    objects). For lint, whose bodies never change once decoded: a request
    re-sending its conversation has its new messages read, not its history."""

    __slots__ = ("_lists",)

    def __init__(self) -> None:
        self._lists: dict[int, list[Any]] = {}

    def known(self, messages: list[Any]) -> int:
        """How many leading ``messages`` are the same objects as a kept list's."""
        if not messages:
            return 0
        old = self._lists.get(id(messages[0]))
        if old is None or old[0] is not messages[0]:
            return 0
        n = min(len(old), len(messages))
        if all(map(operator.is_, messages[:n], old[:n])):  # in C, to the first other one
            return n
        lo, hi = 1, n - 1  # messages[:lo] are (the first is the same object)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if all(map(operator.is_, messages[lo:mid], old[lo:mid])):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def add(self, messages: list[Any]) -> None:
        """Keep ``messages`` (a list read whole: no Converse block in it)."""
        lists = self._lists
        lists.pop(id(messages[0]), None)
        lists[id(messages[0])] = messages
        if len(lists) > _PLAIN:
            del lists[next(iter(lists))]


_PLAIN = 64
"""Message lists :class:`PlainMessages` keeps (one per recent conversation)."""


_CONTENT, _TYPE = itertools.repeat("content"), itertools.repeat("type")
"""Endless ``"content"`` / ``"type"``: the key argument of ``map(dict.get, ...)``."""


def _all_of_type(values: list[Any], kind: type) -> bool:
    """Whether every one of ``values`` is exactly of type ``kind`` (no subclass: its methods
    may differ from the ones ``map`` calls); ``True`` for none."""
    return set(map(type, values)) <= {kind}


def model_from_path(wire_format: str, path: str | None) -> str | None:
    """The model id in a request's URL path, for formats that keep it there (Gemini
    ``/models/<m>:generateContent``, Converse ``/model/<id>/converse``); else ``None``."""
    read = _PATH_MODELS.get(wire_format)
    return None if read is None or not path else read(path)


def with_path_model(wire_format: str, body: Mapping[str, Any],
                    path: str | None) -> Mapping[str, Any]:
    """``body`` with ``"model"`` first, taken from the URL path, for a format whose model
    is a path parameter (so the segments name it: caches are model-scoped); ``body`` itself
    when it already has one, the format keeps it in the body, or the path names none. What
    is sent is never changed: only what is segmented."""
    if "model" in body:
        return body
    model = model_from_path(wire_format, path)
    return body if model is None else {"model": model, **body}


def reply_text(wire_format: str, response: Any) -> str | None:
    """The text the model generated in a response body of ``wire_format`` (its text blocks /
    message content, joined), ``None`` when the body is not a JSON object. What a self-hosted
    engine's slot keeps after the prompt (see ``_recording._engine_view``)."""
    if not isinstance(response, Mapping):
        return None
    try:
        return assistant_turn(wire_format, response).text or ""
    except HistoryError:
        return None


def response_format(response: Mapping[str, Any]) -> str:
    """The wire format of a response body: ``choices`` -> ``openai-chat``, ``candidates`` ->
    ``gemini``, an ``output`` object -> ``bedrock-converse``, an ``output`` list ->
    ``openai-responses``, a ``content`` list -> ``anthropic``.

    Raises:
        HistoryError: None of them (code ``history-response``).
    """
    if "choices" in response:
        return openai_chat.WIRE_FORMAT
    if "candidates" in response:
        return gemini.WIRE_FORMAT
    if isinstance(response.get("output"), Mapping):  # Responses' output is a list
        return bedrock_converse.WIRE_FORMAT
    if "output" in response:
        return openai_responses.WIRE_FORMAT
    if isinstance(response.get("content"), list):
        return anthropic.WIRE_FORMAT
    raise HistoryError("not a provider response: expected an Anthropic Messages response "
                       "('content' list), a Chat Completion ('choices'), a Responses response "
                       "('output' list), a Gemini answer ('candidates') or a Converse answer "
                       f"('output' object); got keys {sorted(map(str, response))[:8]}",
                       code="history-response")


def assistant_turn(wire_format: str, response: Mapping[str, Any], *,
                   choice: int | None = None) -> AssistantTurn:
    """What a response body of ``wire_format`` says the assistant did (text, tool calls,
    reasoning, in response order): the format module's ``assistant_turn``. ``choice`` picks
    a Chat Completion's choice or a Gemini answer's candidate (``None``: it must have exactly
    one); other formats have one turn per response and refuse a ``choice`` other than
    ``None`` or 0.

    Raises:
        HistoryError: The body is not a response of that format (code ``history-response``),
            or a Chat Completion with several choices and no ``choice`` (``history-choices``).
        CaptureError: Unknown wire format.
    """
    if wire_format == openai_chat.WIRE_FORMAT:
        return openai_chat.assistant_turn(response, choice=choice)
    if wire_format == gemini.WIRE_FORMAT:
        return gemini.assistant_turn(response, choice=choice)
    if choice not in (None, 0):
        raise HistoryError(f"choice={choice!r}: {a_or_an(wire_format)} response has one turn, not "
                           "several choices", code="history-choices", pointer="/choices")
    return _module(wire_format).assistant_turn(response)


def segment_request(wire_format: str, body: Mapping[str, Any]) -> SegmentedRequest:
    """Split a request body into cache-order segments.

    Args:
        wire_format: ``anthropic``, ``openai-chat`` or ``openai-responses``
            (``openai-compatible`` is treated as ``openai-chat``).
        body: The decoded JSON request body (dict key order as received).

    Returns:
        SegmentedRequest; segment bytes are compact JSON in the body's own key order, with
        breakpoint markers removed and recorded on ``Segment.breakpoint``.

    Raises:
        CaptureError: unknown wire format (code ``capture-format``), or a body whose shape the
            format does not allow (code ``capture-shape``, with the JSON pointer).
    """
    if wire_format == "openai-compatible":
        wire_format = openai_chat.WIRE_FORMAT
    module = _module(wire_format)
    if not isinstance(body, Mapping):
        raise CaptureError("request body must be a JSON object", code="capture-shape", pointer="")
    builder = SegmentBuilder(_MARKERS[wire_format], wire_format)
    builder.params(body, module.CACHE_KEY_PARAMS)
    module.segment(body, builder)
    return builder.build(wire_format, body)


def known_provider(host: str | None, override: str | None = None) -> str | None:
    """The provider family ``override`` or a known API host names (as :func:`provider_for`),
    ``None`` when neither does (no wire format to fall back on)."""
    if override:
        return override
    return _HOSTS.get(host.lower()) if host else None


def provider_for(host: str | None, wire_format: str, override: str | None = None) -> str:
    """The provider family (``cache_rules`` key) of a call.

    ``override`` wins; else the host (``api.anthropic.com`` -> ``anthropic``,
    ``api.openai.com`` -> ``openai``, ``api.deepseek.com`` -> ``deepseek``, ``openrouter.ai`` ->
    ``openrouter``, ``api.x.ai`` -> ``xai``); else the wire format (``anthropic`` ->
    ``anthropic``, OpenAI formats -> ``openai``, e.g. the loopback emulator).
    """
    known = known_provider(host, override)
    if known is not None:
        return known
    if host and host.lower().startswith("bedrock-runtime") and host.lower().endswith(
            ".amazonaws.com"):
        return "bedrock"
    return provider_of_wire_format(wire_format)


UsageDialects = str | Mapping[str, str] | None
"""A usage-dialect override: one dialect for every call, or host / provider family -> dialect."""


def usage_dialects(value: UsageDialects) -> UsageDialects:
    """Validate a usage-dialect override (``Recorder(usage_dialect=...)``).

    Args:
        value: ``None``; a usage format name from
            :data:`stableprompt.providers.WIRE_FORMATS` for every call; or a mapping from a
            URL host (``"gateway.internal"``) or a provider family (``"vllm"``, the value of a
            ``provider=`` override) to such a name.

    Returns:
        ``value``, a mapping copied with lower-cased keys.

    Raises:
        ConfigurationError: an unknown dialect name, or a key or mapping of the wrong type
            (code ``usage-dialect``).
    """
    def check(name: object, where: str) -> str:
        if not isinstance(name, str) or name not in WIRE_FORMATS:
            raise ConfigurationError(
                f"unknown usage dialect {name!r}{where}; expected one of "
                f"{', '.join(WIRE_FORMATS)}", code="usage-dialect")
        return name

    if value is None or isinstance(value, str):
        return None if value is None else check(value, "")
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"usage_dialect must be a dialect name or a mapping host/provider -> dialect, not "
            f"{type(value).__name__}", code="usage-dialect")
    out: dict[str, str] = {}
    for key, name in value.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"usage_dialect key {key!r} is not a host or provider name",
                                     code="usage-dialect")
        out[key.lower()] = check(name, f" for {key!r}")
    return MappingProxyType(out)


def chosen_dialect(dialects: UsageDialects, host: str | None, provider: str) -> str | None:
    """The dialect an override chooses for a call to ``host`` at ``provider`` (the host's
    entry first, then the provider family's), or ``None``."""
    if dialects is None or isinstance(dialects, str):
        return dialects
    return dialects.get((host or "").lower()) or dialects.get(provider.lower())


def usage_format(provider: str, wire_format: str, dialect: str | None = None) -> str:
    """The usage dialect (parser) of a request format at a provider.

    ``dialect`` wins (an override, see :func:`usage_dialects`); else Anthropic ->
    ``anthropic``; Responses -> ``openai-responses``; chat: ``deepseek``, ``llama-cpp`` for
    those providers, ``openai-compatible`` for vLLM, SGLang, OpenRouter and xAI, else
    ``openai-chat``.
    """
    if dialect is not None:
        return dialect
    if wire_format in (anthropic.WIRE_FORMAT, openai_responses.WIRE_FORMAT, gemini.WIRE_FORMAT,
                       bedrock_converse.WIRE_FORMAT):
        return wire_format
    if provider in ("deepseek", "llama-cpp"):
        return provider
    return "openai-compatible" if provider in _COMPATIBLE else openai_chat.WIRE_FORMAT


def request_format(usage_dialect: str) -> str:
    """The request format a usage dialect's calls are sent in (chat for chat dialects)."""
    if usage_dialect in (anthropic.WIRE_FORMAT, openai_responses.WIRE_FORMAT, gemini.WIRE_FORMAT,
                         bedrock_converse.WIRE_FORMAT):
        return usage_dialect
    return openai_chat.WIRE_FORMAT


def session_hint(body: Mapping[str, Any]) -> tuple[str, bool] | None:
    """``(id, names_a_conversation)`` a request body hints at, or ``None``.

    Order: Anthropic ``metadata.user_id`` (a conversation or a user), then OpenAI
    ``prompt_cache_key``, which names a lineage only when stableprompt derived it from a head
    (``sp-...``). Harnesses often use one such id per user or per head: callers treat it as a
    hint (the linter stops trusting it when conversations interleave under it).
    """
    user = anthropic.session_hint(body) or bedrock_converse.session_hint(body)
    if user is not None:
        return user, True
    return _openai.session_hint(body)


def diagnostics_request(wire_format: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The provider-diagnostics fields a request body asks for (Anthropic ``diagnostics``,
    OpenAI ``prompt_cache_options.comparison_response_id``), or ``None``."""
    asked = anthropic.diagnostics_request(body) if wire_format == anthropic.WIRE_FORMAT else None
    return asked or _openai.diagnostics_request(body)


public(segment_request)


class SegmentSteps(NamedTuple):
    """The pieces :func:`segment_request` runs for a list history, for a segmenter that
    resumes at a history item (``_wire._resegment``): ``params`` + ``head`` make the
    segments before the history, then ``item(b, items[i], i, leading)`` per item, where
    ``leading`` is what the previous item returned (``True`` for the first)."""

    wire_format: str
    marker_key: str
    history_key: str
    params: tuple[str, ...]
    head: Callable[[Mapping[str, Any], SegmentBuilder], None]
    item: Callable[[SegmentBuilder, Any, int, bool], bool]


def segment_steps(wire_format: str) -> SegmentSteps:
    """The :class:`SegmentSteps` of a request format (``openai-compatible`` is Chat).

    Raises:
        CaptureError: unknown wire format (code ``capture-format``).
    """
    if wire_format == "openai-compatible":
        wire_format = openai_chat.WIRE_FORMAT
    module = _module(wire_format)
    return SegmentSteps(wire_format, _MARKERS[wire_format], HISTORY_KEYS[wire_format],
                        module.CACHE_KEY_PARAMS, module.segment_head, module.segment_item)
