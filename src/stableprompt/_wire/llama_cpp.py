"""llama.cpp ``llama-server`` (wire format ``"llama-cpp"``): usage parsing and streaming.

Semantics (PROVIDERS.md §9; ``ggml-org/llama.cpp`` ``tools/server/server-task.cpp``): the OpenAI
``usage.prompt_tokens`` counts the whole prompt; builds after PR #19361 (2026-02) add
``usage.prompt_tokens_details.cached_tokens``. Every build reports the non-standard ``timings``
object, where ``cache_n`` is the number of prompt tokens reused from the KV cache and
``prompt_n`` the number actually processed, so ``prompt_tokens = cache_n + prompt_n``.
No cache writes are reported (``cache_write_tokens`` is ``None``).

Preference, as PROVIDERS.md recommends: ``usage.prompt_tokens_details.cached_tokens`` when
present, else ``timings.cache_n``; total from ``usage.prompt_tokens``, else
``cache_n + prompt_n``. Disagreements between the two sources are flagged.
"""

from __future__ import annotations

from typing import Any

from .._exceptions import UsageParseError
from .._usage import CacheUsage
from ._fields import as_mapping, child, inclusive_usage, opt_int, opt_obj
from .openai_chat import ChatStreamAccumulator, prompt_details

__all__ = ["WIRE_FORMAT", "LlamaCppStreamAccumulator", "parse_response", "parse_usage"]

WIRE_FORMAT = "llama-cpp"


def parse_usage(usage: object, pointer: str = "") -> CacheUsage:
    """Normalize llama-server usage.

    Args:
        usage: Either the whole response object (or last stream chunk) holding ``"usage"``
            and/or ``"timings"`` — e.g. ``{"usage": {...}, "timings": {...}}`` — or a bare
            OpenAI ``usage`` object (recognized by having no ``usage``/``timings`` key).
            ``usage``: ``{"prompt_tokens", "completion_tokens"?, "prompt_tokens_details"?:
            {"cached_tokens"?}}``; ``timings``: ``{"cache_n"?, "prompt_n"?, "predicted_n"?,
            ...}``.
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).

    Returns:
        CacheUsage as described in the module docstring; ``raw`` is ``{"usage": ...,
        "timings": ...}`` with whichever parts were present.

    Raises:
        UsageParseError: no way to know the prompt size (neither ``usage.prompt_tokens`` nor
            both ``timings.cache_n`` and ``timings.prompt_n``: ``usage-missing``), or a count
            negative / not an integer.
    """
    obj = as_mapping(usage, pointer, "llama.cpp usage")
    if "usage" in obj or "timings" in obj:
        oai = opt_obj(obj, "usage", pointer)
        timings = opt_obj(obj, "timings", pointer)
        oai_pointer = child(pointer, "usage")
    else:
        oai, timings, oai_pointer = obj, None, pointer
    timings_pointer = child(pointer, "timings")
    if oai is None and timings is None:
        raise UsageParseError(
            "neither usage nor timings present", code="usage-missing", pointer=oai_pointer
        )
    total = read = output = None
    if oai is not None:
        total = opt_int(oai, "prompt_tokens", oai_pointer)
        read, _ = prompt_details(oai, oai_pointer)
        output = opt_int(oai, "completion_tokens", oai_pointer)
    cache_n = prompt_n = predicted_n = None
    if timings is not None:
        cache_n = opt_int(timings, "cache_n", timings_pointer)
        prompt_n = opt_int(timings, "prompt_n", timings_pointer)
        predicted_n = opt_int(timings, "predicted_n", timings_pointer)
    notes: list[str] = []
    if read is not None and cache_n is not None and read != cache_n:
        notes.append(f"usage cached_tokens ({read}) != timings.cache_n ({cache_n})")
    if (
        total is not None
        and cache_n is not None
        and prompt_n is not None
        and cache_n + prompt_n != total
    ):
        notes.append(
            f"timings.cache_n + timings.prompt_n ({cache_n + prompt_n}) != "
            f"usage.prompt_tokens ({total})"
        )
    if read is None:
        read = cache_n
    if total is None:
        if cache_n is None or prompt_n is None:
            missing = (
                child(oai_pointer, "prompt_tokens")
                if oai is not None
                else child(timings_pointer, "prompt_n" if cache_n is not None else "cache_n")
            )
            raise UsageParseError(
                "cannot tell the prompt size: need usage.prompt_tokens or timings.cache_n "
                "and timings.prompt_n",
                code="usage-missing",
                pointer=missing,
            )
        total = cache_n + prompt_n
    if output is None:
        output = predicted_n
    raw: dict[str, Any] = {}
    if oai is not None:
        raw["usage"] = dict(oai)
    if timings is not None:
        raw["timings"] = dict(timings)
    return inclusive_usage(
        WIRE_FORMAT, raw, total=total, read=read, write=None, output=output, notes=tuple(notes)
    )


def parse_response(body: object) -> CacheUsage:
    """Normalize the usage of a non-streaming llama-server body (its ``usage`` + ``timings``).

    Raises:
        UsageParseError: as :func:`parse_usage`, with pointers into the body.
    """
    obj = as_mapping(body, "", "llama.cpp response body")
    return parse_usage({key: obj[key] for key in ("usage", "timings") if key in obj}, "")


class LlamaCppStreamAccumulator(ChatStreamAccumulator):
    """Stream accumulator for llama-server's OpenAI chat stream (and native ``/completion``).

    ``timings`` rides on the last chunk, with ``usage`` too when
    ``stream_options.include_usage`` is set (PROVIDERS.md §9): the last non-null of each is
    kept, and the pair is parsed with :func:`parse_usage`.
    """

    wire_format = WIRE_FORMAT

    def _finish(self) -> CacheUsage:
        parts = {"usage": self._usage, "timings": self._timings}
        seen = {key: part for key, part in parts.items() if part is not None}
        if not seen:
            if self._done:
                return self._unknown("stream completed without usage or timings", interrupted=False)
            return self._unknown("stream ended before its usage/timings chunk (interrupted)")
        try:
            usage = parse_usage({key: part.value for key, part in seen.items()})
        except UsageParseError as exc:
            source = seen.get("timings" if (exc.pointer or "").startswith("/timings") else "usage")
            exc.offset = source.offset if source is not None else 0
            raise
        last = next(iter(seen.values()))  # the usage chunk's place when there is one
        if not (self._done or last.final):
            return self._partial(
                usage, "stream ended before its final chunk: output_tokens unknown"
            )
        return usage
