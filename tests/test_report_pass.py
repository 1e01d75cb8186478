"""The report's one pass made cheaper per call (issue 30 item 1) without changing a number:
chart points made per kept run equal the points of a :class:`Decimator` fed every call's
point (floats to the bit), one :func:`add_call` to several totals equals one
:meth:`Totals.add` each, and the ``--json`` scrub that scans each distinct string once still
scrubs every occurrence."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt import UsageRecord
from stableprompt._accounting import _builder
from stableprompt._accounting._builder import CostPoint, Decimator, ReadPoint
from stableprompt._accounting._calls import CallRow, call_row, exclusion
from stableprompt._accounting._pricing import Pricing
from stableprompt._accounting._totals import Totals, add_call
from stableprompt._redact import scrub_json_in_place

T0 = datetime(2026, 3, 1, tzinfo=UTC)
KEY = "sk-ant-api03-" + "A1b2C3d4" * 6


@pytest.mark.parametrize("count", [0, 1, 15, 16, 17, 33, 1001, 4099])
def test_points_per_kept_run_equal_the_decimator_of_every_point(count: int) -> None:
    """Below, at and past twice the cap (pairs merged, then ``stride`` calls a point), the
    read and cost points equal :class:`Decimator`'s, costs summed in the same order (the same
    floats, not approximately), the stride too."""
    cap = 8
    rng = random.Random(count)
    reads: Decimator[ReadPoint] = Decimator(cap, _builder._later)
    costs: Decimator[CostPoint] = Decimator(cap, _builder._summed)
    fast_reads = _builder._ReadPoints(cap)
    fast_costs = _builder._CostPoints(cap)
    for i in range(count):
        ts = T0 + timedelta(seconds=i)
        share = rng.random()
        usd = (rng.random() * 0.1, rng.random() * 0.01, rng.random() * 0.3)
        reads.add(ReadPoint(f"s{i % 3}", ts, share))
        costs.add(CostPoint(ts, *usd))
        fast_reads.add(f"s{i % 3}", ts, share)
        fast_costs.add(ts, *usd)
    assert fast_reads.finish() == reads.finish()
    assert fast_costs.finish() == costs.finish()
    assert fast_reads.decimator.stride == reads.stride
    assert fast_costs.decimator.stride == costs.stride


def _record(i: int, **changes: object) -> UsageRecord:
    fields: dict[str, object] = dict(
        record_id=f"r{i}", ts_utc=T0 + timedelta(seconds=i), scenario="s", session_id="a",
        wire_format="anthropic", provider="anthropic", model="claude-sonnet-4-5",
        input_tokens_total=3000, cache_read_tokens=2000, cache_write_tokens=500,
        uncached_tokens=500, output_tokens=20, predicted_cache_read_tokens=2000,
        verdict="hit", verdict_detail={"turn_boundary": "intra"})
    fields.update(changes)
    return UsageRecord.model_validate(fields)


def _rows() -> list[tuple[CallRow, bool | None]]:
    records = [
        _record(0),
        _record(1, verdict="client_mutation", cache_read_tokens=100, cache_write_tokens=2400,
                verdict_detail={"cause": "volatile-token", "lost_tokens": 1900,
                                "turn_boundary": "cross",
                                "server_diagnosis": {"agreement": "agree"}}),
        _record(2, input_tokens_total=None, cache_read_tokens=None, cache_write_tokens=None,
                uncached_tokens=None, output_tokens=None, verdict="unknown"),
        _record(3, verdict_detail={"usage_suspect": True}),
        _record(4, model="no-such-model-9"),  # cost unknown
        _record(5, verdict="provider_miss", cache_read_tokens=0, cache_write_tokens=2500,
                verdict_detail={"missing_tokens": 2000,
                                "server_diagnosis": {"agreement": "server-only"}}),
        _record(6, output_tokens=None),  # a lower bound
    ]
    pricing, notes = Pricing(source="genai-prices test"), dict[str, None]()
    out: list[tuple[CallRow, bool | None]] = []
    for n, record in enumerate(records):
        row = call_row(record, scenario="s", session="a", ceiling=2500, granularity=1,
                       pricing=pricing, notes=notes, agrees=(None if n % 3 == 2 else n % 2 == 0),
                       excluded=exclusion(record))
        out.append((row, row.agrees))
    return out


@pytest.mark.parametrize("priced", [True, False])
def test_one_add_to_several_totals_equals_one_add_each(priced: bool) -> None:
    """Failed, suspect, unpriced, lower-bound and diagnosed calls: the totals :func:`add_call`
    fills at once equal those :meth:`Totals.add` fills one by one (a cost unknown before the
    first known one, exclusions, verdicts, boundaries, server diagnoses)."""
    rows = _rows()
    for start in range(len(rows)):  # the first known cost at every position
        ordered = rows[start:] + rows[:start]
        one, two, alone = Totals(), Totals(), Totals()
        for row, agrees in ordered:
            add_call((one, two), row, agrees, priced)
            alone.add(row, agrees, priced)
        assert one == two == alone
        assert one.calls == len(rows) and one.excluded == 2
        assert (one.cost_usd is None) == (not priced)
        assert one.cost_unknown_calls == (3 if priced else 0)  # failed, no price, lower bound


def test_the_json_scrub_scrubs_every_occurrence_of_a_string() -> None:
    """The same key-shaped string as a key, a value, in lists and nested objects, many times:
    each occurrence scrubbed (each distinct string is scanned once)."""
    data = {KEY: [KEY, {"x": KEY, KEY: 1}, f"a {KEY}"], "n": [f"a {KEY}"] * 3,
            "api_key": "plain-value-1234", "plain": "plain"}
    assert scrub_json_in_place(data) is data
    text = json.dumps(data)
    assert KEY[12:] not in text and "plain-value" not in text
    assert data["plain"] == "plain" and text.count("[REDACTED]") == 9


def test_made_rows_and_splits_are_the_dataclasses_own() -> None:
    """``slotted_maker``'s ``CallRow`` and ``TokenSplit`` equal (and hash as, and are as
    frozen as) the dataclass's own constructor's, defaults included; a class with a
    ``default_factory`` or a ``__post_init__`` is refused."""
    import dataclasses

    from stableprompt._accounting._calls import make_call_row
    from stableprompt._accounting._pricing import TokenSplit, _split
    from stableprompt._frozen import slotted_maker

    for row, _ in _rows():
        values = {f.name: getattr(row, f.name) for f in dataclasses.fields(CallRow)
                  if f.name not in ("agent", "caveats")}  # two left to their defaults
        made, own = make_call_row(**values), CallRow(**values)
        assert made == own and made.agent == own.agent == "main" and made.caveats == ()
        assert repr(made) == repr(own) and made.to_json() == own.to_json()
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.id = "x"  # type: ignore[misc]
    split = _split(10, 4, 3, 1)
    assert split == TokenSplit(10, 4, 3, 1) and hash(split) == hash(TokenSplit(10, 4, 3, 1))
    assert _split(10, 4, 3) == TokenSplit(10, 4, 3)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Listed:
        items: list[int] = dataclasses.field(default_factory=list)

    with pytest.raises(TypeError):
        slotted_maker(Listed)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:  # a maker that skipped it would skip the check
            if self.n < 0:
                raise ValueError(self.n)

    with pytest.raises(TypeError, match="__post_init__"):
        slotted_maker(Checked)


def test_a_call_row_holds_each_value_in_its_own_field() -> None:
    """``call_row`` makes its ``CallRow`` positionally (in field order): a row whose every
    field has its own value (a diagnosed, failed, subagent mutation with snippets, caveats,
    divergences and an estimated span) has each value under its own name; and the exclusion
    passed by the pass (``excluded=``) gives the row and the agreement computed without it."""
    from stableprompt._accounting._calls import agreement_of

    divergence = {"segment": "system[0]", "path": "/system/0/text"}
    record = _record(
        9, scenario="sc", session_id="se", turn=7, verdict="client_mutation",
        cache_read_tokens=100, cache_write_tokens=2400, predicted_cache_read_tokens=2000,
        error_class="ProviderHTTPError", status_code=529,
        verdict_detail={"cause": "volatile-token", "lost_tokens": 1900, "segment": "system[0]",
                        "segment_kind": "system", "path": "/system/0/text",
                        "cause_detail": "a clock", "snippet_a": "at 9:00",
                        "snippet_b": "at 9:01", "turn_boundary": "cross",
                        "policy": "default", "error_message": "overloaded",
                        "server_diagnosis": {"agreement": "agree", "reason": "system_changed"},
                        "agent": {"kind": "subagent", "id": "z"},
                        "divergences": [divergence], "divergences_total": 3,
                        "estimated_span_tokens": 31})
    row = call_row(record, scenario="sc", session="se", ceiling=2500, granularity=1,
                   pricing=Pricing(source="genai-prices test"), notes={}, agrees=True,
                   compared_input_tokens=9000, agent="subagent z", excluded=None)
    assert row.cost_usd is not None and row.lost_usd is not None
    expected = {
        "id": "r9", "scenario": "sc", "session": "se", "turn": 7, "ts": record.ts_utc,
        "verdict": "client_mutation", "provider": "anthropic", "model": "claude-sonnet-4-5",
        "wire_format": "anthropic", "input_tokens": 3000, "cache_read_tokens": 100,
        "cache_write_tokens": 2400, "output_tokens": 20, "predicted_cache_read_tokens": 2000,
        "ceiling_tokens": 2500, "excluded": None, "read_share": 100 / 3000, "partial": True,
        "lost_tokens": 1900, "cause": "volatile-token", "segment": "system[0]",
        "segment_kind": "system", "path": "/system/0/text", "cause_detail": "a clock",
        "before": "at 9:00", "after": "at 9:01", "boundary": "cross",
        "cost_usd": row.cost_usd, "cost_uncached_usd": row.cost_uncached_usd,
        "cost_at_ceiling_usd": row.cost_at_ceiling_usd, "lost_usd": row.lost_usd,
        "agrees": True, "cost_complete": True, "cost_note": None,
        "server_reason": "system_changed", "server_agreement": "agree",
        "caveats": ("cache policy: default",), "error": "ProviderHTTPError 529: overloaded",
        "action": "subagent", "agent": "subagent z", "divergences": (divergence,),
        "divergences_total": 3, "estimated_span_tokens": 31}
    import dataclasses

    assert [f.name for f in dataclasses.fields(CallRow)] == list(expected)
    assert {name: getattr(row, name) for name in expected} == expected
    assert len({row.cost_usd, row.cost_uncached_usd, row.cost_at_ceiling_usd,
                row.lost_usd}) == 4  # four different costs, each in its own field
    others = [record, _record(0), _record(1, verdict_detail={"usage_suspect": True}),
              _record(2, input_tokens_total=None, cache_read_tokens=None, verdict="unknown"),
              _record(3, cache_read_tokens=None), _record(4, wire_format="unknown")]
    for one in others:
        excluded = exclusion(one)
        kwargs = dict(scenario="s", session="a", ceiling=2500, granularity=1, notes={},
                      pricing=Pricing(source="genai-prices test"), agrees=True)
        made = call_row(one, excluded=excluded, **kwargs)  # type: ignore[arg-type]
        assert made.excluded == excluded
        assert agreement_of(one, 1, excluded) == agreement_of(one, 1)
    assert [exclusion(one) for one in others] == [None, None, "suspect", "no-usage",
                                                   "unknown-reads", "unanalysed"]


_CALLERS = [("anthropic", "claude-sonnet-4-5"), ("anthropic", "claude-haiku-4-5"),
            ("openai", "gpt-5"), ("openai", None), ("no-such-provider", "m"), (None, None)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_CALLERS), st.sampled_from(["s", "t", None]),
                          st.integers(0, 3000), st.integers(0, 200)), max_size=40))
def test_policies_found_once_per_provider_and_model_equal_each_calls_own(
        calls: list[tuple[tuple[str | None, str | None], str | None, int, int]]) -> None:
    """The pass finds a call's cache policy once per (provider, model) and notes a
    scenario's models and providers once per (scenario, provider, model): over calls of
    providers and models interleaved (an unknown provider, no model, no scenario), each
    row's agreement is the one computed with its own policy's granularity, and each
    scenario's models and providers are those of its calls in order of first appearance."""
    from stableprompt._accounting._builder import NO_SCENARIO, SummaryBuilder
    from stableprompt._accounting._calls import agreement_of
    from stableprompt._accounting._ceilings import policy_of

    records = [_record(i, provider=provider, model=model, scenario=scenario,
                       cache_read_tokens=read, predicted_cache_read_tokens=read + off)
               for i, ((provider, model), scenario, read, off) in enumerate(calls)]
    builder = SummaryBuilder(price=False)
    for record in records:
        builder.add(record)
    for record, row in zip(records, builder.rows, strict=True):
        policy = policy_of(record.provider, record.model, None)
        granularity = policy.granularity_tokens if policy is not None else 1
        assert row.agrees == agreement_of(record, granularity)
    for name, scenario in builder.scenarios.items():
        own = [r for r in records if (r.scenario or NO_SCENARIO) == name]
        assert scenario.models == list(dict.fromkeys(r.model for r in own if r.model))
        assert scenario.providers == list(dict.fromkeys(r.provider for r in own
                                                        if r.provider))


_VALUES = st.sampled_from([None, "", "x", "/system/0/text", 3, True, ["a"], [{"k": 1}],
                           {"k": 1}])


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["reason", "cause_detail", "segment", "segment_kind",
                                        "path", "snippet_a", "snippet_b", "divergences",
                                        "divergences_total", "turn_boundary", "cause"]),
                       _VALUES, max_size=6),
       st.sampled_from(["hit", "client_mutation", "below_minimum", "no_breakpoint"]),
       st.sampled_from([None, ("before", "after")]))
def test_a_row_without_divergence_keys_reads_them_as_each_helper_does(
        detail: dict[str, object], verdict: str, snippets: tuple[str, str] | None) -> None:
    """``call_row`` skips the divergence helpers for a row with none of their keys (most
    rows): any subset of those keys, with values of every JSON type, gives the segment,
    path, snippets, cause detail and divergences that ``_str``, ``_snippet`` and
    ``_divergences`` read from the detail."""
    from stableprompt._accounting._calls import _divergences, _snippet, _str

    record = _record(0, verdict=verdict, verdict_detail=detail)
    row = call_row(record, scenario="s", session="a", ceiling=2500, granularity=1,
                   pricing=None, notes={}, snippets=snippets, excluded=exclusion(record))
    assert (row.segment, row.segment_kind, row.path) == (
        _str(detail, "segment"), _str(detail, "segment_kind"), _str(detail, "path"))
    assert row.cause_detail == (_str(detail, "cause_detail") or _str(detail, "reason"))
    assert (row.before, row.after) == (_snippet(detail, "snippet_a", snippets, 0),
                                       _snippet(detail, "snippet_b", snippets, 1))
    assert (row.divergences, row.divergences_total) == _divergences(detail)
    if verdict == "below_minimum" and detail.get("reason") == "no-breakpoint":
        assert row.cause == "no-breakpoint"
