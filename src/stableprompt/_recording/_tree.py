"""A request compared with another lineage's call that shares part of its head.

The recorder's index (``_predecessor``, rule ``shared-prefix``) compares a request that has no
call of its own conversation on its lineage (a new session, a subagent) with the most recent
call of another lineage sharing its deepest entry-ending prefix. :func:`attribute_shared`
predicts what that shared prefix lets it read, by the provider's rules, and says what it
shares:

- something readable on a breakpoint cache (a shared breakpoint entry the provider can
  find: Anthropic's 20-block lookback, the TTL, the minimum): the prediction and
  verdict of :func:`~stableprompt._recording._attribution.attribute` against that call, as
  another conversation (losing the rest of its prefix is no mutation);
- nothing readable (no shared entry, or none the provider finds) and nothing read: the
  verdict of a first call (``cold``, or ``below_minimum``), never a mutation of someone
  else's prompt;
- an automatic cache (OpenAI, Gemini, DeepSeek, ...): the verdict of a first call too. Where
  such a cache keeps entries across requests of different heads depends on what is not in
  the request: OpenAI routes by ``prompt_cache_key`` and the prompt's first tokens, keeps
  entries only at its implicit points (GPT-5.6: the end of the latest user or tool message),
  Gemini leaves implicit entries only at block ends past its minimum in its own tokens; so
  the shared prefix is said, not predicted (a self-hosted engine's own view, exact for any
  lineage, still predicts: ``_engine_view``).

Either way ``verdict_detail["shared_prefix"]`` says with which call (``record_id``,
``session``, ``agent``), how much (``segments``; ``tokens``: provider tokens, anchored like
every prefix), where the prompts part (``differs_at``: JSON path, ``differs_at_segment``,
``differs_at_kind``: its segment kind, which the provider's own miss reason is joined to,
``_server_reasons``) and what was readable (``readable_tokens``), and
``shared_prefix_note`` says it in a sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .._policy import CacheRules
from .._usage import CacheUsage
from ._attribution import Attribution, attribute
from ._call import Comparison, RequestState
from ._engine_view import EngineEvidence
from ._sizes import ReportedSizes

__all__ = ["attribute_shared", "shared_note"]


def shared_note(shared: Mapping[str, Any], readable: bool) -> str:
    """One sentence on a shared prefix (``verdict_detail["shared_prefix"]``)."""
    who = f"session {shared.get('session')}" if shared.get("session") else \
        f"call {shared.get('record_id')}"
    if shared.get("agent"):
        who += f" (agent {shared['agent']})"
    where = shared.get("differs_at") or shared.get("differs_at_segment")
    tokens = shared.get("tokens")
    size = f"{tokens:,} tokens" if isinstance(tokens, int) else \
        f"{shared.get('segments')} segments"
    differs = f"; differs at {where}" if where else ""
    if readable:
        return (f"shares {size} with {who}{differs}; reads up to the last shared cache "
                f"breakpoint: {shared.get('readable_tokens', 0):,} tokens")
    return (f"could have read {size} that {who} cached{differs}; no shared cache entry "
            "it can read" if not shared.get("automatic") else
            f"shares {size} with {who}{differs}; reads across heads on an automatic cache "
            "are not predicted")


def attribute_shared(request: RequestState, comparison: Comparison, *,
                     usage: CacheUsage | None, policy: CacheRules,
                     engine: EngineEvidence | None = None,
                     unknown_reason: str | None = None,
                     sizes: ReportedSizes | None = None) -> Attribution:
    """Attribute ``request`` against ``comparison.predecessor``, another lineage's call
    sharing part of its prefix (rule ``shared-prefix``; see the module docstring).

    Raises:
        ValueError: ``request`` has no segmented body or token counts (as ``attribute``).
    """
    found = attribute(request, predecessor=comparison.predecessor, usage=usage,
                      policy=policy, other_conversation=True, engine=engine,
                      unknown_reason=unknown_reason, sizes=sizes)
    shared: dict[str, Any] = dict(comparison.detail.get("shared_prefix") or {})
    tokens = found.detail.get("lcp_tokens_scaled")
    if isinstance(tokens, int):
        shared["tokens"] = tokens
    divergence = found.divergence
    if divergence is not None:
        shared["differs_at"] = divergence.path
        shared["differs_at_segment"] = divergence.segment
        shared["differs_at_kind"] = divergence.segment_kind
    predicted = found.predicted_cache_read_tokens or 0
    reads = None if usage is None else usage.cache_read_tokens
    readable = (predicted > 0 or bool(reads)) and not policy.automatic
    shared["readable_tokens"] = predicted if readable else 0
    if policy.automatic:
        shared["automatic"] = True
    if not readable:
        first = attribute(request, predecessor=None, usage=usage, policy=policy,
                          engine=engine, unknown_reason=unknown_reason, sizes=sizes)
        detail = {**first.detail, "shared_prefix": shared,
                  "shared_prefix_note": shared_note(shared, False)}
        return replace(first, detail=detail)
    detail = {**found.detail, "shared_prefix": shared,
              "shared_prefix_note": shared_note(shared, True)}
    return replace(found, detail=detail)
