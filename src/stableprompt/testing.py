"""Test helpers for harness authors: put prefix stability in your own test suite.

Example (pytest)::

    from stableprompt.testing import assert_prefix_stable

    def test_agent_prompts_are_append_only(captured_bodies):
        assert_prefix_stable(captured_bodies, wire_format="anthropic", min_prefix_ratio=0.9)

The helper needs no pytest import; it raises plain :class:`AssertionError`, which pytest
reports with the divergence message.

:func:`llama_server` runs the real engine for a test: llama.cpp's ``llama-server`` (built once
from the llama.cpp source on PyPI into the user cache) on a tiny random-weight model with a real
chat template, one slot, no host prompt cache::

    from stableprompt.testing import llama_server

    def test_my_harness_hits_the_real_cache():
        with llama_server() as server:   # builds on first use (minutes), then ~0.3 s
            client = openai.OpenAI(base_url=server.openai_base_url, api_key="unused")
            ...
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ._diff import (
    Divergence,
    Segmented,
    bounded_divergences,
    diff,
    is_expected_divergence,
    lcp_bytes,
    value_snippet,
)
from ._lint._divergence import describe_divergence
from ._lint._events import EventQueue
from ._lint._results import format_pair
from ._wire._formats import detect, segment_request
from ._wire._segmenter import SegmentedRequest

if TYPE_CHECKING:
    from ._engine._server import LlamaServer

__all__ = ["assert_prefix_stable", "llama_server"]


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


LATER_DIVERGENCES_SHOWN = 5
"""Later divergences of a failing pair named in :func:`assert_prefix_stable`'s message."""


def _later_divergences(a: Segmented, b: Segmented, first: Divergence) -> str:
    """``"; then N more: cause path, ..."`` for the divergences after ``first`` (the next fix
    reveals them, :func:`stableprompt.divergences`), at most
    :data:`LATER_DIVERGENCES_SHOWN` named; ``""`` when there are none."""
    kept, total = bounded_divergences(a, b, LATER_DIVERGENCES_SHOWN + 1, first)
    if total <= 1:
        return ""
    named = ", ".join(f"{d.cause} {d.path}" for d in kept[1:])
    more = total - len(kept)
    return f"; then {total - 1} more: {named}" + (f", +{more} more" if more > 0 else "")


def assert_prefix_stable(
    requests_or_renders: Iterable[Any],
    *,
    wire_format: str | None = None,
    min_prefix_ratio: float | None = None,
    events: Iterable[Any] | None = None,
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
        events: :class:`~stableprompt.CacheEvent` objects of deliberate changes (from
            :meth:`Conversation.compact` / :meth:`Conversation.rebase`), in order: the break
            each one explains passes (a compaction: a history break where the later request
            holds the summary; a head change: a break in the head). Each explains one break.

    Raises:
        AssertionError: ``"request i does not extend request i-1: <message>"`` at the first
            break (the message ``stableprompt lint`` prints: the JSON path, the character
            offset inside the differing value, the segment-data byte offset, the cause and
            snippets of the differing value; then ``"; then N more: <cause> <path>, ..."``,
            the pair's later divergences in cache order, at most five named), or the mean
            ratio is below ``min_prefix_ratio``, or there is no pair to judge it on.
        ValueError: ``min_prefix_ratio`` is not a number between 0 and 1.
        TypeError: an item is none of the accepted types.
        InputError: ``events`` is not a list of CacheEvent (code ``lint-events``).
        InputError: a request body next to a ``RenderedPrompt`` (code ``diff-mismatch``, from
            :func:`stableprompt.diff`): compare requests with requests, renders with renders.
        CaptureError: a body the wire format does not allow (from ``segment_request``).
    """
    __tracebackhide__ = True  # pytest: show the caller's line, not ours
    if min_prefix_ratio is not None and not (
            isinstance(min_prefix_ratio, (int, float)) and not math.isnan(min_prefix_ratio)
            and 0.0 <= min_prefix_ratio <= 1.0):
        raise ValueError(f"min_prefix_ratio must be between 0 and 1, got {min_prefix_ratio!r}")
    queue = EventQueue(events)
    items = [_segmented(item, wire_format, i) for i, item in enumerate(requests_or_renders)]
    ratios: list[float] = []
    for i in range(1, len(items)):
        (a, a_is_request), (b, _) = items[i - 1], items[i]
        divergence = diff(a, b)
        if divergence is not None and not (
            a_is_request and is_expected_divergence(a, b, divergence)
        ) and queue.explain(b, divergence) is None:
            message = describe_divergence(divergence, value_snippet(a, b, divergence))
            raise AssertionError(f"request {i} does not extend request {i - 1}: {message}"
                                 + _later_divergences(a, b, divergence))
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


@contextlib.contextmanager
def llama_server(template: str = "qwen2.5", **serve_kwargs: Any) -> Iterator[LlamaServer]:
    """Run a real ``llama-server`` for the ``with`` block, and stop it however the block ends.

    Builds the server when it is not in the user cache yet (``stableprompt engine build``:
    minutes, once; needs ``cmake``, ``ninja`` and a C++ compiler), writes the tiny model with
    chat template ``template`` (seconds, once), starts the server on a free loopback port
    (about 0.3 s) and yields it. On exit, normal or by exception, it is stopped (SIGTERM, then
    SIGKILL) and its pid is gone.

    Args:
        template: ``"qwen2.5"`` (tools inside the system turn: append-stable; the default),
            ``"mistral-nemo"``, ``"hermes-3"``, or a path to a ``.jinja`` chat template.
        **serve_kwargs: Passed on to the server: ``model`` (a GGUF path instead of the tiny
            model), ``port`` (0: free), ``ctx_size`` (16384 tokens), ``threads`` (2),
            ``slots`` (1), ``cache_ram_mib`` (0: off), ``extra_args`` (more llama-server
            arguments), ``startup_timeout_s`` (60).

    Yields:
        The running server: ``base_url`` (``http://127.0.0.1:<port>``), ``openai_base_url``
        (``base_url + "/v1"``), ``pid``, ``port``, ``model_path``, ``log_path``,
        ``template``. It reports ``usage.prompt_tokens_details.cached_tokens`` and
        ``timings.cache_n`` on ``/v1/chat/completions``; an exact repeat reads n - 1 tokens.

    Raises:
        EngineError: It cannot be fetched (code ``engine-download-failed``), built
            (``engine-tool-missing``, ``engine-build-failed``), given its model
            (``engine-numpy-missing``: ``pip install 'stableprompt[engine]'``) or started
            (``engine-start-failed``); the message says how to fix it.

    Source: the cache behaviour is llama.cpp's ``tools/server`` (``server-task.cpp``), as
    measured in the project's engine notes.
    """
    from ._engine._server import serve, stop

    server = serve(template=template, **serve_kwargs)
    try:
        yield server
    finally:
        stop(server)
