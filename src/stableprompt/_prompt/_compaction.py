"""Cache events and the compaction planner: when does compacting history pay off?

Cost model (in input-token equivalents, i.e. multiples of the base input price; multiply by the
model's input price per token for USD). ``H`` is head + history now, of which ``C`` tokens are
still cached (default: all of ``H``). Per later turn without compaction, the cached history is
read and the turn's new tokens ``n`` are written; the first turn also writes what is not cached::

    cost_keep(1)    = r' * C + w * (H - C) + w * n
    cost_keep(t)    = r' * (H + (t - 1) * n) + w * n          for t >= 2

Compacting now replaces ``X`` history tokens with a ``S``-token summary. The prefix before the
span (``P`` tokens, head included) survives; everything after it must be written again once::

    cost_compact(1) = r' * P + w * (H' - P + n)               where H' = H - X + S
    cost_compact(t) = r' * (H' + (t - 1) * n) + w * n         for t >= 2

plus the summarization call itself, made now (cache-safe: head + history + an instruction)::

    summarization   = r * C + w_s * (H - C) + o * S

It reads the cached ``C``, sends the rest ``H - C`` (the turns since the last request) and
produces ``S`` output tokens at ``o`` (``output_multiplier``). ``w_s`` is ``w`` when it writes
what it sends (the default) and 1 (fresh input) with ``summary_cache_write=False``
(``Conversation.summarization_request(cache_write=False)``): nothing past ``C`` is written, so
when the surviving prefix reaches past ``C`` the first compacted turn writes that part instead
of reading it (``+ (w - r') * max(0, P - C)``). The summary instruction's few tokens are not
counted. ``r'`` (``turn_read_multiplier``) is the read price of later turns: ``r`` while the
cache outlives the gap between turns, ``w`` when it expires in between (every turn writes its
prefix again). The break-even turn is the first later turn at which the cumulative cost with
compaction is no higher than without. Multipliers come from the provider's cache rules
(:class:`~stableprompt.CacheRules`), e.g. Anthropic reads 0.1x and 5-minute writes 1.25x
(platform.claude.com prompt-caching docs). With the defaults (``C = H``, writes on, ``r' = r``)
this is the model of earlier releases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._exceptions import InputError
from .._public import public

__all__ = ["CacheEvent", "CompactionPlan", "plan_compaction"]


@dataclass(frozen=True, slots=True)
class CacheEvent:
    """A deliberate change to the cached prefix (compaction, head change).

    Attributes:
        kind: ``"compaction"`` or ``"head-change"``.
        lineage: Head fingerprint after the event (unchanged by compaction).
        prefix_before: Fingerprint of head + history before the event.
        prefix_after: Fingerprint of head + history after the event.
        invalidated_tokens: Tokens of cached prefix the event destroys (tokens).
        surviving_tokens: Tokens of cached prefix still valid (head + history before the span).
        removed_tokens: History tokens replaced.
        summary_tokens: Tokens of the summary message that replaced them.
        saved_tokens_per_turn: ``removed_tokens - summary_tokens``: input tokens saved on every
            later turn. Token fields are ``None`` when the head has no tokenizer.
        summary: The text of the message that replaced the span (``prefix + summary`` as
            :meth:`Conversation.compact` stored it); ``None`` for a head change. Lets
            ``lint_requests(events=...)`` and ``assert_prefix_stable(events=...)`` find the
            request this compaction explains in any wire format.
    """

    kind: str
    lineage: str
    prefix_before: str
    prefix_after: str
    invalidated_tokens: int | None
    surviving_tokens: int | None
    removed_tokens: int | None
    summary_tokens: int | None
    saved_tokens_per_turn: int | None
    summary: str | None = None


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """The answer of :func:`plan_compaction`.

    Attributes:
        pays_off: True when compacting now costs less over ``remaining_turns``.
        break_even_turn: First later turn (1-based) at which cumulative cost with compaction is
            no higher than without, or ``None`` if it never is within ``remaining_turns``.
        cost_keep: Total cost over the remaining turns without compaction (input-token
            equivalents).
        cost_compact: Total cost with compaction now, summarization call included.
        savings: ``cost_keep - cost_compact`` (negative when compaction loses).
    """

    pays_off: bool
    break_even_turn: int | None
    cost_keep: float
    cost_compact: float
    savings: float


def plan_compaction(
    *,
    history_tokens: int,
    span_tokens: int,
    summary_tokens: int,
    surviving_tokens: int,
    new_tokens_per_turn: int,
    remaining_turns: int,
    read_multiplier: float,
    write_multiplier: float,
    output_multiplier: float = 5.0,
    cached_tokens: int | None = None,
    summary_cache_write: bool = True,
    turn_read_multiplier: float | None = None,
) -> CompactionPlan:
    """Decide whether compacting now pays off.

    Args:
        history_tokens: ``H``: tokens of head + history now (the prefix of the next turn).
        span_tokens: ``X``: tokens of the history span to replace.
        summary_tokens: ``S``: expected summary tokens.
        surviving_tokens: ``P``: tokens before the span (head included) that stay cached.
        new_tokens_per_turn: ``n``: tokens appended per later turn.
        remaining_turns: Later turns expected in this session.
        read_multiplier: Cache-read price as a multiple of fresh input (Anthropic 0.1).
        write_multiplier: Cache-write price multiple (Anthropic 5 m: 1.25; 1 h: 2.0).
        output_multiplier: Output price as a multiple of input price, for the summary
            generated by the summarization call (default 5.0, typical of frontier models).
        cached_tokens: ``C``: tokens of ``history_tokens`` still cached now (default: all);
            0 when the cache has expired.
        summary_cache_write: Whether the summarization call writes the uncached rest of its
            prefix (the default) or sends it without writing (see the module docstring).
        turn_read_multiplier: ``r'``: read price of later turns (default
            ``read_multiplier``); pass ``write_multiplier`` when the cache expires between
            turns.

    Returns:
        CompactionPlan; costs in input-token equivalents (multiples of the fresh input price).

    Raises:
        InputError: negative or non-int counts, non-finite or negative multipliers,
            ``span_tokens > history_tokens``,
            ``surviving_tokens > history_tokens - span_tokens``,
            ``cached_tokens > history_tokens`` or a non-bool ``summary_cache_write`` (code
            ``compaction-input``).
    """
    values = dict(history_tokens=history_tokens, span_tokens=span_tokens,
                  summary_tokens=summary_tokens, surviving_tokens=surviving_tokens,
                  new_tokens_per_turn=new_tokens_per_turn, remaining_turns=remaining_turns,
                  cached_tokens=history_tokens if cached_tokens is None else cached_tokens)
    for name, value in values.items():
        if type(value) is not int or value < 0:
            raise InputError(f"{name} must be an int >= 0, got {value!r}",
                             code="compaction-input")
    turn_read = read_multiplier if turn_read_multiplier is None else turn_read_multiplier
    multipliers = dict(read_multiplier=read_multiplier, write_multiplier=write_multiplier,
                       output_multiplier=output_multiplier, turn_read_multiplier=turn_read)
    for name, factor in multipliers.items():
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not (
                math.isfinite(factor) and factor >= 0):
            raise InputError(f"{name} must be a finite number >= 0, got {factor!r}",
                             code="compaction-input")
    if span_tokens > history_tokens or surviving_tokens > history_tokens - span_tokens:
        raise InputError("span and surviving tokens must fit inside history_tokens",
                         code="compaction-input")
    cached = values["cached_tokens"]
    if cached > history_tokens:
        raise InputError(f"cached_tokens ({cached}) must be at most history_tokens "
                         f"({history_tokens})", code="compaction-input")
    if type(summary_cache_write) is not bool:
        raise InputError(f"summary_cache_write must be a bool, got {summary_cache_write!r}",
                         code="compaction-input")
    r, w, n, rt = read_multiplier, write_multiplier, new_tokens_per_turn, turn_read
    h, p = history_tokens, surviving_tokens
    compacted = h - span_tokens + summary_tokens
    # the summarization call: reads C, writes (or only sends) the rest, generates S
    sent = w if summary_cache_write else 1.0
    compact_total = r * cached + sent * (h - cached) + output_multiplier * summary_tokens
    # without writing, the surviving prefix past C is written by the first compacted turn
    read_first = p if summary_cache_write else min(p, cached)
    keep_total = 0.0
    break_even: int | None = None
    for t in range(1, remaining_turns + 1):
        if t == 1:
            keep_total += rt * cached + w * (h - cached) + w * n
            compact_total += rt * read_first + w * (compacted - read_first + n)
        else:
            keep_total += rt * (h + (t - 1) * n) + w * n
            compact_total += rt * (compacted + (t - 1) * n) + w * n
        if break_even is None and compact_total <= keep_total:
            break_even = t
    return CompactionPlan(
        pays_off=compact_total < keep_total,
        break_even_turn=break_even,
        cost_keep=keep_total,
        cost_compact=compact_total,
        savings=keep_total - compact_total,
    )


public(CacheEvent, CompactionPlan, plan_compaction)
