"""Is a provider's reported input total plausible for the request we sent? A pure check.

A usage report can add up (``uncached + cache_read + cache_write == input_tokens_total``) and
still be wrong: an Anthropic-compatible server that puts the whole prompt in ``input_tokens``
(an inclusive count in Anthropic's exclusive field) reports every cached token twice, and the
numbers balance. The only independent witness is our own token estimate of the request
(``request_tokens``, per-segment counts with our tokenizer): :func:`usage_suspicion` compares
the reported total with it and flags a ratio outside
[:data:`USAGE_RATIO_LOW`, :data:`USAGE_RATIO_HIGH`] beyond :data:`HIDDEN_TOKENS_SLACK`.

Content the provider counts without its bytes being in the request turns the high-side check
off (:func:`counted_without_bytes`): a document or image by file id or URL, a provider-run
tool (web search, web fetch, code execution, file search, MCP) whose results join the prompt
it counts. There a reported total far above our estimate is that content, not a double count.

The flag never changes a verdict: a suspect report is still attributed as reported (the
caller fixes the dialect, ``Recorder(usage_dialect=...)``); it is evidence in
``verdict_detail`` (``usage_suspect``), which keeps the call out of the report's token sums and
hit rates but never out of its cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._canonical import loads
from .._segment import ByteSlices, Segment
from .._usage import CacheUsage

__all__ = ["HIDDEN_TOKENS_SLACK", "SERVER_TOOL_TYPES", "USAGE_RATIO_HIGH", "USAGE_RATIO_LOW",
           "counted_without_bytes", "usage_suspicion"]

USAGE_RATIO_HIGH = 1.6
"""Reported input total over our estimate above which the report is suspect.

Why 1.6: our tokenizer is not the provider's. Measured per content type
(``reference/ENGINES.md``: tool schemas 1.24x, system text 1.04x, user text 0.86x, assistant
tool calls 0.72x, tool results with digits 1.42x of cl100k), plus ~7 % of template markup a
JSON view never sees: even a request made only of the densest content stays under
1.42 x 1.07 = 1.52x. A double-counted report is ``1 + cached share`` times the true count:
about 2x on any call that reads or writes most of its prompt (a cold write, a hit), so 1.6x
catches it as soon as ~60 % of the prompt is cached, and never flags honest density."""

USAGE_RATIO_LOW = 0.3
"""Reported input total over our estimate below which the report is suspect (a total that
misses what it should include: an exclusive count read by an inclusive parser).

Why 0.3: below the sparsest content density quoted for our estimates (0.33x per content
type, issue 9; ``reference/ENGINES.md`` measures 0.72x, assistant tool calls, as its
sparsest), so no honest request is flagged even if it is made of that content only. An
exclusive count read inclusively reports just the uncached remainder: under 0.3x as soon as
70 % of the prompt is read or written (every hit, every cold write of a long head). Requests
with media blocks are not checked on this side: we tokenize base64 bytes as text while
providers count images and documents by their size in pixels or pages."""

HIDDEN_TOKENS_SLACK = 400
"""Tokens a provider may add to the prompt that no request byte shows, allowed on top of
:data:`USAGE_RATIO_HIGH` (and below :data:`USAGE_RATIO_LOW`): Anthropic's tool-use system
prompt when tools are sent (Anthropic's per-model table, docs.anthropic.com/en/docs/
tool-use-pricing-and-tokens, checked 2026-12-01: 159 to 530 tokens for the Claude 3 models
listed there; 346 with ``tool_choice`` auto/none for current models per secondary sources,
UNVERIFIED on the official page), OpenAI's hidden system
tokens (PROVIDERS.md §2.3: subtracted before cached tokens are reported). Keeps short
requests, where these dominate, from being flagged."""

_MEDIA_MARKERS = (b'"image"', b'"document"', b'"image_url"', b'"input_image"',
                  b'"input_audio"', b'"input_file"')

SERVER_TOOL_TYPES = ("web_search", "web_fetch", "code_execution", "file_search",
                     "code_interpreter", "mcp")
"""Tool ``type`` prefixes of tools the provider runs, adding their results to the prompt it
counts: Anthropic ``web_search_20250305``, ``web_fetch_20250910``, ``code_execution_20250825``
(platform.claude.com/docs/en/agents-and-tools/tool-use/: web-search-tool, web-fetch-tool,
code-execution-tool); OpenAI Responses ``web_search`` (``web_search_preview``),
``file_search``, ``code_interpreter``, ``mcp`` (platform.openai.com/docs/guides/tools). A
client tool has no such ``type`` (none, ``"custom"`` or ``"function"``), whatever its name."""

_SERVER_TOOL_PARAMS = frozenset({"/web_search_options", "/mcp_servers"})
"""Request parameters that make the provider add content: OpenAI Chat ``web_search_options``
(search models), Anthropic ``mcp_servers`` (the MCP connector)."""

_CACHE_REFERENCE_PARAMS = frozenset({"/cachedContent"})
"""Request parameters naming content the provider holds and counts in the prompt: Gemini's
explicit cache (``promptTokenCount`` "also includes the number of tokens in the cached
content", ``google.genai.types.GenerateContentResponseUsageMetadata``)."""

_REFERENCE_MARKERS = (b'"file_id"', b'"file_url"', b'"url"', b'"image_url"', b'"file_data"',
                      b'"fileData"')
"""Bytes every by-reference content block holds (a segment without any is not decoded)."""


def _by_reference(value: Any) -> bool:
    """``value`` (decoded JSON) holds content the provider fetches: a ``file_id`` /
    ``file_url``, an Anthropic ``source`` of type ``file`` or ``url``, an ``image_url`` that
    is an http(s) URL, a Gemini ``file_data``."""
    if isinstance(value, list):
        return any(_by_reference(item) for item in value)
    if not isinstance(value, Mapping):
        return False
    if isinstance(value.get("file_id"), str) or isinstance(value.get("file_url"), str):
        return True
    source = value.get("source")
    if isinstance(source, Mapping) and source.get("type") in ("file", "url"):
        return True
    image = value.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return True
    if isinstance(value.get("file_data"), Mapping) or isinstance(value.get("fileData"), Mapping):
        return True
    return any(_by_reference(item) for item in value.values()
               if isinstance(item, (list, Mapping)))


def counted_without_bytes(segments: Sequence[Segment], data: ByteSlices) -> str | None:
    """What in the request the provider counts without its bytes being sent, or ``None``.

    Args:
        segments: The request's segments (each one JSON value of ``data``).
        data: The segmented request's bytes.

    Returns:
        ``"server tool"`` (a tool of :data:`SERVER_TOOL_TYPES`, or a parameter that adds
        content), ``"cached content by reference"`` (a Gemini ``cachedContent``),
        ``"content by reference"`` (a file or image by id or URL), else ``None``.
        Only segments holding a marker byte string are decoded (it runs only for a total
        far above its estimate, which is rare).
    """
    for seg in segments:
        if seg.kind == "param":
            if seg.path in _SERVER_TOOL_PARAMS:
                return "server tool"
            if seg.path in _CACHE_REFERENCE_PARAMS:
                return "cached content by reference"
            continue
        raw = data[seg.start:seg.end]
        if seg.kind == "tool":
            if b'"type"' not in raw:
                continue
        elif not any(raw.find(marker) >= 0 for marker in _REFERENCE_MARKERS):
            continue
        try:
            value = loads(raw)
        except ValueError:
            continue
        if seg.kind == "tool":
            kind = value.get("type") if isinstance(value, Mapping) else None
            if isinstance(kind, str) and kind.startswith(SERVER_TOOL_TYPES):
                return "server tool"
        elif _by_reference(value):
            return "content by reference"
    return None


def usage_suspicion(
    usage: CacheUsage | None, request_tokens: int, segments: Sequence[Segment],
    data: ByteSlices,
) -> dict[str, Any] | None:
    """Detail entries flagging an implausible reported input total, or ``None``.

    Args:
        usage: The normalized usage (``None``: nothing to check).
        request_tokens: Our token estimate of the whole request.
        segments: The request's segments (media blocks turn the low-side check off; content
            counted without its bytes, the high-side one).
        data: The segmented request's bytes (``SegmentedRequest.segment_bytes``).

    Returns:
        ``{"usage_suspect": True, "usage_ratio": reported / estimate (3 decimals),
        "usage_ratio_bounds": [low, high], "usage_suspect_reason": ...}`` when the reported
        ``input_tokens_total`` exceeds ``USAGE_RATIO_HIGH * request_tokens +
        HIDDEN_TOKENS_SLACK`` (unless the request has content counted without its bytes,
        :func:`counted_without_bytes`) or is under ``USAGE_RATIO_LOW * request_tokens -
        HIDDEN_TOKENS_SLACK`` (text-only requests); else ``None``.
    """
    total = None if usage is None else usage.input_tokens_total
    if total is None or request_tokens <= 0:
        return None
    ratio = total / request_tokens
    if total > USAGE_RATIO_HIGH * request_tokens + HIDDEN_TOKENS_SLACK:
        if counted_without_bytes(segments, data) is not None:
            return None  # the provider counts content our estimate cannot see
        reason = ("reported input total far above our estimate of the request: cached tokens "
                  "counted twice? (an inclusive input count parsed as exclusive: choose the "
                  "endpoint's usage_dialect)")
    elif total < USAGE_RATIO_LOW * request_tokens - HIDDEN_TOKENS_SLACK and not any(
            data.find(marker) >= 0 for marker in _MEDIA_MARKERS):  # segments tile ``data``, and a
        # quoted marker cannot straddle two of them (each ends a JSON value)
        reason = ("reported input total far below our estimate of the request: cached tokens "
                  "left out? (an exclusive input count parsed as inclusive: choose the "
                  "endpoint's usage_dialect)")
    else:
        return None
    return {"usage_suspect": True, "usage_ratio": round(ratio, 3),
            "usage_ratio_bounds": [USAGE_RATIO_LOW, USAGE_RATIO_HIGH],
            "usage_suspect_reason": reason}
