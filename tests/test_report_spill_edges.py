"""Edges of the report's bounded memory (`_accounting/_spill.py`, issue 30) a review probed:
a full temporary directory during a move-out fails the report with a typed error (never a
traceback, never numbers computed without the entries that could not be written); a
``summarize`` summary pickles; odd session ids and scenario names (case and normalisation
twins, NUL, secrets, wide characters) give the same bytes moved out or not."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stableprompt import UsageRecord
from stableprompt._accounting._spill import OrderedSpillMap, SpillMap
from stableprompt._accounting._summary import summarize
from stableprompt._cli import main
from stableprompt._exceptions import ConfigurationError
from test_report_bounded import T0, _ledger_file, _same_bounded_or_not, _Spills, _tiny_caps


def _full_after(monkeypatch: pytest.MonkeyPatch, pages: int) -> None:
    """Every spill file holds at most ``pages`` pages: SQLite then answers SQLITE_FULL
    ("database or disk is full"), as when the temporary directory's disk is full."""
    real = SpillMap._conn

    def conn(self: SpillMap[Any, Any]) -> sqlite3.Connection:
        fresh = self._db is None
        db = real(self)
        if fresh:
            db.execute(f"PRAGMA max_page_count={pages}")
        return db

    monkeypatch.setattr(SpillMap, "_conn", conn)


def test_a_full_spill_file_raises_a_typed_error() -> None:
    """A move-out that SQLite refuses (disk full) raises ``ConfigurationError`` naming the
    temporary directory, and the map refuses any later use rather than answer without the
    entries it lost."""
    with pytest.MonkeyPatch.context() as mp:
        _full_after(mp, 3)
        spill: OrderedSpillMap[str] = OrderedSpillMap(2)
        with pytest.raises(ConfigurationError, match="full") as caught:
            for i in range(5000):
                spill["p", f"session {i}"] = "x" * 300
        assert caught.value.code == "report-spill-failed"
        assert "SQLITE_TMPDIR" in str(caught.value)
        with pytest.raises(ConfigurationError):
            list(spill.items("p"))
        with pytest.raises(ConfigurationError):
            spill.get(("p", "session 0"))
        spill.close()


def test_report_fails_cleanly_when_the_spill_file_is_full(
        demo_ledger_files: list[Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``stableprompt report`` with a full temporary directory: exit 1, one line naming the
    problem, no report printed (``--json``: the error object), every spill file closed."""
    spills = _Spills(monkeypatch)
    _tiny_caps(monkeypatch)
    _full_after(monkeypatch, 3)
    for args in ([], ["--json"], ["--sessions", "--by", "session"]):
        assert main(["report", str(demo_ledger_files[0]), *args]) == 1
        captured = capsys.readouterr()
        assert "temporary file" in captured.err and "Traceback" not in captured.err
        assert "report-spill-failed" in captured.err
        if args == ["--json"]:  # the error object, no report
            assert json.loads(captured.out)["error"]["code"] == "report-spill-failed"
        else:
            assert captured.out == ""
    assert spills.maps and all(m.closed for m in spills.maps)


def test_a_summary_of_summarize_pickles_as_before(demo_ledger_files: list[Path]) -> None:
    """``summarize`` (the public API) gives a summary that pickles (as it did before its
    sessions became a mapping over a spill map: multiprocessing, caches), and reads back the
    same sessions and JSON."""
    from stableprompt._report._command import open_ledger

    whole = summarize(list(open_ledger(demo_ledger_files[0]).records()))
    back = pickle.loads(pickle.dumps(whole))
    assert back.to_json() == whole.to_json()
    for name, scenario in whole.scenarios.items():
        assert list(back.scenarios[name].sessions.items()) == list(scenario.sessions.items())


_ODD_IDS = ["s", "S", "\u00e9", "e\u0301", "a\x00b", "('a', 'b')", "sk-" + "A" * 20,
            "sk-" + "A" * 20 + "x", "[REDACTED]", "api_key", "\U0001f600\u4e2d\u6587" * 3,
            "AKIA" + "B" * 16, "x" * 70]
"""Session ids and scenario names that stress the spill's keys and the streamed JSON's
scrubbing: case and Unicode-normalisation twins, a NUL, a tuple's repr, two ids that scrub
to the same text and one that is that text, a credential's name, wide characters."""


@st.composite
def _odd_records(draw: st.DrawFn) -> list[UsageRecord]:
    records: list[UsageRecord] = []
    ts = T0
    for i in range(draw(st.integers(1, 30))):
        ts += timedelta(seconds=draw(st.sampled_from([1, 30, 400])))
        total = draw(st.sampled_from([1024, 8192]))
        read = draw(st.sampled_from([0, total // 2, total]))
        detail: dict[str, Any] = {"turn_boundary": draw(st.sampled_from(["intra", "cross"]))}
        if draw(st.booleans()):
            detail["agent"] = {"kind": "subagent",
                               "id": draw(st.sampled_from(["a1", "sk-" + "C" * 20]))}
        named: bool = draw(st.booleans())
        predecessor = (records[draw(st.integers(0, len(records) - 1))].record_id
                       if records and named else None)
        records.append(UsageRecord(
            record_id=draw(st.sampled_from(["r", "R", "r\x00"])) + f"{i:03d}", ts_utc=ts,
            scenario=draw(st.sampled_from(["x", "X", "\u00c9", "sk-" + "B" * 20])),
            session_id=draw(st.sampled_from(_ODD_IDS)), turn=i, wire_format="anthropic",
            provider="anthropic", model=draw(st.sampled_from(["claude-sonnet-4-5",
                                                               "claude-haiku-4-5"])),
            input_tokens_total=total, cache_read_tokens=read, cache_write_tokens=total - read,
            uncached_tokens=0, output_tokens=5, predicted_cache_read_tokens=read,
            predecessor_id=predecessor, lineage=draw(st.sampled_from(["l0", "l1"])),
            verdict="hit" if read else "cold", verdict_detail=detail, status_code=200))
    return records


@given(records=_odd_records(), cap=st.integers(1, 3))
@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_odd_ids_are_the_same_with_everything_moved_out(
        records: list[UsageRecord], cap: int, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Sessions and scenarios named by the ids above, in two ledgers merged with a third that
    repeats their first calls (duplicate ids beyond the cap): every ``--by``, ``--json`` (its
    sessions scrubbed as they stream) and ``--sessions`` table, the same bytes with caps of
    1-3 as with the defaults. (Checked against the code before the spill maps, c0ebc7b, on
    16 such ledgers: the same bytes.)"""
    paths = []
    for j, part in enumerate([records[::2], records[1::2], records[:5]]):
        paths.append(_ledger_file(tmp_path / f"odd{os.getpid()}-{j}.db", part))
    modes = [["--json", "--by", by] for by in ("scenario", "session", "agent", "model")]
    _same_bounded_or_not(paths[0], capsys, tmp_path, [*modes, ["--sessions"]], cap=cap)
    merged = [[*paths[1:], "--json", "--by", "session"], [*paths[1:], "--sessions"]]
    with pytest.MonkeyPatch.context() as mp:
        default = [_run(args, capsys) for args in [[paths[0], *m] for m in modes] + merged]
        _tiny_caps(mp, cap)
        assert [_run(args, capsys) for args in
                [[paths[0], *m] for m in modes] + merged] == default


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["report", *args]) == 0, args
    return capsys.readouterr().out
