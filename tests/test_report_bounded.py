"""The report in bounded memory (`_accounting/_spill.py`, issue 30): the ceilings' calls and
cache keys and the totals per session kept at most a cap in memory, the rest in a temporary
SQLite file. With tiny caps (everything moved out) the report's text, ``--json``, ``--html``,
``--sessions``, ``--by session`` and ``--calls``/``--top`` are the same bytes as with the
default caps (nothing moved out), on the demo ledgers, on generated ledgers (cross-session
predecessors, subagents, resumed sessions, TTL expiries) and on PostgreSQL; the file goes
when the pass ends or fails."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stableprompt import Ledger, UsageRecord
from stableprompt._accounting import _builder, _ceilings, _spill
from stableprompt._accounting._spill import OrderedSpillMap, SpillMap, SpillView
from stableprompt._accounting._summary import summarize, summarize_stream
from stableprompt._cli import main
from stableprompt._report import _table
from stableprompt._subcommand import LazyJsonObject

T0 = datetime(2026, 3, 1, tzinfo=UTC)

MODES: list[list[str]] = [
    [], ["--json"], ["--sessions"], ["--by", "session"], ["--by", "session", "--json"],
    ["--calls", "--top", "5"], ["--calls", "--limit", "30", "--offset", "3"],
    ["--by", "agent", "--sessions", "--calls"],
]


class _Spills:
    """Counts the entries the spill maps move out (monkeypatched ``SpillMap._spill``) and
    remembers every map made."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.moved = 0
        self.maps: list[SpillMap[Any, Any]] = []
        real_spill, real_init = SpillMap._spill, SpillMap.__init__
        spills = self

        def spill(self: SpillMap[Any, Any]) -> None:
            before = self.spilled
            real_spill(self)
            spills.moved += self.spilled - before

        def init(self: SpillMap[Any, Any], *args: Any, **kwargs: Any) -> None:
            real_init(self, *args, **kwargs)
            spills.maps.append(self)

        monkeypatch.setattr(SpillMap, "_spill", spill)
        monkeypatch.setattr(SpillMap, "__init__", init)


def _tiny_caps(mp: pytest.MonkeyPatch, cap: int = 1) -> None:
    mp.setattr(_ceilings, "CALLS_IN_MEMORY", cap)
    mp.setattr(_ceilings, "KEYS_IN_MEMORY", cap)
    mp.setattr(_builder, "SESSIONS_IN_MEMORY", cap)
    mp.setattr(_builder, "BRANCHES_IN_MEMORY", cap)
    mp.setattr(_table, "PIECE_ROWS", 2)  # the sessions table printed 2 rows at a time
    mp.setattr(_spill, "SPILL_FILTER_BYTES", 1)  # 8 bits: most lookups read the file


def _outputs(ledger: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
             modes: list[list[str]]) -> list[str]:
    out = []
    for args in modes:
        assert main(["report", ledger, *args]) == 0, args
        out.append(capsys.readouterr().out)
    page = tmp_path / "r.html"
    assert main(["report", ledger, "--html", str(page)]) == 0
    capsys.readouterr()
    out.append(page.read_text())
    return out


def _same_bounded_or_not(ledger: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                         modes: list[list[str]] = MODES, cap: int = 1) -> int:
    """The outputs with the default caps (nothing moved out) and with ``cap``: the same
    bytes. Returns how many entries the tiny caps moved out."""
    with pytest.MonkeyPatch.context() as mp:
        spills = _Spills(mp)
        default = _outputs(ledger, capsys, tmp_path, modes)
        assert spills.moved == 0  # the default caps never touch the disk here
        _tiny_caps(mp, cap)
        bounded = _outputs(ledger, capsys, tmp_path, modes)
        assert all(m.closed for m in spills.maps)  # every file deleted after each report
    for args, a, b in zip([*modes, ["--html"]], default, bounded, strict=True):
        assert a == b, args
    return spills.moved


def test_spill_map_answers_as_a_dict() -> None:
    """A spill map with cap 3 gives every value a dict gives, after its entries were moved
    out and read back, a key set again keeps its latest value, and a closed map that had
    moved entries out refuses lookups (never a partial answer)."""
    spill: SpillMap[tuple[str, ...], int] = SpillMap(3, key_text=repr)
    model: dict[tuple[str, ...], int] = {}
    for i in range(200):
        key = ("k", str(i % 37), "\x00x" if i % 2 else "")
        spill[key] = model[key] = i
        probe = ("k", str((i * 7) % 41), "\x00x" if i % 3 else "")
        assert spill.get(probe) == model.get(probe)
    assert spill.spilled > 0 and spill.read_back > 0
    assert all(spill.get(k) == v for k, v in model.items())
    spill.close()
    with pytest.raises(RuntimeError, match="closed"):
        spill.get(("k", "nope", ""))
    with pytest.raises(ValueError, match="at least 1"):
        SpillMap(0)


@given(ops=st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 12),
                              st.sampled_from(["set", "get", "add"])), max_size=80),
       cap=st.integers(1, 5))
@settings(max_examples=60, deadline=None)
def test_ordered_spill_map_keeps_order_and_counts(ops: list[tuple[str, int, str]],
                                                 cap: int) -> None:
    """An ordered spill map lists each part's keys in order of first set with their latest
    values, counts them, and reads them through a view, whatever its cap."""
    spill: OrderedSpillMap[list[int]] = OrderedSpillMap(cap)
    model: dict[str, dict[str, list[int]]] = {"a": {}, "b": {}}
    for part, n, op in ops:
        key = f"s{n}"
        if op == "set":
            spill[part, key] = [n]
            model[part][key] = [n]
        else:
            value = spill.get((part, key))
            assert value == model[part].get(key)
            if value is not None and op == "add":  # mutated right after get, as the pass does
                value.append(1)
                model[part][key].append(1)
    for part, expected in model.items():
        view = SpillView(spill, part)
        assert list(view.items()) == list(expected.items())
        assert list(view) == list(expected) and len(view) == len(expected)
        assert view == expected and list(view.values()) == list(expected.values())
        assert all(view[k] == v for k, v in expected.items())
        assert "nope" not in view
    spill.close()


def test_demo_ledgers_are_the_same_with_everything_moved_out(
        demo_ledger_files: list[Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """On the demo ledgers (and the two merged), every output is the same bytes with caps of
    1 (every call, cache key and session moved out and read back) and 16 (batches of 2) as
    with the default caps, which never touch the disk; so is a merge that reads every id
    twice (the ids read, moved out too)."""
    few = [["--json"], ["--sessions", "--by", "session", "--calls"]]
    assert _same_bounded_or_not(str(demo_ledger_files[0]), capsys, tmp_path) > 100
    assert _same_bounded_or_not(str(demo_ledger_files[1]), capsys, tmp_path, few) > 100
    assert _same_bounded_or_not(str(demo_ledger_files[1]), capsys, tmp_path, few, cap=16) > 10
    with pytest.MonkeyPatch.context() as mp:
        merged = [str(p) for p in [*demo_ledger_files, demo_ledger_files[0]]]  # repeats
        assert main(["report", *merged, "--json", "--by", "session"]) == 0
        default = capsys.readouterr().out
        _tiny_caps(mp)
        assert main(["report", *merged, "--json", "--by", "session"]) == 0
        assert capsys.readouterr().out == default
    assert '"duplicates": ' in default and '"duplicates": 0' not in default


def test_summarize_keeps_sessions_in_memory_as_a_mapping(
        demo_ledger_files: list[Path]) -> None:
    """``summarize`` (the public API) never spills, whatever the caps, and its sessions are a
    mapping in order of first call equal to the dict they were; a streamed summary with
    everything moved out has the same sessions, and raises once closed."""
    from stableprompt._report._command import open_ledger

    records = list(open_ledger(demo_ledger_files[0]).records())
    with pytest.MonkeyPatch.context() as mp:
        _tiny_caps(mp)
        whole = summarize(records)
        streamed = summarize_stream(iter(records))
    for name, scenario in whole.scenarios.items():
        sessions = streamed.scenarios[name].sessions
        assert dict(scenario.sessions) == dict(sessions.items())
        assert list(scenario.sessions) == list(sessions) == [
            s for s in dict.fromkeys(r.session_id or "(none)" for r in records
                                     if (r.scenario or "(none)") == name
                                     and not r.verdict_detail.get("keepalive"))
            if s in sessions]
    assert streamed.to_json() == whole.to_json() | {
        k: v for k, v in streamed.to_json().items() if k in ("calls_page", "cliffs_total")}
    streamed.close()
    streamed.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        dict(next(iter(streamed.scenarios.values())).sessions.items())
    whole.close()  # a no-op: nothing was moved out
    assert len(next(iter(whole.scenarios.values())).sessions) > 0


def _open_spill_files() -> list[str]:
    """The SQLite temporary files this process holds open (Linux: ``/proc/self/fd``)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if "etilqs_" in target:
            found.append(target)
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_the_spill_file_is_never_left_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spill file is in the temporary directory and already unlinked while the map uses
    it (so it goes even when the process is killed), and closed with the map."""
    monkeypatch.setattr(_spill, "SPILL_CACHE_KIB", 64)  # so its pages reach the file
    spill: OrderedSpillMap[str] = OrderedSpillMap(10)
    for i in range(3000):
        spill["p", f"key {i}"] = "x" * 200
    files = _open_spill_files()
    assert files and all(f.endswith("(deleted)") for f in files), files
    assert len(list(SpillView(spill, "p").items())) == 3000
    spill.close()
    assert _open_spill_files() == []


def test_a_failed_pass_closes_its_files(demo_ledger_files: list[Path],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """When reading the ledger raises mid-pass, every spill map of the pass is closed before
    the error goes on (and ``stableprompt report`` closes its summary's after printing)."""
    from stableprompt._report._command import open_ledger

    spills = _Spills(monkeypatch)
    _tiny_caps(monkeypatch)

    def failing() -> Iterator[UsageRecord]:
        for i, record in enumerate(open_ledger(demo_ledger_files[0]).records()):
            if i == 40:
                raise OSError("disk gone")
            yield record

    with pytest.raises(OSError, match="disk gone"):
        summarize_stream(failing())
    assert spills.moved > 0 and spills.maps and all(m.closed for m in spills.maps)


def test_lazy_json_is_scrubbed_as_a_dict(capsys: pytest.CaptureFixture[str]) -> None:
    """Session ids that are secret-shaped are scrubbed in the lazy JSON as in a dict, also
    when two of them scrub to the same text (one entry, at the first's place, the last's
    value) and when one names a credential (its value redacted whole)."""
    from stableprompt._subcommand import write_scrubbed_json

    cases: list[dict[str, Any]] = [
        {"a": 1, "b": {"c": "x"}},
        {"sk-ant-api03-" + "A" * 40: 1, "plain": 2},
        {"sk-ant-api03-" + "A" * 40: 1, "plain": 2, "sk-ant-api03-" + "B" * 40: 3},
        {"[REDACTED]": 0, "sk-ant-api03-" + "C" * 40: 1},
        {"api_key": {"n": 1}, "ok": {"n": 2}},
    ]
    for case in cases:
        write_scrubbed_json({"s": dict(case)})
        expected = capsys.readouterr().out
        lazy = LazyJsonObject(partial(iter, list(case.items())), partial(iter, list(case)),
                              len(case))
        write_scrubbed_json({"s": lazy})
        assert capsys.readouterr().out == expected, case


def _whole_and_in_pieces(rows: list[tuple[str, ...]], width: int, title: str | None,
                         justify: str) -> tuple[str, str]:
    import io

    from rich.table import Table

    from stableprompt._subcommand import rich_console

    def make() -> Table:
        table = Table(title=title, title_justify="left", header_style="bold")
        for column in ("session", "calls", "verdicts"):
            table.add_column(column, justify="right" if column == "calls" else
                             "left" if justify == "left" else "center")
        return table

    whole, pieces = io.StringIO(), io.StringIO()
    table = make()
    for row in rows:
        table.add_row(*row)
    rich_console(file=whole, width=width, highlight=False).print(table)
    _table.print_in_pieces(rich_console(file=pieces, width=width, highlight=False), make,
                           lambda: iter(rows))
    return whole.getvalue(), pieces.getvalue()


@given(rows=st.lists(st.tuples(st.text("ab-[]é界 ", max_size=30), st.from_regex(r"[0-9,]{1,9}",
                                                                              fullmatch=True),
                               st.text("hit 0123456789·", max_size=60)), max_size=9),
       width=st.sampled_from([160, 60, 30, 12]), piece=st.integers(1, 4),
       title=st.sampled_from([None, "x: sessions", "a long title " * 4]),
       justify=st.sampled_from(["left", "center"]))
@settings(max_examples=80, deadline=None)
def test_a_table_in_pieces_prints_as_rich_prints_it_whole(
        rows: list[tuple[str, str, str]], width: int, piece: int, title: str | None,
        justify: str) -> None:
    """``print_in_pieces`` (``--sessions``: every session, a few rows held at a time) gives
    the bytes rich gives for the whole table, also when columns wrap (narrow consoles), with
    wide characters, and for no rows."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_table, "PIECE_ROWS", piece)
        whole, pieces = _whole_and_in_pieces(list(rows), width, title, justify)
    assert pieces == whole


def test_a_rich_without_the_private_methods_prints_the_table_whole() -> None:
    """A rich whose ``Table`` lacks one of the private methods the pieces use
    (``_table._PRIVATE``) gets the table printed whole: the same bytes, and no row is built
    into a piece (only the whole table holds them)."""
    rows: list[tuple[str, ...]] = [(f"s{i}", f"{i:,}", "hit 1") for i in range(7)]
    pieces_made: list[int] = []
    real = _table.print_in_pieces

    def counted(make: Any) -> Any:
        def make_counted() -> Any:
            pieces_made.append(1)
            return make()
        return make_counted
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_table, "PIECE_ROWS", 2)
        mp.setattr(_table, "_PRIVATE", _table._PRIVATE | {"_gone_in_a_later_rich"})
        mp.setattr(_table, "print_in_pieces", lambda console, make, rows_of: real(
            console, counted(make), rows_of))
        whole, pieces = _whole_and_in_pieces(rows, 60, "x: sessions", "left")
    assert pieces == whole
    assert pieces_made == [1]  # the one table, printed whole


# --------------------------------------------------------------------------- generated ledgers


@st.composite
def _ledger_records(draw: st.DrawFn) -> list[UsageRecord]:
    """Calls of a few sessions in two scenarios, some sessions resumed after others, gaps
    beyond the 5-minute TTL, predecessors in the same or another session, subagents."""
    records: list[UsageRecord] = []
    ts = T0
    n = draw(st.integers(1, 40))
    for i in range(n):
        ts += timedelta(seconds=draw(st.sampled_from([1, 30, 200, 400, 4000])))
        session = draw(st.sampled_from(["s0", "s1", "s2", "s3", "s4", "s5"]))
        scenario = "x" if session in ("s0", "s1", "s2") else "y"
        total = draw(st.sampled_from([None, 1024, 2048, 4096, 8192]))
        read = 0 if total is None else draw(st.sampled_from([0, total // 2, total]))
        detail: dict[str, Any] = {"turn_boundary": draw(st.sampled_from(["intra", "cross"]))}
        if draw(st.booleans()):
            detail["agent"] = {"kind": "subagent", "id": draw(st.sampled_from(["a1", "a2"]))}
        if draw(st.booleans()):
            detail["lcp_tokens_scaled"] = draw(st.sampled_from([512, 1024, 4096]))
        predecessor = None
        named: bool = draw(st.booleans())
        if records and named:
            predecessor = records[draw(st.integers(0, len(records) - 1))].record_id
        verdict = "hit" if read else draw(st.sampled_from(["cold", "ttl_expired",
                                                           "client_mutation", "provider_miss"]))
        write = 0 if total is None else total - read
        records.append(UsageRecord(
            record_id=f"r{i:03d}", ts_utc=ts, scenario=scenario, session_id=session, turn=i,
            wire_format="anthropic", provider="anthropic", model="claude-sonnet-4-5",
            input_tokens_total=total, cache_read_tokens=None if total is None else read,
            cache_write_tokens=None if total is None else write,
            uncached_tokens=None if total is None else 0, output_tokens=5,
            predicted_cache_read_tokens=read, predecessor_id=predecessor,
            lineage=draw(st.sampled_from(["l0", "l1"])),
            verdict=verdict if total is not None else "unknown",  # type: ignore[arg-type]
            verdict_detail=detail, status_code=200 if total is not None else 529))
    return records


def _ledger_file(path: Path, records: list[UsageRecord]) -> str:
    """A new SQLite ledger at ``path`` (replacing one a previous hypothesis example left)
    holding ``records``; its path."""
    path.unlink(missing_ok=True)
    ledger = Ledger(path)
    for record in records:
        ledger.write(record)
    ledger.close()
    return str(path)


@given(records=_ledger_records(), cap=st.integers(1, 4))
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
def test_generated_ledgers_are_the_same_with_everything_moved_out(
        records: list[UsageRecord], cap: int, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Generated ledgers (module docstring): the same text, ``--json``, ``--html``,
    ``--sessions``, ``--by session`` and per-call rows with caps of 1-4 as with the
    defaults."""
    path = _ledger_file(tmp_path / f"g{os.getpid()}.db", records)
    _same_bounded_or_not(path, capsys, tmp_path,
                         modes=[["--json", "--by", "session"], ["--sessions", "--calls"],
                                ["--by", "agent", "--json"]], cap=cap)


def test_postgres_ledger_is_the_same_with_everything_moved_out(
        pg_url: str, demo_ledger_files: list[Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A PostgreSQL ledger of the demo's rows: the same outputs with tiny caps."""
    from test_report_lean import _copy_to

    _copy_to(pg_url, demo_ledger_files[0])
    assert _same_bounded_or_not(pg_url, capsys, tmp_path,
                                modes=[["--json"], ["--sessions", "--by", "session"]]) > 100
