"""Keep-alive, opt-in: while a conversation is idle, refresh its cached prefix just before it
expires, while the expected saving exceeds the price, never more than a hard cap.

A harness sends its real requests through a scheduler instead of its client::

    client = AnthropicClient(recorder=Recorder(Ledger("calls.db")))
    policy = CachePolicy(keep_alive=KeepAlive(interval_s=270, max_pings=6))
    with KeepAliveScheduler(client, policy).start() as keep:
        reply = keep.send(request, conversation="ticket-42")  # instead of client.send
        ...

After each real request of a conversation, the scheduler plans a **ping**: the same request up
to its last cache breakpoint, asking for one output token, not streamed (``_keepalive_ping``:
it reads the cached prefix, which restarts its TTL, and writes nothing new). A ping is due
``interval_s`` after the last refresh (the real request, or the previous ping). When due, it
is sent only if its expected saving exceeds its price by ``min_expected_saving_usd``
(``_economics._keepalive_value``: the gap distribution estimated from the conversation's own
gaps with a log-uniform prior, prices from
:func:`~stableprompt._economics._prices.unit_prices` at the clock's date, TTLs from
:func:`~stableprompt.cache_rules`). Pinging stops for the gap:

- at the hard cap, ``max_pings`` per idle gap (counted when a ping is sent, failed ones
  included): **never more**;
- when the conversation sends again (:meth:`KeepAliveScheduler.send`: a new gap starts), is
  closed (:meth:`~KeepAliveScheduler.close_conversation`) or the scheduler is;
- when a due ping is not worth its price, its entry expired (a late tick), or a ping failed.

Every ping goes through the client's recording transport like any call, and its ledger row is
marked ``verdict_detail["keepalive"] = true`` with ``keepalive_ping`` (its number in the gap),
``keepalive_gap_s`` (seconds since the real request) and ``keepalive_expected_net_usd`` (the
decision's expected saving minus cost); ``_accounting._keepalive.keepalive_totals`` counts and
prices them for the report. A proxy between the client and the
provider records a ping as an ordinary call (the mark is a request extension, never sent).

Time: the scheduler reads ``clock`` (epoch seconds, ``time.time``) for every decision; nothing
waits inside it except :meth:`~KeepAliveScheduler.start`'s background thread, so tests drive it
with the emulator's :class:`~stableprompt.emulator.FakeClock` and :meth:`run_pending`
(``clock=emulator.clock``). Threads, not asyncio, for the sync clients: one daemon thread per
scheduler sleeps until the next ping is due (``threading.Event.wait``, woken by every send and
close); :class:`AsyncKeepAliveScheduler` is the asyncio twin for the async clients (one task).
Both need a real clock to run on their own; with a fake one, call :meth:`run_pending`.

The real request's answer is always returned once the provider sent it (it was billed):
whatever goes wrong planning the ping after it leaves the conversation without one (status
reason ``plan-failed``, a warning logged once per scheduler), never an exception from
``send``. Misuse is refused up front instead, when the scheduler is made (code
``keepalive-config``): a sync client under :class:`AsyncKeepAliveScheduler` or the
reverse, a ``clock`` or ``prices`` that is not callable.

Supported: Anthropic Messages, and OpenAI Chat Completions / Responses on models with a
documented TTL refreshed by a read (GPT-5.6+); anything else gets no ping and says why
(:attr:`KeepAliveStatus.reason`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import httpx

from .._canonical import wire_json
from .._economics._cache_policy import CachePolicy, KeepAlive
from .._economics._keepalive_value import GapModel, PingValue, ping_value
from .._economics._prices import UnitPrices, unit_prices
from .._exceptions import InputError, ProviderError
from .._policy import CacheRules, cache_rules
from .._public import public
from .._usage import CacheUsage
from .._wire._formats import endpoint_path, provider_for
from .._wire._registry import parse_response
from .._wire._request import ProviderRequest
from ._keepalive_ping import NoPing, PingPlan, ping_plan

__all__ = ["AsyncKeepAliveScheduler", "KeepAliveScheduler", "KeepAliveStatus", "PingResult"]

_log = logging.getLogger("stableprompt.keepalive")

PriceLookup = Callable[[str, str, date], "UnitPrices | None"]
"""``(provider, model, day) -> UnitPrices`` (default
:func:`~stableprompt._economics._prices.unit_prices`)."""


@dataclass(frozen=True, slots=True)
class KeepAliveStatus:
    """Where one conversation's keep-alive stands.

    Attributes:
        conversation: Its key.
        pings: Pings sent in the current idle gap (at most ``max_pings``).
        pings_total: Pings sent over the conversation's life.
        spent_usd: What the pings cost (USD, their reported usage at unit prices).
        next_due: Clock time (epoch seconds) of the next ping, ``None`` when none is planned.
        reason: Why none is planned (a slug: ``cap``, ``not-worth-it``, ``expired``,
            ``no-estimate``, ``no-breakpoint``, ``thinking``, ``no-ttl``,
            ``no-explicit-ttl``, ``interval-too-long``, ``unpriced``, ``usage-unknown``,
            ``nothing-cached``, ``ping-failed``, ``plan-failed`` (planning raised
            unexpectedly, e.g. the price lookup: logged as a warning once per scheduler),
            ``closed``...), ``None`` while one is.
        ttl_s: TTL (seconds) of the entry kept, once known.
        extent_tokens: Tokens of the cached prefix a ping reads, once known.
        gaps_observed: Idle gaps of the conversation observed so far.
    """

    conversation: str
    pings: int
    pings_total: int
    spent_usd: float
    next_due: float | None
    reason: str | None
    ttl_s: int | None
    extent_tokens: int | None
    gaps_observed: int


@dataclass(frozen=True, slots=True)
class PingResult:
    """One ping sent by :meth:`KeepAliveScheduler.run_pending`.

    Attributes:
        conversation: Its conversation.
        ping: Its number in the idle gap (1-based).
        sent_at: Clock time it was sent (epoch seconds).
        value: The decision that sent it (expected hit probability, saving, cost).
        usage: Its reported usage, ``None`` when it failed.
        usd: Its cost at unit prices (USD), ``None`` when it failed.
        error: The provider error, ``None`` when it succeeded.
    """

    conversation: str
    ping: int
    sent_at: float
    value: PingValue
    usage: CacheUsage | None = None
    usd: float | None = None
    error: ProviderError | None = None


@dataclass
class _Conversation:
    """A conversation's keep-alive state (guarded by the scheduler's lock)."""

    key: str
    gaps: GapModel
    generation: int = 0
    last_real: float | None = None  # clock time of the last real request
    refreshed: float | None = None  # clock time of the last refresh (request or ping)
    request: ProviderRequest | None = None  # the ping to send
    plan: PingPlan | None = None
    extent: int | None = None  # tokens cached through the last breakpoint
    extent_of: Callable[[], int | None] | None = None  # a stream's, once it ended
    uncached: int = 0  # a ping's tokens after its breakpoint (the last ping's)
    prices: UnitPrices | None = None
    rules: CacheRules | None = None
    pings: int = 0
    pings_total: int = 0
    spent_usd: float = 0.0
    next_due: float | None = None
    reason: str | None = None
    busy: bool = False
    closed: bool = False


@dataclass(frozen=True, slots=True)
class _Due:
    conversation: _Conversation
    generation: int
    ping: int
    sent_at: float
    request: ProviderRequest
    value: PingValue


def _keep_alive_of(settings: KeepAlive | CachePolicy) -> KeepAlive:
    if isinstance(settings, CachePolicy):
        if settings.keep_alive is None:
            raise InputError("the cache policy has no keep_alive settings: set "
                             "CachePolicy(keep_alive=KeepAlive(interval_s=..., max_pings=...))",
                             code="keepalive-config")
        return settings.keep_alive
    if isinstance(settings, KeepAlive):
        return settings
    raise InputError(f"keep_alive must be a KeepAlive or a CachePolicy, got "
                     f"{type(settings).__name__}", code="keepalive-config")


def _usage_extent(usage: CacheUsage) -> int | None:
    if usage.cache_read_tokens is None:
        return None
    return usage.cache_read_tokens + (usage.cache_write_tokens or 0)


def _usd(usage: CacheUsage, prices: UnitPrices) -> float:
    """A call's cost at linear unit prices (1-hour writes at their own rate; an uncached
    remainder that does not add up counts as 0)."""
    read, write = usage.cache_read_tokens or 0, usage.cache_write_tokens or 0
    total = max(usage.input_tokens_total or 0, read + write)
    return prices.usd(total, read, write, min(usage.cache_write_1h_tokens or 0, write),
                      usage.output_tokens or 0)


class _KeepAliveCore:
    """Configuration, per-conversation state and the decisions both schedulers share; the
    subclasses only send and wait."""

    _is_async = False
    """Whether the scheduler awaits its client (the client's ``send`` must match)."""

    @staticmethod
    def _client_kind_error(client: str) -> str:
        return (f"KeepAliveScheduler sends through a sync client, got {client} (async): use "
                "AsyncKeepAliveScheduler for AsyncAnthropicClient, AsyncOpenAIClient, ...")

    def __init__(self, client: Any, keep_alive: KeepAlive | CachePolicy, *,
                 clock: Callable[[], float] = time.time,
                 prior_gaps_s: list[float] | tuple[float, ...] | None = None,
                 prior_weight: float = 1.0, prices: PriceLookup = unit_prices) -> None:
        self.keep_alive = _keep_alive_of(keep_alive)
        if not callable(getattr(client, "send", None)) or not hasattr(client, "_send_marked"):
            raise InputError(f"client must be a stableprompt client (AnthropicClient, "
                             f"OpenAIClient, ...), got {type(client).__name__}",
                             code="keepalive-config")
        if inspect.iscoroutinefunction(client.send) != self._is_async:
            raise InputError(self._client_kind_error(type(client).__name__),
                             code="keepalive-config")
        if not callable(clock):
            raise InputError(f"clock must be callable (() -> epoch seconds, e.g. time.time), "
                             f"got {clock!r}", code="keepalive-config")
        if not callable(prices):
            raise InputError(f"prices must be callable ((provider, model, day) -> UnitPrices "
                             f"| None; default genai-prices), got {prices!r}",
                             code="keepalive-config")
        if not isinstance(prior_weight, (int, float)) or isinstance(prior_weight, bool) \
                or not 0 <= prior_weight < float("inf"):
            raise InputError(f"prior_weight must be a finite number >= 0, got "
                             f"{prior_weight!r}", code="keepalive-config")
        if prior_gaps_s is not None and any(
                isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 <= g < float("inf")
                for g in prior_gaps_s):
            raise InputError("prior_gaps_s must be finite gaps in seconds >= 0",
                             code="keepalive-config")
        self.client = client
        self.clock = clock
        if prior_gaps_s is None and self.keep_alive.prior_gaps_s:
            prior_gaps_s = self.keep_alive.prior_gaps_s  # what the policy was chosen on
        self._prior = None if prior_gaps_s is None else list(prior_gaps_s)
        self._prior_weight = float(prior_weight)
        self._prices = prices
        self._lock = threading.Lock()
        self._conversations: dict[str, _Conversation] = {}
        self._closed = False
        self._plan_failure_logged = False

    # -- state -----------------------------------------------------------------------------

    def _conversation(self, key: str) -> _Conversation:
        if not isinstance(key, str) or not key:
            raise InputError(f"conversation must be a non-empty string, got {key!r}",
                             code="keepalive-conversation")
        found = self._conversations.get(key)
        if found is None:
            found = self._conversations[key] = _Conversation(
                key, GapModel(self._prior, self._prior_weight))
        return found

    def _begin(self, key: str) -> _Conversation:
        """A real request of ``key`` is about to go: the gap ends (observed), no ping of the
        old gap is sent any more."""
        if self._closed:
            raise InputError("the keep-alive scheduler is closed", code="keepalive-closed")
        with self._lock:
            conv = self._conversation(key)
            now = self.clock()
            if conv.last_real is not None and now >= conv.last_real:
                conv.gaps.observe(now - conv.last_real)
            conv.generation += 1
            conv.last_real = conv.refreshed = now
            conv.next_due = None
            conv.pings = 0
            conv.closed = False
            conv.reason = "in-flight"
            return conv

    def _failed(self, conv: _Conversation, generation: int) -> None:
        """The real request of ``generation`` raised: no pings for it (unless a later
        request already re-armed the conversation)."""
        with self._lock:
            if conv.generation == generation:
                conv.reason = "request-failed"

    def _arm(self, conv: _Conversation, request: ProviderRequest | Mapping[str, Any],
             result: Any, generation: int) -> None:
        """Plan the conversation's next ping after its real request ``request`` answered
        ``result`` (a response dict, or a stream whose record comes when it ends)."""
        with self._lock:
            if conv.generation != generation or self._closed:
                return
            try:
                self._plan(conv, request, result)
            except NoPing as exc:
                conv.next_due, conv.reason, conv.request = None, exc.code, None
                return
            except Exception as exc:  # the real request was billed: its answer still returns
                conv.next_due, conv.reason, conv.request = None, "plan-failed", None
                self._log_plan_failure(conv.key, exc)
                return
            if self.keep_alive.max_pings <= 0:
                conv.next_due, conv.reason = None, "cap"
                return
            assert conv.refreshed is not None
            conv.next_due = conv.refreshed + self.keep_alive.interval_s
            conv.reason = None
        self._wake()

    def _log_plan_failure(self, key: str, exc: Exception) -> None:
        """A ping could not be planned for an unexpected reason (a price lookup that raised,
        a client without the expected attributes): a warning the first time, debug after."""
        level = logging.DEBUG if self._plan_failure_logged else logging.WARNING
        self._plan_failure_logged = True
        _log.log(level, "keep-alive of %s not planned (status reason 'plan-failed'; the "
                 "request's answer is returned as usual): %s: %s", key, type(exc).__name__,
                 exc)

    def _plan(self, conv: _Conversation, request: ProviderRequest | Mapping[str, Any],
              result: Any) -> None:
        if isinstance(request, ProviderRequest):
            wire, path, body, headers = (request.wire_format, request.path, request.body,
                                         dict(request.headers))
        else:
            body = dict(request)
            wire = self.client._wire_of(body)
            path, headers = endpoint_path(wire), {}
        model = body.get("model")
        if not isinstance(model, str):
            raise NoPing("shape", "the request names no model")
        host = httpx.URL(self.client.base_url).host
        provider = provider_for(host, wire, self.client.call_provider)
        try:
            rules = cache_rules(provider, model, self.client.recorder.policies)
        except LookupError as exc:
            raise NoPing("no-ttl", f"no cache rules for {provider}: {exc}") from exc
        plan = ping_plan(wire, body, rules)
        if self.keep_alive.interval_s >= plan.ttl_s:
            raise NoPing("interval-too-long", f"interval_s {self.keep_alive.interval_s} is not "
                         f"shorter than the TTL kept ({plan.ttl_s} s)")
        day = datetime.fromtimestamp(self.clock(), UTC).date()
        prices = self._prices(provider, model, day)
        if prices is None:
            raise NoPing("unpriced", f"no price for {provider}/{model} (genai-prices)")
        if not isinstance(prices, UnitPrices):
            raise TypeError(f"prices({provider!r}, {model!r}, {day}) returned "
                            f"{type(prices).__name__}, not UnitPrices or None")
        conv.request = ProviderRequest(wire, path, wire_json(plan.body), headers=headers)
        conv.plan, conv.rules, conv.prices, conv.uncached = plan, rules, prices, 0
        conv.extent, conv.extent_of = None, None
        if isinstance(result, Mapping):
            with contextlib.suppress(Exception):  # no usage: unknown, no ping
                conv.extent = _usage_extent(parse_response(wire, result))
        elif hasattr(result, "record"):
            def of_stream(stream: Any = result) -> int | None:
                record = stream.record
                if record is None or record.cache_read_tokens is None:
                    return None
                return int(record.cache_read_tokens + (record.cache_write_tokens or 0))
            conv.extent_of = of_stream
        if conv.extent is None and conv.extent_of is None:
            raise NoPing("usage-unknown", "the response reported no cache usage")
        if conv.extent == 0:
            raise NoPing("nothing-cached", "the request read and wrote nothing: no entry")

    def _streams_ended(self) -> None:
        """The cached extent of due conversations whose last request was streamed, from the
        stream's record (read outside the lock: it may wait for the recording thread)."""
        with self._lock:
            now = self.clock()
            waiting = [(c, c.generation, c.extent_of) for c in self._conversations.values()
                       if c.extent is None and c.extent_of is not None
                       and c.next_due is not None and now >= c.next_due]
        found = []
        for conv, generation, extent_of in waiting:
            with contextlib.suppress(Exception):  # no record: usage unknown, no ping
                found.append((conv, generation, extent_of()))
        with self._lock:
            for conv, generation, extent in found:
                if conv.generation == generation and extent is not None:
                    conv.extent = extent

    def _due(self) -> list[_Due]:
        """Decide every due ping (under the lock): the ones to send, reserved (counted against
        the cap now, so no two ticks exceed it)."""
        self._streams_ended()
        out: list[_Due] = []
        with self._lock:
            now = self.clock()
            for conv in self._conversations.values():
                if conv.closed or conv.busy or conv.next_due is None or now < conv.next_due:
                    continue
                value = self._decide(conv, now)
                if not value.ping:
                    conv.next_due, conv.reason = None, value.reason
                    continue
                assert conv.request is not None and conv.last_real is not None
                conv.busy = True
                conv.pings += 1
                out.append(_Due(conv, conv.generation, conv.pings, now, conv.request, value))
        return out

    def _decide(self, conv: _Conversation, now: float) -> PingValue:
        keep = self.keep_alive
        if conv.pings >= keep.max_pings:
            return PingValue(False, 0, 0.0, 0.0, 0.0, "cap")
        plan, prices, rules = conv.plan, conv.prices, conv.rules
        if conv.extent is None or plan is None or prices is None or rules is None:
            return PingValue(False, 0, 0.0, 0.0, 0.0, "usage-unknown")
        if conv.extent == 0:
            return PingValue(False, 0, 0.0, 0.0, 0.0, "nothing-cached")
        assert conv.last_real is not None and conv.refreshed is not None
        try:
            write = prices.write(plan.ttl_label, rules.write_multipliers)
        except KeyError:  # a TTL the rules do not price apart: the default write price
            write = prices.cache_write
        ping_usd = (conv.extent * prices.cache_read + conv.uncached * prices.input
                    + plan.output_tokens * prices.output)
        return ping_value(
            conv.gaps, gap_s=now - conv.last_real, refreshed_s=conv.refreshed - conv.last_real,
            ttl_s=plan.ttl_s, interval_s=keep.interval_s,
            pings_left=keep.max_pings - conv.pings,
            saving_per_hit_usd=conv.extent * (write - prices.cache_read), ping_usd=ping_usd,
            min_saving_usd=keep.min_expected_saving_usd)

    @staticmethod
    def _detail(due: _Due) -> dict[str, Any]:
        assert due.conversation.last_real is not None
        return {"keepalive": True, "keepalive_ping": due.ping,
                "keepalive_gap_s": round(due.sent_at - due.conversation.last_real, 3),
                "keepalive_expected_net_usd": round(due.value.net_usd, 8)}

    def _done(self, due: _Due, response: Any, error: ProviderError | None) -> PingResult:
        """Book a ping's answer: the refresh (when its conversation is still idle in the same
        gap), its cost, the next due time or why there is none."""
        conv = due.conversation
        usage: CacheUsage | None = None
        usd: float | None = None
        with self._lock:
            conv.busy = False
            conv.pings_total += 1
            if error is None:
                with contextlib.suppress(Exception):  # no usage: the row says so
                    usage = parse_response(due.request.wire_format, response)
                if usage is not None and conv.prices is not None:
                    usd = _usd(usage, conv.prices)
                    conv.spent_usd += usd
            if conv.generation != due.generation or conv.closed or self._closed:
                return PingResult(conv.key, due.ping, due.sent_at, due.value, usage, usd, error)
            if error is not None:
                conv.next_due, conv.reason = None, "ping-failed"
            else:
                conv.refreshed = due.sent_at
                if usage is not None:
                    extent = _usage_extent(usage)
                    if extent:
                        conv.extent = extent
                    conv.uncached = max(usage.uncached_tokens or 0, 0)
                if conv.pings >= self.keep_alive.max_pings:
                    conv.next_due, conv.reason = None, "cap"
                else:
                    conv.next_due = due.sent_at + self.keep_alive.interval_s
        self._wake()
        return PingResult(conv.key, due.ping, due.sent_at, due.value, usage, usd, error)

    # -- public surface shared by both -----------------------------------------------------

    def status(self, conversation: str) -> KeepAliveStatus:
        """Where ``conversation``'s keep-alive stands.

        Raises:
            InputError: an unknown conversation (code ``keepalive-conversation``).
        """
        with self._lock:
            conv = self._conversations.get(conversation)
            if conv is None:
                raise InputError(f"no conversation {conversation!r} was sent through this "
                                 "scheduler", code="keepalive-conversation")
            return KeepAliveStatus(
                conv.key, conv.pings, conv.pings_total, conv.spent_usd, conv.next_due,
                conv.reason, conv.plan.ttl_s if conv.plan else None, conv.extent,
                conv.gaps.observed)

    def next_due(self) -> float | None:
        """Clock time (epoch seconds) of the earliest planned ping, ``None`` when none is."""
        with self._lock:
            times = [c.next_due for c in self._conversations.values()
                     if c.next_due is not None and not c.closed and not c.busy]
        return min(times) if times else None

    def close_conversation(self, conversation: str) -> None:
        """Stop keeping ``conversation`` alive (until it sends again); unknown keys are
        ignored."""
        with self._lock:
            conv = self._conversations.get(conversation)
            if conv is not None:
                conv.closed, conv.next_due, conv.reason = True, None, "closed"
        self._wake()

    def _close_all(self) -> None:
        with self._lock:
            self._closed = True
            for conv in self._conversations.values():
                conv.closed, conv.next_due, conv.reason = True, None, "closed"
        self._wake()

    def _wake(self) -> None:
        """Tell the waiting loop that the plan changed (subclasses)."""


class KeepAliveScheduler(_KeepAliveCore):
    """Keeps idle conversations' cached prefixes alive for a sync client (module docstring).

    Args:
        client: An :class:`~stableprompt.AnthropicClient`, :class:`~stableprompt.OpenAIClient`
            or :class:`~stableprompt.OpenAICompatibleClient`; pings go through it (and its
            recorder).
        keep_alive: A :class:`~stableprompt.KeepAlive`, or a :class:`~stableprompt.CachePolicy`
            with one (``interval_s``, ``max_pings`` per idle gap, ``min_expected_saving_usd``).
        clock: Epoch seconds (``time.time``); the emulator's ``FakeClock`` in tests.
        prior_gaps_s: Gaps (seconds) whose distribution is the prior of every conversation's
            gap estimate; ``None``: the policy's ``KeepAlive.prior_gaps_s`` (the gaps a
            ``from_ledger`` policy was chosen on), else log-uniform between 1 s and 1 day
            (``_economics._keepalive_value``).
        prior_weight: Observations the prior is worth (default 1; 0 with no gap observed
            yet means no estimate: no ping until the conversation's first gap).
        prices: ``(provider, model, day) -> UnitPrices | None`` (default genai-prices via
            :func:`~stableprompt._economics._prices.unit_prices`); ``None`` for a model: no pings.

    Raises:
        InputError: a bad argument (code ``keepalive-config``): a keep-alive setting missing,
            not a stableprompt client or an async one (use
            :class:`AsyncKeepAliveScheduler`), a ``clock`` or ``prices`` not callable, bad
            prior gaps or weight.
    """

    def __init__(self, client: Any, keep_alive: KeepAlive | CachePolicy, *,
                 clock: Callable[[], float] = time.time,
                 prior_gaps_s: list[float] | tuple[float, ...] | None = None,
                 prior_weight: float = 1.0, prices: PriceLookup = unit_prices) -> None:
        super().__init__(client, keep_alive, clock=clock, prior_gaps_s=prior_gaps_s,
                         prior_weight=prior_weight, prices=prices)
        self._event = threading.Event()
        self._thread: threading.Thread | None = None

    def send(self, request: ProviderRequest | Mapping[str, Any], *, conversation: str,
             stream: bool | None = None) -> Any:
        """Send a real request of ``conversation`` through the client
        (:meth:`AnthropicClient.send <stableprompt.AnthropicClient.send>`: same result and
        errors), ending its idle gap and planning the keep-alive of the next one.

        Once the client's ``send`` returned, its result is returned: planning the next ping
        never raises (a failure leaves the conversation without one, status reason
        ``plan-failed``, and is logged).

        Raises:
            InputError: an empty conversation key (``keepalive-conversation``) or a closed
                scheduler (``keepalive-closed``), before anything is sent; and whatever the
                client's ``send`` raises.
        """
        conv = self._begin(conversation)
        generation = conv.generation
        try:
            result = self.client.send(request, stream=stream)
        except BaseException:
            self._failed(conv, generation)
            raise
        self._arm(conv, request, result, generation)
        return result

    def run_pending(self) -> list[PingResult]:
        """Send every ping due now (by ``clock``) that is worth it; their results. Never
        raises for a failed ping (its result holds the error, and its conversation stops
        pinging for the gap)."""
        results = []
        for due in self._due():
            try:
                response = self.client._send_marked(due.request, self._detail(due))
            except ProviderError as exc:
                _log.warning("keep-alive ping of %s failed: %s", due.conversation.key, exc)
                results.append(self._done(due, None, exc))
            except Exception as exc:  # an unexpected failure: book it, never raise
                results.append(self._done(due, None, ProviderError(
                    f"{type(exc).__name__}: {exc}", code="keepalive-ping")))
            else:
                results.append(self._done(due, response, None))
        return results

    def start(self) -> KeepAliveScheduler:
        """Run :meth:`run_pending` on a daemon thread, sleeping until the next ping is due
        (real clocks only: a fake clock never advances for it). Returns ``self``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="stableprompt-keepalive",
                                            daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._closed:
            due = self.next_due()
            delay = None if due is None else max(0.0, due - self.clock())
            self._event.wait(delay)
            self._event.clear()
            if self._closed:
                return
            try:
                self.run_pending()
            except Exception:  # pragma: no cover - run_pending books its own failures
                _log.exception("keep-alive loop")

    def _wake(self) -> None:
        self._event.set()

    def close(self) -> None:
        """Stop every conversation's keep-alive and the thread (the client stays open)."""
        self._close_all()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    def __enter__(self) -> KeepAliveScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncKeepAliveScheduler(_KeepAliveCore):
    """The asyncio twin of :class:`KeepAliveScheduler`, for the async clients
    (:class:`~stableprompt.AsyncAnthropicClient`, ...): ``await send(...)``,
    ``await run_pending()``, :meth:`start` runs one task on the running loop,
    ``await aclose()``. Arguments and errors as :class:`KeepAliveScheduler`."""

    _is_async = True

    @staticmethod
    def _client_kind_error(client: str) -> str:
        return (f"AsyncKeepAliveScheduler awaits an async client, got {client} (sync): use "
                "KeepAliveScheduler for AnthropicClient, OpenAIClient, ...")

    def __init__(self, client: Any, keep_alive: KeepAlive | CachePolicy, *,
                 clock: Callable[[], float] = time.time,
                 prior_gaps_s: list[float] | tuple[float, ...] | None = None,
                 prior_weight: float = 1.0, prices: PriceLookup = unit_prices) -> None:
        super().__init__(client, keep_alive, clock=clock, prior_gaps_s=prior_gaps_s,
                         prior_weight=prior_weight, prices=prices)
        self._event: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def send(self, request: ProviderRequest | Mapping[str, Any], *, conversation: str,
                   stream: bool | None = None) -> Any:
        """Async :meth:`KeepAliveScheduler.send`."""
        conv = self._begin(conversation)
        generation = conv.generation
        try:
            result = await self.client.send(request, stream=stream)
        except BaseException:
            self._failed(conv, generation)
            raise
        self._arm(conv, request, result, generation)
        return result

    async def run_pending(self) -> list[PingResult]:
        """Async :meth:`KeepAliveScheduler.run_pending` (the due pings sent one by one)."""
        results = []
        for due in self._due():
            try:
                response = await self.client._send_marked(due.request, self._detail(due))
            except ProviderError as exc:
                _log.warning("keep-alive ping of %s failed: %s", due.conversation.key, exc)
                results.append(self._done(due, None, exc))
            except Exception as exc:
                results.append(self._done(due, None, ProviderError(
                    f"{type(exc).__name__}: {exc}", code="keepalive-ping")))
            else:
                results.append(self._done(due, response, None))
        return results

    def start(self) -> AsyncKeepAliveScheduler:
        """Run :meth:`run_pending` as a task of the running loop, sleeping until the next
        ping is due (real clocks only). Returns ``self``.

        Raises:
            InputError: no event loop is running (code ``keepalive-config``): call it from
                async code, e.g. inside ``async with AsyncKeepAliveScheduler(...)``.
        """
        if self._task is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError as exc:
                raise InputError("AsyncKeepAliveScheduler.start() needs a running event "
                                 "loop: call it from async code (inside `async with "
                                 "AsyncKeepAliveScheduler(...)`), or use KeepAliveScheduler "
                                 "with a sync client", code="keepalive-config") from exc
            self._event = asyncio.Event()
            self._task = loop.create_task(self._loop())
        return self

    async def _loop(self) -> None:
        event = self._event
        assert event is not None
        while not self._closed:
            due = self.next_due()
            delay = None if due is None else max(0.0, due - self.clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), delay)
            event.clear()
            if self._closed:
                return
            await self.run_pending()

    def _wake(self) -> None:
        event = self._event
        if event is not None:
            with contextlib.suppress(RuntimeError):  # called from another thread's loop
                event.set()

    async def aclose(self) -> None:
        """Stop every conversation's keep-alive and the task (the client stays open)."""
        self._close_all()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> AsyncKeepAliveScheduler:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


public(AsyncKeepAliveScheduler, KeepAliveScheduler, KeepAliveStatus, PingResult)
