"""The keep-alive scheduler (``_client._keepalive``): pings refresh the emulator's cache under
a fake clock, rows are marked, the cap is never exceeded, and bad input is refused."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt import (
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncKeepAliveScheduler,
    CachePolicy,
    InputError,
    KeepAlive,
    KeepAliveScheduler,
    Ledger,
    OpenAIClient,
    ProviderError,
    Recorder,
    summarize,
)
from stableprompt._accounting._keepalive import keepalive_totals
from stableprompt._economics._prices import UnitPrices
from stableprompt._report._text import keepalive_lines
from stableprompt.emulator import Emulator, FakeClock

MODEL = "claude-sonnet-4-6"
SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))
MARK = {"type": "ephemeral"}
#: Gaps the harness saw before (seconds): idle spells of 10-15 minutes are common.
PRIOR = [600.0, 720.0, 900.0]
#: $3/M input, $0.30/M read, $3.75/M write (5 min), $6/M write (1 h), $15/M output.
PRICES = UnitPrices(3e-6, 0.3e-6, 3.75e-6, 6e-6, 15e-6, "hand")


def prices(provider: str, model: str, day: date) -> UnitPrices:
    return PRICES


def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 16, "metadata": {"user_id": "conv-1"},
            "system": [{"type": "text", "text": SYSTEM, "cache_control": MARK}],
            "messages": messages}


def turn(question: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": question,
                                         "cache_control": MARK}]}


def unmarked(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": message["role"], "content": [
        {k: v for k, v in block.items() if k != "cache_control"}
        for block in message["content"]]}


def idle_twelve_minutes(max_pings: int, ledger: Ledger | None = None
                        ) -> tuple[Recorder, KeepAliveScheduler, dict[str, Any]]:
    """Turn 1, 12 minutes idle (ticks at 270, 540 and 720 s), turn 2, on the emulator."""
    with Emulator(clock=FakeClock()) as emu:
        recorder = Recorder(ledger, clock=emu.clock)
        client = AnthropicClient(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0,
                                 recorder=recorder)
        keep = KeepAliveScheduler(client, KeepAlive(interval_s=270, max_pings=max_pings),
                                  clock=emu.clock, prior_gaps_s=PRIOR, prices=prices)
        first = [turn("hello there")]
        reply = keep.send(body(first), conversation="c1")
        for step in (270, 270, 180):
            emu.advance(step)
            keep.run_pending()
        second = [unmarked(first[0]), {"role": "assistant", "content": reply["content"]},
                  turn("and again")]
        answer = keep.send(body(second), conversation="c1")
        client.close()
    return recorder, keep, answer


def test_keepalive_keeps_a_twelve_minute_idle_conversation_cached() -> None:
    """5-minute TTL, 12 minutes idle: two pings (270 s, 540 s) keep the prefix, so turn 2
    reads it all (verdict ``hit``); each ping reads the whole prefix, writes nothing and is
    marked on its row. Without pings (cap 0) turn 2 is ``ttl_expired`` and reads nothing."""
    recorder, keep, answer = idle_twelve_minutes(max_pings=5)
    rows = recorder.records
    assert [r.verdict for r in rows] == ["cold", "hit", "hit", "hit"]
    cold, ping1, ping2, real = rows
    assert [r.verdict_detail.get("keepalive") for r in rows] == [None, True, True, None]
    assert [ping1.verdict_detail["keepalive_ping"], ping2.verdict_detail["keepalive_ping"]] \
        == [1, 2]
    assert [ping1.verdict_detail["keepalive_gap_s"], ping2.verdict_detail["keepalive_gap_s"]] \
        == [270.0, 540.0]
    extent = cold.cache_write_tokens
    assert extent is not None and extent > 1024
    for ping in (ping1, ping2):
        assert (ping.cache_read_tokens, ping.cache_write_tokens, ping.output_tokens) == \
            (extent, 0, 1)
    assert answer["usage"]["cache_read_input_tokens"] == extent == real.cache_read_tokens
    status = keep.status("c1")
    assert status.pings_total == 2 and status.gaps_observed == 1
    # each ping: its reads at $0.30/M and one output token at $15/M
    assert status.spent_usd == pytest.approx(2 * (extent * 0.3e-6 + 15e-6))

    recorder, keep, answer = idle_twelve_minutes(max_pings=0)
    assert [r.verdict for r in recorder.records] == ["cold", "ttl_expired"]
    assert answer["usage"]["cache_read_input_tokens"] == 0
    assert keep.status("c1").reason == "cap"


def test_a_streamed_request_is_kept_alive_once_its_stream_ended() -> None:
    """``send(..., stream=True)``: the prefix's size comes from the stream's record once the
    harness read it; the ping at 270 s then reads it all."""
    with Emulator(clock=FakeClock()) as emu:
        recorder = Recorder(clock=emu.clock)
        with AnthropicClient(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0,
                             recorder=recorder) as client:
            keep = KeepAliveScheduler(client, KeepAlive(interval_s=270, max_pings=2),
                                      clock=emu.clock, prior_gaps_s=PRIOR, prices=prices)
            with keep.send(body([turn("hello there")]), conversation="c1",
                           stream=True) as events:
                list(events)
            emu.advance(270)
            (result,) = keep.run_pending()
    written = recorder.records[0].cache_write_tokens
    assert result.usage is not None and result.usage.cache_read_tokens == written
    assert keep.status("c1").extent_tokens == written


def test_keepalive_rows_reach_the_ledger_and_the_totals(tmp_path: Path) -> None:
    """The pings' rows are stored with their mark; ``keepalive_totals`` over the ledger counts
    2 pings of one session, their reads, and (genai-prices, Claude Sonnet 4.6 at $0.30/M read
    and $15/M output) their cost."""
    pytest.importorskip("genai_prices")
    with Ledger(tmp_path / "calls.db") as ledger:
        idle_twelve_minutes(max_pings=5, ledger=ledger)
        records = list(ledger.iter_records())
    totals = keepalive_totals(records)
    extent = records[0].cache_write_tokens
    assert extent is not None
    assert (totals.calls, totals.sessions, totals.cache_read_tokens, totals.output_tokens) == \
        (2, 1, 2 * extent, 2)
    assert totals.usd == pytest.approx(2 * (extent * 0.30e-6 + 15e-6))
    # The report: pings out of the calls and hit rates, on their own line, in the total cost.
    summary = summarize(records, what_if=True)
    assert summary.overall.calls == 2 and summary.records == 4
    assert summary.keepalive.calls == 2
    assert summary.overall.cost_usd is not None and totals.usd is not None
    assert summary.cost_usd == pytest.approx(summary.overall.cost_usd + totals.usd)
    (line,) = keepalive_lines(summary)
    assert line.startswith("keep-alive: 2 pings in 1 session, ")
    # The what-if: the policy used is replayed with its recorded pings (what was paid); a
    # 5-minute default without pings expires over the 12 minutes, keep-alive does not.
    assert summary.what_if is not None
    result = summary.what_if["anthropic"]
    assert result.calls == 2
    assert result.as_used.keepalive_pings == 2
    assert result.as_used.usd == pytest.approx(result.recorded_usd, rel=0.01)
    outcomes = result.outcomes_by_label()
    assert outcomes["default"].ttl_expired == 1
    assert outcomes["default + keep-alive"].ttl_expired == 0
    # two pings bridge the 12 minutes; two more follow the last call (the candidate does not
    # know the harness ends its conversation: it pings on while its rule says it pays)
    assert outcomes["default + keep-alive"].keepalive_pings == 4
    assert any("2 recorded keep-alive pings" in note for note in result.notes)


def test_async_scheduler_on_the_emulator() -> None:
    """The asyncio twin: the same two pings keep turn 2 a ``hit``."""

    async def run() -> Recorder:
        with Emulator(clock=FakeClock()) as emu:
            recorder = Recorder(clock=emu.clock)
            async with AsyncAnthropicClient(base_url=emu.base_url, api_key="sk-ant-test",
                                            max_retries=0, recorder=recorder) as client:
                keep = AsyncKeepAliveScheduler(
                    client, CachePolicy(keep_alive=KeepAlive(interval_s=270, max_pings=3)),
                    clock=emu.clock, prior_gaps_s=PRIOR, prices=prices)
                first = [turn("hello there")]
                reply = await keep.send(body(first), conversation="c1")
                for step in (270, 270, 180):
                    emu.advance(step)
                    await keep.run_pending()
                second = [unmarked(first[0]), {"role": "assistant",
                                               "content": reply["content"]},
                          turn("and again")]
                await keep.send(body(second), conversation="c1")
                await keep.aclose()
        return recorder

    recorder = asyncio.run(run())
    assert [r.verdict for r in recorder.records] == ["cold", "hit", "hit", "hit"]
    assert sum(r.verdict_detail.get("keepalive") is True for r in recorder.records) == 2


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_gpt_5_6_idle_forty_minutes(api: str) -> None:
    """GPT-5.6 (30-minute TTL refreshed by a read), implicit breakpoint, 40 minutes idle:
    one ping at 25 minutes keeps the prefix, so the next request is a ``hit``; without it,
    ``ttl_expired``."""
    verdicts = {}
    for max_pings in (3, 0):
        with Emulator(clock=FakeClock()) as emu:
            recorder = Recorder(clock=emu.clock)
            client = OpenAIClient(base_url=emu.openai_base_url, api_key="sk-test",
                                  max_retries=0, recorder=recorder)
            keep = KeepAliveScheduler(client, KeepAlive(interval_s=1500, max_pings=max_pings),
                                      clock=emu.clock, prior_gaps_s=[2400.0], prices=prices)
            if api == "chat":
                def make(items: list[dict[str, Any]]) -> dict[str, Any]:
                    return {"model": "gpt-5.6", "prompt_cache_key": "k",
                            "messages": [{"role": "system", "content": SYSTEM}, *items]}
                first: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
            else:
                def make(items: list[dict[str, Any]]) -> dict[str, Any]:
                    return {"model": "gpt-5.6", "prompt_cache_key": "k",
                            "instructions": SYSTEM, "input": items}
                first = [{"type": "message", "role": "user", "content": "hello"}]
            reply = keep.send(make(first), conversation="c")
            for step in (1500, 900):
                emu.advance(step)
                keep.run_pending()
            if api == "chat":
                said = {"role": "assistant", "content": reply["choices"][0]["message"]["content"]}
                again = {"role": "user", "content": "again"}
            else:
                said = {"type": "message", "role": "assistant",
                        "content": reply["output"][0]["content"][0]["text"]}
                again = {"type": "message", "role": "user", "content": "again"}
            keep.send(make([*first, said, again]), conversation="c")
            client.close()
        verdicts[max_pings] = [(r.verdict, r.verdict_detail.get("keepalive"))
                               for r in recorder.records]
    assert verdicts[3] == [("cold", None), ("hit", True), ("hit", None)]
    assert verdicts[0] == [("cold", None), ("ttl_expired", None)]


# --------------------------------------------------------------------------- a stand-in


class StubClient:
    """A client that answers at once: every request reads ``extent`` tokens (a ping) or
    writes them (a real request); ``fail`` makes pings raise."""

    base_url = "https://api.anthropic.com"
    call_provider = None

    class recorder:  # the attribute the scheduler reads
        policies = None

    def __init__(self, extent: int = 5000, fail: bool = False) -> None:
        self.extent = extent
        self.fail = fail
        self.sent: list[tuple[str, Any]] = []

    def _wire_of(self, body: Mapping[str, Any]) -> str:
        return "anthropic"

    def send(self, request: Any, *, stream: bool | None = None) -> dict[str, Any]:
        self.sent.append(("real", request))
        return {"usage": {"input_tokens": 3, "cache_read_input_tokens": 0,
                          "cache_creation_input_tokens": self.extent, "output_tokens": 9}}

    def _send_marked(self, request: Any, detail: Mapping[str, Any]) -> dict[str, Any]:
        self.sent.append(("ping", dict(detail)))
        if self.fail:
            raise ProviderError("overloaded", code="provider-http")
        return {"usage": {"input_tokens": 0, "cache_read_input_tokens": self.extent,
                          "cache_creation_input_tokens": 0, "output_tokens": 1}}


class AsyncStubClient:
    """The async shape of a client (``async def send``), for the construction checks."""

    async def send(self, request: Any, *, stream: bool | None = None) -> dict[str, Any]:
        raise AssertionError("never sent")

    async def _send_marked(self, request: Any, detail: Mapping[str, Any]) -> dict[str, Any]:
        raise AssertionError("never sent")


class Clock:
    def __init__(self) -> None:
        self.now = 1_767_225_600.0

    def __call__(self) -> float:
        return self.now


def scheduler(client: StubClient, clock: Clock, **keep: Any) -> KeepAliveScheduler:
    settings_ = {"interval_s": 270, "max_pings": 3, **keep}
    return KeepAliveScheduler(client, KeepAlive(**settings_), clock=clock,
                              prior_gaps_s=[600, 700, 800, 900, 1000, 3000], prices=prices)


def request(question: str = "q") -> dict[str, Any]:
    return body([turn(question)])


def test_pinging_stops_at_the_cap_when_sent_again_and_when_closed() -> None:
    """Cap 2: pings at 270 and 540 s, none at 810 (``cap``); a new request resets the count;
    a closed conversation gets none until it sends again."""
    client, clock = StubClient(), Clock()
    keep = scheduler(client, clock, max_pings=2)
    keep.send(request(), conversation="c")
    sent = []
    for _ in range(4):
        clock.now += 270
        sent += keep.run_pending()
    assert [r.ping for r in sent] == [1, 2]
    assert keep.status("c").reason == "cap" and keep.status("c").next_due is None
    keep.send(request(), conversation="c")
    assert keep.status("c").pings == 0 and keep.next_due() == clock.now + 270
    clock.now += 270
    assert [r.ping for r in keep.run_pending()] == [1]
    keep.close_conversation("c")
    clock.now += 270
    assert keep.run_pending() == [] and keep.status("c").reason == "closed"
    keep.send(request(), conversation="c")
    clock.now += 270
    assert len(keep.run_pending()) == 1
    keep.close()
    with pytest.raises(InputError) as info:
        keep.send(request(), conversation="c")
    assert info.value.code == "keepalive-closed"


def test_a_failed_ping_stops_the_gap_without_raising() -> None:
    """A ping that raises a provider error: ``run_pending`` returns it, the conversation
    stops pinging (``ping-failed``), and the failed ping counts against the cap."""
    client, clock = StubClient(fail=True), Clock()
    keep = scheduler(client, clock)
    keep.send(request(), conversation="c")
    clock.now += 270
    (result,) = keep.run_pending()
    assert result.error is not None and result.usage is None
    status = keep.status("c")
    assert (status.reason, status.pings, status.pings_total) == ("ping-failed", 1, 1)
    clock.now += 270
    assert keep.run_pending() == []


def test_reasons_for_no_ping() -> None:
    """No price (``unpriced``), an interval not shorter than the TTL
    (``interval-too-long``), a request with no breakpoint (``no-breakpoint``), nothing cached
    (``nothing-cached``), a late tick past the TTL (``expired``)."""
    clock = Clock()
    unpriced = KeepAliveScheduler(StubClient(), KeepAlive(interval_s=270, max_pings=3),
                                  clock=clock, prices=lambda p, m, d: None)
    unpriced.send(request(), conversation="c")
    assert unpriced.status("c").reason == "unpriced"
    long_interval = scheduler(StubClient(), clock, interval_s=300)
    long_interval.send(request(), conversation="c")
    assert long_interval.status("c").reason == "interval-too-long"
    bare = scheduler(StubClient(), clock)
    bare.send({"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "q"}]},
              conversation="c")
    assert bare.status("c").reason == "no-breakpoint"
    empty = scheduler(StubClient(extent=0), clock)
    empty.send(request(), conversation="c")
    assert empty.status("c").reason == "nothing-cached"
    late = scheduler(StubClient(), clock)
    late.send(request(), conversation="c")
    clock.now += 301
    assert late.run_pending() == [] and late.status("c").reason == "expired"


def test_bad_arguments_are_typed_errors() -> None:
    """A policy without keep-alive, a non-client, a negative prior weight, bad prior gaps,
    ``prices`` or ``clock`` not callable, an async client under the sync scheduler or the
    reverse: ``keepalive-config``, when the scheduler is made; an empty conversation key or
    an unknown one: ``keepalive-conversation``; invalid keep-alive settings are refused by
    the policy itself (``cache-policy``)."""
    client = StubClient()
    one = KeepAlive(interval_s=1, max_pings=1)
    bads: list[Callable[[], object]] = [
        lambda: KeepAliveScheduler(client, CachePolicy()),
        lambda: KeepAliveScheduler(object(), one),
        lambda: KeepAliveScheduler(client, {"interval_s": 1}),  # type: ignore[arg-type]
        lambda: KeepAliveScheduler(client, one, prior_weight=-1),
        lambda: KeepAliveScheduler(client, one, prior_gaps_s=[float("nan")]),
        lambda: KeepAliveScheduler(client, one, prices=None),  # type: ignore[arg-type]
        lambda: KeepAliveScheduler(client, one, clock=5),  # type: ignore[arg-type]
        lambda: KeepAliveScheduler(AsyncStubClient(), one),
        lambda: AsyncKeepAliveScheduler(client, one)]
    for bad in bads:
        with pytest.raises(InputError) as info:
            bad()
        assert info.value.code == "keepalive-config"
    keep = scheduler(client, Clock())
    with pytest.raises(InputError) as info:
        keep.send(request(), conversation="")
    assert info.value.code == "keepalive-conversation"
    with pytest.raises(InputError) as info:
        keep.status("nobody")
    assert info.value.code == "keepalive-conversation"
    from stableprompt import PolicyError

    with pytest.raises(PolicyError) as policy_info:
        CachePolicy(history="5m", keep_alive={"interval_s": 300, "max_pings": 2})  # type: ignore[arg-type]
    assert policy_info.value.code == "cache-policy"


def _price_service_down(provider: str, model: str, day: date) -> UnitPrices:
    raise RuntimeError("price service down")


@pytest.mark.parametrize("lookup", [
    _price_service_down,
    lambda p, m, d: {"input": 3e-6},  # not UnitPrices
], ids=["raises", "wrong-type"])
def test_a_planning_failure_never_escapes_send(
        lookup: Callable[[str, str, date], UnitPrices], caplog: pytest.LogCaptureFixture
        ) -> None:
    """The real request was sent and billed: a price lookup that raises (or answers
    something that is not ``UnitPrices``) leaves its answer returned, the conversation
    without a ping (``plan-failed``), and one warning, not one per request."""
    client, clock = StubClient(), Clock()
    keep = KeepAliveScheduler(client, KeepAlive(interval_s=270, max_pings=3), clock=clock,
                              prior_gaps_s=PRIOR, prices=lookup)
    with caplog.at_level("DEBUG", logger="stableprompt.keepalive"):
        for conversation in ("a", "b"):
            reply = keep.send(request(), conversation=conversation)
            assert reply["usage"]["cache_creation_input_tokens"] == 5000
            assert keep.status(conversation).reason == "plan-failed"
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "plan-failed" in warnings[0].getMessage()
    clock.now += 270
    assert keep.run_pending() == [] and [kind for kind, _ in client.sent] == ["real", "real"]


def test_the_async_scheduler_starts_only_inside_an_event_loop() -> None:
    """``AsyncKeepAliveScheduler.start()`` outside a running loop: ``keepalive-config``
    saying where to call it, not asyncio's RuntimeError."""

    async def make() -> AsyncKeepAliveScheduler:
        return AsyncKeepAliveScheduler(AsyncStubClient(), KeepAlive(interval_s=1, max_pings=1))

    keep = asyncio.run(make())
    with pytest.raises(InputError, match="needs a running event loop") as info:
        keep.start()
    assert info.value.code == "keepalive-config"


@settings(max_examples=60, deadline=None)
@given(max_pings=st.integers(0, 6), interval=st.integers(30, 290),
       idles=st.lists(st.integers(0, 4000), min_size=1, max_size=5),
       tick=st.integers(1, 200))
def test_never_more_pings_than_the_cap(max_pings: int, interval: int, idles: list[int],
                                       tick: int) -> None:
    """Whatever the cap, interval, idle spells and tick rate: per idle gap at most
    ``max_pings`` pings, each at least ``interval_s`` after the previous refresh."""
    client, clock = StubClient(), Clock()
    keep = KeepAliveScheduler(client, KeepAlive(interval_s=interval, max_pings=max_pings),
                              clock=clock, prior_gaps_s=[4000.0], prices=prices)
    for idle in idles:
        keep.send(request(), conversation="c")
        last = clock.now
        end = clock.now + idle
        while clock.now < end:
            clock.now = min(end, clock.now + tick)
            keep.run_pending()
        pings = [d for kind, d in client.sent if kind == "ping"]
        client.sent.clear()
        assert len(pings) <= max_pings
        times = [last + d["keepalive_gap_s"] for d in pings]
        for before, at in zip([last, *times], times, strict=False):
            assert at - before >= interval


def test_the_background_thread_pings_on_a_real_clock() -> None:
    """``start()``: with a 0.3 s interval (and a prior where three pings pay: every gap is
    300.75 s, just past the 5-minute TTL), the thread sends them on its own, no more than
    the cap, and ``close()`` stops it."""
    client = StubClient()
    keep = KeepAliveScheduler(client, KeepAlive(interval_s=0.3, max_pings=3),
                              prior_gaps_s=[300.75], prices=prices).start()
    with keep:
        keep.send(request(), conversation="c")
        deadline = time.monotonic() + 5
        while keep.status("c").pings_total < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
    assert keep.status("c").pings_total == 3
    assert sum(kind == "ping" for kind, _ in client.sent) == 3
