"""Spill files never lose or truncate a record, and a bad line never blocks a replay
(issue 9 items 2-4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from stableprompt import LedgerError, LedgerSpillWarning, UsageParseError, parse_usage
from stableprompt._ledger import _spill
from stableprompt._ledger._ledger import Ledger
from stableprompt._ledger._schema import to_row
from stableprompt._ledger._usage_record import UsageRecord


def _record(**fields: object) -> UsageRecord:
    base: dict[str, object] = {"wire_format": "anthropic", "lineage": "sp1:head"}
    base.update(fields)
    return UsageRecord.model_validate(base)


def _unusable(tmp_path: Path) -> tuple[Ledger, Path]:
    """A ledger whose database path is a directory: every write spills."""
    db = tmp_path / "ledger.db"
    db.mkdir()
    return Ledger(db, fallback_dir=tmp_path / "fallback"), db


def test_usage_counts_past_what_the_ledger_stores_are_typed_errors() -> None:
    """A count in [2^63, 2^64) or with 5,000 digits is ``usage-overflow`` on its field, and
    building the message never fails (item 2, item 12)."""
    for value in (2**63, 2**64 - 1, 10**5000):
        with pytest.raises(UsageParseError) as info:
            parse_usage("openai-chat", {"prompt_tokens": value, "completion_tokens": 1})
        assert info.value.code == "usage-overflow"
        assert info.value.pointer == "/prompt_tokens"
    with pytest.raises(UsageParseError) as info:
        parse_usage("anthropic", {"input_tokens": -(10**5000)})
    assert info.value.code == "usage-negative" and "bits" in str(info.value)


def test_usage_with_non_string_keys_or_a_broken_model_dump_is_typed() -> None:
    """Non-string keys and SDK-like objects whose model_dump misbehaves raise usage-type at
    the object's pointer (items 13, 14)."""
    with pytest.raises(UsageParseError) as info:
        parse_usage("anthropic", {1: 2, "input_tokens": 3})
    assert (info.value.code, info.value.pointer) == ("usage-type", "")
    with pytest.raises(UsageParseError) as info:
        parse_usage("openai-chat", {"prompt_tokens": 3, "prompt_tokens_details": {None: 1}})
    assert (info.value.code, info.value.pointer) == ("usage-type", "/prompt_tokens_details")

    class NoKeywords:
        def model_dump(self) -> dict[str, int]:
            return {}

    class Raises:
        def model_dump(self, **_: object) -> dict[str, int]:
            raise RuntimeError("boom")

    for bad in (NoKeywords(), Raises()):
        with pytest.raises(UsageParseError) as info:
            parse_usage("openai-responses", bad)
        assert info.value.code == "usage-type"


def test_a_record_sqlite_cannot_store_is_a_typed_ledger_value_error() -> None:
    """to_row names the field of an integer outside signed 64 bits."""
    with pytest.raises(LedgerError) as info:
        to_row(_record(input_tokens_total=2**63))
    assert (info.value.code, info.value.pointer) == ("ledger-value", "/input_tokens_total")


def test_sums_of_counts_always_fit_and_memory_only_is_said_exactly(tmp_path: Path) -> None:
    """Counts each at the parser's bound still sum inside 64 bits; a record no file can hold
    is kept in memory with a warning saying exactly that (item 3)."""
    top = 2**53 - 1
    usage = parse_usage("anthropic", {"input_tokens": top, "cache_read_input_tokens": top,
                                      "cache_creation_input_tokens": top, "output_tokens": 1})
    assert usage.input_tokens_total == 3 * top < 2**63
    led, _ = _unusable(tmp_path)
    record = _record(cache_read_tokens=2**70)  # only a hand-built record can hold this
    with pytest.warns(LedgerSpillWarning, match="cannot be serialized.*kept in memory only"):
        assert led.write(record) == "unflushed"
    assert led.unflushed == [record]
    led.close()


def test_replay_quarantines_a_bad_line_and_imports_the_rest(tmp_path: Path) -> None:
    """An unstorable record and a truncated line go to quarantine with their line numbers;
    the good records behind them are imported, and a second replay is clean (item 2)."""
    led, db = _unusable(tmp_path)
    good_a, good_b = _record(turn=1), _record(turn=3)
    huge = _record(turn=2, cache_read_tokens=2**63)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LedgerSpillWarning)
        for record in (good_a, huge, good_b):
            assert led.write(record) == "spilled"
    with led.spill_path.open("ab") as handle:
        handle.write(b'{"wire_format": "anthro\n')  # a half line from some older writer
    db.rmdir()
    with pytest.warns(LedgerSpillWarning, match=r"2 spilled line\(s\).*line 2, 4"):
        assert led.replay_spill() == 2
    assert [r.turn for r in led.records()] == [1, 3]
    quarantine = tmp_path / "ledger.db.spill.quarantine.jsonl"
    kept = [json.loads(line) for line in quarantine.read_bytes().splitlines()]
    assert [(k["line"], k["record_id"]) for k in kept] == [(2, huge.record_id), (4, None)]
    assert "signed 64-bit" in kept[0]["reason"] and "not a valid record" in kept[1]["reason"]
    assert {k["source"] for k in kept} == {str(led.spill_path)}
    assert UsageRecord.model_validate_json(kept[0]["text"]) == huge  # nothing is nowhere
    assert not led.spill_path.exists()
    assert led.replay_spill() == 0
    led.close()


def test_a_short_write_leaves_no_half_line(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A spill append that hits a full disk after half the line is truncated back and the
    record falls through to the next target, never reported spilled half-written (item 4)."""
    target = tmp_path / "x.spill.jsonl"
    _spill.append_line(target, b'{"a":1}')
    real_write = os.write
    calls = {"n": 0}

    def full_disk(fd: int, data: bytes | memoryview) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError):
        _spill.append_line(target, b'{"b":2,"padding":"' + b"x" * 100 + b'"}')
    monkeypatch.setattr(os, "write", real_write)
    assert target.read_bytes() == b'{"a":1}\n'


def test_spill_on_a_size_limited_file_is_whole_or_elsewhere(tmp_path: Path) -> None:
    """With RLIMIT_FSIZE capping file size (a nearly full disk), the spill next to the DB
    fails cleanly, the record lands whole in the fallback or memory, and every line replays."""
    script = f"""
import resource, signal, warnings, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from pathlib import Path
from stableprompt._ledger._ledger import Ledger
from stableprompt._ledger._usage_record import UsageRecord
tmp = Path({str(tmp_path)!r})
(tmp / "db").mkdir()
led = Ledger(tmp / "db" / "ledger.db", fallback_dir=tmp / "fallback")
(tmp / "db" / "ledger.db").unlink(missing_ok=True)
(tmp / "db" / "ledger.db").mkdir()  # unusable: writes spill
warnings.simplefilter("ignore")
resource.setrlimit(resource.RLIMIT_FSIZE, (1500, 1500))
outcomes = [led.write(UsageRecord.model_validate(
    {{"wire_format": "anthropic", "turn": i, "content": "x" * 300}})) for i in range(8)]
print(",".join(outcomes))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    outcomes = done.stdout.strip().split(",")
    assert "spilled" in outcomes
    spill_files = [tmp_path / "db" / "ledger.db.spill.jsonl",
                   *(tmp_path / "fallback").glob("*.spill.jsonl")]
    lines = [line for f in spill_files if f.exists() for line in f.read_bytes().splitlines()]
    for line in lines:
        UsageRecord.from_json(line)  # every line whole
    assert len(lines) == outcomes.count("spilled")
