"""Tests for the report's per-call rows, exclusions, partial reads, causes and cliffs
(`_accounting._calls`, `_accounting._causes`, `_accounting._pricing`) on hand-built SQLite
ledgers."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import record_anthropic_call
from stableprompt import Ledger, UsageRecord, parse_usage
from stableprompt._accounting._calls import CLIFF_DROP
from stableprompt._accounting._pricing import Pricing, TokenSplit, price_call
from stableprompt._cli import main
from stableprompt._lint._findings import CAUSE_FIXES
from stableprompt._recording._observer import Observation
from stableprompt._report._command import read_ledger, summarize

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _rec(i: int, *, session: str = "a", total: int | None = 4000, read: int | None = 0,
         write: int | None = 0, verdict: str = "hit", predicted: int | None = None,
         inconsistent: bool = False, detail: dict[str, Any] | None = None,
         provider: str = "anthropic", model: str = "claude-sonnet-4-5",
         scenario: str = "s") -> UsageRecord:
    known = total is not None
    return UsageRecord(
        ts_utc=T0 + timedelta(seconds=6 * i), scenario=scenario, session_id=session, turn=i,
        wire_format="anthropic" if provider == "anthropic" else "openai-chat",
        provider=provider, model=model, input_tokens_total=total,
        cache_read_tokens=read if known else None, cache_write_tokens=write if known else None,
        uncached_tokens=None if total is None else total - (read or 0) - (write or 0),
        output_tokens=10 if known else None, predicted_cache_read_tokens=predicted,
        usage_inconsistent=inconsistent, verdict=verdict,  # type: ignore[arg-type]
        verdict_detail=detail or {})


def _ledger(path: Path, records: list[UsageRecord]) -> list[UsageRecord]:
    with Ledger(path) as ledger:
        for record in records:
            assert ledger.write(record) == "committed"
    return read_ledger(path)


def test_unknown_reads_are_excluded_not_zero(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A call whose provider did not report cache reads adds nothing to the rate or ceiling
    (not a 0 read), is counted apart, makes the cost a lower bound (never a 0 cost), and the
    report names how many and why."""
    records = _ledger(tmp_path / "c.db", [
        _rec(0, write=4000, verdict="cold"),
        _rec(1, total=4100, read=None, write=None, verdict="unknown"),
        _rec(2, total=4200, read=4100, write=100, predicted=4100),
    ])
    report = summarize(records)
    t = report.scenarios["s"].totals
    assert (t.calls, t.unknown_reads, t.excluded) == (3, 1, 1)
    assert t.input_tokens == 8200 and t.cache_read_tokens == 4100
    assert t.hit_rate == pytest.approx(4100 / 8200)
    assert t.ceiling_tokens == 4100  # the unknown call's size still bounds the next call
    row = report.calls[1]
    assert (row.excluded, row.read_share, row.cost_usd) == ("unknown-reads", None, None)
    assert (row.cost_complete, t.cost_complete, t.cost_unknown_calls) == (False, False, 1)
    assert report.exclusion_notes() == [
        "1 of 3 calls excluded from token sums, hit rates and ceilings (counted as calls and "
        "verdicts, never as 0 reads): 1 with cache reads not reported by the provider (0 "
        "would be a guess)."]
    assert main(["report", str(tmp_path / "c.db")]) == 0
    assert "1 of 3 calls excluded" in capsys.readouterr().out


def test_only_unknown_reads_show_a_dash(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """When every call has unknown reads (vLLM without prompt token details) the hit rate is
    unknown ("—", JSON null), never 0.0%."""
    db = tmp_path / "c.db"
    _ledger(db, [_rec(i, read=None, write=None, verdict="unknown", provider="openai",
                      model="gpt-5.2") for i in range(3)])
    assert main(["report", str(db)]) == 0
    out = capsys.readouterr().out
    assert "0.0%" not in out and "—" in out and "3 of 3 calls excluded" in out
    assert main(["report", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["overall"]["hit_rate"] is None and data["overall"]["unknown_reads"] == 3
    assert data["scenarios"]["s"]["hit_rate"] is None
    assert data["exclusions"][0].startswith("3 of 3 calls excluded")


def test_inconsistent_usage_is_never_summed(tmp_path: Path) -> None:
    """A call flagged usage_inconsistent (here reads 500x its input, a 50,000% hit rate) is
    excluded from every sum and rate, and named in the note."""
    records = _ledger(tmp_path / "c.db", [
        _rec(0, write=4000, verdict="cold"),
        _rec(1, total=2000, read=1_000_000, write=0, inconsistent=True),
        _rec(2, total=4100, read=4000, write=100, predicted=4000),
    ])
    report = summarize(records)
    t = report.overall
    assert (t.inconsistent, t.input_tokens, t.cache_read_tokens) == (1, 8100, 4000)
    assert t.hit_rate is not None and t.hit_rate < 1.0
    assert t.ceiling_tokens == 4000  # bounded by call 0, not by the implausible call 1
    assert "1 with inconsistent usage" in report.exclusion_notes()[0]
    assert report.calls[1].read_share is None and report.calls[1].excluded == "inconsistent"


def test_mixed_providers_inclusive_and_exclusive_input(tmp_path: Path) -> None:
    """Anthropic (input_tokens excludes cache reads and writes) and OpenAI (prompt_tokens
    includes cached tokens) normalize to one inclusive total, so one report sums them right."""
    anthropic = parse_usage("anthropic", {"input_tokens": 100, "cache_read_input_tokens": 3000,
                                          "cache_creation_input_tokens": 900,
                                          "output_tokens": 10})
    openai = parse_usage("openai-chat", {"prompt_tokens": 4000, "completion_tokens": 10,
                                         "prompt_tokens_details": {"cached_tokens": 2944}})
    records = []
    for i, (usage, provider, model) in enumerate([(anthropic, "anthropic", "claude-sonnet-4-5"),
                                                  (openai, "openai", "gpt-5.2")]):
        records.append(UsageRecord(
            ts_utc=T0 + timedelta(seconds=i), scenario="s", session_id=provider,
            wire_format=usage.wire_format,  # type: ignore[arg-type]
            provider=provider, model=model, input_tokens_total=usage.input_tokens_total,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens, uncached_tokens=usage.uncached_tokens,
            output_tokens=usage.output_tokens, verdict="hit"))
    report = summarize(_ledger(tmp_path / "c.db", records))
    rows = report.calls
    assert [r.input_tokens for r in rows] == [4000, 4000]
    assert [r.read_share for r in rows] == [pytest.approx(0.75), pytest.approx(0.736)]
    t = report.overall
    assert (t.input_tokens, t.cache_read_tokens, t.cache_write_tokens) == (8000, 5944, 900)
    assert t.uncached_tokens == 100 + 4000 - 2944
    assert t.hit_rate == pytest.approx(5944 / 8000)


def test_partial_reads_are_not_full_hits_nor_zeros(tmp_path: Path) -> None:
    """A call that read 82% of what it could is partial; one that read it all (within the
    tolerance) is not, nor one that read nothing."""
    records = _ledger(tmp_path / "c.db", [
        _rec(0, total=10_000, write=10_000, verdict="cold"),
        _rec(1, total=10_000, read=8_200, write=1_800, predicted=10_000,
             verdict="provider_miss", detail={"missing_tokens": 1_800}),
        _rec(2, total=10_000, read=9_990, write=10, predicted=10_000),
        _rec(3, total=10_000, read=0, write=10_000, predicted=10_000, verdict="provider_miss",
             detail={"missing_tokens": 10_000}),
    ])
    report = summarize(records)
    rows = report.calls
    assert [r.partial for r in rows] == [False, True, False, False]
    assert [r.read_share for r in rows] == [0.0, 0.82, 0.999, 0.0]
    assert report.overall.partial == 1
    assert [r.lost_tokens for r in rows] == [0, 1_800, 0, 10_000]


def test_split_moves_lost_tokens_from_writes_then_uncached() -> None:
    """The counterfactual split reads more out of the writes first (1h writes last), then the
    uncached tokens, keeping the total; pricing it uses genai-prices at the call's date."""
    split = TokenSplit(total=1000, read=100, write=300, write_1h=250)
    assert split.reading(300) == TokenSplit(1000, 300, 100, 100)
    assert split.reading(900) == TokenSplit(1000, 900, 0, 0)
    assert split.reading(50) == split
    assert split.uncached() == TokenSplit(1000, 0, 0, 0)
    record = _rec(0, total=1000, read=100, write=300)
    pricing, notes = Pricing(source="genai-prices x"), dict[str, None]()
    actual = price_call(record, pricing, notes)
    assert actual is not None and not notes
    cheaper = price_call(record, pricing, notes, split.reading(900))
    assert cheaper is not None and cheaper < actual


def test_causes_ranked_by_lost_tokens_with_lint_fixes(tmp_path: Path) -> None:
    """Misses group by cause, segment and path, ranked by lost tokens, each with lint's fix
    text and lost dollars equal to the price difference had the lost tokens been read."""
    clock = {"cause": "volatile-token", "segment": "system[0]", "segment_kind": "system",
             "path": "/system/0/text", "cause_detail": "timestamp"}
    records = _ledger(tmp_path / "c.db", [
        _rec(0, write=4000, verdict="cold"),
        _rec(1, total=4100, write=4100, verdict="client_mutation",
             detail={**clock, "lost_tokens": 4000}),
        _rec(2, total=4200, write=4200, verdict="client_mutation",
             detail={**clock, "lost_tokens": 4100}),
        _rec(3, total=4300, read=2000, write=2300, verdict="client_mutation",
             detail={"cause": "tool-reorder", "segment": "tools[1]", "path": "/tools/1",
                     "lost_tokens": 2000}),
        _rec(4, total=4400, read=0, write=4400, verdict="ttl_expired",
             detail={"expired_tokens": 4300}),
    ])
    report = summarize(records)
    causes = report.causes()
    assert [(c.cause, c.segment, c.path, c.calls, c.lost_tokens) for c in causes] == [
        ("volatile-token", "system[0]", "/system/0/text", 2, 8100),
        ("ttl-expired", None, None, 1, 4300),
        ("tool-reorder", "tools[1]", "/tools/1", 1, 2000)]
    assert causes[0].fix == CAUSE_FIXES["volatile-token"]
    assert causes[2].fix == CAUSE_FIXES["tool-reorder"]
    assert causes[1].fix is not None and "TTL" in causes[1].fix
    pricing, notes = Pricing(source="genai-prices x"), dict[str, None]()
    expected = 0.0
    for record in records[1:3]:
        split = TokenSplit.of(record)
        lost = int(record.verdict_detail["lost_tokens"])  # type: ignore[arg-type]
        before, after = (price_call(record, pricing, notes),
                         price_call(record, pricing, notes, split.reading(lost)))
        assert before is not None and after is not None
        expected += before - after
    assert causes[0].lost_usd == pytest.approx(expected) and expected > 0
    assert report.overall.lost_tokens == 8100 + 4300 + 2000
    row = report.calls[1]
    assert (row.cause, row.segment, row.path, row.cause_detail) == (
        "volatile-token", "system[0]", "/system/0/text", "timestamp")
    t = report.overall
    assert t.cost_usd is not None and t.cost_uncached_usd is not None
    assert t.cost_at_ceiling_usd is not None
    # Mostly writes (1.25x) and few reads: dearer than no caching; at the ceiling, cheaper.
    assert t.cost_at_ceiling_usd < t.cost_uncached_usd < t.cost_usd


def test_cliffs_are_sharp_drops_within_a_session(tmp_path: Path) -> None:
    """A cliff is a read-share drop of at least CLIFF_DROP from the previous included call of
    the same session; other sessions and excluded calls in between do not count."""
    records = _ledger(tmp_path / "c.db", [
        _rec(0, write=4000, verdict="cold"),
        _rec(1, total=4100, read=4000, write=100),
        _rec(2, session="b", total=4000, write=4000, verdict="cold"),
        _rec(3, total=4200, read=None, write=None, verdict="unknown"),
        _rec(4, total=4300, read=1000, write=3300, verdict="client_mutation",
             detail={"cause": "whitespace", "segment": "messages[1]", "lost_tokens": 3100}),
        _rec(5, total=4400, read=4300, write=100),
    ])
    cliffs = summarize(records, price=False).cliffs()
    assert [(c.call.turn, c.previous_id) for c in cliffs] == [(4, records[1].record_id)]
    cliff = cliffs[0]
    assert cliff.drop == pytest.approx(4000 / 4100 - 1000 / 4300)
    assert cliff.drop >= CLIFF_DROP
    assert cliff.to_json()["verdict"] == "client_mutation"
    assert cliff.to_json()["cause"] == "whitespace"


def test_report_json_has_calls_causes_cliffs(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`report --json` keeps its keys and adds overall, groups, calls, causes and cliffs with
    the issue's fields."""
    db = tmp_path / "c.db"
    _ledger(db, [_rec(0, write=4000, verdict="cold"),
                 _rec(1, total=4100, write=4100, verdict="client_mutation",
                      detail={"cause": "volatile-token", "segment": "system[0]",
                              "path": "/system/0/text", "lost_tokens": 4000})])
    assert main(["report", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scenarios"]["s"]["calls"] == 2
    overall = data["overall"]
    for key in ("calls", "input_tokens", "cache_read_tokens", "cache_write_tokens",
                "uncached_tokens", "hit_rate", "ceiling", "cost_usd", "cost_uncached_usd",
                "cost_at_ceiling_usd", "verdicts"):
        assert key in overall, key
    assert [g["scenario"] for g in data["groups"]] == ["s"]
    call_keys = ["id", "scenario", "session", "turn", "ts", "verdict", "read_share",
                 "cache_read_tokens", "predicted_cache_read_tokens", "lost_tokens", "cause",
                 "segment", "path", "before", "after"]
    assert list(data["calls"][0])[:len(call_keys)] == call_keys
    assert data["calls"][1]["cause"] == "volatile-token"
    cause = data["causes"][0]
    assert list(cause)[:7] == ["cause", "segment", "path", "calls", "lost_tokens", "lost_usd",
                               "fix"]
    assert cause["lost_tokens"] == 4000 and cause["lost_usd"] > 0
    assert cause["fix"] == CAUSE_FIXES["volatile-token"]
    assert data["cliffs"] == []  # 0% -> 0%: no drop


# --------------------------------------------------------------------------- the demo ledger


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    from stableprompt.demo import run_demo, synthetic_workload

    ledger = tmp_path_factory.mktemp("demo") / "demo.db"
    return run_demo(synthetic_workload(), ledger_path=ledger), ledger


def test_demo_ledger_totals_and_causes(demo_ledger: tuple[Any, Path]) -> None:
    """On the demo's ledger the report's totals equal the demo's, every client_mutation of
    clock-in-system is a volatile token in the system segment, and that cause leads with lost
    dollars."""
    result, path = demo_ledger
    report = summarize(read_ledger(path))
    for name, scenario in result.report.scenarios.items():
        assert report.scenarios[name].totals.to_full_json() == scenario.totals.to_full_json()
    assert report.overall.excluded == 0
    mutations = [r for r in report.calls
                 if r.scenario == "clock-in-system" and r.verdict == "client_mutation"]
    assert len(mutations) == 21
    assert {(r.cause, r.segment_kind, r.segment) for r in mutations} == {
        ("volatile-token", "system", "system[0]")}
    causes = report.causes()
    clock = next(c for c in causes if c.cause == "volatile-token")
    assert clock.calls == 21 and clock.lost_usd is not None and clock.lost_usd > 0
    assert clock.fix == CAUSE_FIXES["volatile-token"]
    assert sum(c.lost_tokens for c in causes) == report.overall.lost_tokens
    assert report.cliffs() and all(c.call.verdict != "hit" for c in report.cliffs())


def test_demo_misses_carry_their_before_after_from_the_ledger_row(
        demo_ledger: tuple[Any, Path]) -> None:
    """The demo keeps no request bodies, yet every client_mutation row says what changed: the
    recorder stores lint's snippet of the first change (the clock's two values in the system
    prompt; the moved tool's name), so the report's before/after is never empty."""
    _, path = demo_ledger
    report = summarize(read_ledger(path), price=False)
    mutations = [r for r in report.calls if r.verdict == "client_mutation"]
    assert mutations and all(r.before is not None and r.after is not None for r in mutations)
    assert all(r.before != r.after for r in mutations)
    dropped = [r for r in mutations if r.scenario == "breakpoint-misplaced"]
    # the clock block the next request left out; after: the block that came at its place
    assert dropped and all("Current time" in (r.before or "") and r.after
                           and "Current time" not in r.after for r in dropped)
    clock = [r for r in mutations if r.scenario == "clock-in-system"]
    stamp = re.compile(r"\d\d:\d\d")
    assert all(stamp.search(r.before or "") and stamp.search(r.after or "") for r in clock)
    assert all(len(r.before or "") <= 64 and len(r.after or "") <= 64 for r in mutations)


def test_store_snippets_false_keeps_no_prompt_text(tmp_path: Path) -> None:
    """``Recorder(store_snippets=False)``: the miss keeps its cause, segment and path, not the
    text around the change."""
    from stableprompt import Recorder

    details = []
    for keep in (True, False):
        recorder = Recorder(None, session_id="s", store_snippets=keep)
        for step, minute in enumerate((0, 5)):
            record_anthropic_call(recorder, step, read=0, write=0, input_tokens=1700,
                                  system="You are helpful. " * 400
                                  + f"Now: 2026-11-30T10:0{minute}:00Z")
        details.append(recorder.records[-1].verdict_detail)
    kept, dropped = details
    assert kept["cause"] == dropped["cause"] == "volatile-token"
    assert dropped["path"] == kept["path"] == "/system/0/text"
    assert "10:00" in str(kept["snippet_a"]) and "10:05" in str(kept["snippet_b"])
    assert "snippet_a" not in dropped and "snippet_b" not in dropped


def test_demo_ledger_splits_intra_and_cross_turn(demo_ledger: tuple[Any, Path]) -> None:
    """Every demo call has a turn boundary; stableprompt reads more inside user turns than
    across them, tool-order-drift reads nothing across them (its tools move per user turn)."""
    _, path = demo_ledger
    report = summarize(read_ledger(path), price=False)
    assert all(row.boundary in ("intra", "cross") for row in report.calls)
    good = report.scenarios["stableprompt"].totals
    drift = report.scenarios["tool-order-drift"].totals
    assert good.intra_calls + good.cross_calls == good.calls
    assert good.intra_turn_hit_rate is not None and good.cross_turn_hit_rate is not None
    assert good.intra_turn_hit_rate > good.cross_turn_hit_rate > 0
    assert drift.cross_turn_hit_rate == 0.0
    assert drift.intra_turn_hit_rate is not None and drift.intra_turn_hit_rate > 0.9


def test_boundary_from_stored_content_for_older_rows(tmp_path: Path) -> None:
    """A row without verdict_detail["turn_boundary"] that kept its request body is classified
    from that body; without either, the split says unknown (None), not 0."""
    body = {"model": "claude-sonnet-4-5", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]}
    with_body = _rec(1, total=4100, read=4000, write=100).model_copy(
        update={"content": json.dumps(body)})
    path = tmp_path / "c.db"
    with Ledger(path, store_content=True) as ledger:
        for record in (_rec(0, write=4000, verdict="cold"), with_body):
            assert ledger.write(record) == "committed"
    report = summarize(read_ledger(path), price=False)
    assert [row.boundary for row in report.calls] == [None, "intra"]
    t = report.overall
    assert t.intra_turn_hit_rate == pytest.approx(4000 / 4100)
    assert t.cross_turn_hit_rate is None


def test_report_text_explains_misses_and_lists_calls(
        demo_ledger: tuple[Any, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """`stableprompt report` prints the turn split, the causes with their fix and lost USD and
    the cliffs; `--calls` adds one table of calls per scenario, partial reads marked."""
    _, path = demo_ledger
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "turn boundary" in out and "intra-turn hit rate" in out
    assert "causes, by lost tokens" in out and "volatile-token" in out
    assert "cliffs: read share fell sharply" in out
    assert "clock-in-system: calls" not in out
    assert out.rstrip().splitlines()[-1].startswith("Costs: genai-prices")
    assert main(["report", str(path), "--calls"]) == 0
    out = capsys.readouterr().out
    assert "clock-in-system: calls" in out and "(partial)" in out and "tool result" in out


def test_history_causes_group_across_message_indexes(tmp_path: Path) -> None:
    """The same history rewrite at messages[2] and messages[4] is one cause
    (messages[*]); head segments keep their index."""
    def rewrite(i: int, index: int) -> UsageRecord:
        return _rec(i, total=4000 + i, write=4000 + i, verdict="client_mutation", detail={
            "cause": "history-rewrite", "segment": f"messages[{index}].content[1]",
            "segment_kind": "message", "path": f"/messages/{index}/content/1",
            "lost_tokens": 100 * index})
    records = _ledger(tmp_path / "c.db", [_rec(0, write=4000, verdict="cold"), rewrite(1, 2),
                                          rewrite(2, 4)])
    causes = summarize(records, price=False).causes()
    assert [(c.segment, c.path, c.calls, c.lost_tokens) for c in causes] == [
        ("messages[*].content[1]", "/messages/*/content/1", 2, 600)]
    assert causes[0].fix == CAUSE_FIXES["history-rewrite"]


def test_before_after_snippets_from_stored_bodies(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """With store_content the report re-diffs a client_mutation against its predecessor's
    stored body and shows lint's before/after snippet (here the clock that changed)."""
    from stableprompt import Recorder

    path = tmp_path / "c.db"
    long_text = "You are a careful assistant. " * 400
    with Ledger(path, store_content=True) as ledger:
        recorder = Recorder(ledger, store_content=True, tokenizer="bytes/4", session_id="s1",
                            scenario="clock")
        for step, clock in enumerate(("2026-01-01T10:00:00Z", "2026-01-01T10:05:00Z")):
            body = {"model": "claude-sonnet-4-5", "max_tokens": 5,
                    "system": [{"type": "text", "text": f"Now: {clock}. {long_text}",
                                "cache_control": {"type": "ephemeral"}}],
                    "messages": [{"role": "user", "content": "q"}]}
            pending = recorder.start("/v1/messages", {}, json.dumps(body).encode(),
                                     host="api.anthropic.com")
            assert pending is not None
            total = len(json.dumps(body)) // 4
            response = {"id": f"m{step}", "type": "message", "role": "assistant",
                        "content": [], "usage": {"input_tokens": 20, "output_tokens": 1,
                                                 "cache_read_input_tokens": 0,
                                                 "cache_creation_input_tokens": total - 20}}
            assert recorder.finish(pending, Observation(status_code=200,
                                   body=json.dumps(response).encode())) is not None
    records = read_ledger(path)
    assert [r.verdict for r in records] == ["cold", "client_mutation"]
    row = summarize(records, price=False).calls[1]
    assert (row.cause, row.path) == ("volatile-token", "/system/0/text")
    assert row.before is not None and row.after is not None
    assert "10:00:00" in row.before and "10:05:00" in row.after
    assert main(["report", str(path), "--calls"]) == 0
    assert "before -> after" in capsys.readouterr().out


# --------------------------------------------------------------------------- several ledgers


def test_several_ledgers_merge_with_duplicates_once(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Two ledgers are merged in time order; a record id present in both counts once, and the
    JSON says how many rows were dropped and which ledgers were read."""
    first = [_rec(0, write=4000, verdict="cold"), _rec(2, total=4200, read=4100, write=100)]
    second = [first[0], _rec(1, total=4100, read=4000, write=100)]
    _ledger(tmp_path / "a.db", first)
    _ledger(tmp_path / "b.db", second)
    assert main(["report", str(tmp_path / "a.db"), str(tmp_path / "b.db"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["records"] == 3 and data["duplicates"] == 1
    assert [entry["records"] for entry in data["ledgers"]] == [2, 2]
    assert [c["turn"] for c in data["calls"]] == [0, 1, 2]  # time order across ledgers
    assert data["overall"]["ceiling_tokens"] == 4000 + 4100
    assert main(["report", str(tmp_path / "a.db"), str(tmp_path / "b.db")]) == 0
    out = capsys.readouterr().out
    assert "1 rows repeated a record id" in out and "2 ledgers" in out
    assert main(["report", str(tmp_path / "a.db"), str(tmp_path / "missing.db")]) == 2
    assert "missing.db" in capsys.readouterr().err


def test_session_since_and_by_select_and_group(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """--session and --since select calls (named in a note), --by groups the totals by
    session, model, wire or day; a bad --since is a one-line usage error."""
    db = tmp_path / "c.db"
    _ledger(db, [_rec(0, write=4000, verdict="cold"),
                 _rec(1, total=4100, read=4000, write=100),
                 _rec(2, session="b", total=3000, write=3000, verdict="cold",
                      provider="openai", model="gpt-5.2")])
    assert main(["report", str(db), "--session", "b", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["records"] == 1 and data["calls"][0]["session"] == "b"
    since = (T0 + timedelta(seconds=6)).isoformat()
    assert main(["report", str(db), "--since", since, "--json", "--by", "model"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["turn"] for c in data["calls"]] == [1, 2]
    assert data["by"] == "model"
    assert [(g["group"], g["calls"]) for g in data["groups"]] == [("claude-sonnet-4-5", 1),
                                                                  ("gpt-5.2", 1)]
    # its predecessor is not selected: the ceiling is what it read, counted beyond the ledger
    assert data["groups"][0]["ceiling_tokens"] == 4000 and data["reads_beyond_ledger"] == 1
    report = summarize(read_ledger(db), price=False)
    assert list(report.group_by("session")) == ["s/a", "s/b"]
    assert list(report.group_by("wire")) == ["anthropic", "openai-chat"]
    assert list(report.group_by("day")) == ["2026-01-01"]
    assert report.group_by("scenario")["s"].to_full_json() == (
        report.scenarios["s"].totals.to_full_json())
    assert main(["report", str(db), "--since", "2026-01-01", "--by", "day"]) == 0
    out = capsys.readouterr().out
    assert "by day" in out and "selection: calls since 2026-01-01T00:00:00Z" in out
    assert main(["report", str(db), "--since", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--since" in err


def test_html_has_turn_split_causes_and_misses(demo_ledger: tuple[Any, Path],
                                               tmp_path: Path) -> None:
    """The HTML page carries the turn-boundary split, the causes with their fixes, and the
    miss table, escaped and still free of scripts."""
    _, path = demo_ledger
    page_path = tmp_path / "r.html"
    assert main(["report", str(path), "--html", str(page_path)]) == 0
    page = page_path.read_text()
    assert "<h2>Turn boundary</h2>" in page and "<h2>Causes, by lost tokens</h2>" in page
    assert "Misses: calls that lost tokens" in page
    assert CAUSE_FIXES["volatile-token"] in page and "/system/0/text" in page
    assert "<script" not in page


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
def test_the_sdk_tail_re_sent_after_the_same_history_is_no_mutation_when_recorded(
        wire: str) -> None:
    """One rule for recorder and lint (``_diff.is_expected_divergence``): the SDK's own
    OpenAI tail message re-sent with a new value after the same history (a retry, a poll) is
    expected to both: a hit on the ledger, no break in lint."""
    from stableprompt import PromptBuilder, Recorder, lint_requests

    head = (PromptBuilder().system("You are a careful assistant. " * 300)
            .tail_slot("now").freeze())
    conv = head.conversation()
    conv.user("What's new?")
    recorder = Recorder(None, session_id="retry")
    bodies = []
    for i, now in enumerate(("2026-11-30T10:00:00Z", "2026-11-30T10:05:00Z")):
        rendered = conv.render(tail={"now": now})
        request = (rendered.to_openai_chat(model="gpt-5.1") if wire == "openai-chat"
                   else rendered.to_openai_responses(model="gpt-5.1"))
        bodies.append(request.body)
        path = "/v1/chat/completions" if wire == "openai-chat" else "/v1/responses"
        pending = recorder.start(path, {}, request.content, host="api.openai.com")
        assert pending is not None
        cached = 0 if i == 0 else 1920
        usage = ({"prompt_tokens": 2100, "completion_tokens": 1,
                  "prompt_tokens_details": {"cached_tokens": cached}} if wire == "openai-chat"
                 else {"input_tokens": 2100, "output_tokens": 1,
                       "input_tokens_details": {"cached_tokens": cached}})
        answer = ({"id": f"c{i}", "object": "chat.completion", "choices": [], "usage": usage}
                  if wire == "openai-chat" else
                  {"id": f"r{i}", "object": "response", "output": [], "usage": usage})
        recorder.finish(pending, Observation(status_code=200, body=json.dumps(answer).encode()))
    second = recorder.records[-1]
    assert second.verdict == "hit", second.verdict_detail
    assert lint_requests(bodies).summary.breaks == 0
