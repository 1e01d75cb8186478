"""What a keep-alive ping is worth: the distribution of a conversation's idle gaps, and the
expected saving of pinging against its price.

**Gaps.** A gap is the time between two real requests of one conversation (keep-alive pings
do not end it). :class:`GapModel` estimates their distribution from the gaps the conversation
showed so far, mixed with a prior worth ``prior_weight`` observations::

    F(x) = (#{observed gaps <= x} + w * F0(x)) / (n + w)

``F0`` is, by default, **log-uniform between 1 second and 1 day** (:data:`PRIOR_MIN_S`,
:data:`PRIOR_MAX_S`): with nothing observed, every factor of ten in that range is as likely as
another (a tool loop's seconds, a user's minutes, a break's hours); or the empirical
distribution of gaps you pass (``prior_gaps_s``, e.g. from a ledger of the same harness). A
conversation's own gaps take over as they accumulate (with ``w = 1``, the tenth gap leaves the
prior a weight of 1/11). With ``w = 0`` and no observed gap nothing is known: no ping.

**Value of pinging.** Let ``T`` be the TTL of the entry kept (its last breakpoint's), ``I``
the keep-alive interval (``I < T``), ``g`` the gap so far at the decision (seconds since the
last real request), ``a`` the time of the last refresh in the same frame (0 after the real
request, the last ping's time after one), so the entry dies at ``a + T`` unless pinged. A ping
now refreshes it until ``g + T``; a run of ``j`` pings at ``g, g + I, ..., g + (j-1)I`` keeps it
until ``g + (j-1)I + T``, each sent only if the conversation is still idle. With ``S(x) = 1 -
F(x)`` (the conversation still idle at ``x``)::

    hit(j)   = (F(g + (j-1)I + T) - F(a + T)) / S(g)      next request arrives while kept
    saving(j) = hit(j) * (C * write - C * read)            the write it avoids, less the read
    cost(j)  = sum_{i<j} S(g + iI) / S(g) * price          pings sent while still idle

where ``C`` is the cached prefix (tokens: reads + writes of the last request), ``write`` the
price of a token written at the entry's TTL, ``read`` of a cached token, and ``price`` that of
one ping (``C * read``, the uncached tokens after its breakpoint, and its output tokens). For
``j = 1`` this is the single ping's expected saving: the probability that the next request
comes within the interval after the TTL would have run out, given the gap so far, times what
it saves. A ping is sent when the best run (``1 <= j <= `` pings left under the cap) has
``saving(j) - cost(j) > min_expected_saving_usd``: a single ping alone can be worth nothing
when the next request is expected after several intervals (then only a run saves the
prefix), so the decision looks ahead over runs; it is taken again at each ping, with the gap
so far conditioning it. Once a due ping is not sent the entry expires and pinging stops for
that gap (a later ping would write, not read).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["PRIOR_MAX_S", "PRIOR_MIN_S", "GapModel", "PingValue", "ping_value"]

PRIOR_MIN_S = 1.0
"""Lower end of the default log-uniform prior of gaps (seconds)."""
PRIOR_MAX_S = 86_400.0
"""Upper end of the default log-uniform prior of gaps (seconds: one day)."""


def _log_uniform_cdf(x: float) -> float:
    if x <= PRIOR_MIN_S:
        return 0.0
    if x >= PRIOR_MAX_S:
        return 1.0
    return math.log(x / PRIOR_MIN_S) / math.log(PRIOR_MAX_S / PRIOR_MIN_S)


class GapModel:
    """A conversation's idle-gap distribution (module docstring).

    Args:
        prior_gaps_s: Gaps (seconds) whose empirical distribution is the prior ``F0``;
            ``None``: log-uniform between :data:`PRIOR_MIN_S` and :data:`PRIOR_MAX_S`.
        prior_weight: Observations the prior is worth (``w``, >= 0).
    """

    def __init__(self, prior_gaps_s: Sequence[float] | None = None,
                 prior_weight: float = 1.0) -> None:
        self._prior = sorted(prior_gaps_s) if prior_gaps_s is not None else None
        self.prior_weight = prior_weight
        self._gaps: list[float] = []

    @property
    def observed(self) -> int:
        """Gaps observed."""
        return len(self._gaps)

    @property
    def gaps(self) -> tuple[float, ...]:
        """The gaps observed (seconds), sorted."""
        return tuple(self._gaps)

    def observe(self, gaps_s: float | Iterable[float]) -> None:
        """Add an observed gap (or several), in seconds."""
        for gap in [gaps_s] if isinstance(gaps_s, (int, float)) else gaps_s:
            bisect.insort(self._gaps, float(gap))

    def _prior_cdf(self, x: float) -> float:
        if self._prior is None:
            return _log_uniform_cdf(x)
        if not self._prior:
            return 0.0
        return bisect.bisect_right(self._prior, x) / len(self._prior)

    @property
    def known(self) -> bool:
        """Whether there is anything to estimate from (observed gaps or a weighted prior)."""
        return bool(self._gaps) or (self.prior_weight > 0
                                    and (self._prior is None or bool(self._prior)))

    def cdf(self, x: float) -> float:
        """``F(x)``: the probability that a gap is at most ``x`` seconds (0 when unknown)."""
        weight = self.prior_weight if self._prior is None or self._prior else 0.0
        total = len(self._gaps) + weight
        if total <= 0:
            return 0.0
        return (bisect.bisect_right(self._gaps, x) + weight * self._prior_cdf(x)) / total

    def survival(self, x: float) -> float:
        """``S(x) = 1 - F(x)``: the probability that a gap is longer than ``x`` seconds."""
        return max(0.0, 1.0 - self.cdf(x))


@dataclass(frozen=True, slots=True)
class PingValue:
    """A ping decision and its numbers (module docstring).

    Attributes:
        ping: Send it.
        run: The run length ``j`` whose net value was best (0: none was positive).
        hit_probability: ``hit(run)``.
        saving_usd: ``saving(run)`` (USD).
        cost_usd: ``cost(run)`` (USD).
        reason: Why not, a slug (``expired``, ``no-estimate``, ``not-worth-it``,
            ``no-survivor``), ``None`` when sent.
    """

    ping: bool
    run: int
    hit_probability: float
    saving_usd: float
    cost_usd: float
    reason: str | None = None

    @property
    def net_usd(self) -> float:
        """``saving_usd - cost_usd``."""
        return self.saving_usd - self.cost_usd


def ping_value(model: GapModel, *, gap_s: float, refreshed_s: float, ttl_s: float,
               interval_s: float, pings_left: int, saving_per_hit_usd: float,
               ping_usd: float, min_saving_usd: float = 0.0) -> PingValue:
    """Whether to ping now (module docstring).

    Args:
        model: The conversation's gaps.
        gap_s: ``g``: seconds since the last real request.
        refreshed_s: ``a``: seconds from the last real request to the last refresh (0, or
            the last ping's).
        ttl_s: ``T``, the kept entry's TTL (seconds).
        interval_s: ``I``, seconds between pings (``< T``).
        pings_left: Pings the cap still allows in this gap.
        saving_per_hit_usd: ``C * (write - read)``: what keeping the entry saves the next
            request (USD).
        ping_usd: One ping's price (USD).
        min_saving_usd: The margin the net expected saving must exceed.

    Returns:
        :class:`PingValue`.
    """
    none = PingValue(False, 0, 0.0, 0.0, 0.0)
    if gap_s >= refreshed_s + ttl_s:
        return PingValue(False, 0, 0.0, 0.0, 0.0, "expired")
    if not model.known:
        return PingValue(False, 0, 0.0, 0.0, 0.0, "no-estimate")
    idle = model.survival(gap_s)
    if idle <= 0:
        return PingValue(False, 0, 0.0, 0.0, 0.0, "no-survivor")
    dies = model.cdf(refreshed_s + ttl_s)
    best = none
    cost = 0.0
    for j in range(1, pings_left + 1):
        sent_at = gap_s + (j - 1) * interval_s
        still_idle = model.survival(sent_at) / idle
        if still_idle <= 0:
            break  # no request arrives this late: longer runs add nothing
        cost += still_idle * ping_usd
        hit = max(0.0, model.cdf(sent_at + ttl_s) - dies) / idle
        value = PingValue(False, j, hit, hit * saving_per_hit_usd, cost)
        if value.net_usd > best.net_usd:
            best = value
    if best.run and best.net_usd > min_saving_usd:
        return PingValue(True, best.run, best.hit_probability, best.saving_usd, best.cost_usd)
    return PingValue(False, best.run, best.hit_probability, best.saving_usd, best.cost_usd,
                     "not-worth-it")
