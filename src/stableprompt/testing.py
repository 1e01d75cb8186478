"""Test helpers for harness authors: put prefix stability in your own test suite.

Example (pytest)::

    from stableprompt.testing import assert_prefix_stable

    def test_agent_prompts_are_append_only(captured_bodies):
        assert_prefix_stable(captured_bodies, wire_format="anthropic", min_prefix_ratio=0.9)

The helper needs no pytest import; it raises plain :class:`AssertionError`, which pytest
reports with the divergence message.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ._diff import Segmented, diff, lcp_bytes
from ._lint._divergence import describe_divergence, is_expected_divergence, value_snippet
from ._lint._results import format_pair
from ._wire._formats import detect, segment_request
from ._wire._segmenter import SegmentedRequest

__all__ = ["assert_prefix_stable"]


def _segmented(item: Any, wire_format: str | None, position: int) -> tuple[Segmented, bool]:
    """Return ``(segmented, is_request)``: request bodies get the volatile-tail allowance."""
    if isinstance(item, SegmentedRequest):
        return item, True
    segmented = getattr(item, "segmented", None)  # ProviderRequest
    if isinstance(segmented, SegmentedRequest):
        return segmented, True
    if isinstance(item, Mapping):
        fmt = wire_format or detect(item)
        if fmt is None:
            raise AssertionError(f"request {position}: cannot tell the wire format; pass "
                                 "wire_format='anthropic' | 'openai-chat' | 'openai-responses'")
        return segment_request(fmt, item), True
    if hasattr(item, "segments") and hasattr(item, "data"):  # RenderedPrompt
        return item, False
    raise TypeError(f"request {position} is a {type(item).__name__}: expected a request body "
                    "dict, a ProviderRequest, a SegmentedRequest or a RenderedPrompt")


def assert_prefix_stable(
    requests_or_renders: Iterable[Any],
    *,
    wire_format: str | None = None,
    min_prefix_ratio: float | None = None,
) -> None:
    """Assert that each request extends the previous one byte for byte (its cacheable part).

    Consecutive items are compared with :func:`stableprompt.diff`, in provider cache order
    (cache-key parameters, tools, system, messages; breakpoint markers are not content).
    Allowed: the volatile tail. For ``RenderedPrompt`` items, their ``tail:`` segments; for
    request bodies / ``ProviderRequest`` objects, a divergence inside the predecessor's last
    message only (after its last breakpoint, or where the next turn replaced it), exactly as
    ``stableprompt lint`` decides (``expected`` divergences): a change to any earlier message
    fails, wherever the breakpoints are.

    Args:
        requests_or_renders: Request body dicts, ``ProviderRequest``, ``SegmentedRequest`` or
            ``RenderedPrompt`` objects, in the order they were sent (one conversation).
        wire_format: Wire format of dict bodies (``anthropic``, ``openai-chat``,
            ``openai-responses``); ``None`` detects it per body.
        min_prefix_ratio: Also require the mean over pairs of ``lcp_bytes / later size``
            (bytes of segment data) to be at least this (0..1); with fewer than two items
            there is no pair and the assertion fails.

    Raises:
        AssertionError: ``"request i does not extend request i-1: <message>"`` at the first
            break (the message ``stableprompt lint`` prints: the JSON path, the character
            offset inside the differing value, the segment-data byte offset, the cause and
            snippets of the differing value), or the mean ratio is below
            ``min_prefix_ratio``, or there is no pair to judge it on.
        ValueError: ``min_prefix_ratio`` is not a number between 0 and 1.
        TypeError: an item is none of the accepted types.
        InputError: a request body next to a ``RenderedPrompt`` (code ``diff-mismatch``, from
            :func:`stableprompt.diff`): compare requests with requests, renders with renders.
        CaptureError: a body the wire format does not allow (from ``segment_request``).
    """
    __tracebackhide__ = True  # pytest: show the caller's line, not ours
    if min_prefix_ratio is not None and not (
            isinstance(min_prefix_ratio, (int, float)) and not math.isnan(min_prefix_ratio)
            and 0.0 <= min_prefix_ratio <= 1.0):
        raise ValueError(f"min_prefix_ratio must be between 0 and 1, got {min_prefix_ratio!r}")
    items = [_segmented(item, wire_format, i) for i, item in enumerate(requests_or_renders)]
    ratios: list[float] = []
    for i in range(1, len(items)):
        (a, a_is_request), (b, _) = items[i - 1], items[i]
        divergence = diff(a, b)
        if divergence is not None and not (
            a_is_request and is_expected_divergence(a, b, divergence)
        ):
            message = describe_divergence(divergence, value_snippet(a, b, divergence))
            raise AssertionError(f"request {i} does not extend request {i - 1}: {message}")
        ratios.append(lcp_bytes(a, b) / len(b.data) if b.data else 1.0)
    if min_prefix_ratio is None:
        return
    if not ratios:
        raise AssertionError(f"no pair to judge min_prefix_ratio={min_prefix_ratio} on: "
                             f"{len(items)} request(s); pass at least two")
    mean = sum(ratios) / len(ratios)
    if mean < min_prefix_ratio:
        worst = min(range(len(ratios)), key=ratios.__getitem__)
        shown, minimum = format_pair(mean, min_prefix_ratio)
        raise AssertionError(
            f"mean prefix ratio {shown} is below {minimum} over {len(ratios)} pair(s); "
            f"lowest: request {worst + 1} at {ratios[worst]:.4f}")
