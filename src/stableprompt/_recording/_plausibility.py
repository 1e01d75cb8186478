"""Is a provider's reported input total plausible for the request we sent? A pure check.

A usage report can add up (``uncached + cache_read + cache_write == input_tokens_total``) and
still be wrong: an Anthropic-compatible server that puts the whole prompt in ``input_tokens``
(an inclusive count in Anthropic's exclusive field) reports every cached token twice, and the
numbers balance. The only independent witness is our own token estimate of the request
(``request_tokens``, per-segment counts with our tokenizer): :func:`usage_suspicion` compares
the reported total with it and flags a ratio outside
[:data:`USAGE_RATIO_LOW`, :data:`USAGE_RATIO_HIGH`] beyond :data:`HIDDEN_TOKENS_SLACK`.

The flag never changes a verdict: a suspect report is still attributed as reported (the
caller fixes the dialect, ``Recorder(usage_dialect=...)``); it is evidence in
``verdict_detail`` and sets the record's ``usage_inconsistent``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._segment import ByteSlices, Segment
from .._usage import CacheUsage

__all__ = ["HIDDEN_TOKENS_SLACK", "USAGE_RATIO_HIGH", "USAGE_RATIO_LOW", "usage_suspicion"]

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


def usage_suspicion(
    usage: CacheUsage | None, request_tokens: int, segments: Sequence[Segment],
    data: ByteSlices,
) -> dict[str, Any] | None:
    """Detail entries flagging an implausible reported input total, or ``None``.

    Args:
        usage: The normalized usage (``None``: nothing to check).
        request_tokens: Our token estimate of the whole request.
        segments: The request's segments (media blocks turn the low-side check off).
        data: The segmented request's bytes (``SegmentedRequest.segment_bytes``).

    Returns:
        ``{"usage_suspect": True, "usage_ratio": reported / estimate (3 decimals),
        "usage_ratio_bounds": [low, high], "usage_suspect_reason": ...}`` when the reported
        ``input_tokens_total`` exceeds ``USAGE_RATIO_HIGH * request_tokens +
        HIDDEN_TOKENS_SLACK`` or is under ``USAGE_RATIO_LOW * request_tokens -
        HIDDEN_TOKENS_SLACK`` (text-only requests); else ``None``.
    """
    total = None if usage is None else usage.input_tokens_total
    if total is None or request_tokens <= 0:
        return None
    ratio = total / request_tokens
    if total > USAGE_RATIO_HIGH * request_tokens + HIDDEN_TOKENS_SLACK:
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
