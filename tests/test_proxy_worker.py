"""The proxy's load path: finishing on a worker thread (``_recording._worker``,
``_recording._deferred``) and the sharded upstream pool (``_proxy._pool``)."""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref

import anthropic
import httpx
import pytest

from stableprompt import Ledger, Recorder
from stableprompt._proxy._pool import ShardedTransport
from stableprompt._proxy._server import Proxy
from stableprompt._recording._worker import RecordingWorker
from stableprompt.emulator import Emulator, FakeClock

SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))


def test_threaded_recording_keeps_one_row_per_call_in_order(tmp_path: object) -> None:
    """``record_in_thread=True``: a 4-turn conversation streamed through the proxy gets one
    row per call, in turn order, each turn compared with the previous (cold, then hits),
    the last rows written by the time the proxy has stopped."""
    db = f"{tmp_path}/calls.db"
    with Ledger(db) as ledger:
        recorder = Recorder(ledger)
        with Emulator(clock=FakeClock()) as emu, \
                Proxy(emu.base_url, recorder=recorder, record_in_thread=True) as proxy, \
                anthropic.Anthropic(base_url=proxy.base_url, max_retries=0,
                                    api_key="sk-ant-api03-workertest-0123456789",
                                    default_headers={"x-stableprompt-session": "w"}) as client:
            messages: list[dict[str, object]] = []
            for turn in range(4):
                messages.append({"role": "user", "content": f"question {turn}"})
                with client.messages.stream(
                        model="claude-sonnet-4-6", max_tokens=16, messages=messages,  # type: ignore[arg-type]
                        system=[{"type": "text", "text": SYSTEM,
                                 "cache_control": {"type": "ephemeral"}}]) as stream:
                    text = stream.get_final_text()
                messages.append({"role": "assistant", "content": text})
        rows = ledger.records()
    assert [r.turn for r in rows] == [1, 2, 3, 4]
    assert [r.verdict for r in rows] == ["cold", "hit", "hit", "hit"]
    assert [r.record_id for r in rows] == [r.record_id for r in recorder.records]


def test_worker_runs_jobs_in_order_and_survives_a_failing_one(
        caplog: pytest.LogCaptureFixture) -> None:
    """Jobs run first in, first out on one thread; a job that raises is logged and the next
    ones still run; after close, a late job runs inline; ``wait`` blocks until the queue ran."""
    worker = RecordingWorker()
    seen: list[int] = []
    gate = threading.Event()
    worker.submit(gate.wait)
    for i in range(5):
        worker.submit(seen.append, i)
    worker.submit(lambda: 1 / 0)
    worker.submit(lambda: seen.append(99))
    assert seen == []
    gate.set()
    with caplog.at_level(logging.WARNING, logger="stableprompt.recorder"):
        worker.wait()
    assert seen == [0, 1, 2, 3, 4, 99]
    assert "ZeroDivisionError" in caplog.text
    worker.close()
    worker.submit(lambda: seen.append(100))
    assert seen[-1] == 100


def test_a_job_handle_waits_for_its_job_only_and_for_no_longer_than_asked() -> None:
    """``submit`` returns a handle whose ``result`` returns once that job ran (jobs behind it
    may still be queued), raises ``TimeoutError`` while it has not, and ``wait`` with a
    timeout says False meanwhile; waiters on several threads are all woken."""
    worker = RecordingWorker()
    gate, later = threading.Event(), threading.Event()
    first = worker.submit(gate.wait)
    second = worker.submit(later.wait)
    assert first is not None and second is not None
    with pytest.raises(TimeoutError):
        first.result(0.05)
    assert worker.wait(0.05) is False
    woken: list[int] = []

    def waiter() -> None:
        first.result()
        woken.append(1)

    waiters = [threading.Thread(target=waiter) for _ in range(3)]
    for thread in waiters:
        thread.start()
    gate.set()
    first.result(5)
    for thread in waiters:
        thread.join(5)
    assert woken == [1, 1, 1]
    with pytest.raises(TimeoutError):
        second.result(0.05)
    later.set()
    assert worker.wait(5) is True
    second.result(0)
    worker.close()


def test_a_job_runs_with_its_arguments_and_its_handle_then_drops_them() -> None:
    """``submit(job, *args)`` runs ``job(*args)``; the handle the submitter keeps (a pending
    call's ``finishing``) holds the job and its arguments only until it ran, so what they
    reference is freed by reference counting then, also after ``close`` (inline)."""
    class Box:
        pass

    worker = RecordingWorker()
    seen: list[tuple[Box, int]] = []
    box = Box()
    alive = weakref.ref(box)
    handle = worker.submit(lambda b, n: seen.append((b, n)), box, 7)
    assert handle is not None
    del box
    handle.result(5)
    assert len(seen) == 1 and seen[0][1] == 7 and seen[0][0] is alive()
    seen.clear()
    assert alive() is None  # the handle, still held, let go of its argument
    worker.close()
    late = Box()
    gone = weakref.ref(late)
    ran: list[Box] = []
    assert worker.submit(ran.append, late) is None and ran == [late]  # inline
    del late
    ran.clear()
    assert gone() is None


def test_sharded_pool_spreads_streams_and_counts_them_back() -> None:
    """``ShardedTransport``: 12 concurrent streams over 3 pools of 4 connections each are
    spread evenly (least busy first), every response is whole, and each pool's in-flight
    count is back to 0 once the streams are closed."""
    async def run() -> None:
        transport = ShardedTransport(max_connections=12)
        assert transport.shards == 3
        peak: list[int] = []
        with Emulator(clock=FakeClock()) as emu:
            async with httpx.AsyncClient(transport=transport, base_url=emu.base_url) as client:
                async def call(i: int) -> str:
                    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "stream": True,
                            "messages": [{"role": "user", "content": f"q{i}"}]}
                    async with client.stream("POST", "/v1/messages", json=body, headers={
                            "x-api-key": "sk-ant-api03-pooltest-0123456789",
                            "anthropic-version": "2023-06-01"}) as response:
                        peak.append(max(transport._busy))
                        return (await response.aread()).decode()

                texts = await asyncio.gather(*(call(i) for i in range(12)))
        assert all("message_stop" in text for text in texts)
        assert transport._busy == [0, 0, 0]
        assert max(peak) <= 4

    asyncio.run(run())
