"""Tests for the ledger summary (`_report`) and `stableprompt report`."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from genai_prices import Usage, calc_price

from old_ledgers import downgrade
from stableprompt import Ledger, LedgerError, UsageRecord
from stableprompt._accounting._calls import agreement_of
from stableprompt._cli import main
from stableprompt._policy import ESTIMATED_SEGMENT_FRAMING_TOKENS, ESTIMATED_SPAN_FRACTION
from stableprompt._report._command import (
    VERDICTS,
    ceiling_notes,
    html_report,
    read_ledger,
    summarize,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ISSUE_FIELDS = ["calls", "input_tokens", "cache_read_tokens", "cache_write_tokens", "hit_rate",
                "ceiling", "verdicts", "agreement"]


def _rec(i: int, *, scenario: str = "s", session: str = "a", total: int | None = 2000,
         read: int = 0, write: int = 0, predicted: int | None = None, verdict: str = "hit",
         model: str = "claude-sonnet-4-5", provider: str = "anthropic",
         write_1h: int | None = None) -> UsageRecord:
    return UsageRecord(
        ts_utc=T0 + timedelta(seconds=6 * i), scenario=scenario, session_id=session, turn=i,
        wire_format="anthropic" if provider == "anthropic" else "openai-chat",
        provider=provider, model=model, input_tokens_total=total,
        cache_read_tokens=None if total is None else read,
        cache_write_tokens=None if total is None else write,
        cache_write_1h_tokens=write_1h,
        uncached_tokens=None if total is None else total - read - write,
        output_tokens=None if total is None else 10, predicted_cache_read_tokens=predicted,
        verdict=verdict,  # type: ignore[arg-type]
        status_code=200 if total is not None else 500)


def test_ceiling_is_previous_request_of_the_session() -> None:
    """The ceiling of a call is its session's previous request (capped at its own size); a
    session's first call has none."""
    records = [
        _rec(0, total=2000, write=2000, verdict="cold"),
        _rec(1, total=2100, read=2000, write=100),
        _rec(2, total=2050, read=0, write=2050, verdict="client_mutation"),  # shrank
        _rec(3, session="b", total=3000, write=3000, verdict="cold"),
    ]
    totals = summarize(records, price=False).scenarios["s"].totals
    assert totals.ceiling_tokens == 2000 + 2050
    assert totals.input_tokens == 9150
    assert totals.cache_read_tokens == 2000
    assert totals.ceiling == pytest.approx(4050 / 9150)
    assert totals.hit_rate == pytest.approx(2000 / 9150)
    assert totals.of_ceiling == pytest.approx(2000 / 4050)


def test_ceiling_respects_minimum_and_granularity() -> None:
    """Below the model's minimum the ceiling is 0; OpenAI's is floored to 128 tokens."""
    short = [_rec(0, total=500), _rec(1, total=600)]
    assert summarize(short, price=False).scenarios["s"].totals.ceiling_tokens == 0
    openai = [_rec(0, total=3000, model="gpt-5.2", provider="openai"),
              _rec(1, total=3100, model="gpt-5.2", provider="openai")]
    assert summarize(openai, price=False).scenarios["s"].totals.ceiling_tokens == 2944


def test_agreement_within_granularity() -> None:
    """Agreement counts calls whose prediction equals the report within the granularity."""
    anthropic = [_rec(0, read=1900, predicted=1900), _rec(1, read=2000, predicted=1999),
                 _rec(2, read=5, predicted=None)]
    assert summarize(anthropic, price=False).scenarios["s"].totals.agreement == 0.5
    openai = [_rec(0, read=2944, predicted=3000, model="gpt-5.2", provider="openai")]
    assert summarize(openai, price=False).scenarios["s"].totals.agreement == 1.0


def _estimated(i: int, *, read: int, predicted: int, span: int | None,
               scale: float = 0.999, segments: int | None = 3) -> UsageRecord:
    record = _rec(i, total=11_278, read=read, write=11_278 - read, predicted=predicted,
                  verdict="client_mutation")
    detail: dict[str, Any] = {"token_scale": scale}
    if span is not None:
        detail["estimated_span_tokens"] = span
        if segments is not None:
            detail["estimated_span_segments"] = segments
    return record.model_copy(update={"verdict_detail": detail})


def test_an_estimated_span_agrees_within_its_allowance_and_is_counted_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A prediction resting on an estimated span (Claude Code's first read of its system
    breakpoint: 8,755 predicted, 8,766 read, span 2,376 tokens over 3 segments) agrees within
    5% of the span plus the request's density offset plus 8 tokens per segment; the same
    error without a span, or an error beyond the allowance (an entry read at another
    breakpoint, nothing read at all), disagrees. The report counts the estimated calls
    apart, with their largest error, and says so."""
    allowance = (1 + ESTIMATED_SEGMENT_FRAMING_TOKENS * 3
                 + math.ceil((ESTIMATED_SPAN_FRACTION + 0.001) * 2376))  # 145 tokens
    records = [
        _estimated(0, read=8766, predicted=8755, span=2376),  # the captured first read
        _estimated(1, read=8766, predicted=8755, span=None),  # no span: exact or nothing
        _estimated(2, read=8755 + allowance - 1, predicted=8755, span=2376),
        _estimated(3, read=8755 + allowance, predicted=8755, span=2376),
        _estimated(4, read=0, predicted=8755, span=2376),
        _estimated(5, read=8788, predicted=8755, span=100, scale=1.2,
                   segments=None),  # error 33 < 1 + 8 + 25
        _estimated(6, read=8790, predicted=8755, span=100, scale=1.2, segments=None),
    ]
    totals = summarize(records, price=False).overall
    assert (totals.agreement_calls, totals.agreement_matches) == (7, 3)
    assert [agreement_of(r, 1) for r in records] == [True, False, True, False, False, True,
                                                      False]
    assert totals.agreement_estimated == 6
    assert totals.estimate_max_error_tokens == 8755
    assert summarize(records[:1], price=False).overall.estimate_max_error_tokens == 11
    db = tmp_path / "calls.db"
    _ledger(db, records[:1])
    assert main(["report", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["overall"]["agreement"], data["overall"]["agreement_estimated"],
            data["overall"]["estimate_max_error_tokens"]) == (1.0, 1, 11)
    assert data["calls"][0]["estimated_span_tokens"] == 2376
    assert main(["report", str(db)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "1 of 1 predictions rest partly on our token estimate" in out
    assert ("off by at most 11 tokens, allowed 5% of the estimated span and 8 tokens per "
            "block in it") in out


def test_an_estimate_allowance_never_turns_a_miss_into_agreement(tmp_path: Path) -> None:
    """The allowance covers how many tokens a read holds, not whether one happened. Measured
    on the emulator (a 1,344-token tools breakpoint, a 1,211-token system breakpoint, 60
    turns of history after it, the first user message changed): the read of the system
    entry was predicted 2,191 over an estimated span of 46,347 tokens in 121 segments
    (allowance 3,616 tokens), so a read of nothing agreed. A read of 0 against a positive
    prediction (or a read where none was predicted) now disagrees; the real read still
    agrees."""
    def row(i: int, *, read: int, predicted: int) -> UsageRecord:
        return _estimated(i, read=read, predicted=predicted, span=46_347, scale=0.9929,
                          segments=121)

    assert agreement_of(row(0, read=2555, predicted=2191), 1) is True
    assert agreement_of(row(1, read=0, predicted=2191), 1) is False
    assert agreement_of(row(2, read=900, predicted=0), 1) is False  # hand-edited
    totals = summarize([row(0, read=2555, predicted=2191), row(1, read=0, predicted=2191)],
                       price=False).overall
    assert (totals.agreement_calls, totals.agreement_matches) == (2, 1)
    assert (totals.agreement_estimated, totals.estimate_max_error_tokens) == (2, 2191)


@pytest.mark.parametrize(("key", "raw"), [
    ("token_scale", "1e308"), ("token_scale", "-1e308"), ("token_scale", '"1.2"'),
    ("token_scale", "true"), ("estimated_span_tokens", "18446744073709551615"),
    ("estimated_span_tokens", "2376.5"), ("estimated_span_tokens", '"2376"'),
    ("estimated_span_tokens", "-5"), ("estimated_span_segments", "18446744073709551615"),
    ("estimated_span_segments", "true"), ("estimated_span_segments", "[3]"),
])
def test_hand_edited_estimate_fields_never_crash_the_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, raw: str) -> None:
    """A ledger row whose estimate fields were edited by hand (an absurd density, a span or a
    segment count of another type or size) is reported in every form (text, JSON, HTML,
    ``--calls``), and a read of nothing never agrees with the prediction it missed."""
    db = tmp_path / "calls.db"
    _ledger(db, [_estimated(0, read=8766, predicted=8755, span=2376),
                 _estimated(1, read=0, predicted=8755, span=2376)])
    from stableprompt._ledger._schema import COLUMNS

    column = COLUMNS["verdict_detail"]
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        for rowid, text in con.execute(f'SELECT rowid, "{column}" FROM calls').fetchall():
            edited = re.sub(rf'"{key}":[^,}}]+', f'"{key}":{raw}', text)
            assert edited != text
            con.execute(f'UPDATE calls SET "{column}" = ? WHERE rowid = ?', (edited, rowid))
    for mode in ([], ["--calls"], ["--html", str(tmp_path / "r.html")]):
        assert main(["report", str(db), *mode]) == 0
    capsys.readouterr()
    assert main(["report", str(db), "--json", "--calls"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["overall"]["agreement"] in (0.5, 0.0)  # the read of nothing never agrees
    assert [call["cache_read_tokens"] for call in data["calls"]] == [8766, 0]


def test_unknown_usage_counts_as_a_call_but_not_tokens() -> None:
    """A failed call is a call with unknown usage and adds no tokens and no ceiling."""
    records = [_rec(0, total=2000, write=2000), _rec(1, total=None, verdict="unknown"),
               _rec(2, total=2100, read=2000, write=100)]
    totals = summarize(records, price=False).scenarios["s"].totals
    assert (totals.calls, totals.unknown_usage, totals.input_tokens) == (3, 1, 4100)
    assert totals.ceiling_tokens == 2000
    assert totals.verdicts == {"hit": 2, "cold": 0, "client_mutation": 0, "below_minimum": 0,
                               "no_breakpoint": 0, "ttl_expired": 0, "provider_miss": 0,
                               "unknown": 1}


def test_groups_by_scenario_and_session_in_order() -> None:
    """Scenarios and sessions keep their order of first appearance; the JSON has the issue's
    fields for each."""
    records = [_rec(0, scenario="z", session="2"), _rec(1, scenario="a", session="1"),
               _rec(2, scenario="z", session="1")]
    report = summarize(records, price=False)
    assert list(report.scenarios) == ["z", "a"]
    assert list(report.scenarios["z"].sessions) == ["2", "1"]
    entry = report.scenarios["z"].totals.to_json()
    assert list(entry) == ISSUE_FIELDS
    assert list(entry["verdicts"]) == list(VERDICTS)


def test_cost_matches_genai_prices_per_call() -> None:
    """Each call is priced with genai-prices at its date, 1-hour writes included."""
    records = [_rec(0, total=5000, write=5000, write_1h=5000),
               _rec(1, total=5100, read=5000, write=100)]
    report = summarize(records)
    expected = 0.0
    for r in records:
        usage: dict[str, Any] = {"input_tokens": r.input_tokens_total,
                                 "cache_read_tokens": r.cache_read_tokens,
                                 "cache_write_tokens": r.cache_write_tokens, "output_tokens": 10}
        if r.cache_write_1h_tokens:
            usage["cache_write_1h_tokens"] = r.cache_write_1h_tokens
        expected += float(calc_price(Usage(**usage), "claude-sonnet-4-5",
                                     provider_id="anthropic",
                                     genai_request_timestamp=datetime(2026, 1, 1, 12)).total_price)
    assert report.scenarios["s"].totals.cost_usd == pytest.approx(expected)
    assert report.pricing.as_of() == "2026-01-01"
    assert report.pricing.source.startswith("genai-prices ")


def test_unknown_model_omits_cost_with_a_note() -> None:
    """A model genai-prices does not know gets no cost and a note naming it."""
    report = summarize([_rec(0, model="claude-imaginary-9")])
    assert report.scenarios["s"].totals.cost_usd is None
    assert any("claude-imaginary-9" in note for note in report.pricing.notes)


def test_html_is_self_contained_with_inline_svg() -> None:
    """The HTML report has inline SVG charts (matplotlib's) that parse as XML, no scripts, no
    external URLs (only in-page ``#id`` references)."""
    records = [_rec(0, write=2000, verdict="cold"), _rec(1, total=2100, read=2000, write=100),
               _rec(2, scenario="t<&>", total=2000, write=2000, verdict="cold")]
    page = html_report(summarize(records), title="t", intro=["an emulator, not a provider"])
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "<link" not in page
    assert set(re.findall(r"(?:src|href)=\"(.)", page)) <= {"#"}
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    assert len(svgs) == 2
    for svg in svgs:
        ET.fromstring(svg)  # well-formed
    assert "t&lt;&amp;&gt;" in page and "an emulator, not a provider" in page


def _ledger(path: Path, records: list[UsageRecord]) -> None:
    with Ledger(path) as ledger:
        for record in records:
            assert ledger.write(record) == "committed"


def test_report_command_json_and_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    """`stableprompt report` prints tables, or JSON with the issue's fields, and writes HTML."""
    db = tmp_path / "calls.db"
    _ledger(db, [_rec(0, write=2000, verdict="cold"), _rec(1, total=2100, read=2000, write=100)])
    assert main(["report", str(db), "--json", "--html", str(tmp_path / "r.html")]) == 0
    data = json.loads(capsys.readouterr().out)
    scenario = data["scenarios"]["s"]
    assert [k for k in scenario if k in ISSUE_FIELDS] == ISSUE_FIELDS
    assert (scenario["calls"], scenario["cache_read_tokens"], scenario["ceiling_tokens"]) == (
        2, 2000, 2000)
    assert scenario["sessions"]["a"]["calls"] == 2
    assert (tmp_path / "r.html").read_text().count('<svg class="chart"') == 2
    assert main(["report", str(db), "--sessions"]) == 0
    out = capsys.readouterr().out
    assert "hit rate" in out and "s: sessions" in out and "48.8%" in out and "100.0%" in out


@pytest.mark.parametrize("kind", ["missing", "directory", "not-sqlite", "empty", "other-db",
                                  "unrelated-calls"])
def test_report_bad_ledger_is_one_line(kind: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """An unreadable ledger path gives a one-line error and exit 2 (bad input), and changes
    nothing."""
    path = tmp_path / "x.db"
    if kind == "directory":
        path.mkdir()
    elif kind == "not-sqlite":
        path.write_text("hello\n")
    elif kind == "empty":
        path.touch()
    elif kind in ("other-db", "unrelated-calls"):
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE calls (x)" if kind == "unrelated-calls" else
                     "CREATE TABLE things (x)")
        conn.commit()
        conn.close()
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "ledger" in err
    assert path.exists() == (kind != "missing")
    with pytest.raises(LedgerError):
        read_ledger(path)
    if kind in ("other-db", "unrelated-calls"):  # not migrated into a ledger
        assert "not a stableprompt ledger (schema version 0" in err
        conn = sqlite3.connect(path)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.close()
        assert (tables, version) == (["things" if kind == "other-db" else "calls"], 0)


# --------------------------------------------------------------------------- read-only, metadata


def _run_in_read_only_dir(directory: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``python -m stableprompt *argv`` while ``directory`` is read-only: ``chmod 0o555``
    for a normal user; as root (which ignores modes) a read-only bind mount in a private mount
    namespace (``unshare -m``), skipping when that is not permitted."""
    command = [sys.executable, "-m", "stableprompt", *argv]
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=120,
                                  check=False)
        finally:
            directory.chmod(0o755)
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("running as root without unshare: cannot make a read-only directory")
    script = ('mount --bind "$1" "$1" 2>/dev/null && mount -o remount,bind,ro "$1" 2>/dev/null '
              '|| exit 96; if touch "$1/.probe" 2>/dev/null; then exit 97; fi; shift; '
              'exec "$@"')
    done = subprocess.run([unshare, "-m", "sh", "-c", script, "sh", str(directory), *command],
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode in (96, 97) or "unshare failed" in done.stderr:
        pytest.skip(f"cannot make a read-only bind mount here: {done.stderr.strip()[:200]}")
    return done


def test_report_reads_a_ledger_in_a_read_only_directory(tmp_path: Path) -> None:
    """`stableprompt report` reads a ledger in a read-only directory (SQLite cannot create the
    WAL side files there: immutable fallback), prints its backend line, and refuses one whose
    -wal file holds writes it could not see."""
    directory = tmp_path / "ro"
    directory.mkdir()
    db = directory / "calls.db"
    with Ledger(db) as ledger:
        ledger.set_meta("backend", "stableprompt emulator (loopback): not a real provider")
        for record in [_rec(0, write=2000, verdict="cold"), _rec(1, total=2100, read=2000)]:
            assert ledger.write(record) == "committed"
    assert sorted(p.name for p in directory.iterdir()) == ["calls.db"]  # WAL checkpointed
    done = _run_in_read_only_dir(directory, ["report", str(db), "--json"])
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["scenarios"]["s"]["calls"] == 2
    assert data["meta"] == {"backend": "stableprompt emulator (loopback): not a real provider"}
    assert sorted(p.name for p in directory.iterdir()) == ["calls.db"]
    # A writer that died leaves its rows in calls.db-wal (here: copied while a writer is open
    # elsewhere, without the -shm file).
    shutil.copyfile(db, tmp_path / "live.db")
    with Ledger(tmp_path / "live.db") as ledger:
        assert ledger.write(_rec(2, total=2200, read=2100)) == "committed"
        shutil.copyfile(tmp_path / "live.db-wal", directory / "calls.db-wal")
    assert (directory / "calls.db-wal").stat().st_size > 0
    done = _run_in_read_only_dir(directory, ["report", str(db)])
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "calls.db-wal" in done.stderr
    assert "Traceback" not in done.stderr


def test_report_prints_the_backend_from_the_ledger_metadata(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With ledger metadata, report's text, JSON and HTML all carry the backend line; without
    it, none invents one."""
    db = tmp_path / "calls.db"
    with Ledger(db) as ledger:
        ledger.set_meta("backend", "stableprompt emulator (loopback): not a real provider")
        ledger.set_meta("model", "claude-sonnet-5")
        ledger.set_meta("extra", "kept")
        assert ledger.write(_rec(0, write=2000, verdict="cold")) == "committed"
    html_path = tmp_path / "r.html"
    assert main(["report", str(db), "--html", str(html_path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[:3] == ["Backend: stableprompt emulator (loopback): not a real provider",
                         "Model: claude-sonnet-5", "extra: kept"]
    page = html_path.read_text()
    assert ('<p class="banner">Backend: stableprompt emulator (loopback): not a real provider'
            in page)
    assert main(["report", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["meta"]["backend"].endswith("not a real provider")
    plain = tmp_path / "plain.db"
    _ledger(plain, [_rec(0, write=2000, verdict="cold")])
    assert main(["report", str(plain)]) == 0
    assert "Backend" not in capsys.readouterr().out


def test_report_never_migrates_an_older_ledger(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report` on a schema v1 ledger reads it and leaves it at v1, byte for byte."""
    db = tmp_path / "v1.db"
    _ledger(db, [_rec(0, write=2000, verdict="cold")])
    downgrade(db, 1)
    before = db.read_bytes()
    assert main(["report", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["meta"] == {}
    assert db.read_bytes() == before


# --------------------------------------------------------------------------- notes, paths


def test_html_names_the_cost_source_once(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The report's HTML and text name the cost source once and each pricing note once."""
    db = tmp_path / "calls.db"
    _ledger(db, [_rec(0, write=2000, verdict="cold"), _rec(1, model="claude-imaginary-9")])
    assert main(["report", str(db), "--html", str(tmp_path / "r.html")]) == 0
    text = capsys.readouterr().out
    page = (tmp_path / "r.html").read_text()
    for output in (text, page):
        assert len(re.findall(r"costs?:", output, flags=re.IGNORECASE)) == 1
        assert output.count("genai-prices 0") == 1
        assert output.count("claude-imaginary-9") == 1


def test_reads_beyond_the_ledger_raise_the_ceiling_and_get_a_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A session whose first call already reads (a cache warm from an earlier run): a read
    proves its prefix was cached, so the ceiling is at least the read and ``of ceiling`` stays
    at 100%, with a note counting the calls no earlier call of the ledger explains (here the
    first); at or below what the ledger explains, no note."""
    warm = [_rec(0, total=2000, read=2000), _rec(1, total=2000, read=2000)]
    report = summarize(warm, price=False)
    assert report.scenarios["s"].totals.of_ceiling == pytest.approx(1.0)
    assert report.reads_beyond_ledger == 1
    notes = ceiling_notes(report)
    assert len(notes) == 1 and notes[0].startswith("1 call read more") and "warm" in notes[0]
    cold = [_rec(0, total=2000, write=2000), _rec(1, total=2010, read=2000, write=10)]
    assert ceiling_notes(summarize(cold, price=False)) == []
    db = tmp_path / "calls.db"
    _ledger(db, warm)
    assert main(["report", str(db)]) == 0
    out = capsys.readouterr().out
    assert "100.0%" in out and "1 call read more than any earlier call" in out
    assert main(["report", "--json", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["reads_beyond_ledger"] == 1


def _bad_html_paths(tmp_path: Path) -> dict[str, Path]:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file")
    paths = {"directory": tmp_path, "under-a-file": blocker / "r.html",
             "dangling-link": tmp_path / "link.html"}
    (tmp_path / "link.html").symlink_to(tmp_path / "missing" / "target.html")
    if Path("/proc/self").is_dir():
        paths["proc"] = Path("/proc/stableprompt-report.html")
    return paths


def test_report_html_path_is_checked_first(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A --html path that cannot be written (a directory, under a file, a dangling link,
    /proc, the ledger itself) is a one-line usage error naming --html and the path."""
    db = tmp_path / "calls.db"
    _ledger(db, [_rec(0, write=2000, verdict="cold")])
    before = db.read_bytes()
    for kind, path in {**_bad_html_paths(tmp_path), "ledger-itself": db}.items():
        assert main(["report", str(db), "--html", str(path)]) == 2, kind
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, kind
        assert "--html" in err and str(path) in err, (kind, err)
    assert db.read_bytes() == before


def test_self_hosted_calls_are_not_priced_in_one_line() -> None:
    """A ledger whose calls all went to a self-hosted engine says so in one cost line."""
    from stableprompt._report._text import pricing_lines

    records = [_rec(0, provider="llama-cpp", model="tiny", verdict="cold"),
               _rec(1, provider="llama-cpp", model="tiny", read=1900)]
    assert pricing_lines(summarize(records)) == [
        "Costs: not priced: the calls went to a self-hosted engine (llama-cpp)."]


def test_meta_lines_name_the_keys_of_json_values() -> None:
    """A JSON object in the ledger metadata (the engine demo's agreement) prints as its keys,
    other values as they are."""
    from stableprompt._report._text import meta_lines

    meta = {"backend": "b", "agreement": json.dumps({f"row{i}": {"calls": i} for i in range(6)}),
            "note": "{not json"}
    assert meta_lines(meta) == [
        "Backend: b",
        "agreement: JSON with 6 keys (row0, row1, row2, row3, ...); see --json, meta.agreement",
        "note: {not json"]


@pytest.mark.parametrize("extra", [[], ["--by", "model"]], ids=["default", "by-model"])
def test_report_shows_a_model_that_looks_like_rich_markup_literally(
        extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model named ``[/]`` (any proxy client can send it) prints literally, not a rich
    MarkupError."""
    db = tmp_path / "calls.db"
    _ledger(db, [_rec(0, model="[/]", write=2000, verdict="cold"),
                 _rec(1, model="[/]", total=2100, read=2000, write=100)])
    assert main(["report", str(db), *extra]) == 0
    out = capsys.readouterr().out
    assert "model '[/]'" in out
    if extra:
        assert re.search(r"^\W*\[/\] ", out, re.MULTILINE)  # the by-model row


HOSTILE = {
    "model": "[/]:smile:",
    "session": "\x1b[2Jsess\rion",
    "scenario": "[bold]scen[/bold][link=https://evil.invalid]click[/link]",
    "segment": "\x1b]8;;https://evil.invalid\x1b\\tools\x1b]8;;\x1b\\",
    "path": "/messages/0\u202e\x07",
    "snippet_a": "[red]before\x1b[31m",
    "snippet_b": "after\r\n[/]",
}


def test_report_shows_ledger_strings_literally(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Terminal escapes and rich markup in ledger strings (model, session, scenario, cause
    path, snippets, metadata) are printed as visible text, never interpreted."""
    mutation = _rec(1, scenario=HOSTILE["scenario"], session=HOSTILE["session"],
                    model=HOSTILE["model"], read=0, write=2000, verdict="client_mutation")
    mutation = mutation.model_copy(update={"verdict_detail": {
        "cause": "tool-reorder", "lost_tokens": 1900, "segment": HOSTILE["segment"],
        "path": HOSTILE["path"], "snippet_a": HOSTILE["snippet_a"],
        "snippet_b": HOSTILE["snippet_b"]}})
    records = [_rec(0, scenario=HOSTILE["scenario"], session=HOSTILE["session"],
                    model=HOSTILE["model"], write=2000, verdict="cold"), mutation]
    path = tmp_path / "hostile.db"
    _ledger(path, records)
    with Ledger(path) as led:
        led.set_meta("backend", "\x1b[31m[blink]red[/blink]")
    assert main(["report", str(path), "--calls", "--sessions", "--by", "model"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    assert "\u202e" not in out
    for literal in ("[/]:smile:", "[bold]scen[/bold][link=https://evil.invalid]click[/link]",
                    "\\x1b[2Jsess\\rion", "\\x1b]8;;https://evil.invalid", "[blink]red[/blink]",
                    "\\u202e"):
        assert literal in out, literal
    assert main(["report", str(path), "--follow", "--follow-seconds", "0"]) == 0
    followed = capsys.readouterr().out
    assert "\x1b" not in followed and "\r" not in followed
    assert "\\x1b[2Jsess\\rion" in followed and "\\x1b]8;;https://evil.invalid" in followed


def _diagnosed(record: UsageRecord, reason: str | None, agreement: str,
               **detail: Any) -> UsageRecord:
    return record.model_copy(update={"verdict_detail": {**detail, "server_diagnosis": {
        "reason": reason, "missed_tokens": 100, "agreement": agreement, "why": "test"}}})


def test_report_shows_the_providers_reasons_beside_ours(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Calls that asked the provider why they missed: the report counts agree / disagree per
    group, the agreement where both speak, and the provider-side unexplained misses (the
    server blames itself, or our provider_miss got no server reason)."""
    db = tmp_path / "calls.db"
    _ledger(db, [
        _diagnosed(_rec(0, write=2000, verdict="cold"), "previous_message_not_found",
                   "no-comparison"),
        _diagnosed(_rec(1, total=2100, read=0, write=2100, verdict="client_mutation"),
                   "system_changed", "agree", segment_kind="system", cause="volatile-token"),
        _diagnosed(_rec(2, total=2200, read=0, write=2200, verdict="client_mutation"),
                   "tools_changed", "disagree", segment_kind="message"),
        _diagnosed(_rec(3, total=2300, read=0, write=2300, verdict="provider_miss"),
                   "unavailable", "server-only"),
        _rec(4, total=2400, read=0, write=2400, verdict="provider_miss"),
        _rec(5, total=2500, read=2400, write=100)])
    assert main(["report", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scenarios"]["s"]["server_diagnosis"] == {
        "agree": 1, "disagree": 1, "server-only": 1, "ours-only": 0, "no-comparison": 1,
        "agreement": 0.5, "provider_side_unexplained": 2}
    assert main(["report", str(db)]) == 0
    out = capsys.readouterr().out
    assert ("provider diagnostics, s: 1 agree, 1 disagree (50.0% where both speak), 2 "
            "provider-side unexplained, 1 without a comparison. (provider diagnostics: the "
            "provider's own miss reason against our verdict; the agreement column: our "
            "predicted cache reads against the reported ones.)") in " ".join(out.split())
