"""The pending journal (``_ledger._journal``): the proxy's worker-thread recording loses no
completed call to a SIGKILL. Unit tests of the journal, then a real ``stableprompt proxy``
process killed under load and restarted."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

import stableprompt
from stableprompt import Ledger, Recorder, UsageRecord
from stableprompt._cli import main
from stableprompt._ledger._journal import PendingJournal, orphaned_journals
from stableprompt._recording._unanalysed import provisional_record
from stableprompt.emulator import Emulator

SRC = Path(stableprompt.__file__).parent.parent
A_KEY = "sk-ant-api03-journaltestkey-0123456789abcdef"
SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))


def _record(i: int, **fields: Any) -> UsageRecord:
    return UsageRecord(record_id=f"r{i:04d}", wire_format="anthropic", verdict="unknown",
                       **fields)


def _journals(db: Path) -> list[Path]:
    return sorted(db.parent.glob(f"{db.name}.pending.*.jsonl"))


def test_settled_lines_are_truncated_and_a_clean_close_leaves_no_file(tmp_path: Path) -> None:
    """Lines stay while unsettled; once all are settled the file is empty; sealed files are
    deleted when settled; close deletes what is settled."""
    db = tmp_path / "calls.db"
    line = len(_record(0).to_json()) + 1  # every test record has the same size
    with Ledger(db) as ledger:
        journal = PendingJournal(ledger.path, lambda r: r, segment_bytes=2 * line)
        tickets = [journal.append(_record(i)) for i in range(3)]
        assert all(t is not None for t in tickets)
        files = _journals(db)
        assert len(files) == 2  # the first sealed after two lines
        lines = [UsageRecord.from_json(text) for f in files
                 for text in f.read_bytes().splitlines()]
        assert [r.record_id for r in lines] == ["r0000", "r0001", "r0002"]
        assert orphaned_journals(ledger.path) == []  # this process holds their locks
        for ticket in tickets:
            assert ticket is not None
            journal.settle(ticket)
        (current,) = _journals(db)
        assert current.stat().st_size == 0 and oct(current.stat().st_mode & 0o777) == "0o600"
        journal.close()
        assert _journals(db) == [] and journal.append(_record(9)) is None


def test_a_killed_writers_journal_is_replayed_once_and_a_stored_row_wins(
        tmp_path: Path) -> None:
    """A process that journaled three records and died (os._exit, no cleanup) leaves an
    orphan; ``replay_spill`` stores the two records the ledger lacks, keeps the stored one
    as it was, deletes the file, and a second replay imports nothing."""
    db = tmp_path / "calls.db"
    with Ledger(db) as ledger:
        ledger.write(_record(1, model="final"))
    script = textwrap.dedent(f"""
        import os
        from stableprompt import Ledger, Recorder, UsageRecord
        ledger = Ledger({str(db)!r})
        journal = ledger.pending_journal()
        for i in range(3):
            journal.append(UsageRecord(record_id=f"r{{i:04d}}", wire_format="anthropic",
                                       model="provisional", content="secret prompt"))
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60,
                   env={**os.environ, "PYTHONPATH": str(SRC)})
    (orphan,) = orphaned_journals(db)
    assert b"secret prompt" not in orphan.read_bytes()  # the ledger's rule: no content
    with Ledger(db) as ledger:
        assert ledger.replay_spill() == 3  # already-stored ids count
        rows = {r.record_id: r.model for r in ledger.records()}
        assert rows == {"r0000": "provisional", "r0001": "final", "r0002": "provisional"}
        assert _journals(db) == [] and ledger.replay_spill() == 0


@contextmanager
def proxy_process(upstream: str, ledger: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``stableprompt proxy`` (worker-thread recording, the default) as a child process."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "stableprompt", "proxy", "--upstream", upstream, "--port", "0",
         "--ledger", str(ledger), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        match = re.search(r"stableprompt proxy on (http://127\.0\.0\.1:\d+)", banner)
        assert match is not None, banner + (proc.stderr.read() if proc.stderr else "")
        yield proc, match.group(1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def _call(client: anthropic.Anthropic, worker: int, i: int) -> str:
    """One streamed call; the message id once the whole stream arrived."""
    with client.messages.stream(
            model="claude-sonnet-4-6", max_tokens=16,
            system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            messages=[{"role": "user", "content": f"worker {worker} question {i}"}],
            extra_headers={"x-stableprompt-session": f"w{worker}"}) as stream:
        return stream.get_final_message().id


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _load_then_kill(url: str, proc: subprocess.Popen[str], *, workers: int, kill_after: int,
                    lock_db: Path | None = None) -> set[str]:
    """``workers`` clients calling in a loop; SIGKILL once ``kill_after`` calls completed
    (with ``lock_db``: while this process holds the ledger's write lock, so the proxy's
    worker is stuck and completed calls are queued). Returns the completed calls' ids."""
    done: set[str] = set()
    lock = threading.Lock()
    killed = threading.Event()

    def loop(worker: int) -> None:
        with anthropic.Anthropic(base_url=url, api_key=A_KEY, max_retries=0,
                                 timeout=120) as client:
            for i in range(10_000):
                if killed.is_set():
                    return
                try:
                    message_id = _call(client, worker, i)
                except Exception:  # the proxy died mid-call: not a completed call
                    return
                with lock:
                    done.add(message_id)

    blocker = None
    if lock_db is not None:
        blocker = sqlite3.connect(lock_db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # writers wait: the proxy's worker is stuck
    try:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            futures = [pool.submit(loop, w) for w in range(workers)]
            deadline = time.monotonic() + 60
            while len(done) < kill_after and time.monotonic() < deadline \
                    and not all(f.done() for f in futures):
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            killed.set()
            proc.wait(timeout=10)
            for future in futures:
                future.result(timeout=30)
    finally:
        if blocker is not None:
            blocker.execute("ROLLBACK")
            blocker.close()
    assert len(done) >= kill_after
    return done


def _restart_and_check(emu: Emulator, db: Path, done: set[str]) -> list[UsageRecord]:
    """Start the proxy again (its startup replays the journal), stop it; every completed call
    has exactly one row, nothing is duplicated, the file is sound, no journal is left."""
    with proxy_process(emu.base_url, db) as (proc, _url):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 143
    assert _integrity(db) == "ok"
    with Ledger(db, read_only=True) as ledger:
        records = ledger.records()
    ids = [r.response_id for r in records]
    assert len(ids) == len(set(ids)), "a call has two rows"
    assert done <= set(ids), f"{len(done - set(ids))} completed calls have no row"
    assert _journals(db) == []
    assert all(A_KEY not in r.to_json().decode() for r in records)
    return records


@pytest.mark.slow
def test_sigkill_under_load_loses_no_completed_call(tmp_path: Path) -> None:
    """Eight streaming clients in a loop, SIGKILL after 60 completed calls, restart: each
    completed call has exactly one row (final, or provisional from the journal)."""
    db = tmp_path / "calls.db"
    with Emulator() as emu:
        with proxy_process(emu.base_url, db) as (proc, url):
            done = _load_then_kill(url, proc, workers=8, kill_after=60)
        _restart_and_check(emu, db, done)


@pytest.mark.slow
def test_sigkill_with_the_worker_stuck_recovers_queued_calls(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The ledger's write lock held by another process (the worker blocks on its first
    write), four or more calls complete meanwhile, SIGKILL: without the journal their rows would be
    lost; ``stableprompt report`` names the journal until the restart, after which each has
    one provisional row with the usage the stream reported, verdict ``unknown`` and the
    reason."""
    db = tmp_path / "calls.db"
    with Emulator() as emu:
        with proxy_process(emu.base_url, db) as (proc, url):
            with anthropic.Anthropic(base_url=url, api_key=A_KEY, max_retries=0) as client:
                first = _call(client, 99, 0)  # the ledger's schema exists; one final row
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with contextlib.suppress(Exception), Ledger(db, read_only=True) as ledger:
                    if ledger.records():
                        break
                time.sleep(0.05)
            done = _load_then_kill(url, proc, workers=8, kill_after=4, lock_db=db)
        assert main(["report", str(db), "--json"]) == 0  # before the restart: named, unread
        waiting = json.loads(capsys.readouterr().out)["unimported_files"]
        assert any(".pending." in name for name in waiting)  # and a spill file, once the
        # stuck write gave up
        records = _restart_and_check(emu, db, done | {first})
    recovered = [r for r in records if r.verdict_detail.get("recovered") == "pending journal"]
    assert len(recovered) >= 2  # queued behind the stuck write (which may have spilled)
    for record in recovered:
        assert record.verdict == "unknown" and "pending journal" in str(
            record.verdict_detail["unknown_reason"])
        assert record.input_tokens_total is not None and record.status_code == 200
        assert record.session_id is not None
        # Queued behind the stuck write, their analysis (segments, lineage) never ran: the
        # request was forwarded without waiting for it.
        assert (record.lineage is None) == (record.request_fingerprint is None)


def test_an_eager_observer_closes_at_the_terminal_event() -> None:
    """``eager``: the observer hands its observation over inside the feed of the chunk
    carrying ``message_stop`` (before the caller gets it), not at the body's end; a JSON body
    is over once its ``Content-Length`` is reached."""
    from stableprompt._recording._observer import Observation, ResponseObserver

    seen: list[Observation] = []

    def observer(headers: dict[str, str]) -> ResponseObserver:
        made = ResponseObserver(lambda o: seen.append(o), usage_format="anthropic",
                                status_code=200, headers=headers, clock=time.monotonic,
                                started=time.monotonic())
        made.eager = True
        return made

    stream = observer({"content-type": "text/event-stream"})
    stream.feed(b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1",'
                b'"usage":{"input_tokens":3,"output_tokens":0,"cache_read_input_tokens":0,'
                b'"cache_creation_input_tokens":0}}}\n\n')
    stream.feed(b'event: message_delta\ndata: {"type":"message_delta","delta":{},'
                b'"usage":{"output_tokens":2}}\n\n')
    assert seen == []
    stream.feed(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert len(seen) == 1 and seen[0].incomplete is None
    assert seen[0].usage is not None and seen[0].usage.output_tokens == 2
    body = b'{"id":"m2","usage":{"input_tokens":1,"output_tokens":1}}'
    whole = observer({"content-type": "application/json", "content-length": str(len(body))})
    whole.feed(body[:10])
    assert len(seen) == 1
    whole.feed(body[10:])
    assert len(seen) == 2 and seen[1].body == body


@pytest.mark.parametrize("store_content", [False, True])
def test_a_provisional_row_given_as_fields_replays_as_its_record(
        tmp_path: Path, store_content: bool) -> None:
    """The caller's thread hands the journal a provisional row as its JSON object (no record
    built): the line replays to exactly the record ``Recorder.provisional`` makes, for a JSON
    body, a cut stream, an error without a response and a provider echoing the request's
    key; the ledger's content rule applies to fields as to records."""
    from stableprompt._ledger._provisional import with_parsed_usage
    from stableprompt._recording._deferred import DeferredRecorder
    from stableprompt._recording._observer import Observation
    from stableprompt._usage import CacheUsage

    db = tmp_path / "calls.db"
    with Ledger(db, store_content=store_content) as ledger:
        recorder = Recorder(ledger, tokenizer="bytes/4", store_content=True,
                            scenario=f"bench {A_KEY}", monotonic=lambda: 10.0)
        deferred = DeferredRecorder(recorder, decode=False)
        journal = ledger.pending_journal()
        body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [
            {"role": "user", "content": "hello"}]}).encode()
        usage = CacheUsage(wire_format="anthropic", input_tokens_total=12, uncached_tokens=2,
                           cache_read_tokens=10, cache_write_tokens=0, output_tokens=3)
        answer = json.dumps({"id": f"msg_{A_KEY[:20]}", "type": "message", "usage": {
            "input_tokens": 5, "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0, "output_tokens": 1}}).encode()
        cases: list[Observation] = [
            Observation(status_code=200, body=answer, latency_ms=1.0),
            Observation(status_code=200, usage=usage, response_id="msg_2", ttft_ms=-1.0,
                        incomplete="stream ended before its final event"),
            Observation(error=httpx.ConnectError("refused")),
            Observation(status_code=529, body=b'{"type":"error","error":{"type":'
                        b'"overloaded_error"}}'),
        ]
        for observation in cases:
            pending = recorder.register("/v1/messages", {"x-api-key": A_KEY}, body,
                                        decode=False)
            assert pending is not None
            recorder.analyse(pending)
            fields = deferred._provisional(pending, observation)  # a journal
            assert fields is not None
            expected = provisional_record(pending, observation, scenario=recorder.scenario,
                                          now=recorder.monotonic())
            assert expected is not None and expected == with_parsed_usage(
                UsageRecord.from_json(json.dumps(fields)))
            assert A_KEY not in json.dumps(fields)
            if observation.body == answer:  # parsed when read
                assert "usage_as_received" in fields["verdict_detail"]
                assert expected.input_tokens_total == 5 and expected.output_tokens == 1
                assert "usage_as_received" not in expected.verdict_detail
            ticket = journal.append(fields)
            assert ticket is not None
            (line,) = [ln for ln in _journals(db)[0].read_bytes().splitlines()
                       if expected.record_id.encode() in ln]
            replayed = with_parsed_usage(UsageRecord.from_json(line))  # as a replay reads
            assert replayed == (expected if store_content
                                else expected.model_copy(update={"content": None}))
            assert expected.content is not None and A_KEY not in line.decode()
        journal.close()
        recorder.close()


_BODIES: dict[str, dict[str, Any]] = {
    "anthropic": {"usage": {"input_tokens": 3, "cache_read_input_tokens": 10,
                            "cache_creation_input_tokens": 2, "output_tokens": 4}},
    "bedrock-converse": {"usage": {"inputTokens": 3, "outputTokens": 4,
                                   "cacheReadInputTokens": 10, "cacheWriteInputTokens": 2}},
    "deepseek": {"usage": {"prompt_tokens": 13, "completion_tokens": 4,
                           "prompt_cache_hit_tokens": 10, "prompt_cache_miss_tokens": 3}},
    "gemini": {"usageMetadata": {"promptTokenCount": 13, "cachedContentTokenCount": 10,
                                 "candidatesTokenCount": 4}},
    "llama-cpp": {"usage": {"prompt_tokens": 13, "completion_tokens": 4},
                  "timings": {"cache_n": 10, "prompt_n": 3}},
    "openai-chat": {"usage": {"prompt_tokens": 13, "completion_tokens": 4,
                              "prompt_tokens_details": {"cached_tokens": 10}}},
    "openai-compatible": {"usage": {"prompt_tokens": 13, "completion_tokens": 4,
                                    "prompt_tokens_details": {"cached_tokens": 10}}},
    "openai-responses": {"usage": {"input_tokens": 13, "output_tokens": 4,
                                   "input_tokens_details": {"cached_tokens": 10}}},
}


@pytest.mark.parametrize("wire_format", sorted(_BODIES))
def test_the_usage_members_kept_for_a_provisional_row_parse_as_the_whole_body(
        wire_format: str) -> None:
    """A provisional row keeps only a body's ``USAGE_MEMBERS`` (parsed when the row is
    read): for every wire format they give the usage the whole body gives."""
    from stableprompt._ledger._provisional import USAGE_MEMBERS
    from stableprompt.providers import WIRE_FORMATS, parse_response

    assert set(_BODIES) == set(WIRE_FORMATS)
    body = {"id": "r1", "model": "m", "content": [{"type": "text", "text": "hi"}],
            "choices": [], "output": [], **_BODIES[wire_format]}
    kept = {key: body[key] for key in USAGE_MEMBERS if key in body}
    whole = parse_response(wire_format, body)
    assert whole.cache_read_tokens == 10 and whole.output_tokens == 4
    assert parse_response(wire_format, kept) == whole
