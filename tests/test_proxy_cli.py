"""``stableprompt proxy`` as a process: the loopback-or-token rule, graceful SIGTERM with a
stream in flight, and a ledger intact after SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from conftest import proxy_process
from stableprompt import Ledger
from stableprompt._cli import main
from stableprompt._proxy._server import Proxy
from stableprompt.emulator import Emulator

A_KEY = "sk-ant-api03-clitestkey-0123456789abcdef"
SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))
BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-6", "max_tokens": 16,
    "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hi"}]}


def test_non_loopback_host_without_token_is_refused(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    """``--host 0.0.0.0`` without ``--access-token`` exits 2 before binding, saying why."""
    status = main(["proxy", "--upstream", "http://127.0.0.1:9", "--host", "0.0.0.0",
                   "--ledger", str(tmp_path / "l.db")])
    err = capsys.readouterr().err
    assert status == 2
    assert "0.0.0.0 is not a loopback address" in err and "--access-token" in err
    assert not (tmp_path / "l.db").exists()


def test_a_file_that_is_not_a_ledger_is_refused_at_startup(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--ledger notes.txt`` (an existing file that is no ledger) exits 2 before listening,
    as ``stableprompt report`` does, instead of spilling every call's row."""
    notes = tmp_path / "notes.db"
    notes.write_text("not a database\n")
    status = main(["proxy", "--upstream", "http://127.0.0.1:9", "--ledger", str(notes),
                   "--port", "0"])
    err = capsys.readouterr().err
    assert status == 2 and "ledger" in err and str(notes) in err
    assert err.count("\n") == 1 and notes.read_text() == "not a database\n"


def test_bad_upstream_url_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An upstream that is not an http(s) URL is refused by the argument parser (exit 2)."""
    assert main(["proxy", "--upstream", "api.anthropic.com"]) == 2
    assert "http(s)://" in capsys.readouterr().err


def test_sigterm_lets_a_stream_in_flight_finish(tmp_path: Path) -> None:
    """SIGTERM while a stream is in flight: the stream still ends normally, its row is in
    the ledger, and the process exits 143."""
    release = threading.Event()

    class Slow(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1",'
                   b'"usage":{"input_tokens":3,"output_tokens":0,"cache_read_input_tokens":0,'
                   b'"cache_creation_input_tokens":0}}}\n\n')
            while not release.is_set():
                await asyncio.sleep(0.01)
            yield (b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
                   b'"end_turn"},"usage":{"output_tokens":1}}\n\n')
            yield b'event: message_stop\ndata: {"type":"message_stop"}\n\n'

    def slow(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Slow())

    ledger = tmp_path / "calls.db"
    with Proxy("http://slow.invalid", transport=httpx.MockTransport(slow)) as upstream, \
            proxy_process(upstream.base_url, ledger) as (proc, url), \
            httpx.Client(base_url=url, timeout=10) as client, \
            client.stream("POST", "/v1/messages", json={**BODY, "stream": True},
                          headers={"x-api-key": A_KEY}) as response:
        chunks = response.iter_raw()
        assert next(chunks).startswith(b"event: message_start")
        proc.send_signal(signal.SIGTERM)
        release.set()
        rest = b"".join(chunks)
        assert rest.endswith(b'{"type":"message_stop"}\n\n')
        assert proc.wait(timeout=15) == 143
    with Ledger(ledger, read_only=True) as led:
        (record,) = led.iter_records()
    assert record.status_code == 200 and record.input_tokens_total == 3
    assert "incomplete" not in record.verdict_detail and "stream" not in record.verdict_detail


def test_sigkill_leaves_the_ledger_intact(tmp_path: Path) -> None:
    """kill -9 in the middle of a run: the ledger opens, passes SQLite's integrity check and
    holds every call that finished before the kill."""
    ledger = tmp_path / "calls.db"
    with Emulator() as emu, proxy_process(emu.base_url, ledger) as (proc, url), \
            anthropic.Anthropic(base_url=url, api_key=A_KEY, max_retries=0) as client:
        for i in range(6):
            client.messages.create(**{**BODY, "messages": [{"role": "user",
                                                             "content": f"q{i}"}]})
        with client.messages.stream(**BODY) as stream:
            next(iter(stream))
            proc.kill()  # SIGKILL with a stream in flight
            with contextlib.suppress(Exception):  # whatever had not arrived yet is lost
                list(stream)
        proc.wait(timeout=10)
    conn = sqlite3.connect(ledger)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    with Ledger(ledger, read_only=True) as led:
        records = list(led.iter_records())
        assert led.meta()["backend"] == f"stableprompt proxy -> {emu.base_url}"
    assert len(records) in (6, 7)  # the stream's row, if it ended before the kill
    assert [r.verdict for r in sorted(records, key=lambda r: r.ts_utc)][:2] == ["cold", "hit"]
    assert all(A_KEY not in r.to_json().decode() for r in records)
