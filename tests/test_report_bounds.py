"""The report's last places that grew with the ledger (issue 30, session 16): the ``--by``
table printed in pieces with its short ids made in one pass, the keep-alive pings' sessions
in a spill map, ``--follow`` on the report's one call-row path, and ``--json`` that leaves
no truncated document on stdout when the spill fails partway."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import tracemalloc
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stableprompt import UsageRecord, _subcommand
from stableprompt._accounting import _builder, _keepalive, _spill
from stableprompt._accounting._calls import exclusion
from stableprompt._accounting._keepalive import KeepAliveTally
from stableprompt._accounting._spill import SpillMap
from stableprompt._accounting._summary import summarize, summarize_stream
from stableprompt._cli import main
from stableprompt._report import _command, _follow, _ids, _table, _text
from stableprompt._subcommand import rich_console
from test_report_bounded import T0, _ledger_file, _same_bounded_or_not, _Spills, _tiny_caps


def _reference_short_ids(ids: list[str]) -> dict[str, str]:
    """``short_ids`` as it was written before ``short_form`` (every id held, widened until
    every two differ): the oracle of the one-pass rule."""
    distinct = sorted(set(ids))
    if not distinct:
        return {}
    common = _ids._shared_prefix(distinct[0], distinct[-1]) if len(distinct) > 1 else 0
    common = min(common, min(len(i) for i in distinct) - 1) if common else 0
    rests = {i: i[common:] for i in distinct}
    width = _ids.SHORT_ID_CHARS
    while len({r[:width] for r in rests.values()}) < len(rests):
        width += 1
    shown = {}
    for i, rest in rests.items():
        cut = rest[:width]
        text = ("…" if common else "") + cut + ("…" if len(rest) > width else "")
        shown[i] = i if len(i) <= _ids.SHORT_ID_CHARS + 2 or len(text) >= len(i) else text
    return shown


_ID = st.one_of(st.text("ab0-é", max_size=24),
                st.builds(lambda tail: "0192a4b1-7c3e-7" + tail, st.text("0123abc-", max_size=22)))


@given(ids=st.lists(_ID, max_size=12))
@settings(max_examples=300, deadline=None)
def test_short_form_in_one_pass_is_short_ids(ids: list[str]) -> None:
    """``short_form`` over the ids in order gives each id the shown form the rule that held
    every id gave (shared prefixes, neighbours alike for many characters, ids that are
    prefixes of others, empty and wide-character ids)."""
    expected = _reference_short_ids(ids)
    assert _ids.short_ids(ids) == expected
    shorten = _ids.short_form(iter(sorted(set(ids))))
    assert {i: shorten(i) for i in expected} == expected


# --------------------------------------------------------------------------- --by in pieces


@st.composite
def _group_records(draw: st.DrawFn) -> list[UsageRecord]:
    """Calls of sessions with long, partly shared ids, some by subagents with long ids, on
    two models and two days."""
    sessions = draw(st.lists(_ID.filter(bool), min_size=1, max_size=9, unique=True))
    agents = draw(st.lists(st.builds(lambda t: "agent-a1f3" + t, st.text("0a-", max_size=14)),
                           min_size=1, max_size=4, unique=True))
    records = []
    ts = T0
    for i in range(draw(st.integers(1, 24))):
        ts += timedelta(seconds=draw(st.sampled_from([1, 400, 90_000])))
        total = draw(st.sampled_from([1024, 4096]))
        read = draw(st.sampled_from([0, total // 2, total]))
        detail: dict[str, Any] = {"turn_boundary": draw(st.sampled_from(["intra", "cross"]))}
        if draw(st.booleans()):
            detail["agent"] = {"kind": "subagent", "id": draw(st.sampled_from(agents))}
        records.append(UsageRecord(
            record_id=f"r{i:03d}", ts_utc=ts, scenario="x",
            session_id=draw(st.sampled_from(sessions)), turn=i, wire_format="anthropic",
            provider="anthropic",
            model=draw(st.sampled_from(["claude-sonnet-4-5", "claude-haiku-4-5"])),
            input_tokens_total=total, cache_read_tokens=read, cache_write_tokens=total - read,
            uncached_tokens=0, output_tokens=5, predicted_cache_read_tokens=read,
            verdict="hit" if read else draw(st.sampled_from(["cold", "client_mutation"])),
            verdict_detail=detail, status_code=200))
    return records


def _groups_text(records: list[UsageRecord], by: str, width: int, *, whole: bool,
                 cap: int | None) -> str:
    with pytest.MonkeyPatch.context() as mp:
        if cap is not None:
            _tiny_caps(mp, cap)
        mp.setattr(_table, "PIECE_ROWS", 1 if cap is None else cap)
        if whole:  # rich prints the table whole (print_in_pieces' fallback)
            mp.setattr(_table, "_PRIVATE", _table._PRIVATE | {"_not_in_rich"})
        report = summarize_stream(iter(records), by=by) if cap is not None else summarize(
            records)
        out = io.StringIO()
        _text._print_groups(rich_console(file=out, width=width, highlight=False), report, by)
        report.close()
    return out.getvalue()


@given(records=_group_records(), width=st.sampled_from([160, 130, 100, 80, 50]),
       by=st.sampled_from(["session", "agent", "model", "day"]),
       cap=st.sampled_from([None, 1, 2, 3]))
@settings(max_examples=80, deadline=None)
def test_groups_table_in_pieces_prints_as_rich_prints_it_whole(
        records: list[UsageRecord], width: int, by: str, cap: int | None) -> None:
    """The ``--by`` table printed in pieces (a piece of 1-3 rows, the groups moved out to the
    spill file) is the bytes rich prints for the whole table: with and without the outer
    edge (narrow: headers in lines, verdicts under the table), wrapped and folded cells,
    short session and subagent ids; and the same as ``summarize``'s (every group held)."""
    text = _groups_text(records, by, width, whole=False, cap=cap)
    assert text == _groups_text(records, by, width, whole=True, cap=cap)
    assert text == _groups_text(records, by, width, whole=True, cap=None)


_WIDE = 1200  # sessions in the larger ledger


@pytest.fixture(scope="module")
def wide_ledgers(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    """Two ledgers of one call per session (a subagent's, each its own id): 300 and
    :data:`_WIDE` sessions."""
    folder = tmp_path_factory.mktemp("wide")
    out = {}
    for n in (300, _WIDE):
        out[n] = _ledger_file(folder / f"w{n}.db", [UsageRecord(
            record_id=f"r{i:05d}", ts_utc=T0 + timedelta(seconds=i), scenario="x",
            session_id=f"0192a4b1-7c3e-7{i * 7919 % 100_003:011d}", turn=1,
            wire_format="anthropic", provider="anthropic", model="claude-sonnet-4-5",
            input_tokens_total=2048, cache_read_tokens=1024, cache_write_tokens=1024,
            uncached_tokens=0, output_tokens=5, predicted_cache_read_tokens=1024, verdict="hit",
            verdict_detail={"turn_boundary": "cross",
                            "agent": {"kind": "subagent", "id": f"agent-{i:06d}"}},
            status_code=200) for i in range(n)])
    return out


def _small_rich_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich's own caches of cell widths and cut segments (``lru_cache`` of 4,096 and 16,384
    entries, ~1 MB once full) at 16 entries, so what the report holds is what is measured."""
    import functools

    from rich import cells
    from rich.segment import Segment

    monkeypatch.setattr(cells, "cached_cell_len",
                        functools.lru_cache(16)(cells.cached_cell_len.__wrapped__))
    split: Any = functools.lru_cache(16)(Segment.__dict__["_split_cells"].__func__.__wrapped__)
    monkeypatch.setattr(Segment, "_split_cells", classmethod(split))


def _peak_while_written(ledger: str, args: list[str]) -> int:
    """Bytes traced at most while ``report`` prints (``_command._write``: after the pass),
    its output going to ``/dev/null``."""
    real = _command._write
    peak: list[int] = []

    def traced(*a: Any, **k: Any) -> int:
        tracemalloc.start()
        try:
            return real(*a, **k)
        finally:
            peak.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    with (pytest.MonkeyPatch.context() as mp, open(os.devnull, "w") as null,
          contextlib.redirect_stdout(null)):
        mp.setattr(_command, "_write", traced)
        assert main(["report", ledger, *args]) == 0
    return peak[0]


@pytest.mark.parametrize("args", [["--by", "session"], ["--by", "agent"],
                                  ["--by", "session", "--json", "--limit", "0"],
                                  ["--by", "agent", "--html", "HTML"]])
def test_by_outputs_hold_no_more_with_more_groups(
        args: list[str], wide_ledgers: dict[int, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With small caps, ``--by session`` and ``--by agent`` (text, ``--json``, ``--html``)
    hold as much on 4x the sessions (the text table was one rich table of every group, ~6
    KB a session)."""
    _tiny_caps(monkeypatch, 8)
    monkeypatch.setattr(_table, "PIECE_ROWS", 16)
    monkeypatch.setattr(_spill, "READ_ROWS", 16)
    monkeypatch.setattr(_builder, "MAX_POINTS", 50)  # the charts' points: at most 100
    monkeypatch.setattr(_subcommand, "JSON_HELD_CHARS", 1000)  # --json: to its file
    _small_rich_caches(monkeypatch)
    args = [str(tmp_path / "r.html") if a == "HTML" else a for a in args]
    _peak_while_written(wide_ledgers[300], args)  # imports, caches: warm
    small = _peak_while_written(wide_ledgers[300], args)
    large = _peak_while_written(wide_ledgers[_WIDE], args)
    assert large - small < 150_000, (small, large)


# --------------------------------------------------------------------------- pings


def test_ping_sessions_are_kept_in_a_spill_map() -> None:
    """The keep-alive tally counts the sessions that had a ping with at most ``cap`` of their
    ids in memory (the rest moved out and read back), the same count as without a cap."""
    pings = [UsageRecord(
        record_id=f"p{i}", ts_utc=T0 + timedelta(seconds=i), session_id=f"s{i % 37}",
        wire_format="anthropic", provider="anthropic", model="claude-sonnet-4-5",
        input_tokens_total=4096, cache_read_tokens=4096, cache_write_tokens=0,
        uncached_tokens=0, output_tokens=1, verdict="hit",
        verdict_detail={"keepalive": True, "keepalive_ping": 1}) for i in range(200)]
    with pytest.MonkeyPatch.context() as mp:
        spills = _Spills(mp)
        bounded, whole = KeepAliveTally(price=False, cap=2), KeepAliveTally(price=False)
        for record in pings:
            bounded.add(record)
            whole.add(record)
        assert bounded.totals() == whole.totals()
        assert whole.totals().sessions == 37
        assert [m.cap for m in spills.maps if m.spilled] == [2]
        bounded.close()
        assert all(m.closed for m in spills.maps)


def test_ping_ledger_is_the_same_with_everything_moved_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ledger with pings in many sessions: every output the same with caps of 1 (the
    pings' sessions moved out too) as with the defaults."""
    records = []
    for i in range(60):
        ping = i % 3 == 0
        records.append(UsageRecord(
            record_id=f"r{i:03d}", ts_utc=T0 + timedelta(seconds=60 * i), scenario="x",
            session_id=f"session-{i % 17:02d}", turn=i, wire_format="anthropic",
            provider="anthropic", model="claude-sonnet-4-5", input_tokens_total=4096,
            cache_read_tokens=4096 if ping else 2048, cache_write_tokens=0 if ping else 2048,
            uncached_tokens=0, output_tokens=5, predicted_cache_read_tokens=2048,
            verdict="hit", status_code=200,
            verdict_detail={"keepalive": True, "keepalive_ping": 1} if ping else {}))
    path = _ledger_file(tmp_path / "pings.db", records)
    made: list[SpillMap[Any, Any]] = []

    class Recorded(SpillMap[Any, Any]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_keepalive, "SpillMap", Recorded)
        _tiny_caps(mp)
        assert main(["report", path]) == 0
        assert "keep-alive: 20 pings in 17 sessions" in capsys.readouterr().out
        assert [(m.cap, m.spilled > 10, m.closed) for m in made] == [(1, True, True)]
    _same_bounded_or_not(path, capsys, tmp_path, modes=[[], ["--json"]])


# --------------------------------------------------------------------------- --follow


def test_follow_decides_each_exclusion_as_the_report_does(
        demo_ledger_files: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """``--follow`` hands ``call_row`` the call's exclusion, as the report's pass does (one
    path), and its rows carry the report's verdicts, exclusions, read shares, partial flags
    and lost tokens."""
    from stableprompt._accounting._calls import call_row as real
    from stableprompt._report._command import open_ledger

    given_exclusions: list[Any] = []

    def spy(record: UsageRecord, **kwargs: Any) -> Any:
        given_exclusions.append(kwargs.get("excluded", "not given"))
        assert given_exclusions[-1] == exclusion(record)
        return real(record, **kwargs)

    monkeypatch.setattr(_follow, "call_row", spy)
    records = [r for r in open_ledger(demo_ledger_files[0]).records()
               if not r.verdict_detail.get("keepalive") and not r.verdict_detail.get("agent")]
    state = _follow.FollowState()
    rows = [state.add(r) for r in records]
    assert len(given_exclusions) == len(records)
    report = summarize(records)

    def key(row: Any) -> tuple[Any, ...]:
        return (row.id, row.verdict, row.excluded, row.read_share, row.partial,
                row.lost_tokens, row.cause)

    assert [key(r) for r in rows] == [key(r) for r in report.calls]


def test_follow_keeps_its_ceilings_in_bounded_memory(demo_ledger_files: list[Path]) -> None:
    """``--follow`` (a view that runs for days) remembers each call's size and time as the
    report does, at most the caps in memory: with caps of 1 it moves them out and shows the
    same rows as with the defaults, and :meth:`FollowState.close` deletes its file."""
    from stableprompt._report._command import open_ledger

    records = list(open_ledger(demo_ledger_files[0]).records())
    default = _follow.FollowState()
    expected = [default.add(r) for r in records]
    with pytest.MonkeyPatch.context() as mp:
        _tiny_caps(mp)
        bounded = _follow.FollowState()
        assert [bounded.add(r) for r in records] == expected
    assert bounded.ceilings.spilled > len(records) // 2
    bounded.close()
    default.close()


# --------------------------------------------------------------------------- --json failing


def _failing_reads(monkeypatch: pytest.MonkeyPatch, after: int) -> None:
    """Reading a spill file back fails (an I/O error) after ``after`` rows were read."""
    real = _spill._rows
    read = [0]

    def rows(cursor: sqlite3.Cursor) -> Iterator[tuple[Any, ...]]:
        for row in real(cursor):
            read[0] += 1
            if read[0] > after:
                raise sqlite3.OperationalError("disk I/O error")
            yield row

    monkeypatch.setattr(_spill, "_rows", rows)


@pytest.mark.parametrize("held", [_subcommand.JSON_HELD_CHARS, 1000])
def test_json_failing_partway_prints_only_the_error_object(
        held: int, wide_ledgers: dict[int, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``report --json`` whose spill file fails while the groups are written (after 2 MB of
    JSON): exit 1, one line on stderr, and stdout is one complete JSON document, the error
    object (``jq`` reads it), not a truncated report followed by it; so when the document
    was held in memory and when it had gone to its temporary file."""
    _tiny_caps(monkeypatch)
    monkeypatch.setattr(_subcommand, "JSON_HELD_CHARS", held)
    assert main(["report", wide_ledgers[_WIDE], "--json", "--by", "session"]) == 0
    whole = capsys.readouterr().out
    assert len(whole) > 1 << 20  # far more than one write of the encoder's
    _failing_reads(monkeypatch, 3000)  # after the sessions (read twice), in the groups
    assert main(["report", wide_ledgers[_WIDE], "--json", "--by", "session"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"error": {
        "code": "report-spill-failed", "exit_status": 1,
        "message": captured.err.strip().removeprefix("stableprompt: error: ")}}
    assert "disk I/O error" in captured.err and captured.err.count("\n") == 1


@given(cap=st.integers(1, 3))
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_json_that_succeeds_is_written_whole(
        cap: int, demo_ledger_files: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    """``--json`` held back until it is complete prints the same document as before (the
    error path above aside), whatever the caps, also when it went through its temporary
    file (held in memory up to 1,000 characters)."""
    assert main(["report", str(demo_ledger_files[0]), "--json", "--by", "agent"]) == 0
    default = capsys.readouterr().out
    with pytest.MonkeyPatch.context() as mp:
        _tiny_caps(mp, cap)
        mp.setattr(_subcommand, "JSON_HELD_CHARS", 1000)
        assert main(["report", str(demo_ledger_files[0]), "--json", "--by", "agent"]) == 0
    assert capsys.readouterr().out == default
    json.loads(default)
