"""What the report says beside a verdict (issue 26 item 8): the ``no_breakpoint`` verdict, one
``lost_tokens`` (the ledger's, shown as stored), caveats and error text per call, failed calls'
errors listed, and breaks grouped by the user action behind them (``_accounting._actions``)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2

from stableprompt import Ledger, UsageRecord
from stableprompt._accounting._actions import action_of
from stableprompt._accounting._summary import VERDICTS, summarize
from stableprompt._cli import main
from stableprompt._recording._recorder import Recorder
from stableprompt._recording._transport import RecordingTransport
from stableprompt._report._html import html_report
from stableprompt._report._text import failed_call_lines, print_explanations
from test_transport import API_KEY, SYSTEM, FakeProvider

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEAKED = "sk-ant-api03-LEAKEDkey0123456789abcdefghijklmnop"


def _rec(i: int, *, total: int | None = 4000, read: int = 0, write: int = 0,
         verdict: str = "hit", session: str = "a", **detail: Any) -> UsageRecord:
    return UsageRecord(
        record_id=f"r{i}", ts_utc=T0 + timedelta(seconds=6 * i), scenario="s",
        session_id=session, turn=i, wire_format="anthropic", provider="anthropic",
        model="claude-sonnet-4-5", input_tokens_total=total,
        cache_read_tokens=None if total is None else read,
        cache_write_tokens=None if total is None else write,
        uncached_tokens=None if total is None else total - read - write,
        output_tokens=None if total is None else 10, predecessor_id=f"r{i - 1}" if i else None,
        verdict=verdict, verdict_detail=detail,  # type: ignore[arg-type]
        status_code=200 if total is not None else 429,
        error_class=None if total is not None else "ProviderHTTPError")


def test_no_breakpoint_is_its_own_verdict_with_its_loss_and_fix() -> None:
    """A no_breakpoint row is counted as such (not below_minimum), its cause is
    no-breakpoint with lint's fix, and it lost what the ledger says."""
    rows = [_rec(0, write=4000, verdict="cold"),
            _rec(1, verdict="no_breakpoint", reason="no-breakpoint", lost_tokens=3500,
                 lost_cap_tokens=4000)]
    report = summarize(rows, price=False)
    assert "no_breakpoint" in VERDICTS
    assert report.overall.verdicts["no_breakpoint"] == 1
    assert report.overall.verdicts["below_minimum"] == 0
    call = report.calls[1]
    assert (call.cause, call.lost_tokens, call.action) == ("no-breakpoint", 3500,
                                                            "no breakpoint")
    (cause,) = report.causes()
    assert cause.cause == "no-breakpoint" and cause.fix and "breakpoint" in cause.fix


def test_the_report_shows_the_ledgers_lost_tokens_as_stored() -> None:
    """A row carrying the recorder's computation (lost_cap_tokens) shows its lost_tokens as
    stored, even where the report's own ceiling is lower; an older row is still capped at
    ceiling - read."""
    base = _rec(0, total=3000, write=3000, verdict="cold")
    new = _rec(1, total=4000, verdict="client_mutation", cause="content-edit",
               lost_tokens=3500, lost_cap_tokens=4000)
    old = _rec(1, total=4000, verdict="client_mutation", cause="content-edit",
               lost_tokens=3500)
    assert summarize([base, new], price=False).calls[1].lost_tokens == 3500
    assert summarize([base, old], price=False).calls[1].lost_tokens == 3000  # the ceiling


def test_recorded_and_reported_lost_tokens_are_one_value(tmp_path: Path) -> None:
    """Through the official SDK: a compaction (the history replaced by a shorter summary)
    is a miss whose lost_tokens in the ledger row equals the report's for that call."""
    import anthropic

    db = tmp_path / "calls.db"
    recorder = Recorder(ledger=Ledger(db))
    http = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(FakeProvider()),
                                                      recorder=recorder))
    client = anthropic.Anthropic(api_key=API_KEY, base_url="http://provider.test",
                                 http_client=http, max_retries=0,
                                 default_headers={"x-stableprompt-session": "s1"})
    system: Any = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    history: list[dict[str, Any]] = []
    for turn in range(12):
        history.append({"role": "user", "content": [{"type": "text",
                                                      "text": f"question {turn} " * 40}]})
        marked = [*history[:-1], {**history[-1], "content": [
            {**history[-1]["content"][0], "cache_control": {"type": "ephemeral"}}]}]
        client.messages.create(model="claude-sonnet-4-6", max_tokens=5, system=system,
                               messages=marked)  # type: ignore[arg-type]
        history.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    summary = [{"role": "user", "content": [{"type": "text", "text": "summary of it all",
                                             "cache_control": {"type": "ephemeral"}}]}]
    client.messages.create(model="claude-sonnet-4-6", max_tokens=5, system=system,
                           messages=summary)  # type: ignore[arg-type]
    recorder.flush()
    records = Ledger(db, read_only=True).records()
    last = records[-1]
    assert last.verdict == "client_mutation"
    stored = last.verdict_detail["lost_tokens"]
    assert isinstance(stored, int) and 0 < stored == last.verdict_detail["lost_cap_tokens"]
    before = records[-2].input_tokens_total
    assert before is not None and last.cache_read_tokens is not None
    assert before - last.cache_read_tokens > 10 * stored  # what the long request had cached
    row = summarize(records, price=False).calls[-1]
    assert row.lost_tokens == stored
    assert row.action == "compaction"


def test_caveats_and_errors_are_shown_beside_the_verdict(tmp_path: Path) -> None:
    """report --calls numbers a call's caveats (an undocumented content-shape rule, a changed
    header) and a failed call's redacted error text beside its verdict and lists them under
    the table; the failed calls' errors are listed once per distinct text with a count."""
    shape = "content shape changed (string vs one text block): treated as different"
    rows = [
        _rec(0, write=4000, verdict="cold"),
        _rec(1, read=4000, content_shape=shape,
             header_changes=[{"header": "anthropic-beta", "before": "a,b", "after": "a",
                              "removed": ["b"], "added": []}]),
        _rec(2, total=None, verdict="unknown", error_type="rate_limit_error",
             error_message=f"slow down (key {LEAKED})"),
        _rec(3, total=None, verdict="unknown", error_type="rate_limit_error",
             error_message=f"slow down (key {LEAKED})"),
    ]
    report = summarize(rows, price=False)
    assert report.calls[1].caveats == (shape, "anthropic-beta: dropped 'b' (the beta "
                                       "features on; a beta can change what the model is sent:"
                                       " tools, thinking, context management)")
    error = report.calls[2].error
    assert error is not None and error.startswith("ProviderHTTPError 429 rate_limit_error: ")
    assert LEAKED not in error and "[REDACTED]" in error
    assert failed_call_lines(report) == ["failed calls (2):", f"  2 x {error} (e.g. r2)"]
    out = io.StringIO()
    print_explanations(report, file=out, calls=True)
    text = out.getvalue()
    assert "[1] " + shape in text and "[2] anthropic-beta: dropped 'b'" in text
    assert f"[3] error: {error}" in text and LEAKED not in text
    data = report.to_json()
    assert data["calls"][1]["caveats"][0] == shape and data["calls"][2]["error"] == error
    page = html_report(report, title="t")
    assert "<h2>Failed calls</h2>" in page and LEAKED not in page


def test_a_misss_caveats_are_under_its_verdict_in_the_html() -> None:
    """The HTML misses table shows a miss's caveats under its verdict."""
    shape = "content shape changed (string vs one text block): treated as different"
    rows = [_rec(0, write=4000, verdict="cold"),
            _rec(1, write=4000, verdict="client_mutation", cause="history-rewrite",
                 content_shape=shape, lost_tokens=4000, lost_cap_tokens=4000)]
    page = html_report(summarize(rows, price=False), title="t")
    assert f"client-mutation<br><small>{shape}</small>" in page


def test_breaks_are_grouped_by_the_user_action_behind_them(tmp_path: Path) -> None:
    """model-change, tool changes, header-change, a shrunk request (compaction) and other
    prefix changes are told apart; hits and cold calls are no break; --json has them."""
    assert action_of("client_mutation", {"cause": "model-change"}, 100, 100) == "model switch"
    assert action_of("client_mutation", {"cause": "tool-added", "segment_kind": "tool"},
                     100, 100) == "tool change"
    # a call the recorder named a branch of its session (verdict_detail "agent", the one
    # branch rule or the harness's headers): a subagent when it lost reads (a mutation, or a
    # cold first call that could have read a prefix another call cached), else no break
    subagent = {"kind": "subagent", "id": "a1", "source": "rule"}
    assert action_of("client_mutation", {"cause": "tool-removed", "segment_kind": "tool",
                                         "agent": subagent}, 6380, 11853) == "subagent"
    assert action_of("cold", {"agent": subagent, "shared_prefix": {"tokens": 7096}},
                     6380, None) == "subagent"
    assert action_of("cold", {"agent": subagent}, 6380, None) is None
    # without the recorder's word, a smaller request under another head is its cause's action
    assert action_of("client_mutation", {"cause": "tool-removed", "segment_kind": "tool"},
                     6380, 11853) == "tool change"
    assert action_of("client_mutation", {"cause": "header-change"}, 100, 100) == \
        "header change"
    assert action_of("client_mutation", {"cause": "history-rewrite"}, 700, 1000) == \
        "compaction"
    assert action_of("client_mutation", {"cause": "history-rewrite",
                                         "predecessor_rule": "same-head-recent"},
                     1000, 1000) == "compaction"
    assert action_of("client_mutation", {"cause": "history-rewrite"}, 990, 1000) == \
        "other change"
    assert action_of("ttl_expired", {}, 100, 100) == "provider or TTL"
    assert action_of("hit", {}, 100, 100) is None and action_of("cold", {}, 1, None) is None
    rows = [_rec(0, write=4000, verdict="cold"),
            _rec(1, write=4000, verdict="client_mutation", cause="model-change",
                 lost_tokens=4000, lost_cap_tokens=4000),
            _rec(2, total=2000, write=2000, verdict="client_mutation", cause="history-rewrite",
                 lost_tokens=2000, lost_cap_tokens=2000)]
    db = tmp_path / "calls.db"
    with Ledger(db) as ledger:
        for row in rows:
            ledger.write(row)
    report = summarize(rows)
    actions = {a.action: a for a in report.actions()}
    assert set(actions) == {"model switch", "compaction"}
    assert (actions["model switch"].calls, actions["model switch"].lost_tokens) == (1, 4000)
    assert actions["compaction"].lost_usd is not None and actions["compaction"].lost_usd > 0
    out = io.StringIO()
    print_explanations(report, file=out)
    assert "breaks by the user action behind them" in out.getvalue()
    assert main(["report", str(db), "--json"]) == 0


def test_report_json_names_the_actions(tmp_path: Path, capsys: Any) -> None:
    """``report --json`` has ``actions`` and each call's ``action``."""
    db = tmp_path / "calls.db"
    with Ledger(db) as ledger:
        ledger.write(_rec(0, write=4000, verdict="cold"))
        ledger.write(_rec(1, write=4000, verdict="client_mutation", cause="tool-removed",
                          lost_tokens=4000, lost_cap_tokens=4000))
    capsys.readouterr()
    assert main(["report", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [a["action"] for a in data["actions"]] == ["tool change"]
    assert [c["action"] for c in data["calls"]] == [None, "tool change"]
