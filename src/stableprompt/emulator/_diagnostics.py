"""Cache diagnostics computed from the emulator's own prompt chains: fingerprints and reasons.

Both providers compare a request with an earlier one named by the caller and say where the
prompt prefix first diverged. The emulator keeps a :class:`Fingerprint` of every request that
asks (hashes and token counts only, as the providers describe theirs) and compares the same
blocks it caches, so a reason always agrees with its own cache accounting.

* **Anthropic** (GA; ``diagnostics: {"previous_message_id": "msg_..." | null}``): the response
  carries ``diagnostics: {"cache_miss_reason": {...}}``, or ``diagnostics: null`` when the
  request did not ask or no divergence was found (the previous request's blocks are a prefix
  of this one's). Reason types, checked in prompt order: ``model_changed`` (``model`` or
  ``speed``), ``tools_changed``, ``system_changed``, ``unavailable`` (model, system and tools
  match but another prompt-affecting parameter such as ``thinking`` or ``tool_choice``
  differs), ``messages_changed``; ``previous_message_not_found`` for an id the emulator has no
  fingerprint of (another API key, never asked, or evicted). ``cache_missed_input_tokens``
  (``*_changed`` only) is the emulator's estimate of "input tokens that would have been read
  from cache had the prefix matched": the previous request's prompt tokens after the last
  block both requests share. Sources: ``anthropic`` SDK 2.17 ``types/diagnostics_param.py``,
  ``types/cache_miss_*.py``, ``types/message.py``;
  https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics ("The API rebuilds
  the fingerprint for the new request, compares it against the stored one ... describing the
  first point of divergence"; "The comparison is about request structure, independent of
  whether the cache actually hit").
* **OpenAI Responses** (``prompt_cache_options.comparison_response_id``, GPT-5.6+): the response
  carries ``prompt_cache_diagnostics``: ``{"type": "cache_hit"}`` when no divergence was found,
  ``{"type": "cache_miss", "reason", "cache_missed_tokens", "comparison_reusable_tokens"}``,
  ``{"type": "comparison_response_not_found"}`` or ``{"type": "unavailable"}`` (the compared
  response is not a Responses request of a GPT-5.6+ model, or only a setting without a reason
  of its own changed). Reasons, checked in the SDK's order: ``model_changed``,
  ``prompt_cache_key_changed``, ``tools_changed``, ``text_format_changed``,
  ``reasoning_effort_changed``, ``verbosity_changed``, then the input: ``context_compacted``
  when the first differing item is a ``compaction`` item, else ``input_changed``.
  ``cache_missed_tokens`` is this request's prompt tokens after the shared prefix and
  ``comparison_reusable_tokens`` that shared prefix. ``service_tier_changed`` is never
  reported: the service tier is not part of the emulator's cache key (the caching guide does
  not list it). Source: ``openai`` SDK 3.63 ``types/responses/response.py``
  (``PromptCacheDiagnostics*``), https://developers.openai.com/api/docs/guides/prompt-caching.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from hashlib import sha256
from typing import Any

from ._prompt import Block

__all__ = [
    "ANTHROPIC_SECTIONS",
    "Fingerprint",
    "FingerprintStore",
    "anthropic_diagnostics",
    "digest",
    "fingerprint_of",
    "openai_diagnostics",
]

ANTHROPIC_SECTIONS = {"tool": "tools_changed", "system": "system_changed",
                      "speed": "model_changed", "params": "unavailable",
                      "message": "messages_changed"}
"""Anthropic: the reason for a divergence at a block of each kind (the chain's order)."""


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What the emulator keeps of one request for a later comparison (no prompt text).

    Attributes:
        scope: Digest of the API key: fingerprints are per key, like the caches.
        wire: ``"anthropic"`` or ``"openai-responses"``.
        settings: ``(reason, digest)`` of each setting compared before the blocks, in order
            (Anthropic: the model; OpenAI: model and ``prompt_cache_key``).
        blocks: ``(kind, digest, end tokens)`` of each prompt block in cache order; the kinds
            are :attr:`stableprompt.emulator._prompt.Block.kind` values.
        later_settings: ``(reason, digest)`` compared after the tool blocks (OpenAI: text
            format, reasoning effort, verbosity, other scope parameters).
        total_tokens: Prompt tokens of the request.
        diagnosable: OpenAI only: the model supports diagnostics (GPT-5.6+).
    """

    scope: bytes
    wire: str
    settings: tuple[tuple[str, bytes], ...]
    blocks: tuple[tuple[str, bytes, int], ...]
    later_settings: tuple[tuple[str, bytes], ...] = ()
    total_tokens: int = 0
    diagnosable: bool = True


def digest(value: bytes) -> bytes:
    """A short SHA-256 digest of ``value``."""
    return sha256(value).digest()[:16]


def fingerprint_of(
    blocks: Sequence[Block], *, scope: bytes, wire: str,
    settings: Sequence[tuple[str, bytes]], later_settings: Sequence[tuple[str, bytes]] = (),
    total_tokens: int, diagnosable: bool = True,
) -> Fingerprint:
    """The fingerprint of a request rendered as ``blocks``."""
    return Fingerprint(scope, wire, tuple(settings),
                       tuple((b.kind, b.digest, b.end_tokens) for b in blocks),
                       tuple(later_settings), total_tokens, diagnosable)


class FingerprintStore:
    """Response id -> :class:`Fingerprint`, least recently stored dropped beyond ``limit``.

    Args:
        limit: Fingerprints kept (the providers keep theirs "for a limited time").
    """

    def __init__(self, limit: int = 100_000) -> None:
        self._items: OrderedDict[str, Fingerprint] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def put(self, response_id: str, fingerprint: Fingerprint) -> None:
        """Keep ``fingerprint`` under ``response_id``."""
        with self._lock:
            self._items[response_id] = fingerprint
            self._items.move_to_end(response_id)
            while len(self._items) > self._limit:
                self._items.popitem(last=False)

    def get(self, response_id: str, scope: bytes) -> Fingerprint | None:
        """The fingerprint stored under ``response_id`` for the API key ``scope``, if any."""
        with self._lock:
            found = self._items.get(response_id)
        return found if found is not None and found.scope == scope else None


def _common(previous: Fingerprint, current: Fingerprint) -> tuple[int, str | None]:
    """``(index of the first differing block, its kind)``; kind ``None`` when every block of
    ``previous`` is also at the start of ``current`` (append-only growth)."""
    for i, old in enumerate(previous.blocks):
        if i >= len(current.blocks):
            return i, old[0]
        new = current.blocks[i]
        if old[:2] != new[:2]:
            return i, old[0] if _rank(old[0]) <= _rank(new[0]) else new[0]
    return len(previous.blocks), None


_ORDER = ("tool", "system", "speed", "params", "message", "item", "compaction")


def _rank(kind: str) -> int:
    return _ORDER.index(kind) if kind in _ORDER else len(_ORDER)


def _end(fingerprint: Fingerprint, index: int) -> int:
    """Prompt tokens before block ``index`` of ``fingerprint``."""
    return fingerprint.blocks[index - 1][2] if index > 0 else 0


def anthropic_diagnostics(previous: Fingerprint | None, current: Fingerprint
                          ) -> dict[str, Any] | None:
    """The Messages ``diagnostics`` value comparing ``current`` with ``previous`` (``None``:
    no divergence, sent as ``null``); ``previous`` ``None`` means it was not found."""
    if previous is None or previous.wire != current.wire:
        return {"cache_miss_reason": {"type": "previous_message_not_found"}}
    for (reason, old), (_, new) in zip(previous.settings, current.settings, strict=True):
        if old != new:
            return _anthropic_miss(reason, previous.total_tokens)
    index, kind = _common(previous, current)
    if kind is None:
        return None
    reason = ANTHROPIC_SECTIONS.get(kind, "messages_changed")
    if reason == "unavailable":
        return {"cache_miss_reason": {"type": "unavailable"}}
    return _anthropic_miss(reason, previous.total_tokens - _end(previous, index))


def _anthropic_miss(reason: str, tokens: int) -> dict[str, Any]:
    return {"cache_miss_reason": {"type": reason, "cache_missed_input_tokens": max(tokens, 0)}}


def openai_diagnostics(previous: Fingerprint | None, current: Fingerprint) -> dict[str, Any]:
    """The Responses ``prompt_cache_diagnostics`` comparing ``current`` with ``previous``
    (``None``: the compared response was not found)."""
    if previous is None:
        return {"type": "comparison_response_not_found"}
    if previous.wire != current.wire or not (previous.diagnosable and current.diagnosable):
        return {"type": "unavailable"}
    for (reason, old), (_, new) in zip(previous.settings, current.settings, strict=True):
        if old != new:
            return _openai_miss(reason, current.total_tokens, 0)
    index, kind = _common(previous, current)
    if kind == "tool":
        return _openai_miss("tools_changed", current.total_tokens, _end(current, index))
    for (reason, old), (_, new) in zip(previous.later_settings, current.later_settings,
                                       strict=True):
        if old != new:
            if reason == "unavailable":
                return {"type": "unavailable"}
            return _openai_miss(reason, current.total_tokens, 0)
    if kind is None:
        return {"type": "cache_hit"}
    compacted = kind == "compaction" or (index < len(current.blocks)
                                         and current.blocks[index][0] == "compaction")
    reason = "context_compacted" if compacted else "input_changed"
    return _openai_miss(reason, current.total_tokens, _end(current, index))


def _openai_miss(reason: str, total: int, common: int) -> dict[str, Any]:
    return {"type": "cache_miss", "reason": reason, "cache_missed_tokens": total - common,
            "comparison_reusable_tokens": common}
