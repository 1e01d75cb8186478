"""A fleet writing one PostgreSQL ledger: two `stableprompt proxy` processes on two "hosts"
(127.0.0.1 and 127.0.0.2) and one in-process RecordingTransport, taking turns in the same
conversations against the loopback emulator, for a bounded time. One row per completed call,
each turn's predecessor found across processes, and `stableprompt report --json` equal to the
same traffic recorded by one recorder into SQLite (ids, timestamps and latencies aside)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import stableprompt
from pg_cluster import PASSWORD
from stableprompt import Ledger, Recorder, RecordingTransport
from stableprompt.emulator import Emulator

pytestmark = pytest.mark.slow

SRC = Path(stableprompt.__file__).parent.parent
KEY = "sk-ant-api03-fleettestkey-0123456789abcdef"
SESSIONS, TURNS = 6, 6
DEADLINE_S = 90.0

Send = Callable[[dict[str, Any], str], dict[str, Any]]


@contextlib.contextmanager
def _proxy(upstream: str, ledger: str, host: str, home: Path
           ) -> Iterator[tuple[subprocess.Popen[str], str]]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(SRC), "HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "stableprompt", "proxy", "--upstream", upstream, "--host", host,
         "--port", "0", "--ledger", ledger, "--quiet", "--record-inline"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        match = re.search(r"stableprompt proxy on (http://[\d.]+:\d+)", banner)
        assert match is not None, banner + (proc.stderr.read() if proc.stderr else "")
        assert PASSWORD not in banner
        yield proc, match.group(1)
    finally:
        if proc.poll() is None:
            proc.terminate()
        _, err = proc.communicate(timeout=30)
        assert PASSWORD not in err


def _sender(client: httpx.Client, base_url: str) -> Send:
    def send(body: dict[str, Any], session: str) -> dict[str, Any]:
        response = client.post(f"{base_url}/v1/messages", json=body, headers={
            "x-api-key": KEY, "anthropic-version": "2023-06-01",
            "x-stableprompt-session": session}, timeout=30)
        response.raise_for_status()
        return dict(response.json())
    return send


def _conversation(session: int, routes: list[Send], deadline: float,
                  stored: Callable[[str, int], None] | None = None) -> int:
    """Turns of one conversation, turn ``k`` through route ``(session + k) % len(routes)``;
    the number of completed calls. ``stored(session, n)`` (when given) waits until the
    conversation's first ``n`` rows are in the ledger before the next turn is sent."""
    system = f"Session {session}. " + " ".join(f"rule {i}: keep the prefix stable."
                                               for i in range(120))
    messages: list[dict[str, Any]] = []
    done = 0
    for turn in range(TURNS):
        if time.monotonic() > deadline:
            break
        if stored is not None and turn:
            stored(f"s{session}", turn)
        messages.append({"role": "user", "content": f"session {session} question {turn}"})
        body = {"model": "claude-sonnet-4-6", "max_tokens": 16,
                "system": [{"type": "text", "text": system,
                            "cache_control": {"type": "ephemeral"}}],
                "messages": list(messages)}  # each turn's request extends the last one
        answer = routes[(session + turn) % len(routes)](body, f"s{session}")
        text = "".join(b.get("text", "") for b in answer["content"])
        messages.append({"role": "assistant", "content": text or "ok"})
        done += 1
    return done


def _run(routes: list[Send], *, parallel: bool,
         stored: Callable[[str, int], None] | None = None) -> int:
    deadline = time.monotonic() + DEADLINE_S
    counts = [0] * SESSIONS
    if not parallel:
        return sum(_conversation(s, routes, deadline) for s in range(SESSIONS))

    def one(s: int) -> None:
        counts[s] = _conversation(s, routes, deadline, stored)

    threads = [threading.Thread(target=one, args=(s,)) for s in range(SESSIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts)


_VOLATILE = {"id", "record_id", "ts", "ts_utc", "latency_ms", "ttft_ms", "predecessor_id",
             "ledger", "meta", "response_id", "gap_s", "first_ts", "last_ts", "duration_s"}


def _stable(value: Any) -> Any:
    """The report without what differs between two recordings of the same traffic (calls in
    conversation order: the fleet interleaves conversations)."""
    if isinstance(value, dict) and isinstance(value.get("calls"), list):
        value = {**value, "calls": sorted(value["calls"],
                                          key=lambda c: (c["session"], c["turn"]))}
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in _VOLATILE
                and not k.endswith(("_ms", "_s", "_ts"))}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _report(target: str, home: Path) -> Any:
    env = {**os.environ, "PYTHONPATH": str(SRC), "HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "stableprompt", "report", target, "--json"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    return json.loads(done.stdout)


def _stored_in(url: str) -> Callable[[str, int], None]:
    """Wait (up to 10 s) until a conversation has ``n`` rows in the ledger at ``url``.

    A proxy sends the last byte of an answer before its row is written, so a client that sends
    the next turn at once through *another* host can reach it before the row does; that host
    then finds no predecessor and counts the turn again (a stated limit of a shared ledger:
    a predecessor is found once its row is stored). The fleet's guarantee is checked for
    turns sent after their predecessor's row is stored, as a conversation's next turn is in
    an agent loop that runs a tool between turns."""
    def stored(session: str, n: int) -> None:
        end = time.monotonic() + 10.0
        with Ledger(url, read_only=True) as reader:
            while sum(1 for _ in reader.iter_records(session_id=session)) < n:
                assert time.monotonic() < end, f"{session}: row {n} not stored within 10 s"
                time.sleep(0.01)
    return stored


def test_two_proxy_hosts_and_a_transport_write_one_postgresql_ledger(
        pg_url: str, tmp_path: Path) -> None:
    """Two proxies (127.0.0.1, 127.0.0.2) and a RecordingTransport take turns in six
    conversations at once: one row per completed call, every later turn's predecessor is the
    previous turn (stored by another process), and the report equals SQLite's."""
    home = tmp_path / "home"
    home.mkdir()
    began = time.monotonic()
    with Emulator() as emu, \
            _proxy(emu.base_url, pg_url, "127.0.0.1", home) as (_, one), \
            _proxy(emu.base_url, pg_url, "127.0.0.2", home) as (_, two), \
            Ledger(pg_url, spill_dir=home / "spill") as ledger, \
            httpx.Client() as plain:
        assert "127.0.0.2" in two
        recorder = Recorder(ledger)
        with httpx.HTTPTransport() as wrapped, httpx.Client(
                transport=RecordingTransport(wrapped, recorder=recorder)) as recorded:
            routes = [_sender(plain, one), _sender(plain, two),
                      _sender(recorded, emu.base_url)]
            completed = _run(routes, parallel=True, stored=_stored_in(pg_url))
    elapsed_s = time.monotonic() - began
    assert completed == SESSIONS * TURNS, f"only {completed} calls before the deadline"

    with Ledger(pg_url, read_only=True) as reader:
        rows = reader.records()
    assert len(rows) == completed == len({r.record_id for r in rows})
    by_id = {r.record_id: r for r in rows}
    for session in range(SESSIONS):
        turns = sorted((r for r in rows if r.session_id == f"s{session}"),
                       key=lambda r: r.ts_utc)
        assert [r.turn for r in turns] == list(range(1, TURNS + 1))
        for earlier, later in itertools.pairwise(turns):
            assert later.predecessor_id == earlier.record_id, (session, later.turn)
            assert by_id[earlier.record_id].lineage == later.lineage
    assert not list(home.rglob("*.spill.jsonl"))  # nothing spilled

    with Emulator() as emu, Ledger(tmp_path / "same.db") as lite:
        recorder = Recorder(lite)
        with httpx.HTTPTransport() as wrapped, httpx.Client(
                transport=RecordingTransport(wrapped, recorder=recorder)) as recorded:
            assert _run([_sender(recorded, emu.base_url)], parallel=False) == completed
    postgres = _report(pg_url, home)
    sqlite = _report(str(tmp_path / "same.db"), home)
    print(f"fleet: {completed} calls through 3 writers in {elapsed_s:.1f}s")
    assert _stable(postgres)["records"] == _stable(sqlite)["records"]
    # The proxies keep no request body (store_content off): each later turn was compared with
    # a predecessor another process stored, by its row's segment outline (schema v4).
    assert all(r.segment_digests for r in rows)
    assert all(r.content is None for r in rows)
    assert {c["verdict"] for c in postgres["calls"] if c["turn"] > 1} == {"hit"}
    assert _stable(postgres) == _stable(sqlite)
