"""``stableprompt proxy`` as a process: the loopback-or-token rule, graceful SIGTERM with a
stream in flight, and a ledger intact after SIGKILL."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

import stableprompt
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


class SlowStream(httpx.AsyncByteStream):
    """An Anthropic stream that sends ``message_start``, then waits for ``release`` (at most
    ``at_most_s`` seconds, else for ever) before ``message_delta`` and ``message_stop``."""

    def __init__(self, release: threading.Event, at_most_s: float | None = None) -> None:
        self.release, self.at_most_s = release, at_most_s

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1",'
               b'"usage":{"input_tokens":3,"output_tokens":0,"cache_read_input_tokens":0,'
               b'"cache_creation_input_tokens":0}}}\n\n')
        waited = 0.0
        while not self.release.is_set() and (self.at_most_s is None
                                             or waited < self.at_most_s):
            await asyncio.sleep(0.01)
            waited += 0.01
        yield (b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
               b'"end_turn"},"usage":{"output_tokens":1}}\n\n')
        yield b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def test_sigterm_lets_a_stream_in_flight_finish(tmp_path: Path) -> None:
    """SIGTERM while a stream is in flight: the stream still ends normally, its row is in
    the ledger, and the process exits 143."""
    release = threading.Event()

    def slow(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=SlowStream(release))

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


def test_header_timeout_and_connection_cap_flags(tmp_path: Path) -> None:
    """``--header-timeout 0.5 --max-concurrency 2`` (a cap of 8 open connections): 20
    half-open connections do not keep another client from an answer, and a connection that
    sends nothing is closed about 0.5 s after it opened."""
    import socket

    def models(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": []})

    held: list[socket.socket] = []
    with Proxy("http://up.invalid", transport=httpx.MockTransport(models)) as upstream, \
            proxy_process(upstream.base_url, tmp_path / "calls.db", "--header-timeout", "0.5",
                          "--max-concurrency", "2") as (proc, url):
        host, port = url.removeprefix("http://").split(":")
        deadline = time.monotonic() + 10  # the banner comes just before uvicorn listens
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        try:
            for _ in range(20):
                held.append(socket.create_connection((host, int(port)), timeout=5))
                held[-1].sendall(b"GET /v1/models HTTP/1.1\r\n")
            with httpx.Client(base_url=url, timeout=5) as client:
                assert client.get("/v1/models").status_code == 200
            silent = socket.create_connection((host, int(port)), timeout=5)
            held.append(silent)
            opened = time.monotonic()
            assert silent.recv(1) == b""  # closed by the proxy, no answer
            assert 0.4 < time.monotonic() - opened < 3.0
        finally:
            for sock in held:
                sock.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 143


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


def test_sigterm_past_the_shutdown_timeout_logs_one_line_per_cut_call(tmp_path: Path) -> None:
    """SIGTERM with three streams still running after ``--shutdown-timeout 1``, and a fourth
    call whose upstream has not answered yet: each cut call gets one warning naming its
    method and path, no traceback; the process exits 143 and each call's row is in the
    ledger (verdict ``unknown``: the streams incomplete, the fourth with its error)."""
    release = threading.Event()
    waiting = threading.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        if b"no-headers-yet" in request.content:
            waiting.set()
            while not release.is_set():
                await asyncio.sleep(0.01)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=SlowStream(release, at_most_s=5.0))

    def unanswered(url: str) -> None:
        with contextlib.suppress(httpx.HTTPError), httpx.Client(base_url=url, timeout=10) as c:
            c.post("/v1/messages", json={**BODY, "metadata": {"user_id": "no-headers-yet"}},
                   headers={"x-api-key": A_KEY})

    ledger = tmp_path / "calls.db"
    with Proxy("http://slow.invalid", transport=httpx.MockTransport(slow)) as upstream:
        try:
            with proxy_process(upstream.base_url, ledger, "--shutdown-timeout", "1") as (
                    proc, url), httpx.Client(base_url=url, timeout=10) as client, \
                    contextlib.ExitStack() as streams:
                bodies = []  # kept: a dropped iterator closes its stream (a disconnect)
                for _ in range(3):
                    response = streams.enter_context(client.stream(
                        "POST", "/v1/messages", json={**BODY, "stream": True},
                        headers={"x-api-key": A_KEY}))
                    bodies.append(response.iter_raw())
                    assert next(bodies[-1]).startswith(b"event: message_start")
                fourth = threading.Thread(target=unanswered, args=(url,))
                fourth.start()
                assert waiting.wait(10)
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=15) == 143
                _, err = proc.communicate(timeout=10)
                fourth.join(10)
        finally:
            release.set()
    assert "Traceback" not in err and "CancelledError" not in err
    assert "Exception in ASGI application" not in err
    cut = [line for line in err.splitlines() if "cut POST /v1/messages at shutdown" in line]
    assert len(cut) == 4, err
    assert all(line.startswith("stableprompt proxy: WARNING ") for line in cut)
    assert "returned without completing response" not in err
    assert "returned without starting response" not in err
    with Ledger(ledger, read_only=True) as led:
        records = list(led.iter_records())
    assert len(records) == 4 and {r.verdict for r in records} == {"unknown"}
    streams_cut = [r for r in records if r.input_tokens_total == 3]
    assert len(streams_cut) == 3
    for record in streams_cut:
        assert record.verdict_detail.get("incomplete") or record.verdict_detail.get("stream")
    (never_answered,) = [r for r in records if r not in streams_cut]
    assert never_answered.status_code is None
    assert "CancelledError" in str(never_answered.verdict_detail["unknown_reason"])


def test_help_output_has_nothing_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    """No subcommand's ``--help`` trips the output redactor (it scrubs text shaped like a
    credential header, e.g. an ``Authorization:`` followed by a scheme)."""
    from stableprompt._cli import SUBCOMMANDS
    from stableprompt._proxy._server import CONNECTION_FACTOR

    for name in SUBCOMMANDS:
        assert main([name, "--help"]) == 0
        out = capsys.readouterr().out
        assert "usage: stableprompt" in out and "[REDACTED]" not in out, (name, out)
    assert main(["proxy", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "at least 16 characters" in text and "STABLEPROMPT_PROXY_TOKEN" in text
    assert f"capped at {CONNECTION_FACTOR}xN" in text


def test_access_token_from_the_environment_the_flag_winning(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``$STABLEPROMPT_PROXY_TOKEN`` is the token when ``--access-token`` is not given (an
    empty value is unset); the flag wins; a short token is refused naming where it came
    from, before anything binds."""
    from stableprompt._proxy._command import TOKEN_ENV, _token

    env_token, flag_token = "e" * 16, "f" * 20
    monkeypatch.setenv(TOKEN_ENV, env_token)
    assert _token(argparse.Namespace(access_token=None)) == env_token
    assert _token(argparse.Namespace(access_token=flag_token)) == flag_token
    monkeypatch.setenv(TOKEN_ENV, "")
    assert _token(argparse.Namespace(access_token=None)) is None
    monkeypatch.setenv(TOKEN_ENV, "short")
    assert main(["proxy", "--upstream", "http://127.0.0.1:9", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert f"{TOKEN_ENV} must be at least 16 characters" in err and "short" not in err
    assert main(["proxy", "--upstream", "http://127.0.0.1:9", "--access-token", "x" * 15]) == 2
    assert "--access-token must be at least 16 characters" in capsys.readouterr().err
    # HTTP trims header values: a token with whitespace could never match (every call a 401)
    for bad in (" " * 16, "a-valid-token-16 ", "token with spaces!", "tab\tseparated-token"):
        assert main(["proxy", "--upstream", "http://127.0.0.1:9", "--access-token", bad]) == 2
        err = capsys.readouterr().err
        assert "printable, without whitespace" in err and (not bad.strip() or bad not in err)


def test_all_interfaces_banner_names_a_usable_client_url_never_the_token(
        tmp_path: Path) -> None:
    """``--host 0.0.0.0`` with the token in the environment (so ``ps`` does not show it):
    the startup line does not offer ``http://0.0.0.0`` as the clients' base URL, says that
    clients use this machine's address and must send ``x-stableprompt-token``, and never
    prints the token; the token from the environment is enforced."""
    token = "env-token-0123456789abcdef"
    src = Path(stableprompt.__file__).parent.parent
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(src),
           "STABLEPROMPT_PROXY_TOKEN": token}
    with Emulator() as emu:
        proc = subprocess.Popen(
            [sys.executable, "-m", "stableprompt", "proxy", "--upstream", emu.base_url,
             "--host", "0.0.0.0", "--port", "0", "--ledger", str(tmp_path / "l.db")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None
            banner = proc.stdout.readline()
            assert token not in " ".join(proc.args)  # type: ignore[arg-type]
            match = re.search(r"stableprompt proxy on http://0\.0\.0\.0:(\d+) ", banner)
            assert match is not None, banner
            port = match.group(1)
            assert "BASE_URL=http://0.0.0.0" not in banner and token not in banner
            assert "this machine's address" in banner and "x-stableprompt-token" in banner
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                assert client.post("/v1/messages", json=BODY,
                                   headers={"x-api-key": A_KEY}).status_code == 401
                assert client.post("/v1/messages", json=BODY, headers={
                    "x-api-key": A_KEY, "x-stableprompt-token": token}).status_code == 200
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 143
        finally:
            if proc.poll() is None:
                proc.kill()
            out, err = proc.communicate(timeout=10)
    assert token not in out + err


def test_the_call_log_line_of_a_path_with_a_newline_is_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A path holding a decoded ``%0a`` (forwarded and recorded as it is) is logged escaped,
    so it cannot start a line of its own in the proxy's log."""
    from stableprompt._proxy._command import _line

    _line("GET", "/v1\n/models\r", 404, None)
    assert capsys.readouterr().out == "GET /v1\\n/models\\r 404\n"


def test_log_lines_show_terminal_escapes_literally(capsys: pytest.CaptureFixture[str]) -> None:
    """A request path holding terminal escapes is printed literally in the per-call line and
    in the proxy's log lines (``uvicorn_logging``'s formatter)."""
    import logging

    from stableprompt._proxy._command import _line, uvicorn_logging

    _line("GET", "/v1/\x1b[2J\x1b]8;;https://evil.invalid\x07x\r\n", 404, None)
    out = capsys.readouterr().out
    assert out == "GET /v1/\\x1b[2J\\x1b]8;;https://evil.invalid\\x07x\\r\\n 404\n"
    plain = uvicorn_logging()["formatters"]["plain"]  # type: ignore[index]
    formatter = plain["()"](fmt=plain["fmt"])
    record = logging.LogRecord("stableprompt.proxy", logging.WARNING, __file__, 1,
                               "cut %s %s at shutdown", ("POST", "/\x1b[31mred\r"), None)
    assert formatter.format(record) == (
        "stableprompt proxy: WARNING cut POST /\\x1b[31mred\\r at shutdown")
