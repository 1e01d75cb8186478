"""Edges of the report's bounded memory (`_accounting/_spill.py`, issue 30) a review found:
a full temporary directory during a move-out fails the report with a typed error (never a
traceback, never numbers computed without the entries that could not be written)."""

from __future__ import annotations

import json
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from stableprompt._accounting._spill import OrderedSpillMap, SpillMap
from stableprompt._accounting._summary import summarize
from stableprompt._cli import main
from stableprompt._exceptions import ConfigurationError
from test_report_bounded import _Spills, _tiny_caps


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
