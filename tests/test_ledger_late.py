"""A follower's late rows (`_ledger/_late.py`, `Ledger.records_after(late=)`): on PostgreSQL a
row can commit after another writer's row with a higher ``seq``; a follower reading only
``seq > last`` never showed it (``report --follow``). Now the numbers it read past are read
again until a row fills them or they are older than ``LateRows.wait_s``."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt import Ledger
from stableprompt._ledger import _late
from stableprompt._ledger._late import LateRows
from stableprompt._report._follow import follow
from test_ledger_postgres import _record


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _watched(late: LateRows) -> set[int]:
    return {n for first, last in late.ranges for n in range(first, last + 1)}


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["read", "fill", "tick"]),
                          st.lists(st.integers(1, 60), max_size=8)), max_size=12))
def test_late_rows_watch_exactly_the_numbers_read_past_and_not_yet_filled(
        steps: list[tuple[str, list[int]]]) -> None:
    """Against a model: the watched numbers are those missing between rows read, minus those
    filled since, minus those older than ``wait_s`` (counted in ``given_up``)."""
    clock = _Clock()
    late = LateRows(10.0, clock=clock)
    model: dict[int, float] = {}
    given_up = 0
    last = 0
    for kind, numbers in steps:
        if kind == "tick":
            clock.now += 6.0
            continue
        if kind == "read":
            seen = sorted({n + last for n in numbers})
            late.read_past(last, seen)
            for n in range(last + 1, seen[-1] if seen else last + 1):
                if n not in seen:
                    model[n] = clock.now
            last = seen[-1] if seen else last
        else:
            filled = sorted(n for n in set(numbers) if n <= last)
            late.filled(filled)
            for n in filled:
                model.pop(n, None)
        late.expire()
        for n, since in list(model.items()):
            if clock.now - since > 10.0:
                del model[n]
                given_up += 1
        assert _watched(late) == set(model)
        assert late.given_up == given_up
        assert late.ranges == sorted(late.ranges)


def test_the_oldest_ranges_are_given_up_beyond_the_cap(monkeypatch: Any) -> None:
    monkeypatch.setattr(_late, "MAX_RANGES", 3)
    clock = _Clock()
    late = LateRows(clock=clock)
    for at in range(5):  # one gap per read, a second apart
        late.read_past(at * 10, [at * 10 + 2])
        clock.now += 1
    late.expire()
    assert late.ranges == [(21, 21), (31, 31), (41, 41)]
    assert late.given_up == 2


def _insert_uncommitted_copy(url: str, source_id: str, new_id: str) -> Any:
    """A connection holding an open transaction that inserted a copy of row ``source_id`` as
    ``new_id`` (verdict ``cold``): its ``seq`` is taken now, its row visible only at commit."""
    import psycopg

    conn = psycopg.connect(url)
    columns = [row[0] for row in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'calls' "
        "AND column_name NOT IN ('seq', 'record_id') ORDER BY ordinal_position").fetchall()]
    listed = ", ".join(f'"{name}"' for name in columns)
    # Another verdict: another rollup row (``_ledger/_rollups.py``), whose lock the open
    # transaction holds; a later write of the same hour, model and verdict would wait for it.
    chosen = listed.replace('"verdict"', "'cold'")
    conn.execute(f'INSERT INTO calls ("record_id", {listed}) SELECT %s, {chosen} FROM calls '
                 'WHERE "record_id" = %s', (new_id, source_id))
    return conn


def test_a_row_committed_after_a_later_one_is_read_by_a_follower(
        pg_url: str, tmp_path: Path) -> None:
    """Writer A takes ``seq`` 2 and commits after writer B's row 3 was read: the follower
    reads 1, 3, then 2; without ``late`` (the code before) 2 was never read."""
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        assert ledger.write(_record(1)) == "committed"
        held = _insert_uncommitted_copy(pg_url, "r0001", "late-row")
        try:
            assert ledger.write(_record(3)) == "committed"
            late = LateRows()
            plain_first, plain_last = ledger.records_after(0)
            assert [r.record_id for r in plain_first] == ["r0001", "r0003"]
            first, last = ledger.records_after(0, late=late)
            assert [r.record_id for r in first] == ["r0001", "r0003"]
            assert late.ranges == [(2, 2)]
            held.commit()
        finally:
            held.close()
        again, last_again = ledger.records_after(last, late=late)
        assert [r.record_id for r in again] == ["late-row"]
        assert last_again == last and late.ranges == []
        assert ledger.records_after(last, late=late) == ([], last)
        plain, _ = ledger.records_after(plain_last)  # without late: never read
        assert plain == []


def test_report_follow_shows_a_row_committed_late(pg_url: str, tmp_path: Path) -> None:
    """``report --follow`` on PostgreSQL counts the late row: it commits 0.3 s into a 1.5 s
    follow polling every 0.05 s, after the follower read past its ``seq``."""
    import threading

    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        ledger.write(_record(1))
        held = _insert_uncommitted_copy(pg_url, "r0001", "late-row")
        ledger.write(_record(3))
        timer = threading.Timer(0.3, held.commit)
        timer.start()
        out = io.StringIO()
        try:
            state = follow(pg_url, file=out, interval_s=0.05, seconds=1.5)
        finally:
            timer.join()
            held.close()
    assert state.totals.calls == 3, out.getvalue()
