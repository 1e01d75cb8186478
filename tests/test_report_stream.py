"""The streaming report (`_accounting/_builder.py`, issue 30 item 1) against the in-memory
`summarize`: the same numbers, text, JSON and HTML on the demo ledgers and on a ledger of
every kind of row (pings, suspect and failed calls, stored bodies, cross-session
predecessors), with a page of calls instead of all of them and bounded state."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from stableprompt import Ledger, UsageRecord
from stableprompt._accounting import _builder
from stableprompt._accounting._builder import CallPage, CostPoint, Decimator
from stableprompt._accounting._keepalive import is_keepalive
from stableprompt._accounting._pricing import Pricing
from stableprompt._accounting._stabilized import StabilizeSavings
from stableprompt._accounting._storage import ExplicitCaches
from stableprompt._accounting._summary import GROUP_BY, Summary, summarize, summarize_stream
from stableprompt._cli import main
from stableprompt._ledger._reads import record_by_id
from stableprompt._report._command import (
    _body_finder,
    html_report,
    open_ledger,
    print_tables,
    stream_records,
)
from stableprompt._report._text import print_explanations

T0 = datetime(2026, 3, 1, tzinfo=UTC)
STREAM_ONLY = ("calls_page", "cliffs_total")


def _body(system: str, turns: int) -> str:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
                for i in range(turns)]
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8,
                       "system": [{"type": "text", "text": system}], "messages": messages})


def _every_kind(path: Path) -> Path:
    """A ledger with every kind of row the report treats apart (see the module docstring)."""
    records: list[UsageRecord] = []

    def rec(i: int, session: str, *, scenario: str = "mixed", verdict: str = "hit",
            total: int | None = 3000, read: int = 0, detail: dict[str, Any] | None = None,
            predecessor: str | None = None, content: str | None = None,
            model: str = "claude-sonnet-4-5") -> UsageRecord:
        write = 0 if total is None else (total - read if verdict != "hit" else 0)
        record = UsageRecord(
            record_id=f"r{i:04d}", ts_utc=T0 + timedelta(seconds=20 * i), scenario=scenario,
            session_id=session, turn=i, wire_format="anthropic", provider="anthropic",
            model=model, input_tokens_total=total,
            cache_read_tokens=None if total is None else read,
            cache_write_tokens=None if total is None else write,
            uncached_tokens=None if total is None else total - read - write,
            output_tokens=None if total is None else 12, predicted_cache_read_tokens=read,
            predecessor_id=predecessor, verdict=verdict,  # type: ignore[arg-type]
            verdict_detail=detail or {"turn_boundary": "intra" if i % 3 else "cross"},
            status_code=200 if total is not None else 529, content=content)
        records.append(record)
        return record

    first = rec(0, "a", verdict="cold", content=_body("Time 10:00. Be brief.", 1))
    rec(1, "a", read=2900, predecessor=first.record_id, content=_body("Time 10:00. Be brief.", 3))
    rec(2, "a", verdict="client_mutation", predecessor="r0001",
        content=_body("Time 10:05. Be brief.", 5),
        detail={"cause": "volatile-token", "segment": "system[0]", "segment_kind": "system",
                "path": "/system/0/text", "lost_tokens": 2900})
    rec(3, "b", read=2000, predecessor=first.record_id, detail={"lcp_tokens_scaled": 2500})
    rec(4, "b", read=1000, predecessor="r0003")  # a cliff: 67% -> 33%
    rec(5, "b", total=None, verdict="unknown")  # failed: no usage
    rec(6, "b", read=2900, detail={"usage_suspect": True})
    rec(7, "a", read=2900, detail={"keepalive": True})  # a keep-alive ping
    rec(8, "c", scenario="other", verdict="ttl_expired", detail={"expired_tokens": 2500})
    rec(9, "c", scenario="other", read=2900, model="no-such-model-9")  # cost unknown
    rec(10, "c", scenario="other", verdict="provider_miss", detail={"missing_tokens": 2900})
    for i in range(11, 60):
        rec(i, f"s{i % 4}", scenario="bulk", read=2900 if i % 7 else 100,
            verdict="hit" if i % 7 else "provider_miss",
            detail={"missing_tokens": 2800} if i % 7 == 0 else None)
    ledger = Ledger(path, store_content=True)
    for record in records:
        ledger.write(record)
    ledger.close()
    return path


def _streamed(path: Path, *, page: CallPage | None = None, by: str = "scenario",
              what_if: bool = False) -> Summary:
    ledger = open_ledger(path)
    records, _, _ = stream_records([ledger])
    return summarize_stream(records, page=page or CallPage(limit=10**9), by=by,
                            what_if=what_if, find_body=_body_finder([ledger], None, None))


def _text(report: Summary, by: str) -> str:
    out = io.StringIO()
    print_tables(report, title="t", file=out, sessions=True)
    print_explanations(report, file=out, calls=True, by=None if by == "scenario" else by)
    return out.getvalue()


def _json(report: Summary, by: str) -> dict[str, Any]:
    data = report.to_json(by=by)
    for key in STREAM_ONLY:
        data.pop(key, None)
    return dict(json.loads(json.dumps(data)))


def _ledgers(demo_ledger_files: list[Path], tmp_path: Path) -> Iterator[Path]:
    yield from demo_ledger_files
    yield _every_kind(tmp_path / "every-kind.db")


@pytest.mark.parametrize("by", GROUP_BY)
def test_streaming_report_equals_the_in_memory_summary(
        demo_ledger_files: list[Path], tmp_path: Path, by: str) -> None:
    """On the demo ledgers and a ledger of every kind of row, the streaming pass gives the
    JSON (every key but its page), the terminal text and the HTML bytes of ``summarize``
    over all records, for every grouping."""
    for path in _ledgers(demo_ledger_files, tmp_path):
        old = summarize(open_ledger(path).records())
        new = _streamed(path, by=by)
        assert new.streamed is not None and old.streamed is None
        assert _json(new, by) == _json(old, by), (path, by)
        assert _text(new, by) == _text(old, by), (path, by)
        if by == "scenario":
            assert (html_report(new, title="t", notes=["n"])
                    == html_report(old, title="t", notes=["n"])), path


def test_what_if_streams_the_rest_with_the_same_numbers(tmp_path: Path) -> None:
    """``--what-if`` keeps the records for its replay; its result and every other number
    equal ``summarize(what_if=True)``'s."""
    path = _every_kind(tmp_path / "l.db")
    old = summarize(open_ledger(path).records(), what_if=True)
    new = _streamed(path, what_if=True)
    assert old.what_if is not None and _json(new, "scenario") == _json(old, "scenario")


def test_a_body_no_longer_held_is_read_back_from_the_ledger(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for one request body only, the predecessor's body is looked up in the ledger
    by id, so the stored-body snippets equal the in-memory ones."""
    path = _every_kind(tmp_path / "l.db")
    monkeypatch.setattr(_builder, "MAX_BODIES", 0)
    old = summarize(open_ledger(path).records())
    new = _streamed(path)
    mutation = next(r for r in old.calls if r.verdict == "client_mutation")
    assert mutation.before is not None and "10:00" in mutation.before
    assert [r.to_json() for r in new.calls] == [r.to_json() for r in old.calls]
    assert record_by_id(open_ledger(path), "r0000") is not None
    assert record_by_id(open_ledger(path), "nope") is None


def test_a_page_of_calls_and_the_top_losses(tmp_path: Path) -> None:
    """``CallPage(offset, limit)`` keeps those calls in ledger order; ``top`` the calls that
    lost the most tokens (ledger order); every total counts all calls."""
    path = _every_kind(tmp_path / "l.db")
    full = summarize(open_ledger(path).records())
    paged = _streamed(path, page=CallPage(offset=3, limit=4))
    assert [r.id for r in paged.calls] == [r.id for r in full.calls[3:7]]
    assert paged.calls_total == full.calls_total == len(full.calls)
    assert paged.overall.to_full_json() == full.overall.to_full_json()
    top = _streamed(path, page=CallPage(top=3))
    ranked = sorted((r for r in full.calls if r.included and r.lost_tokens > 0),
                    key=lambda r: -r.lost_tokens)[:3]
    assert {r.id for r in top.calls} == {r.id for r in ranked}
    assert [r.id for r in top.calls] == [r.id for r in full.calls if r in top.calls]


def test_the_streaming_pass_holds_no_row_per_call(tmp_path: Path) -> None:
    """Many calls through the builder: the rows kept are the page, the bodies kept at most
    ``MAX_BODIES``, the cliffs and misses at most their caps."""
    builder = _builder.SummaryBuilder(keep_calls=False, page=CallPage(limit=5))
    content = _body("x", 1)
    for i in range(3000):
        builder.add(UsageRecord(
            record_id=f"id{i}", ts_utc=T0 + timedelta(seconds=i), scenario="s",
            session_id=f"s{i % 50}", wire_format="anthropic", provider="anthropic",
            model="claude-sonnet-4-5", input_tokens_total=2000, cache_read_tokens=1900,
            cache_write_tokens=0, uncached_tokens=100, output_tokens=5, verdict="hit",
            content=content))
    report = Summary(**builder.finish())
    assert len(report.calls) == 5 and report.calls_total == 3000
    assert len(builder._bodies) <= _builder.MAX_BODIES
    assert len(builder.rows) == 5 and not builder.scenarios["s"].read_series
    assert report.overall.calls == 3000


def test_decimated_cost_points_keep_the_cumulative_cost_exact() -> None:
    """Beyond twice the cap, points are merged in pairs and then ``stride`` at a time, and
    the sums of the merged costs equal the sums of every call's."""
    cap = 8
    decimator: Decimator[CostPoint] = Decimator(cap, _builder._summed)
    points = [CostPoint(T0 + timedelta(seconds=i), i * 0.5, i * 0.25, float(i))
              for i in range(1001)]
    for point in points:
        decimator.add(point)
    kept = decimator.finish()
    assert cap <= len(kept) <= 2 * cap + 1 and decimator.stride > 1
    assert sum(p.actual for p in kept) == pytest.approx(sum(p.actual for p in points))
    assert sum(p.uncached for p in kept) == pytest.approx(sum(p.uncached for p in points))
    assert kept[-1].ts == points[-1].ts
    few: Decimator[CostPoint] = Decimator(cap, _builder._summed)
    for point in points[:2 * cap - 1]:
        few.add(point)
    assert few.finish() == points[:2 * cap - 1]


def test_report_command_pages_the_calls(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``--limit``/``--offset`` page the JSON calls (``calls_page`` says which of how many),
    ``--top`` lists the costliest misses, ``--top`` with ``--offset`` is a usage error."""
    path = _every_kind(tmp_path / "l.db")
    full = summarize(open_ledger(path).records())
    assert main(["report", str(path), "--json", "--limit", "2", "--offset", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in data["calls"]] == [r.id for r in full.calls[1:3]]
    assert data["calls_page"] == {"offset": 1, "limit": 2, "top": None,
                                  "total": len(full.calls)}
    assert main(["report", str(path), "--calls", "--limit", "2"]) == 0
    assert f"calls listed: 1-2 of {len(full.calls):,} in ledger order" in capsys.readouterr().out
    for extra, said in ((["--limit", "0"], "none (--limit 0)"),
                        (["--offset", "100000"], "none (--offset 100,000 is past the last")):
        assert main(["report", str(path), "--calls", *extra]) == 0
        assert f"calls listed: {said}" in capsys.readouterr().out  # was "0-100,000 of 9"
    assert main(["report", str(path), "--json", "--top", "1"]) == 0
    top = json.loads(capsys.readouterr().out)["calls"]
    assert [c["lost_tokens"] for c in top] == [max(r.lost_tokens for r in full.calls)]
    assert main(["report", str(path), "--calls", "--top", "2"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert (f"calls listed: the 2 of {len(full.calls):,} that lost the most tokens (--top 2), "
            "in ledger order") in said
    assert main(["report", str(path), "--top", "1", "--offset", "2"]) == 2
    assert "--top: not with --offset" in capsys.readouterr().err


def test_report_call_finds_a_call_beyond_the_page(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--call ID`` looks among all calls, not in the page ``--limit``/``--offset``/``--top``
    keep (a ledger of more than 1,000 calls said "no call id starts with" for its later
    calls); an empty ``--call`` is a usage error, not every call."""
    path = _every_kind(tmp_path / "l.db")
    last = summarize(open_ledger(path).records()).calls[-1]
    for extra in (["--limit", "1"], ["--top", "1"], ["--offset", "0", "--limit", "2"]):
        assert main(["report", str(path), "--call", last.id[:10], *extra]) == 0
        out = capsys.readouterr().out
        assert f"call {last.id} ({last.verdict}" in out and "no call id" not in out
    assert main(["report", str(path), "--call", ""]) == 2
    assert "--call: empty" in capsys.readouterr().err
    with sqlite3.connect(path) as conn:  # a hand-edited row: named, not "no call id"
        conn.execute("UPDATE calls SET verdict_detail = '{\"lost_tokens\": NaN}' "
                     "WHERE record_id = ?", (last.id,))
    conn.close()
    assert main(["report", str(path), "--call", last.id[:10]]) == 1
    out = capsys.readouterr().out
    assert f"no call id starts with {last.id[:10]!r}" in out
    assert f"skipped corrupt row {last.id!r}" in out


def test_report_merges_ledgers_in_time_order_with_each_id_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two ledgers holding the same calls (one twice): the streaming merge counts each record
    id once and the numbers equal one ledger's."""
    one = _every_kind(tmp_path / "one.db")
    two = _every_kind(tmp_path / "two.db")
    assert main(["report", str(one), str(two), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert main(["report", str(one), "--json"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert merged["duplicates"] == single["records"]
    assert merged["overall"] == single["overall"]
    assert [entry["records"] for entry in merged["ledgers"]] == [single["records"]] * 2


_ODD: st.SearchStrategy[JsonValue] = st.one_of(
    st.none(), st.integers(-5, 300_000), st.sampled_from(["x", "", True]))
_ODD_TEXT: st.SearchStrategy[JsonValue] = st.one_of(st.none(), st.integers(0, 2), st.sampled_from(
    ["", "no-breakpoint", "breakpoints-below-minimum", "/system/0/text", "a"]))
# every key the pass reads or skips a call by, with null and odd values
_DETAIL: dict[str, st.SearchStrategy[JsonValue]] = {
    "lost_tokens": _ODD, "missing_tokens": _ODD, "expired_tokens": _ODD,
    "lost_cap_tokens": _ODD, "reason": _ODD_TEXT, "cause": _ODD_TEXT,
    "cause_detail": _ODD_TEXT, "segment": _ODD_TEXT, "segment_kind": _ODD_TEXT,
    "path": _ODD_TEXT, "snippet_a": _ODD_TEXT, "snippet_b": _ODD_TEXT,
    "divergences": st.one_of(st.none(), st.just("x"), st.lists(st.one_of(
        st.integers(-3, 3), st.fixed_dictionaries({"path": st.just("/a")})), max_size=2)),
    "divergences_total": _ODD, "usage_suspect": st.sampled_from([True, False, None, "true"]),
    "keepalive": st.sampled_from([True, False, 1, None]),
    "gemini_cache": st.one_of(st.none(), st.just("x"), st.fixed_dictionaries({
        "op": st.sampled_from(["create", "update", "delete", None]),
        "name": st.sampled_from(["c1", "c2", None]), "tokens": _ODD,
        "ttl_s": st.sampled_from([None, 60, -1, 3600])})),
    "cached_content": st.sampled_from(["c1", "c2", None, 3]),
    "stabilized": st.sampled_from([None, [], ["history-breakpoint"], ["tool-order", 3], "x"]),
    "server_diagnosis": st.one_of(st.none(), st.just(3), st.fixed_dictionaries(
        {"agreement": _ODD_TEXT, "reason": _ODD_TEXT})),
    "agent": st.one_of(st.none(), st.just("x"), st.fixed_dictionaries(
        {"kind": st.sampled_from(["subagent", "main"]), "id": _ODD_TEXT})),
    "turn_boundary": st.sampled_from(["intra", "cross", None, "x"]),
}
_CALLERS = [("anthropic", "claude-sonnet-4-5"), ("aws", "claude-sonnet-4-5"),
            ("google", "gemini-2.5-pro"), ("openai", "gpt-4o"), ("azure", "gpt-4o"),
            ("acme", "foo-1"), ("anthropic", "no-such-model-9"), (None, None)]
_TOKENS = st.one_of(st.none(), st.sampled_from([0, 3000, 250_000, -3]),
                    st.integers(0, 300_000))


@st.composite
def _odd_records(draw: st.DrawFn) -> list[UsageRecord]:
    records: list[UsageRecord] = []
    for i in range(draw(st.integers(1, 25))):
        provider, model = draw(st.sampled_from(_CALLERS))
        total = draw(_TOKENS)
        consistent = draw(st.booleans())
        read = draw(st.sampled_from([0, (total or 0) // 2, total])) if consistent else draw(
            _TOKENS)
        records.append(UsageRecord(
            record_id=f"r{i:03d}", ts_utc=T0 + timedelta(seconds=draw(st.sampled_from(
                [0, 30, 4000])) * i), scenario=draw(st.sampled_from(["a", "b", None])),
            session_id=draw(st.sampled_from(["s0", "s1", None])),
            wire_format=draw(st.sampled_from(["anthropic", "gemini", "unknown"])),
            provider=provider, model=model, lineage=draw(st.sampled_from([None, "l1"])),
            predecessor_id=f"r{i - 1:03d}" if i and draw(st.booleans()) else None,
            input_tokens_total=total, cache_read_tokens=read,
            cache_write_tokens=(max((total or 0) - (read or 0), 0) if consistent
                                else draw(_TOKENS)),
            cache_write_1h_tokens=draw(st.sampled_from([None, 0, 100])),
            output_tokens=draw(st.sampled_from([None, 0, 12, -2])),
            predicted_cache_read_tokens=draw(st.sampled_from([None, 0, 1500, 3000])),
            usage_inconsistent=draw(st.booleans()),
            status_code=draw(st.sampled_from([200, 200, None, 529])),
            verdict=draw(st.sampled_from(["cold", "hit", "client_mutation", "below_minimum",
                                          "no_breakpoint", "ttl_expired", "provider_miss",
                                          "unknown"])),
            verdict_detail=draw(st.fixed_dictionaries({}, optional=_DETAIL))))
    return records


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_odd_records(), st.sampled_from(GROUP_BY), st.booleans())
def test_streaming_report_equals_the_in_memory_summary_on_odd_rows(
        records: list[UsageRecord], by: str, price: bool) -> None:
    """The pass skips tallies, cliffs, explicit caches and stabilize bookkeeping for calls
    they do not count, and prices a call's variants without split objects: on rows whose
    keys are null or odd (pings, explicit caches, failed, suspect and inconsistent calls,
    unknown providers and models, long-context totals, negative parts), with and without
    prices, its JSON and text equal ``summarize``'s over every call, and its explicit caches
    and stabilize savings those of every record fed to them."""
    old = summarize(records, price=price)
    new = summarize_stream(records, price=price, page=CallPage(limit=10**9), by=by)
    assert _json(new, by) == _json(old, by)
    assert _text(new, by) == _text(old, by)
    # the explicit caches and the stabilize savings of every record, as if none were skipped
    caches, stabilized = ExplicitCaches(), StabilizeSavings()
    pricing, notes = Pricing(source=old.pricing.source), dict[str, None]()
    calls = iter(old.calls)
    for record in records:
        if not caches.add(record) and not is_keepalive(record):
            stabilized.add(record, next(calls), pricing if price else None, notes)
    assert caches.totals(price=price).to_json() == old.explicit_caches.to_json()
    assert stabilized.to_json() == old.stabilized.to_json()
