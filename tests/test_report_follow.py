"""``stableprompt report --follow`` (``_report._follow``): a live view of a ledger another
process writes, read incrementally by rowid, stopped by a deadline, an event or SIGTERM."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stableprompt import Ledger, UsageRecord
from stableprompt._cli import main
from stableprompt._report._follow import FollowState, follow

SRC = str(Path(__file__).resolve().parents[1] / "src")
T0 = datetime(2026, 1, 1, tzinfo=UTC)

WRITER = textwrap.dedent("""
    import sys, time
    from datetime import datetime, timedelta, timezone
    from stableprompt import Ledger, UsageRecord
    path, count, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with Ledger(path) as ledger:
        for i in range(count):
            miss = i % 3 == 2
            detail = {"cause": "tool-reorder", "segment": "tools[0]", "path": "/tools/0",
                      "snippet_a": '"name":"alpha"', "snippet_b": '"name":"delta"',
                      "lost_tokens": 900} if miss else {}
            ledger.write(UsageRecord(
                record_id=f"r{i}", ts_utc=t0 + timedelta(seconds=i), session_id="s",
                turn=i + 1, wire_format="anthropic", provider="anthropic",
                model="claude-sonnet-4-5", input_tokens_total=1000,
                cache_read_tokens=0 if miss else 900, cache_write_tokens=100,
                uncached_tokens=0 if not miss else 900, output_tokens=5,
                verdict="client_mutation" if miss else "hit", verdict_detail=detail))
            time.sleep(pause)
""")


def _writer(path: Path, count: int, pause: float) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(count), str(pause)],
                            env=env)


def test_follow_reads_each_row_of_a_live_writer_once(tmp_path: Path) -> None:
    """While a subprocess writes 9 rows (WAL), the follower prints each call once, in order,
    misses with cause, segment, path and snippets, and ends with the running totals."""
    db = tmp_path / "live.db"
    writer = _writer(db, 9, 0.15)
    stop = threading.Event()
    out = io.StringIO()
    def stop_when_written() -> None:
        writer.wait()
        stop.set()

    watcher = threading.Thread(target=stop_when_written)
    watcher.start()
    state = follow(str(db), file=out, interval_s=0.05, seconds=60, stop=stop)
    watcher.join()
    assert writer.returncode == 0
    lines = [line for line in out.getvalue().splitlines() if line.startswith("2026-")]
    assert [line.split()[1] for line in lines] == [f"s/{i}" for i in range(1, 10)]
    miss = lines[2]
    assert "client_mutation" in miss and "cause=tool-reorder" in miss
    assert "segment=tools[0]" in miss and "path=/tools/0" in miss
    assert "before='\"name\":\"alpha\"'" in miss and "after='\"name\":\"delta\"'" in miss
    assert state.totals.calls == 9 and state.causes["tool-reorder"].calls == 3
    assert list(state.causes["tool-reorder"].latest) == ["r2", "r5", "r8"]
    assert out.getvalue().splitlines()[-1].endswith(
        "calls 9, hit rate 60.0%, hit 6 client-mutation 3")


def _write(db: Path, n: int, start: int = 0) -> None:
    with Ledger(db) as ledger:
        for i in range(start, start + n):
            ledger.write(UsageRecord(
                record_id=f"r{i}", ts_utc=T0 + timedelta(seconds=i), session_id="s", turn=i,
                wire_format="anthropic", provider="anthropic", model="claude-sonnet-4-5",
                input_tokens_total=1000, cache_read_tokens=1000, cache_write_tokens=0,
                uncached_tokens=0, output_tokens=1, verdict="hit"))


def test_follow_seconds_zero_reads_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    """``--follow --follow-seconds 0`` reads what is there once and exits 0; a ledger that
    does not exist yet is waited for, not an error."""
    db = tmp_path / "calls.db"
    assert main(["report", "--follow", str(db), "--follow-seconds", "0"]) == 0
    assert "waiting for" in capsys.readouterr().out
    _write(db, 3)
    assert main(["report", "--follow", str(db), "--follow-seconds", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len([line for line in out if line.startswith("2026-")]) == 3
    assert out[-1].endswith("calls 3, hit rate 100.0%, hit 3")


def test_follow_refuses_several_ledgers_or_json(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``--follow`` takes one ledger and no ``--json``/``--html`` (exit 2, one line)."""
    assert main(["report", "--follow", str(tmp_path / "a.db"), "--json"]) == 2
    assert "--follow" in capsys.readouterr().err


def test_follow_refuses_what_if(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--what-if --follow`` was silently a plain follow: a usage error (exit 2, one line)
    saying the two do not combine and how to get the replay."""
    assert main(["report", "--follow", str(tmp_path / "a.db"), "--what-if",
                 "--follow-seconds", "0"]) == 2
    err = capsys.readouterr().err
    assert "--what-if" in err and "--follow" in err and err.count("\n") == 1
    assert not (tmp_path / "a.db").exists()


def test_sigterm_stops_the_follower_cleanly(tmp_path: Path) -> None:
    """SIGTERM to ``stableprompt report --follow``: exit 0 within a second, summary printed,
    rows written before it seen."""
    db = tmp_path / "calls.db"
    _write(db, 2)
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen([sys.executable, "-m", "stableprompt", "report", "--follow",
                             str(db), "--interval", "0.05"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the first row is shown: the follower is running
    assert first.startswith("2026-")
    _write(db, 1, start=2)
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert time.monotonic() - sent < 2
    assert out.splitlines()[-1].endswith("calls 3, hit rate 100.0%, hit 3")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_view_is_a_live_panel(tmp_path: Path) -> None:
    """On a terminal the view is rich ``Live``: the panel shows the hit rate, the latest
    misses and the miss causes, not one line per call."""
    db = tmp_path / "calls.db"
    _write(db, 2)
    with Ledger(db) as ledger:
        ledger.write(UsageRecord(
            record_id="m1", ts_utc=T0 + timedelta(seconds=9), session_id="s", turn=9,
            wire_format="anthropic", provider="anthropic", model="claude-sonnet-4-5",
            input_tokens_total=1000, cache_read_tokens=0, cache_write_tokens=1000,
            uncached_tokens=0, output_tokens=1, verdict="client_mutation",
            verdict_detail={"cause": "system-edit", "segment": "system[0]",
                            "path": "/system/0", "lost_tokens": 1000}))
    screen = _Tty()
    kwargs: dict[str, Any] = {"seconds": 0}
    state = follow(str(db), file=screen, **kwargs)
    text = screen.getvalue()
    assert state.totals.calls == 3
    assert "latest misses" in text and "system-edit" in text and "miss causes so far" in text
    assert "66.7%" in text and not any(line.startswith("2026-") for line in text.splitlines())
    assert isinstance(FollowState().renderable("t"), object)


@pytest.mark.parametrize(("flag", "value"), [("--interval", "nan"), ("--interval", "0"),
                                             ("--interval", "inf"),
                                             ("--follow-seconds", "nan"),
                                             ("--follow-seconds", "-1")])
def test_follow_timings_must_be_finite(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       flag: str, value: str) -> None:
    """``--interval nan`` used to busy-poll and ``--follow-seconds nan`` never to stop: both
    are one-line usage errors naming the option."""
    from stableprompt._cli import main as cli_main

    assert cli_main(["report", "--follow", str(tmp_path / "x.db"), flag, value]) == 2
    err = capsys.readouterr().err
    assert flag in err and "finite" in err and err.count("\n") == 1


def test_follow_counts_lost_tokens_as_the_report_does(tmp_path: Path) -> None:
    """The live causes table bounds each miss's lost tokens by the same ceiling as
    ``stableprompt report`` (it used a ceiling of 0, so every miss showed 0 lost)."""
    state = FollowState()
    rows = []
    for i in range(4):
        miss = i == 3
        rows.append(state.add(UsageRecord(
            record_id=f"r{i}", ts_utc=T0 + timedelta(seconds=i), session_id="s", turn=i + 1,
            wire_format="anthropic", provider="anthropic", model="claude-sonnet-4-5",
            input_tokens_total=10_000, cache_read_tokens=0 if miss or i == 0 else 9_000,
            cache_write_tokens=1_000, uncached_tokens=0, output_tokens=5,
            verdict="client_mutation" if miss else ("cold" if i == 0 else "hit"),
            verdict_detail={"cause": "tool-reorder", "lost_tokens": 9_500} if miss else {})))
    assert rows[-1] is not None and rows[-1].lost_tokens == 9_500
    assert state.causes["tool-reorder"].lost_tokens == 9_500
