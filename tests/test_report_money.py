"""Tests that the report never drops money (issue 24, `_accounting._pricing`, `_accounting._calls`,
`_accounting._summary`): a priced ledger of every kind of call, each priced by hand from list
prices written here, totals equal to the microdollar; calls whose cost is unknown make the
total a lower bound that names them; suspect usage is priced as reported with a note."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx2
import pytest

from stableprompt import Ledger, UsageRecord
from stableprompt._cli import main
from stableprompt._recording._recorder import Recorder
from stableprompt._report._command import summarize
from test_transport import SYSTEM_BLOCKS, FakeProvider, anthropic_sdk, conversation

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MODEL = "claude-sonnet-4-5"

# List prices of claude-sonnet-4-5, USD per million tokens (= microdollars per token), from
# Anthropic's pricing page (https://platform.claude.com/docs/en/about-claude/pricing, "Model
# pricing" and "Long context pricing": requests whose input, cache reads and writes included,
# exceeds 200,000 tokens pay the second column for every token). Web search: $10 per 1,000
# searches (https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-search-tool,
# "Usage and pricing"), i.e. 10,000 microdollars per search.
UNCACHED = {"base": Decimal(3), "long": Decimal(6)}
WRITE_5M = {"base": Decimal("3.75"), "long": Decimal("7.5")}
WRITE_1H = {"base": Decimal(6), "long": Decimal(12)}
READ = {"base": Decimal("0.3"), "long": Decimal("0.6")}
OUTPUT = {"base": Decimal(15), "long": Decimal("22.5")}
LONG_CONTEXT_ABOVE = 200_000
SEARCH_MICRO_USD = Decimal(10_000)

SUSPECT = {"usage_suspect": True, "usage_ratio": 9.5, "usage_ratio_bounds": [0.3, 1.6],
           "usage_suspect_reason": "reported input total far above our estimate of the request"}


@dataclass(frozen=True)
class Call:
    """One call of the priced ledger: Anthropic usage fields as reported."""

    name: str
    uncached: int | None
    read: int = 0
    write_5m: int = 0
    write_1h: int = 0
    output: int | None = 0
    searches: int = 0
    suspect: bool = False

    def hand_micro_usd(self) -> Decimal | None:
        """The call's price in microdollars from the list prices above (``None``: unknown)."""
        if self.uncached is None:
            return None
        total = self.uncached + self.read + self.write_5m + self.write_1h
        tier = "long" if total > LONG_CONTEXT_ABOVE else "base"
        return (self.uncached * UNCACHED[tier] + self.read * READ[tier]
                + self.write_5m * WRITE_5M[tier] + self.write_1h * WRITE_1H[tier]
                + (self.output or 0) * OUTPUT[tier] + self.searches * SEARCH_MICRO_USD)

    def record(self, i: int) -> UsageRecord:
        """The ledger row the recorder writes for this call (suspect rows as older
        recorders wrote them: ``usage_inconsistent`` set with ``usage_suspect``)."""
        if self.uncached is None:  # failed before any usage
            return UsageRecord(ts_utc=T0 + timedelta(seconds=10 * i), scenario="money",
                               session_id="s", wire_format="anthropic", provider="anthropic",
                               model=MODEL, verdict="unknown", record_id=self.name,
                               error_class="ProviderHTTPError", status_code=529,
                               verdict_detail={"unknown_reason": "the call failed"})
        write = self.write_5m + self.write_1h
        raw: dict[str, Any] = {
            "input_tokens": self.uncached, "cache_read_input_tokens": self.read,
            "cache_creation_input_tokens": write,
            "cache_creation": {"ephemeral_5m_input_tokens": self.write_5m,
                               "ephemeral_1h_input_tokens": self.write_1h},
            "output_tokens": 1 if self.output is None else self.output}
        if self.searches:
            raw["server_tool_use"] = {"web_search_requests": self.searches,
                                      "web_fetch_requests": 0}
        detail: dict[str, Any] = dict(SUSPECT) if self.suspect else {}
        if self.output is None:
            detail.update(incomplete=True, unknown_reason=(
                "stream ended before message_delta: output_tokens unknown"))
        return UsageRecord(
            ts_utc=T0 + timedelta(seconds=10 * i), scenario="money", session_id="s",
            record_id=self.name, wire_format="anthropic", provider="anthropic", model=MODEL,
            input_tokens_total=self.uncached + self.read + write, uncached_tokens=self.uncached,
            cache_read_tokens=self.read, cache_write_tokens=write,
            cache_write_5m_tokens=self.write_5m, cache_write_1h_tokens=self.write_1h,
            output_tokens=self.output, usage_inconsistent=self.suspect, usage_raw=raw,
            verdict="unknown" if self.output is None else "cold", verdict_detail=detail)


CALLS = [
    Call("plain", 2_000, output=300),
    Call("write-5m", 5, write_5m=4_000, output=100),
    Call("write-1h", 5, write_1h=6_000, output=100),
    Call("read", 30, read=10_000, write_5m=50, output=200),
    Call("long-context", 1_000, read=240_000, write_5m=9_000, output=2_000),
    Call("file-document", 50_000, output=40, suspect=True),
    Call("web-search", 30_000, output=800, searches=3, suspect=True),
    Call("image-url", 1_650, output=80, suspect=True),
    Call("cut-stream", 5, read=12_000, output=None),
]
FAILED = Call("failed", None)


HALF_MICRO_USD = Decimal("0.500001")  # "to the microdollar": JSON rounds USD to 6 digits


def _off(value: float | None, micro_usd: Decimal | None) -> Decimal:
    """How far ``value`` (USD) is from ``micro_usd`` (microdollars), in microdollars."""
    assert value is not None and micro_usd is not None
    return abs(Decimal(repr(value)) * 1_000_000 - micro_usd)


def test_the_hand_prices_are_the_issues() -> None:
    """The hand prices of the issue's examples: a document by file_id $0.1506, web search
    with 3 searches $0.132, and the long-context call at the >200k rates."""
    by_name = {c.name: c.hand_micro_usd() for c in CALLS}
    assert by_name["file-document"] == Decimal("150600")
    assert by_name["web-search"] == Decimal("132000")
    assert by_name["long-context"] == Decimal("262500")


def test_every_call_is_priced_to_the_microdollar() -> None:
    """Each call's cost (suspect or not, cut or not) is its hand price to the microdollar;
    the overall cost is their sum, and only the cut stream's is a lower bound."""
    report = summarize([c.record(i) for i, c in enumerate(CALLS)])
    for call, row in zip(CALLS, report.calls, strict=True):
        assert _off(row.cost_usd, call.hand_micro_usd()) < HALF_MICRO_USD, call.name
    expected = sum((c.hand_micro_usd() or Decimal(0) for c in CALLS), Decimal(0))
    assert _off(report.cost_usd, expected) < HALF_MICRO_USD
    assert report.overall.cost_complete is False  # the cut stream's output is unknown
    assert report.overall.cost_unknown_calls == 1
    assert [r.id for r in report.calls if not r.cost_complete] == ["cut-stream"]


def test_a_call_without_usage_makes_the_cost_a_named_lower_bound(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A failed call with no usage adds no dollars but makes every total that holds it a
    lower bound: JSON ``cost_complete: false`` with ``cost_unknown_calls`` and the call's
    ``cost_note``; the text shows "≥" and names the calls."""
    calls = [*CALLS, FAILED]
    db = tmp_path / "money.db"
    with Ledger(db) as ledger:
        for i, call in enumerate(calls):
            assert ledger.write(call.record(i)) == "committed"
    assert main(["report", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    expected = sum((c.hand_micro_usd() or Decimal(0) for c in calls), Decimal(0))
    overall = data["overall"]
    assert _off(overall["cost_usd"], expected) < HALF_MICRO_USD
    assert (overall["cost_complete"], overall["cost_unknown_calls"]) == (False, 2)
    rows = {row["id"]: row for row in data["calls"]}
    assert rows["failed"]["cost_usd"] is None and rows["failed"]["cost_complete"] is False
    assert "usage unknown" in rows["failed"]["cost_note"]
    assert "output tokens unknown" in rows["cut-stream"]["cost_note"]
    assert rows["plain"]["cost_complete"] is True and rows["plain"]["cost_note"] is None
    assert overall["suspect"] == 3 and overall["inconsistent"] == 0
    assert any("failed" in note and "cut-stream" in note for note in data["cost_notes"])
    assert main(["report", str(db)]) == 0
    text = capsys.readouterr().out
    assert f"≥${expected / 1_000_000:,.4f}" in text
    assert "file-document" in text and "usage_suspect" in text


def test_suspect_calls_stay_out_of_hit_rates_but_not_out_of_costs() -> None:
    """A suspect call is priced as reported, left out of token sums and hit rates (its total
    may be counted twice), and counted apart from calls whose usage did not add up."""
    report = summarize([c.record(i) for i, c in enumerate(CALLS)])
    t = report.overall
    assert (t.suspect, t.inconsistent) == (3, 0)
    suspects = [r for r in report.calls if r.excluded == "suspect"]
    assert [r.id for r in suspects] == ["file-document", "web-search", "image-url"]
    assert t.input_tokens == sum(
        (c.uncached or 0) + c.read + c.write_5m + c.write_1h for c in CALLS if not c.suspect)
    assert all(r.cost_usd is not None and r.cost_usd > 0 for r in suspects)


def test_usage_that_does_not_add_up_is_priced_when_its_parts_are_not_negative() -> None:
    """A call flagged usage_inconsistent without suspicion (its TTL split did not add up)
    is priced from its reported parts; one whose uncached remainder is negative cannot be
    priced, so its cost is unknown (a lower bound), never a negative or a 0."""
    odd = CALLS[0].record(0).model_copy(update={"usage_inconsistent": True})
    negative = CALLS[0].record(1).model_copy(update={
        "record_id": "negative", "usage_inconsistent": True, "cache_read_tokens": 5_000,
        "uncached_tokens": -3_000})
    report = summarize([odd, negative])
    assert _off(report.calls[0].cost_usd, CALLS[0].hand_micro_usd()) < HALF_MICRO_USD
    assert report.calls[1].cost_usd is None and report.calls[1].cost_complete is False
    assert report.overall.cost_unknown_calls == 1
    assert _off(report.cost_usd, CALLS[0].hand_micro_usd()) < HALF_MICRO_USD


def test_a_negative_output_count_is_not_priced() -> None:
    """A report of -1,000,000 output tokens was priced -$15 (the total went down): a
    negative part makes the cost unknown, named, never negative."""
    negative = CALLS[0].record(0).model_copy(update={"output_tokens": -1_000_000})
    report = summarize([negative])
    assert report.calls[0].cost_usd is None and report.calls[0].cost_complete is False
    assert report.cost_usd is None or report.cost_usd >= 0


def test_a_recorded_stream_cut_after_message_start_is_priced_on_its_input() -> None:
    """An Anthropic stream recorded through the SDK and cut after ``message_start`` (input and
    cache counts known, output not) is priced on its input, as a lower bound that says so."""
    start = {"id": "msg_cut", "type": "message", "role": "assistant", "model": MODEL,
             "content": [], "usage": {"input_tokens": 5, "cache_read_input_tokens": 0,
                                      "cache_creation_input_tokens": 1_600, "output_tokens": 1}}
    body = f"event: message_start\ndata: {json.dumps({'type': 'message_start', 'message': start})}"
    fake = FakeProvider()
    fake.script.append(httpx2.Response(200, headers={"content-type": "text/event-stream"},
                                       content=iter([(body + "\n\n").encode()])))
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_sdk(fake, recorder)
    list(client.messages.create(stream=True, model=MODEL, max_tokens=5, system=SYSTEM_BLOCKS,
                                messages=conversation(1)))
    (row,) = recorder.summary().calls
    hand = 5 * UNCACHED["base"] + 1_600 * WRITE_5M["base"]  # 5-minute write: the default TTL
    assert row.output_tokens == 0 and _off(row.cost_usd, hand) < HALF_MICRO_USD
    assert row.cost_complete is False and "output tokens unknown" in (row.cost_note or "")


@pytest.mark.parametrize("used", [{"web_search_requests": 3.0}, {"web_search_requests": "3"},
                                  {"web_search_requests": True}, [3]])
def test_a_server_tool_count_that_cannot_be_read_is_a_gap(used: Any) -> None:
    """A ``server_tool_use`` count that is not an integer (``3.0``, ``"3"``, ``true``; the
    member not an object) makes the call's cost a lower bound with a note, never a silently
    complete price without the fee (the session's reviewer found it priced as complete)."""
    record = Call("odd-search", 1_000, output=10).record(0)
    raw = dict(record.usage_raw or {})
    raw["server_tool_use"] = used
    summary = summarize([record.model_copy(update={"usage_raw": raw})])
    row = summary.calls[0]
    assert row.cost_usd is not None and not row.cost_complete
    assert row.cost_note is not None and "server_tool_use" in row.cost_note
    assert not summary.overall.cost_complete
