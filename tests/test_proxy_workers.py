"""``stableprompt proxy --workers N`` as real processes on loopback: two workers behind one
port (SO_REUSEPORT) recording into one SQLite ledger in WAL mode, read as shared.

Several conversations at once, each turn on a new connection (so turns land on either
worker): every call 200, exactly one row per call, every later turn's predecessor found (a
hit) even when the previous turn was recorded by the other worker; SIGTERM with streams in
flight on both workers finishes them and leaves no row behind; options that cannot work
across processes are refused (exit 2)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import stableprompt
from conftest import proxy_process
from stableprompt import Ledger
from stableprompt._cli import main
from stableprompt._proxy._server import Proxy
from stableprompt.emulator import Emulator
from test_proxy_cli import SlowStream

KEY = "sk-ant-api03-workerstestkey-0123456789abcdef"
SESSIONS, TURNS = 6, 5
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


def _stored(ledger: Path | str, session: str, n: int) -> None:
    """Wait (up to 10 s) until ``session`` has ``n`` rows in ``ledger``.

    A worker sends the last byte of an answer before its row is written (the row is recorded
    after the response, in the worker's recording thread), so a next turn sent at once on a
    new connection can reach the *other* worker before that row is stored, which then finds
    no predecessor (the stated limit of ``--workers``, as of a shared PostgreSQL ledger,
    tests/test_ledger_fleet.py). The guarantee is checked for turns sent after their
    predecessor's row is stored, as an agent loop's next turn is (a tool runs between)."""
    end = time.monotonic() + 10.0
    with Ledger(ledger, read_only=True) as reader:
        while sum(1 for _ in reader.iter_records(session_id=session)) < n:
            assert time.monotonic() < end, f"{session}: row {n} not stored within 10 s"
            time.sleep(0.01)


def _conversation(session: int, url: str, ledger: Path | str, statuses: list[int]) -> None:
    """One conversation's turns, each on a new connection (a new client)."""
    system = f"Session {session}. " + " ".join(f"rule {i}: keep the prefix stable."
                                               for i in range(120))
    messages: list[dict[str, Any]] = []
    for turn in range(TURNS):
        if turn:
            _stored(ledger, f"s{session}", turn)
        messages.append({"role": "user", "content": f"session {session} question {turn}"})
        body = {"model": "claude-sonnet-4-6", "max_tokens": 16,
                "system": [{"type": "text", "text": system,
                            "cache_control": {"type": "ephemeral"}}],
                "messages": list(messages)}
        with httpx.Client(timeout=30) as client:  # a new connection per turn
            response = client.post(f"{url}/v1/messages", json=body, headers={
                **HEADERS, "x-stableprompt-session": f"s{session}"})
        statuses.append(response.status_code)
        answer = response.json() if response.status_code == 200 else {"content": []}
        text = "".join(b.get("text", "") for b in answer["content"])
        messages.append({"role": "assistant", "content": text or "ok"})


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql",
                                                           marks=pytest.mark.slow)])
def test_two_workers_share_one_port_and_one_ledger(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Six conversations at once through ``--workers 2``, a new connection per turn: every
    call 200, one row per call, both workers served calls, turns crossed workers, and every
    later turn's predecessor is the previous turn (a hit), wherever it was recorded. On a
    SQLite file (WAL) and on a PostgreSQL database (spill files and journals under HOME)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    ledger: Path | str = tmp_path / "calls.db"
    if backend == "postgresql":
        ledger = str(request.getfixturevalue("pg_url"))
    captures = tmp_path / "captures"
    statuses: list[int] = []
    with Emulator() as emu, proxy_process(emu.base_url, ledger, "--workers", "2", "--quiet",
                                          "--capture", str(captures)) as (proc, url):
        threads = [threading.Thread(target=_conversation, args=(s, url, ledger, statuses))
                   for s in range(SESSIONS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
    assert statuses == [200] * (SESSIONS * TURNS)

    with Ledger(ledger, read_only=True) as reader:
        rows = reader.records()
    assert len(rows) == SESSIONS * TURNS == len({r.record_id for r in rows})
    by_id = {r.record_id: r for r in rows}
    for session in range(SESSIONS):
        turns = sorted((r for r in rows if r.session_id == f"s{session}"),
                       key=lambda r: r.ts_utc)
        assert [r.turn for r in turns] == list(range(1, TURNS + 1))
        assert turns[0].verdict != "hit"
        for earlier, later in itertools.pairwise(turns):
            assert later.predecessor_id == earlier.record_id, (session, later.turn)
            assert by_id[earlier.record_id].lineage == later.lineage
            assert later.verdict == "hit", (session, later.turn, later.verdict_detail)

    # Which worker served which turn: each worker writes its own capture file.
    files = sorted(captures.glob("proxy-*.jsonl"))
    assert len(files) == 2
    served: dict[tuple[str, int], int] = {}
    for worker, path in enumerate(files):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert lines, f"worker {worker} served no call"
        for line in lines:
            turn = len(json.loads(line["request"])["messages"]) // 2 + 1
            served[(line["session"], turn)] = worker
    assert len(served) == SESSIONS * TURNS
    crossed = sum(served[(f"s{s}", t)] != served[(f"s{s}", t + 1)]
                  for s in range(SESSIONS) for t in range(1, TURNS))
    assert crossed > 0  # predecessors were found across workers, not only within one
    assert not list(tmp_path.rglob("*.spill.jsonl"))
    assert not list(tmp_path.rglob("*.pending.*.jsonl"))


def test_sigterm_stops_every_worker_after_its_streams_finish(tmp_path: Path) -> None:
    """SIGTERM with eight streams in flight (on separate connections, so on both workers):
    every stream still ends normally, the supervisor exits 143 once both workers stopped,
    and each stream has its row (none left queued, spilled or journalled)."""
    release = threading.Event()
    started = threading.Barrier(9)

    def slow(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=SlowStream(release, at_most_s=20))

    ledger, captures = tmp_path / "calls.db", tmp_path / "captures"
    ends: list[bytes] = []

    def stream(url: str, n: int) -> None:
        body = {"model": "claude-sonnet-4-6", "max_tokens": 16, "stream": True,
                "messages": [{"role": "user", "content": f"stream {n}"}]}
        with httpx.Client(base_url=url, timeout=30) as client, \
                client.stream("POST", "/v1/messages", json=body, headers=HEADERS) as response:
            chunks = response.iter_raw()
            assert next(chunks).startswith(b"event: message_start")
            started.wait(timeout=20)
            ends.append(b"".join(chunks))

    with Proxy("http://slow.invalid", transport=httpx.MockTransport(slow)) as upstream, \
            proxy_process(upstream.base_url, ledger, "--workers", "2", "--quiet",
                          "--capture", str(captures)) as (proc, url):
        threads = [threading.Thread(target=stream, args=(url, n)) for n in range(8)]
        for thread in threads:
            thread.start()
        started.wait(timeout=20)  # every stream has its first event: all are in flight
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)  # the workers are shutting down, the streams still open
        assert proc.poll() is None
        release.set()
        for thread in threads:
            thread.join(timeout=30)
        assert proc.wait(timeout=30) == 143
    assert len(ends) == 8
    assert all(end.endswith(b'{"type":"message_stop"}\n\n') for end in ends)
    assert all(path.read_text() for path in captures.glob("proxy-*.jsonl"))
    assert len(list(captures.glob("proxy-*.jsonl"))) == 2  # both workers had streams
    with Ledger(ledger, read_only=True) as reader:
        rows = reader.records()
    assert len(rows) == 8 and all(r.status_code == 200 for r in rows)
    assert not any(r.verdict_detail.get("incomplete") for r in rows)
    assert not list(tmp_path.rglob("*.spill.jsonl"))
    assert not list(tmp_path.rglob("*.pending.*.jsonl"))


def test_a_port_held_by_another_proxy_with_workers_is_not_shared(tmp_path: Path) -> None:
    """A second ``--workers 2`` on the port of a running ``--workers 2`` proxy cannot listen
    (exit 1): ``SO_REUSEPORT`` would otherwise let it take half of the first one's
    connections."""
    with Emulator() as emu, proxy_process(emu.base_url, tmp_path / "a.db", "--workers",
                                          "2") as (_, url):
        port = url.rsplit(":", 1)[1]
        done = subprocess.run(
            [sys.executable, "-m", "stableprompt", "proxy", "--upstream", emu.base_url,
             "--port", port, "--ledger", str(tmp_path / "b.db"), "--workers", "2"],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "PYTHONPATH": str(Path(stableprompt.__file__).parent.parent)})
        assert done.returncode == 1 and "cannot listen on" in done.stderr, done.stderr
        assert done.stdout == ""


def test_workers_stop_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    """``kill -9`` of the supervisor: its workers get SIGTERM (PR_SET_PDEATHSIG), stop
    gracefully (their output pipes close, the port is free again) and every answered call
    has its row."""
    ledger = tmp_path / "calls.db"
    with Emulator() as emu, proxy_process(emu.base_url, ledger, "--workers", "2",
                                          "--quiet") as (proc, url):
        for n in range(6):
            with httpx.Client(timeout=30) as client:  # a new connection each
                response = client.post(f"{url}/v1/messages", headers=HEADERS, json={
                    "model": "claude-sonnet-4-6", "max_tokens": 8,
                    "messages": [{"role": "user", "content": f"call {n}"}]})
            assert response.status_code == 200
        proc.kill()
        proc.communicate(timeout=20)  # returns once no worker holds the pipes
        port = int(url.rsplit(":", 1)[1])
        end = time.monotonic() + 10
        while True:  # the workers' sockets are closed: the port binds again
            try:
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
                break
            except OSError:
                assert time.monotonic() < end, "a worker still holds the port"
                time.sleep(0.05)
    with Ledger(ledger, read_only=True) as reader:
        assert len(reader.records()) == 6


@pytest.mark.parametrize(("options", "named"), [
    (["--workers", "2", "--diagnostics"], "--diagnostics"),
    (["--workers", "0"], "--workers"),
])
def test_workers_with_what_cannot_work_across_processes_is_refused(
        options: list[str], named: str, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """``--workers 2 --diagnostics`` (a request waits for rows its own process is still
    recording) and ``--workers 0`` exit 2 before listening, naming the option."""
    status = main(["proxy", "--upstream", "http://127.0.0.1:9", "--port", "0",
                   "--ledger", str(tmp_path / "l.db"), *options])
    err = capsys.readouterr().err
    assert status == 2 and named in err
    assert not (tmp_path / "l.db").exists()


def test_a_sqlite_ledger_can_be_marked_shared(tmp_path: Path) -> None:
    """``Ledger(path, shared=True)``: a SQLite file other processes write (the workers);
    PostgreSQL is shared by default, SQLite not."""
    with Ledger(tmp_path / "a.db") as alone, Ledger(tmp_path / "a.db", shared=True) as many:
        assert not alone.shared and many.shared
