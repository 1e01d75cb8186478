"""Tests for the compaction planner (does compacting now pay off?)."""

from __future__ import annotations

import pytest

from stableprompt import InputError, plan_compaction

ANTHROPIC_5M = {"read_multiplier": 0.1, "write_multiplier": 1.25}


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
    plan = plan_compaction(remaining_turns=200, **kwargs)  # type: ignore[arg-type]
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
