"""Summarize ledger records per scenario and per session: the numbers of ``stableprompt report``.

:func:`summarize` reads :class:`~stableprompt.UsageRecord` rows (``Ledger.records()``) and
groups them by ``scenario`` and ``session_id``. Every number comes from the records:

* ``calls``: records in the group (failed calls included).
* ``input_tokens`` / ``cache_read_tokens`` / ``cache_write_tokens`` / ``output_tokens``: sums
  of the provider-reported fields over calls whose usage is known (``input_tokens`` is the
  inclusive total, ``gen_ai.usage.input_tokens``).
* ``hit_rate``: ``cache_read_tokens / input_tokens`` (token-weighted, DESIGN.md).
* ``ceiling``: the append-only upper bound on the same calls, as a hit rate. For each call with
  known usage, in ledger order within its scenario and session, an append-only harness could at
  best read the whole previous request of the same session: ``min(previous input_tokens,
  this call's input_tokens)``, floored to the model's cache granularity and 0 when below its
  minimum cacheable length (:func:`~stableprompt.cache_policy`); a session's first call has
  ceiling 0. It uses request sizes only, so a scenario's own mistakes do not lower it. Reads of
  another session's identical head can exceed it (the demo gives each session its own head).
* ``verdicts``: count per attribution verdict (all seven keys, zeros included).
* ``agreement``: fraction of calls with both numbers known whose predicted cache reads
  (``predicted_cache_read_tokens``) equal the reported ones within the provider's granularity
  (``|predicted - reported| < granularity_tokens``); ``None`` when no call has both.
* ``cost_usd``: each call priced with `genai-prices <https://pypi.org/project/genai-prices/>`_
  at its own date (``ts_utc``) for its provider and model (cache reads and writes, including
  the 1-hour write split, at their own rates); ``None`` with a note when the model is unknown.

Rendering is elsewhere: terminal tables and notes in ``_report_text.py``, the HTML page in
``_report_html.py``; JSON is :meth:`Report.to_json`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from typing import Any

from .._ledger._usage_record import UsageRecord
from .._policy import PolicyTable, cache_policy

__all__ = [
    "NO_SCENARIO",
    "NO_SESSION",
    "VERDICTS",
    "Pricing",
    "Report",
    "ScenarioReport",
    "Totals",
    "summarize",
]

VERDICTS = ("hit", "cold", "client_mutation", "below_minimum", "ttl_expired", "provider_miss",
            "unknown")
"""The attribution verdicts, in display order."""

NO_SCENARIO = "(none)"
NO_SESSION = "(none)"
_GENAI_PROVIDERS = {"gemini": "google", "bedrock": "aws", "xai": "x-ai"}


# --------------------------------------------------------------------------- model


@dataclass
class Totals:
    """Sums over a group of calls (tokens unless stated). See the module docstring.

    Attributes:
        calls: Calls in the group.
        unknown_usage: Calls whose usage is unknown (failed, interrupted).
        input_tokens: Reported input tokens, inclusive of cache reads and writes.
        cache_read_tokens: Reported cache reads.
        cache_write_tokens: Reported cache writes (all TTLs).
        output_tokens: Reported output tokens.
        ceiling_tokens: Sum of the per-call append-only ceiling.
        verdicts: Calls per verdict.
        agreement_calls: Calls with both predicted and reported reads.
        agreement_matches: Of those, calls where they agree within the granularity.
        cost_usd: Summed price (USD), ``None`` when any priced call could not be priced.
    """

    calls: int = 0
    unknown_usage: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    ceiling_tokens: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    agreement_calls: int = 0
    agreement_matches: int = 0
    cost_usd: float | None = 0.0

    @property
    def hit_rate(self) -> float | None:
        """``cache_read_tokens / input_tokens``, ``None`` when no input is known."""
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else None

    @property
    def ceiling(self) -> float | None:
        """``ceiling_tokens / input_tokens``: the append-only bound as a hit rate."""
        return self.ceiling_tokens / self.input_tokens if self.input_tokens else None

    @property
    def of_ceiling(self) -> float | None:
        """``cache_read_tokens / ceiling_tokens``: share of the ceiling reached."""
        return self.cache_read_tokens / self.ceiling_tokens if self.ceiling_tokens else None

    @property
    def agreement(self) -> float | None:
        """Fraction of calls whose prediction matches the report within the granularity."""
        return self.agreement_matches / self.agreement_calls if self.agreement_calls else None

    def add(self, record: UsageRecord, ceiling: int, agrees: bool | None,
            cost: float | None, priced: bool) -> None:
        """Add one call (its ceiling, agreement and cost computed by :func:`summarize`)."""
        self.calls += 1
        verdict = record.verdict if record.verdict in self.verdicts else "unknown"
        self.verdicts[verdict] += 1
        if record.input_tokens_total is None:
            self.unknown_usage += 1
        else:
            self.input_tokens += record.input_tokens_total
            self.cache_read_tokens += record.cache_read_tokens or 0
            self.cache_write_tokens += record.cache_write_tokens or 0
            self.output_tokens += record.output_tokens or 0
            self.ceiling_tokens += ceiling
        if agrees is not None:
            self.agreement_calls += 1
            self.agreement_matches += int(agrees)
        if priced:
            self.cost_usd = None if cost is None or self.cost_usd is None else (
                self.cost_usd + cost)

    def to_json(self) -> dict[str, Any]:
        """The issue's fields: calls, input_tokens, cache_read_tokens, cache_write_tokens,
        hit_rate, ceiling, verdicts, agreement (rates rounded to 6 digits)."""
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "hit_rate": _round(self.hit_rate),
            "ceiling": _round(self.ceiling),
            "verdicts": dict(self.verdicts),
            "agreement": _round(self.agreement),
        }

    def to_full_json(self) -> dict[str, Any]:
        """:meth:`to_json` plus output tokens, unknown usage, ceiling tokens, share of the
        ceiling and cost (USD, rounded to 6 digits)."""
        return {
            **self.to_json(),
            "output_tokens": self.output_tokens,
            "unknown_usage": self.unknown_usage,
            "ceiling_tokens": self.ceiling_tokens,
            "of_ceiling": _round(self.of_ceiling),
            "cost_usd": _round(self.cost_usd),
        }


@dataclass
class ScenarioReport:
    """One scenario: totals, per-session totals, and the models/providers seen."""

    name: str
    totals: Totals = field(default_factory=Totals)
    sessions: dict[str, Totals] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    providers: list[str] = field(default_factory=list)
    read_series: list[float] = field(default_factory=list)  # per call: read / input


@dataclass
class Pricing:
    """How costs were computed.

    Attributes:
        source: ``"genai-prices <version>"`` (or why pricing is unavailable).
        first_date: Earliest call date priced.
        last_date: Latest call date priced.
        notes: Why some costs were omitted (unknown model, ...), one line each.
    """

    source: str = ""
    first_date: date | None = None
    last_date: date | None = None
    notes: list[str] = field(default_factory=list)

    def as_of(self) -> str | None:
        """``"2026-01-01"`` or ``"2026-01-01..2026-01-03"``; ``None`` when nothing was priced."""
        if self.first_date is None or self.last_date is None:
            return None
        if self.first_date == self.last_date:
            return self.first_date.isoformat()
        return f"{self.first_date.isoformat()}..{self.last_date.isoformat()}"

    def to_json(self) -> dict[str, Any]:
        """``{"source", "as_of", "notes"}``."""
        return {"source": self.source, "as_of": self.as_of(), "notes": list(self.notes)}


@dataclass
class Report:
    """A ledger summary: scenarios in order of first appearance."""

    scenarios: dict[str, ScenarioReport]
    records: int
    pricing: Pricing

    def to_json(self, *, sessions: bool = True) -> dict[str, Any]:
        """``{"records", "pricing", "scenarios": {name: {...full totals..., "models",
        "sessions": {id: {...}}}}}``."""
        out: dict[str, Any] = {}
        for name, scenario in self.scenarios.items():
            entry = {**scenario.totals.to_full_json(), "models": list(scenario.models),
                     "providers": list(scenario.providers)}
            if sessions:
                entry["sessions"] = {sid: t.to_full_json() for sid, t in scenario.sessions.items()}
            out[name] = entry
        return {"records": self.records, "pricing": self.pricing.to_json(), "scenarios": out}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


# --------------------------------------------------------------------------- summarizing


def _policy(provider: str | None, model: str | None,
            policies: PolicyTable | None) -> tuple[int, int]:
    """``(min_cacheable_tokens, granularity_tokens)``; ``(0, 1)`` for unknown providers."""
    try:
        policy = cache_policy(provider or "", model or "", policies)
    except LookupError:
        return 0, 1
    return policy.min_cacheable_tokens, policy.granularity_tokens


@lru_cache(maxsize=65_536)
def _price(provider: str, model: str, day: date, total: int, read: int, write: int,
           write_1h: int, output: int) -> float:
    from genai_prices import Usage, calc_price

    usage: dict[str, int] = {"input_tokens": total, "cache_read_tokens": read,
                             "cache_write_tokens": write, "output_tokens": output}
    if write_1h:
        usage["cache_write_1h_tokens"] = write_1h
    stamp = datetime(day.year, day.month, day.day, 12)
    result = calc_price(Usage(**usage), model, provider_id=_GENAI_PROVIDERS.get(provider, provider),
                        genai_request_timestamp=stamp)
    return float(result.total_price)


def _genai_prices_version() -> str | None:
    try:
        from importlib.metadata import version

        return f"genai-prices {version('genai-prices')}"
    except Exception:
        return None


def summarize(records: Iterable[UsageRecord], *, policies: PolicyTable | None = None,
              price: bool = True) -> Report:
    """Group records by scenario and session and compute the summary (module docstring).

    Args:
        records: Ledger records, in ledger order (time order).
        policies: Cache-policy table for minimums and granularity (default: shipped).
        price: Price calls with genai-prices (``False``: every cost is ``None``).

    Returns:
        A :class:`Report`; scenarios and sessions in order of first appearance.
    """
    scenarios: dict[str, ScenarioReport] = {}
    previous: dict[tuple[str, str], int] = {}
    pricing = Pricing(source=_genai_prices_version() or "genai-prices not installed")
    notes: dict[str, None] = {}
    count = 0
    for record in records:
        count += 1
        name = record.scenario or NO_SCENARIO
        sid = record.session_id or NO_SESSION
        scenario = scenarios.get(name)
        if scenario is None:
            scenario = scenarios[name] = ScenarioReport(name)
        if record.model and record.model not in scenario.models:
            scenario.models.append(record.model)
        if record.provider and record.provider not in scenario.providers:
            scenario.providers.append(record.provider)
        minimum, granularity = _policy(record.provider, record.model, policies)
        total = record.input_tokens_total
        ceiling = 0
        if total is not None:
            before = previous.get((name, sid))
            if before is not None:
                best = min(before, total) // granularity * granularity
                ceiling = best if best >= minimum else 0
            previous[(name, sid)] = total
            scenario.read_series.append((record.cache_read_tokens or 0) / total if total else 0.0)
        agrees = None
        predicted, reported = record.predicted_cache_read_tokens, record.cache_read_tokens
        if predicted is not None and reported is not None and total is not None:
            agrees = abs(predicted - reported) < granularity
        cost, priced = None, False
        if price and total is not None:
            priced = True
            cost = _record_cost(record, pricing, notes)
        scenario.totals.add(record, ceiling, agrees, cost, priced)
        session = scenario.sessions.get(sid)
        if session is None:
            session = scenario.sessions[sid] = Totals()
        session.add(record, ceiling, agrees, cost, priced)
    pricing.notes = list(notes)
    return Report(scenarios, count, pricing)


def _record_cost(record: UsageRecord, pricing: Pricing, notes: dict[str, None]) -> float | None:
    if pricing.source.startswith("genai-prices not"):
        notes["genai-prices is not installed: costs omitted"] = None
        return None
    model, provider = record.model, record.provider
    if not model or not provider:
        notes["calls without a model or provider name: cost omitted"] = None
        return None
    day = record.ts_utc.date()
    try:
        cost = _price(provider, model, day, record.input_tokens_total or 0,
                      record.cache_read_tokens or 0, record.cache_write_tokens or 0,
                      record.cache_write_1h_tokens or 0, record.output_tokens or 0)
    except LookupError:
        notes[f"genai-prices has no price for model {model!r} at provider {provider!r}: "
              "cost omitted"] = None
        return None
    except Exception as exc:  # a pricing-library problem must not hide the token numbers
        notes[f"cannot price {model!r}: {type(exc).__name__}: {exc}"] = None
        return None
    if pricing.first_date is None or day < pricing.first_date:
        pricing.first_date = day
    if pricing.last_date is None or day > pricing.last_date:
        pricing.last_date = day
    return cost
