"""Compaction priced at the call: :class:`CompactionAdvice`, what a conversation observed.

:meth:`Conversation.compaction_advice <stableprompt.Conversation.compaction_advice>` hands its
token counts to :func:`advise_compaction`, which prices both ways
with :func:`~stableprompt.plan_compaction` (the cost model, in input-token equivalents) and
converts to USD with the model's unit prices (:func:`stableprompt._economics._prices.unit_prices`,
genai-prices). ``Conversation.compact`` asks the same function and warns
(:class:`~stableprompt.CompactionCostWarning`) when compacting does not pay.

What the conversation observes (:class:`TurnLog`): each :meth:`~stableprompt.Conversation.render`
of a history not rendered just before is one turn (one request; a retry of the same request is
not another), stamped with the conversation's clock (seconds, ``time.monotonic`` unless one is
given) and the tokens of its head + history. From those come the turn rate (the median gap
between turns), the tokens a turn adds, and whether the cache outlives the gap. The provider and
model come from the last response given to ``add_response`` (its ``model`` field), unless passed.

Estimates, when not given (each one named in :attr:`CompactionAdvice.notes`):

* remaining turns: as many more as observed so far (a session that has lasted N turns is
  expected to last about N more), or, with none observed (a resumed conversation), as many as
  the history's assistant turns; at least 1;
* tokens a turn adds: the mean growth of head + history between the turns observed since the
  last compaction, or, with fewer than two, the history's tokens per assistant turn;
* the cache is warm (``cached_tokens`` is what the last rendered request wrote) unless the
  last turn is older than the TTL; when the median gap between turns exceeds the TTL, later
  turns read nothing and their reads are priced as writes.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from .._economics._prices import unit_prices
from .._exceptions import InputError
from .._policy import TTL_LABELS_S, cache_rules
from .._public import public
from .._wire._formats import response_format
from ._compaction import CompactionPlan, plan_compaction

__all__ = ["CompactionAdvice", "TurnLog", "advise_compaction", "served_by", "worth_advising"]

DEFAULT_OUTPUT_MULTIPLIER = 5.0
"""Output price as a multiple of input when the model has no unit price (plan_compaction's
default)."""

#: Provider of each response format whose body names the model, and the field naming it.
_SERVED_BY = {"anthropic": ("anthropic", "model"), "openai-chat": ("openai", "model"),
              "openai-responses": ("openai", "model"), "gemini": ("gemini", "modelVersion")}


def served_by(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(provider, model)`` a response body names, or ``None`` (Bedrock Converse bodies name
    no model; a missing or empty field). ``body`` is a response ``add_response`` took."""
    found = _SERVED_BY.get(response_format(body))
    if found is None:
        return None
    model = body.get(found[1])
    return (found[0], model) if isinstance(model, str) and model else None


class TurnLog:
    """The turns a conversation observed: clock time (seconds) and head + history tokens
    (``None`` without a tokenizer) of each, and where the last compaction was."""

    __slots__ = ("_since", "times_s", "tokens")

    def __init__(self) -> None:
        self.times_s: list[float] = []
        self.tokens: list[int | None] = []
        self._since = 0  # first turn after the last compaction

    def observe(self, time_s: float, tokens: int | None) -> None:
        """Record one turn."""
        self.times_s.append(time_s)
        self.tokens.append(tokens)

    def compacted(self) -> None:
        """The history was replaced: token growth is measured from the next turn on."""
        self._since = len(self.times_s)

    def copy(self) -> TurnLog:
        """An independent copy (for ``Conversation.fork``)."""
        other = TurnLog()
        other.times_s, other.tokens = list(self.times_s), list(self.tokens)
        other._since = self._since
        return other

    @property
    def count(self) -> int:
        """Turns observed."""
        return len(self.times_s)

    @property
    def last_s(self) -> float | None:
        """Clock time of the last turn."""
        return self.times_s[-1] if self.times_s else None

    def interval_s(self) -> float | None:
        """Median gap between consecutive turns (seconds), ``None`` with fewer than two."""
        times = self.times_s
        if len(times) < 2:
            return None
        return float(statistics.median(b - a for a, b in itertools.pairwise(times)))

    def growth(self) -> float | None:
        """Mean tokens a turn added since the last compaction (the history is append-only in
        between), ``None`` with fewer than two such turns or unknown counts."""
        first, last = self.tokens[self._since:self._since + 1], self.tokens[-1:]
        turns = len(self.tokens) - self._since
        if turns < 2 or first[0] is None or last[0] is None:
            return None
        return (last[0] - first[0]) / (turns - 1)


@dataclass(frozen=True, slots=True)
class CompactionAdvice:
    """Whether compacting history messages ``[start, end)`` now pays, priced at the call.

    Token fields are tokens of the head's tokenizer (an estimate of the provider's count);
    costs are totals over the expected remaining turns, the summarization call included.

    Attributes:
        provider: Provider priced (``"anthropic"``, ``"openai"``...).
        model: Model priced.
        ttl: Cache TTL label assumed for writes (``"5m"``, ``"1h"``, ``"30m"``...), ``None``
            for a provider without labels (automatic caching).
        ttl_s: That TTL in seconds, ``None`` when the provider has none.
        start: First history message replaced.
        end: One past the last one replaced.
        history_tokens: ``H``: head + history now.
        cached_tokens: ``C``: of ``H``, tokens expected in the cache now: what the last
            rendered request wrote (0 before any render, after a compaction, or when the
            last turn is older than the TTL).
        invalidated_tokens: Tokens of prefix the compaction invalidates, cached or not (the
            history from ``start`` on), as :attr:`CacheEvent.invalidated_tokens` will report;
            :attr:`destroyed_tokens` is the cached part.
        surviving_tokens: ``P``: head + history before ``start``: stays cached.
        span_tokens: ``X``: tokens of the messages replaced.
        summary_tokens: ``S``: the summary message's tokens (given, or counted by
            ``compact``).
        saved_tokens_per_turn: ``X - S``: tokens fewer on every later request.
        new_tokens_per_turn: ``n``: tokens a later turn adds (given or estimated).
        new_tokens_basis: ``"given"``, ``"observed"`` (mean growth between observed turns)
            or ``"history"`` (history tokens per assistant turn).
        remaining_turns: Later turns priced (given or estimated).
        remaining_turns_basis: ``"given"``, ``"observed"`` (as many more as observed) or
            ``"history"`` (as many as the history's assistant turns; none observed).
        turns_observed: Turns (distinct rendered requests) this conversation saw.
        turn_interval_s: Median seconds between observed turns (the inverse of the observed
            turn rate, see :attr:`turns_per_hour`), ``None`` with fewer than two.
        expires_between_turns: The median gap exceeds the TTL: later turns are priced as
            writing their whole prefix again (compaction destroys nothing that would have
            been read).
        read_multiplier: Cache read price / fresh input price.
        write_multiplier: Cache write price at ``ttl`` / fresh input price.
        output_multiplier: Output price / fresh input price (the summary is output).
        plan: The cost model's answer (:func:`plan_compaction`): ``cost_keep``,
            ``cost_compact``, ``savings`` in input-token equivalents, ``break_even_turn``,
            ``pays_off``; for the summarization call sent as :attr:`summary_cache_write`
            says.
        summary_cache_write: The ``cache_write`` to pass to
            ``Conversation.summarization_request``: ``False`` when sending the summarization
            call's uncached rest without writing it is cheaper (a one-shot summary whose
            prefix is replaced right after: the write premium buys nothing), ``True`` (the
            default) when it is no cheaper.
        input_usd_per_token: USD of one fresh input token (genai-prices), ``None`` when the
            model has no price: the USD fields are then ``None`` too, never $0.
        cost_keep_usd: ``plan.cost_keep`` in USD.
        cost_compact_usd: ``plan.cost_compact`` in USD.
        savings_usd: ``plan.savings`` in USD (negative when compacting loses).
        saved_usd_per_turn: What each later turn saves in USD (its saved tokens at the read
            price later turns pay).
        prices_source: ``"genai-prices <version> (<day>)"``, ``None`` when unpriced.
        notes: One sentence per estimate or assumption made, in plain words.
    """

    provider: str
    model: str
    ttl: str | None
    ttl_s: int | None
    start: int
    end: int
    history_tokens: int
    cached_tokens: int
    invalidated_tokens: int
    surviving_tokens: int
    span_tokens: int
    summary_tokens: int
    saved_tokens_per_turn: int
    new_tokens_per_turn: int
    new_tokens_basis: str
    remaining_turns: int
    remaining_turns_basis: str
    turns_observed: int
    turn_interval_s: float | None
    expires_between_turns: bool
    read_multiplier: float
    write_multiplier: float
    output_multiplier: float
    plan: CompactionPlan
    summary_cache_write: bool
    input_usd_per_token: float | None
    cost_keep_usd: float | None
    cost_compact_usd: float | None
    savings_usd: float | None
    saved_usd_per_turn: float | None
    prices_source: str | None
    notes: tuple[str, ...]

    @property
    def pays_off(self) -> bool:
        """Compacting now costs less than keeping the history over the remaining turns."""
        return self.plan.pays_off

    @property
    def break_even_turn(self) -> int | None:
        """First later turn (1-based) by which compacting has cost no more than keeping,
        ``None`` when that is not within :attr:`remaining_turns`."""
        return self.plan.break_even_turn

    @property
    def destroyed_tokens(self) -> int:
        """Cached tokens the compaction destroys: the part of :attr:`cached_tokens` past the
        surviving prefix (``invalidated_tokens`` counts the prefix whether cached or not)."""
        return max(0, self.cached_tokens - self.surviving_tokens)

    @property
    def turns_per_hour(self) -> float | None:
        """The observed turn rate: ``3600 / turn_interval_s`` (``None`` when unknown or the
        turns came at the same instant)."""
        gap = self.turn_interval_s
        return None if not gap else 3600.0 / gap

    def __str__(self) -> str:
        """The advice as one paragraph with its numbers (the warning's text)."""
        verdict = "pays" if self.pays_off else "does not pay"
        turns = (f"{self.remaining_turns} later turn{'s' if self.remaining_turns != 1 else ''}"
                 f" ({_BASIS[self.remaining_turns_basis]})")
        rate = (f", one every {_seconds(self.turn_interval_s)}"
                if self.turn_interval_s is not None else "")
        usd = (f"${self.cost_compact_usd:,.4f} with compaction vs ${self.cost_keep_usd:,.4f} "
               f"without" if self.cost_compact_usd is not None and
               self.cost_keep_usd is not None else "USD unknown")
        even = (f"it breaks even at turn {self.break_even_turn}" if self.break_even_turn
                else "it does not break even")
        text = (f"compacting messages [{self.start}, {self.end}) {verdict} within the expected "
                f"{turns}{rate}: it invalidates {self.invalidated_tokens:,} tokens of prefix "
                f"({self.destroyed_tokens:,} of them cached now), keeps "
                f"{self.surviving_tokens:,} and saves {self.saved_tokens_per_turn:,} tokens on "
                f"every later request; {usd} ({self.plan.cost_compact:,.0f} vs "
                f"{self.plan.cost_keep:,.0f} input-token equivalents, {self.provider} "
                f"{self.model}); {even}")
        if not self.summary_cache_write:
            text += ("; the summarization call is cheaper sent with "
                     "summarization_request(cache_write=False)")
        return text + "."


def _seconds(value: float) -> str:
    """Seconds for a sentence: whole ones from 10 s on, two significant digits below."""
    return f"{value:,.0f} s" if value >= 10 else f"{value:.2g} s"


_BASIS = {"given": "given", "observed": "as many more as observed so far",
          "history": "as many as the history's assistant turns"}


def _count(name: str, value: object, *, optional: bool = True) -> int | None:
    """``value`` checked as an int >= 0 (``None`` allowed when ``optional``)."""
    if value is None and optional:
        return None
    if type(value) is not int or value < 0:
        raise InputError(f"{name} must be an int >= 0, got {value!r}", code="compaction-input",
                         pointer=f"/{name}")
    return value


def _ttl(rules_labels: Mapping[str, float], default_s: int | None,
         ttl: str | None) -> tuple[str | None, int | None]:
    """The TTL label and seconds to price: ``ttl`` checked against the provider's labels,
    or its default."""
    if ttl is None:
        return next(iter(rules_labels), None), default_s
    if ttl not in rules_labels:
        offered = ", ".join(map(repr, rules_labels)) or "none (automatic caching: pass None)"
        raise InputError(f"ttl {ttl!r} is not a cache TTL of this model; labels: {offered}",
                         code="compaction-input", pointer="/ttl")
    return ttl, TTL_LABELS_S.get(ttl)


def worth_advising(served: tuple[str, str] | None, provider: str | None,
                   model: str | None) -> bool:
    """Whether ``Conversation.compact`` consults the advice: a provider or model passed, or
    both learned from a response (``served``) and known to the cache-rules table (a model
    there only by the provider's conservative default, e.g. a local server behind the Chat
    Completions format, is not priced)."""
    if provider is not None or model is not None:
        return True
    return served is not None and not cache_rules(*served).conservative


def advise_compaction(*, head_tokens: int | None, token_sums: Sequence[int | None],
                      written: int | None, assistant_turns: int, turns: TurnLog,
                      served: tuple[str, str] | None, start: int, end: int,
                      summary_tokens: object, provider: str | None = None,
                      model: str | None = None, remaining_turns: object = None,
                      new_tokens_per_turn: object = None, ttl: str | None = None,
                      now_s: object, day: object = None) -> CompactionAdvice:
    """Price compacting history messages ``[start, end)`` now against keeping them (see the
    module docstring); the arguments of ``Conversation.compaction_advice`` and the
    conversation's state.

    Args:
        head_tokens: Head tokens (``None``: no tokenizer).
        token_sums: History tokens through each message (``None`` once unknown).
        written: History messages the last rendered request held (it wrote head + those),
            ``None`` when none was rendered since the conversation began or was compacted.
        assistant_turns: Assistant messages in the history.
        turns: What the conversation observed.
        served: ``(provider, model)`` of the last response added, if any.
        start, end: The span (checked by the caller).
        summary_tokens: The summary message's tokens (int >= 0).
        provider, model: Given, or ``None``: ``served``'s.
        remaining_turns, new_tokens_per_turn: Given (int >= 0) or ``None`` (estimated).
        ttl: Cache TTL label, or ``None`` for the provider's default.
        now_s: Clock time (seconds) of the advice.
        day: The day priced (``date``), or ``None``: today (UTC).

    Raises:
        InputError: no provider or model (code ``compaction-model``); no tokenizer (code
            ``compaction-tokens``); a count that is not an int >= 0, a ``now`` that is not a
            finite number, a ``day`` that is not a date, a ``ttl`` the model does not offer,
            an empty provider or model (code ``compaction-input``).
        PolicyError: ``provider`` has no cache rules (code ``policy-unknown-provider``).
    """
    learned = served or (None, None)
    provider = learned[0] if provider is None else provider
    model = learned[1] if model is None else model
    if provider is None or model is None:
        raise InputError("the provider and model to price are unknown: pass provider= and "
                         "model= (e.g. provider='anthropic', model='claude-sonnet-4-6'), or add "
                         "a response with add_response() first", code="compaction-model")
    history = token_sums[-1] if token_sums else 0
    if head_tokens is None or history is None:
        raise InputError("the head has no tokenizer (PromptBuilder(tokenizer=None)), so the "
                         "tokens a compaction destroys and saves are unknown",
                         code="compaction-tokens")
    # an unknown count stops the running sums for good: with the last one known, all are
    before, through = (token_sums[start - 1] if start else 0), token_sums[end - 1]
    written_history = (token_sums[written - 1] if written else 0)
    assert before is not None and through is not None and written_history is not None
    return _advise(
        provider=provider, model=model, ttl=ttl, start=start, end=end,
        history_tokens=head_tokens + history, history_only_tokens=history,
        cached_tokens=0 if written is None else head_tokens + written_history,
        surviving_tokens=head_tokens + before, span_tokens=through - before,
        summary_tokens=summary_tokens, assistant_turns=assistant_turns, turns=turns,
        remaining_turns=remaining_turns, new_tokens_per_turn=new_tokens_per_turn,
        now_s=now_s, day=day)


def _advise(*, provider: str, model: str, ttl: str | None, start: int, end: int,
            history_tokens: int, history_only_tokens: int, cached_tokens: int,
            surviving_tokens: int, span_tokens: int, summary_tokens: object,
            assistant_turns: int, turns: TurnLog, remaining_turns: object,
            new_tokens_per_turn: object, now_s: object, day: object) -> CompactionAdvice:
    """:func:`advise_compaction` once the counts are known: ``H`` (``history_tokens``),
    ``C``, ``P``, ``X`` and the history alone.

    Raises:
        InputError / PolicyError: see :func:`advise_compaction`.
    """
    summary = _count("summary_tokens", summary_tokens, optional=False)
    given_turns = _count("remaining_turns", remaining_turns)
    given_n = _count("new_tokens_per_turn", new_tokens_per_turn)
    assert summary is not None
    for name, value in (("provider", provider), ("model", model)):
        if not isinstance(value, str) or not value:
            raise InputError(f"{name} must be a non-empty str, got {value!r}",
                             code="compaction-input", pointer=f"/{name}")
    if isinstance(now_s, bool) or not isinstance(now_s, (int, float)) or not math.isfinite(
            now_s):
        raise InputError(f"now must be a finite number of seconds on the conversation's clock, "
                         f"got {now_s!r}", code="compaction-input", pointer="/now")
    if day is None:
        day = datetime.now(UTC).date()
    elif isinstance(day, datetime):
        day = day.date()
    elif not isinstance(day, date):
        raise InputError(f"day must be a datetime.date, got {day!r}", code="compaction-input",
                         pointer="/day")
    rules = cache_rules(provider, model)
    label, ttl_s = _ttl(rules.write_multipliers, rules.default_ttl_s, ttl)
    notes: list[str] = []
    if rules.conservative:
        notes.append(f"{model} is not in the policy table: {provider}'s default cache rules "
                     "are used")

    # remaining turns: given, or as many more as observed, or as the history's
    if given_turns is not None:
        remaining, turns_basis = given_turns, "given"
    elif turns.count:
        remaining, turns_basis = turns.count, "observed"
        notes.append(f"remaining turns: {remaining}, as many more as observed so far")
    else:
        remaining, turns_basis = max(1, assistant_turns), "history"
        notes.append(f"remaining turns: {remaining}, as many as the history's assistant turns "
                     "(no turn observed)")
    # tokens a turn adds: given, or the mean observed growth, or history per assistant turn
    growth = turns.growth()
    if given_n is not None:
        n, n_basis = given_n, "given"
    elif growth is not None:
        n, n_basis = max(0, round(growth)), "observed"
        notes.append(f"tokens per turn: {n:,}, the mean growth between observed turns")
    else:
        n, n_basis = round(history_only_tokens / max(1, assistant_turns)), "history"
        notes.append(f"tokens per turn: {n:,}, the history's tokens per assistant turn")

    # is the cache warm now, and between turns?
    interval = turns.interval_s()
    last = turns.last_s
    expires = interval is not None and ttl_s is not None and interval > ttl_s
    cached = cached_tokens
    if last is None:
        notes.append("no turn observed: the cache is assumed warm")
    elif ttl_s is not None and now_s - last > ttl_s:
        cached = 0
        notes.append(f"the last turn was {_seconds(now_s - last)} ago, past the {ttl_s} s TTL: "
                     "nothing is cached now")
    if expires and interval is not None:
        notes.append(f"turns come every {_seconds(interval)} (median), past the {ttl_s} s TTL: "
                     "later turns write their whole prefix again")

    # multipliers and USD from the unit prices, else from the cache rules
    prices = unit_prices(provider, model, day)
    if prices is not None and prices.input > 0:
        usd: float | None = prices.input
        # ratios of prices, rounded off the float noise of the divisions (0.09999999999999999)
        r = round(prices.cache_read / prices.input, 12)
        w = round(prices.write(label, rules.write_multipliers) / prices.input, 12)
        o = round(prices.output / prices.input, 12)
        source: str | None = prices.source
    else:
        usd, source = None, None
        r = rules.read_multiplier
        w = rules.write_multipliers.get(label, 1.0) if label else 1.0
        o = DEFAULT_OUTPUT_MULTIPLIER
        notes.append(f"USD unknown: genai-prices has no price for {provider} {model} on "
                     f"{day.isoformat()} (or is not installed); multipliers from the cache "
                     f"rules, output at {o:g}x input")
    turn_read = w if expires else r

    common: dict[str, Any] = dict(
        history_tokens=history_tokens, span_tokens=span_tokens, summary_tokens=summary,
        surviving_tokens=surviving_tokens, new_tokens_per_turn=n, remaining_turns=remaining,
        read_multiplier=r, write_multiplier=w, output_multiplier=o, cached_tokens=cached,
        turn_read_multiplier=turn_read)
    writing = plan_compaction(**common)
    reading = plan_compaction(summary_cache_write=False, **common)
    write = not reading.cost_compact < writing.cost_compact
    plan = writing if write else reading
    saved = span_tokens - summary

    def dollars(tokens: float) -> float | None:
        return None if usd is None else tokens * usd

    return CompactionAdvice(
        provider=provider, model=model, ttl=label, ttl_s=ttl_s, start=start, end=end,
        history_tokens=history_tokens, cached_tokens=cached,
        invalidated_tokens=history_tokens - surviving_tokens,
        surviving_tokens=surviving_tokens, span_tokens=span_tokens, summary_tokens=summary,
        saved_tokens_per_turn=saved, new_tokens_per_turn=n, new_tokens_basis=n_basis,
        remaining_turns=remaining, remaining_turns_basis=turns_basis,
        turns_observed=turns.count, turn_interval_s=interval, expires_between_turns=expires,
        read_multiplier=r, write_multiplier=w, output_multiplier=o, plan=plan,
        summary_cache_write=write, input_usd_per_token=usd,
        cost_keep_usd=dollars(plan.cost_keep), cost_compact_usd=dollars(plan.cost_compact),
        savings_usd=dollars(plan.savings), saved_usd_per_turn=dollars(saved * turn_read),
        prices_source=source, notes=tuple(notes))


public(CompactionAdvice)
