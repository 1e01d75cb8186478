"""Tests for the compaction planner (does compacting now pay off?)."""

from __future__ import annotations

from typing import Any

import pytest

from stableprompt import InputError, plan_compaction

ANTHROPIC_5M: dict[str, Any] = {"read_multiplier": 0.1, "write_multiplier": 1.25}


def test_large_span_pays_off_with_break_even() -> None:
    """Replacing 90k tokens by a 2k summary pays off within a few turns."""
    plan = plan_compaction(history_tokens=100_000, span_tokens=90_000, summary_tokens=2_000,
                           surviving_tokens=10_000, new_tokens_per_turn=1_000,
                           remaining_turns=30, **ANTHROPIC_5M)
    assert plan.pays_off
    assert plan.break_even_turn is not None and 1 <= plan.break_even_turn <= 30
    assert plan.savings == pytest.approx(plan.cost_keep - plan.cost_compact)


def test_break_even_matches_hand_computation() -> None:
    """The break-even turn is the first turn where cumulative costs cross, computed by hand."""
    kwargs = dict(history_tokens=50_000, span_tokens=40_000, summary_tokens=1_000,
                  surviving_tokens=10_000, new_tokens_per_turn=500, **ANTHROPIC_5M)
    r, w = 0.1, 1.25
    keep = 0.0
    compact = r * 50_000 + 5.0 * 1_000
    compacted = 50_000 - 40_000 + 1_000
    expected = None
    for t in range(1, 200):
        keep += r * (50_000 + (t - 1) * 500) + w * 500
        compact += (r * 10_000 + w * (compacted - 10_000 + 500)) if t == 1 else (
            r * (compacted + (t - 1) * 500) + w * 500)
        if compact <= keep:
            expected = t
            break
    plan = plan_compaction(remaining_turns=200, **kwargs)
    assert plan.break_even_turn == expected


def test_small_span_never_pays_off() -> None:
    """Compacting a small span near the end of a short session does not pay off."""
    plan = plan_compaction(history_tokens=20_000, span_tokens=2_000, summary_tokens=1_500,
                           surviving_tokens=15_000, new_tokens_per_turn=500,
                           remaining_turns=3, **ANTHROPIC_5M)
    assert not plan.pays_off
    assert plan.break_even_turn is None
    assert plan.savings < 0


@pytest.mark.parametrize(
    "changes",
    [{"history_tokens": -1}, {"span_tokens": 200}, {"surviving_tokens": 90},
     {"remaining_turns": -2}, {"remaining_turns": True}, {"read_multiplier": float("nan")},
     {"write_multiplier": -1.0}, {"output_multiplier": float("inf")}],
)
def test_bad_input(changes: dict[str, object]) -> None:
    """Negative or inconsistent token counts raise InputError with code compaction-input."""
    kwargs: dict[str, object] = dict(history_tokens=100, span_tokens=50, summary_tokens=10,
                                     surviving_tokens=50, new_tokens_per_turn=10,
                                     remaining_turns=5, **ANTHROPIC_5M)
    kwargs.update(changes)
    with pytest.raises(InputError) as info:
        plan_compaction(**kwargs)  # type: ignore[arg-type]
    assert info.value.code == "compaction-input"


def test_defaults_are_the_earlier_model() -> None:
    """Passing cached_tokens=H, writes on and r'=r explicitly changes nothing."""
    kwargs = dict(history_tokens=50_000, span_tokens=40_000, summary_tokens=1_000,
                  surviving_tokens=10_000, new_tokens_per_turn=500, remaining_turns=7,
                  **ANTHROPIC_5M)
    assert plan_compaction(**kwargs) == plan_compaction(
        cached_tokens=50_000, summary_cache_write=True, turn_read_multiplier=0.1,
        **kwargs)


def test_partly_cached_prefix_by_hand() -> None:
    """With C < H the first turn of both paths and the summarization call price the uncached
    rest, with and without the summarization call's cache write (hand-computed)."""
    r, w, o = 0.1, 1.25, 5.0
    h, x, s, p, c, n = 10_000, 6_000, 500, 2_000, 9_000, 300
    compacted = h - x + s  # 4,500
    keep = (r * c + w * (h - c) + w * n) + (r * (h + n) + w * n)
    # writing: the summarization call writes h - c; the first compacted turn reads p
    compact_w = (r * c + w * (h - c) + o * s) + (r * p + w * (compacted - p + n)) + (
        r * (compacted + n) + w * n)
    # not writing: h - c sent at 1x; p <= c is still read
    compact_nw = (r * c + 1.0 * (h - c) + o * s) + (r * p + w * (compacted - p + n)) + (
        r * (compacted + n) + w * n)
    common = dict(history_tokens=h, span_tokens=x, summary_tokens=s, surviving_tokens=p,
                  new_tokens_per_turn=n, remaining_turns=2, cached_tokens=c, **ANTHROPIC_5M)
    writing = plan_compaction(**common)
    reading = plan_compaction(summary_cache_write=False, **common)
    assert writing.cost_keep == pytest.approx(keep)
    assert writing.cost_compact == pytest.approx(compact_w)
    assert reading.cost_compact == pytest.approx(compact_nw)
    assert writing.cost_compact - reading.cost_compact == pytest.approx((w - 1) * (h - c))


def test_no_write_when_the_surviving_prefix_is_not_cached() -> None:
    """Without the summarization call's write, a surviving prefix past C is written by the
    first compacted turn: (w - r) * (P - C) more than reading it (hand-computed)."""
    r, w = 0.1, 1.25
    common = dict(history_tokens=10_000, span_tokens=2_000, summary_tokens=100,
                  surviving_tokens=8_000, new_tokens_per_turn=100, remaining_turns=1,
                  cached_tokens=5_000, **ANTHROPIC_5M)
    writing = plan_compaction(**common)
    reading = plan_compaction(summary_cache_write=False, **common)
    # summarization: 5,000 sent at 1x instead of 1.25x; first turn: 3,000 written not read
    expected = -(w - 1) * 5_000 + (w - r) * 3_000
    assert reading.cost_compact - writing.cost_compact == pytest.approx(expected)


def test_cache_expiring_between_turns_prices_reads_as_writes() -> None:
    """With r' = w every later turn writes its whole prefix again (hand-computed)."""
    w = 1.25
    plan = plan_compaction(history_tokens=1_000, span_tokens=600, summary_tokens=100,
                           surviving_tokens=400, new_tokens_per_turn=50, remaining_turns=2,
                           cached_tokens=0, turn_read_multiplier=w, **ANTHROPIC_5M)
    keep = w * 1_000 + w * 50 + w * (1_000 + 50) + w * 50
    compact = (w * 1_000 + 5.0 * 100) + (w * 400 + w * (500 - 400 + 50)) + (
        w * (500 + 50) + w * 50)
    assert plan.cost_keep == pytest.approx(keep)
    assert plan.cost_compact == pytest.approx(compact)


@pytest.mark.parametrize("changes", [{"cached_tokens": 101}, {"cached_tokens": -1},
                                     {"summary_cache_write": 1},
                                     {"turn_read_multiplier": float("nan")}])
def test_bad_new_input(changes: dict[str, object]) -> None:
    """The new planner inputs are checked like the others (code compaction-input)."""
    kwargs: dict[str, object] = dict(history_tokens=100, span_tokens=50, summary_tokens=10,
                                     surviving_tokens=50, new_tokens_per_turn=10,
                                     remaining_turns=5, **ANTHROPIC_5M)
    kwargs.update(changes)
    with pytest.raises(InputError) as info:
        plan_compaction(**kwargs)  # type: ignore[arg-type]
    assert info.value.code == "compaction-input"
