"""What ``--stabilize`` saved in ``stableprompt report`` (``_accounting._stabilized``): calls per
rewrite kind and the estimated reads, on hand-built rows and end to end through the proxy's
transport and the report command."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stableprompt import Ledger, Recorder, UsageRecord, summarize
from stableprompt._cli import main
from test_stabilize import stabilizing_sdk

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _rec(t: float, *, read: int, total: int = 4000, detail: dict[str, Any] | None = None,
         request_tokens: int | None = None, lineage: str = "L",
         known: bool = True) -> UsageRecord:
    return UsageRecord(
        ts_utc=T0 + timedelta(seconds=t), scenario="s", session_id="a", wire_format="anthropic",
        provider="anthropic", model="claude-sonnet-4-5", lineage=lineage,
        input_tokens_total=total if known else None, cache_read_tokens=read if known else None,
        cache_write_tokens=0 if known else None, uncached_tokens=total - read if known else None,
        output_tokens=10, verdict="hit" if read else "cold", request_tokens=request_tokens,
        verdict_detail=dict(detail or {}))


def test_savings_are_estimated_per_rewrite_kind() -> None:
    """Breakpoints: the whole read is gained and the whole write added (the request as
    written reads and writes nothing); tool rewrites: the reads between what the request as
    written could share and what the stabilized one can, scaled to provider tokens, 0 when
    the client's own request shared as much, negative when the rewrite made it share less;
    rows without the counterfactual evidence (older rows), the cache key and excluded calls
    are counted, never estimated."""
    tools = {"stabilized": ["tool-order", "schema-key-order"]}
    records = [
        _rec(0, read=0, detail={**tools, "client_shared_tokens": 0,
                                "stabilized_shared_tokens": 0}),
        _rec(1, read=3000, request_tokens=2000,  # provider tokens are 2x ours
             detail={**tools, "client_shared_tokens": 500, "stabilized_shared_tokens": 1900}),
        # the request as written shared as much (a cross-lineage read it would make too)
        _rec(2, read=3500, detail={**tools, "client_shared_tokens": 3600,
                                   "stabilized_shared_tokens": 3600}, lineage="K"),
        # sorting made it share less than the client's own order did
        _rec(3, read=1000, detail={**tools, "client_shared_tokens": 1500,
                                   "stabilized_shared_tokens": 1000}),
        _rec(4, read=3000, detail={**tools, "stabilized_prefix_tokens": 500}),  # older row
        _rec(5, read=3600, detail={"stabilized": ["head-breakpoint", "history-breakpoint"]},
             lineage="M"),
        _rec(6, read=3000, detail={"stabilized": ["prompt-cache-key"]}, lineage="N"),
        _rec(7, read=0, known=False, detail={"stabilized": ["history-breakpoint"]},
             lineage="M"),
    ]
    saved = summarize(records, price=False).stabilized
    got = saved.to_json()
    assert got["calls"] == 8
    assert list(got["kinds"]) == ["tool-order", "schema-key-order", "prompt-cache-key",
                                  "head-breakpoint", "history-breakpoint"]
    # 0 + (min(3000, 3800) - min(3000, 1000)) + 0 - 500
    assert got["kinds"]["tool-order"] == {"calls": 5, "estimated": 4, "saved_tokens": 1500,
                                          "write_tokens": 0, "saved_usd": None}
    assert got["kinds"]["schema-key-order"]["estimated"] == 0
    assert got["kinds"]["history-breakpoint"] == {"calls": 2, "estimated": 1,
                                                  "saved_tokens": 3600, "write_tokens": 0,
                                                  "saved_usd": None}
    assert got["kinds"]["head-breakpoint"]["calls"] == 1
    assert got["kinds"]["prompt-cache-key"] == {"calls": 1, "estimated": 0, "saved_tokens": 0,
                                                "write_tokens": 0, "saved_usd": 0.0}
    assert got["saved_tokens"] == 5100


def test_priced_savings_are_what_the_reads_saved() -> None:
    """With prices, a breakpoint rewrite's saving is the call's price had its reads been
    uncached minus its price as reported: positive for a known model."""
    pytest.importorskip("genai_prices")
    records = [_rec(0, read=3600, detail={"stabilized": ["history-breakpoint"]})]
    report = summarize(records)
    usd = report.stabilized.saved_usd
    assert usd is not None and usd > 0
    row = report.calls[0]
    assert row.cost_uncached_usd is not None and row.cost_usd is not None
    assert usd == pytest.approx(row.cost_uncached_usd - row.cost_usd)


ORDERS = [["alpha", "beta", "delta", "gamma"], ["delta", "gamma", "beta", "alpha"],
          ["beta", "alpha", "delta", "gamma"], ["gamma", "delta", "alpha", "beta"]]
SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))


def test_report_shows_what_stabilizing_a_reordering_client_saved(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A client that reorders its tools every call, through ``RecordingTransport(stabilize=
    True)`` into a ledger: ``report --json`` credits ``tool-order`` with the reads its own
    orders would not have shared, and the terminal report prints the table."""
    db = tmp_path / "calls.db"
    with Ledger(db) as ledger:
        recorder = Recorder(ledger)
        with stabilizing_sdk(recorder, True) as client:
            for names in ORDERS:
                client.messages.create(
                    model="claude-sonnet-4-6", max_tokens=16,
                    tools=[{"name": n, "description": f"{n} things " * 20,
                            "input_schema": {"properties": {"q": {"type": "string"}},
                                             "type": "object"}} for n in names],
                    system=[{"type": "text", "text": SYSTEM,
                             "cache_control": {"type": "ephemeral"}}],
                    messages=[{"role": "user", "content": "hi"}])
    rows = recorder.records
    assert [r.verdict_detail.get("stabilized") for r in rows] == [None] + [["tool-order"]] * 3
    assert all(isinstance(r.verdict_detail.get("client_shared_tokens"), int)
               and isinstance(r.verdict_detail.get("stabilized_shared_tokens"), int)
               for r in rows[1:])
    assert main(["report", str(db), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["stabilized"]
    kind = got["kinds"]["tool-order"]
    assert kind["calls"] == 3 and kind["estimated"] == 3
    reads = sum(r.cache_read_tokens or 0 for r in rows[1:])
    assert 0 < kind["saved_tokens"] <= reads
    assert main(["report", str(db)]) == 0
    out = capsys.readouterr().out
    assert "stabilized: 3 calls rewritten" in out and "tool-order" in out


LONG_TOOLS = [{"name": n, "description": f"{n}: " + "does a useful thing with files. " * 90,
               "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                                "required": ["path"]}}
              for n in ("zeta_read", "alpha_write", "mid_list")]
LONG_TOOLS[-1] = {**LONG_TOOLS[-1], "cache_control": {"type": "ephemeral"}}


def _run(stabilize: bool, calls: list[dict[str, Any]]) -> tuple[float, Any]:
    """Hit rate and ``report --json``'s ``stabilized`` of ``calls`` through the anthropic SDK
    and ``RecordingTransport(stabilize=stabilize)`` on the emulator."""
    recorder = Recorder()
    with stabilizing_sdk(recorder, stabilize) as client:
        for kwargs in calls:
            client.messages.create(**kwargs)
    rows = recorder.records
    hit = sum(r.cache_read_tokens or 0 for r in rows) / sum(r.input_tokens_total or 0
                                                             for r in rows)
    return hit, summarize(rows, price=False).stabilized.to_json()


def test_a_cross_lineage_read_the_client_would_make_too_is_credited_nothing() -> None:
    """A main agent and a subagent send the same tools in the same unsorted order; the
    subagent reads them from the main agent's cache with or without stabilizing (same hit
    rate), so the tool rewrite saved nothing and is credited nothing (before: the new
    lineage was credited the cross-lineage read)."""
    calls = []
    for turn in range(3):
        messages = [{"role": "user", "content": f"task {turn}"}]
        calls.append(dict(model="claude-sonnet-4-6", max_tokens=16, tools=LONG_TOOLS,
                          system=[{"type": "text", "text": SYSTEM,
                                   "cache_control": {"type": "ephemeral"}}],
                          messages=messages))
        calls.append(dict(model="claude-sonnet-4-6", max_tokens=16, tools=LONG_TOOLS,
                          system=[{"type": "text", "text": "You are a brief subagent."}],
                          messages=messages))
    off, _ = _run(False, calls)
    on, saved = _run(True, calls)
    assert on == pytest.approx(off, abs=1e-3) and on > 0.5
    kind = saved["kinds"]["tool-order"]
    assert kind["calls"] == 6 and kind["estimated"] == 6
    assert kind["saved_tokens"] == 0 and saved["saved_tokens"] == 0


def test_history_breakpoints_never_read_are_a_cost_and_stop() -> None:
    """A harness without breakpoints that re-renders its transcript every call (the time in
    its first message): history breakpoints are written and never read. The report shows
    the writes added and no reads gained (a negative saving once priced), and the
    stabilizer stops placing them after two such calls (before: every call, "saved 0")."""
    calls, history = [], []
    for turn in range(6):
        history.append({"role": "user", "content": [
            {"type": "text", "text": f"step {turn}: " + "observation line. " * 400}]})
        first = {"role": "user", "content": [
            {"type": "text", "text": f"[now 10:{turn:02d}] Work on the task."}]}
        calls.append(dict(model="claude-sonnet-4-6", max_tokens=16, system="Be brief.",
                          messages=[first, {"role": "assistant", "content": "ok"}, *history]))
        history.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    off, _ = _run(False, calls)
    on, saved = _run(True, calls)
    assert off == on == 0.0
    kind = saved["kinds"]["history-breakpoint"]
    assert kind["calls"] == 2  # turn 0, and turn 1 (the first rewrite seen); then none
    assert kind["saved_tokens"] == 0 and kind["write_tokens"] > 0


def test_a_history_breakpoint_written_and_never_read_saves_a_negative_amount() -> None:
    """Priced, a breakpoint call that wrote 3,000 tokens and read none cost more than the
    request as written (no breakpoint: no reads and no writes): its saving is the 0.25x
    write premium, negative, and the JSON says so."""
    pytest.importorskip("genai_prices")
    record = UsageRecord(
        ts_utc=T0, scenario="s", session_id="a", wire_format="anthropic", provider="anthropic",
        model="claude-sonnet-4-5", lineage="L", input_tokens_total=4000, cache_read_tokens=0,
        cache_write_tokens=3000, uncached_tokens=1000, output_tokens=10, verdict="cold",
        verdict_detail={"stabilized": ["history-breakpoint"]})
    report = summarize([record])
    got = report.stabilized.to_json()["kinds"]["history-breakpoint"]
    assert got["saved_tokens"] == 0 and got["write_tokens"] == 3000
    row = report.calls[0]
    assert row.cost_uncached_usd is not None and row.cost_usd is not None
    assert got["saved_usd"] == pytest.approx(row.cost_uncached_usd - row.cost_usd, abs=1e-6)
    assert got["saved_usd"] < 0
