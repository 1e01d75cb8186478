"""Requests the proxy forwards without analysing them (other paths, non-JSON bodies): one
``unknown`` row each, through the recorder's one storing path, kept out of hit rates by the
report (``Recorder.unanalysed``, ``_proxy._app``)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from stableprompt import Ledger, Recorder, UsageRecord, summarize
from stableprompt._cli import main
from stableprompt._proxy._server import Proxy, bind

A_KEY = "sk-ant-api03-unanalysedkey-0123456789abcdef"
G_KEY = "AIzaSyUnanalysedGeminiKey0123456789abcd"
SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))
MESSAGE = {"model": "claude-sonnet-4-6", "max_tokens": 8,
           "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
           "messages": [{"role": "user", "content": "hi"}]}
ANSWER = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
          "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
          "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 1900,
                    "cache_creation_input_tokens": 0}}
MODELS = {"data": [{"id": "claude-sonnet-4-6", "type": "model"}], "has_more": False}


def upstream(request: httpx.Request) -> httpx.Response:
    """An API: Messages (a JSON body, else 400), models, token counting, a Gemini path."""
    path = request.url.path
    if path == "/v1/messages":
        try:
            json.loads(request.content)
        except ValueError:
            return httpx.Response(400, json={"type": "error", "error": {
                "type": "invalid_request_error", "message": "bad JSON"}})
        return httpx.Response(200, json=ANSWER)
    if path == "/v1/models":
        return httpx.Response(200, json=MODELS)
    if path == "/v1/messages/count_tokens":
        return httpx.Response(200, json={"input_tokens": 1910})
    if path.startswith("/v1beta/models/"):
        return httpx.Response(200, json={"candidates": [], "usageMetadata": {}})
    return httpx.Response(404, json={"error": "no such path"})


def _send_mix(base_url: str) -> list[httpx.Response]:
    """One LLM call and four requests the proxy cannot analyse."""
    headers = {"x-api-key": A_KEY, "x-stableprompt-session": "mix"}
    with httpx.Client(base_url=base_url, headers=headers) as client:
        return [
            client.post("/v1/messages", json=MESSAGE),
            client.get("/v1/models?limit=5"),
            client.post("/v1/messages/count_tokens", json=MESSAGE),
            client.post("/v1/messages", content=b"not json{",
                        headers={"content-type": "application/json"}),
            client.post(f"/v1beta/models/gemini-2.5-flash:countTokens?key={G_KEY}",
                        json={"contents": [{"parts": [{"text": "hi"}]}]}),
        ]


@pytest.mark.parametrize("in_thread", [False, True], ids=["inline", "worker"])
def test_every_forwarded_request_gets_one_row(tmp_path: Path, in_thread: bool) -> None:
    """Each forwarded request has exactly one row; the unanalysed ones carry wire format and
    verdict ``unknown``, status, method, path without its query (the Gemini key sits there),
    body sizes and latency, nothing of the request's body or headers; sinks see every row."""
    seen: list[UsageRecord] = []
    with Ledger(tmp_path / "calls.db") as ledger:
        recorder = Recorder(ledger, sinks=[seen.append])
        with Proxy("http://api.anthropic.com", recorder=recorder,
                   transport=httpx.MockTransport(upstream), record_in_thread=in_thread) as p:
            responses = _send_mix(p.base_url)
        rows = ledger.records()
    assert [r.status_code for r in responses] == [200, 200, 200, 400, 200]
    assert responses[1].json() == MODELS  # forwarded untouched
    assert len(rows) == len(responses)
    assert [r.record_id for r in seen] == [r.record_id for r in rows]
    llm, *others = rows
    assert llm.wire_format == "anthropic" and llm.cache_read_tokens == 1900
    assert [(r.wire_format, r.verdict) for r in others] == [("unknown", "unknown")] * 4
    details = [r.verdict_detail for r in others]
    assert [(d["method"], d["path"]) for d in details] == [
        ("GET", "/v1/models"), ("POST", "/v1/messages/count_tokens"),
        ("POST", "/v1/messages"), ("POST", "/v1beta/models/gemini-2.5-flash:countTokens")]
    assert [r.status_code for r in others] == [200, 200, 400, 200]
    assert [d["response_bytes"] for d in details] == [len(r.content) for r in responses[1:]]
    assert details[0]["request_bytes"] == 0 and details[2]["request_bytes"] == len(b"not json{")
    assert "not an LLM endpoint" in str(details[0]["unknown_reason"])
    assert "not a JSON object" in str(details[2]["unknown_reason"])
    for record in others:
        assert record.provider == "anthropic"  # the upstream's host names it
        assert record.session_id == "mix"
        assert record.latency_ms is not None and record.latency_ms > 0
        assert record.input_tokens_total is None and record.content is None
        assert record.lineage is None and record.request_fingerprint is None
    stored = "\n".join(r.to_json().decode() for r in rows)
    assert A_KEY not in stored and G_KEY not in stored and "key=" not in stored


def test_report_counts_unanalysed_rows_apart_from_hit_rates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The report counts the unanalysed rows as calls, leaves them out of hit rates with a
    note naming why, and its text, JSON and HTML renderings do not fail on them."""
    db = tmp_path / "calls.db"
    with Ledger(db) as ledger:
        with Proxy("http://api.anthropic.com", recorder=Recorder(ledger),
                   transport=httpx.MockTransport(upstream)) as p:
            _send_mix(p.base_url)
        records = ledger.records()
    summary = summarize(records, price=False)
    overall = summary.overall
    assert (overall.calls, overall.unanalysed, overall.excluded) == (5, 4, 4)
    assert overall.input_tokens == 1910 and overall.hit_rate == pytest.approx(1900 / 1910)
    (note,) = summary.exclusion_notes()
    assert "4 of 5 calls excluded" in note and "4 with no LLM call to analyse" in note
    assert summary.to_json()["overall"]["calls"] == 5
    assert main(["report", str(db)]) == 0
    text = capsys.readouterr().out
    assert "no LLM call to analyse" in text
    assert main(["report", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["overall"]["unanalysed"] == 4
    html = tmp_path / "report.html"
    assert main(["report", str(db), "--html", str(html)]) == 0
    assert html.stat().st_size > 0


def test_unanalysed_rows_spill_when_the_ledger_fails(tmp_path: Path) -> None:
    """A ledger that cannot be written spills the unanalysed rows like any other row, and
    replaying the spill file into a working ledger stores them."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the ledger's directory should be")
    spill = tmp_path / "spill"
    with pytest.warns(UserWarning, match="spilled"):
        broken = Ledger(blocker / "calls.db", fallback_dir=spill)
        with Proxy("http://api.anthropic.com", recorder=Recorder(broken),
                   transport=httpx.MockTransport(upstream), record_in_thread=True) as p, \
                httpx.Client(base_url=p.base_url) as client:
            assert client.get("/v1/models", headers={"x-api-key": A_KEY}).status_code == 200
    (spilled,) = spill.glob("*.spill.jsonl")
    (record,) = [UsageRecord.from_json(line) for line in spilled.read_bytes().splitlines()]
    assert record.wire_format == "unknown" and record.verdict_detail["path"] == "/v1/models"


def test_an_unanalysed_request_to_an_unreachable_upstream_is_recorded_failed(
        tmp_path: Path) -> None:
    """``GET /v1/models`` with nothing listening upstream: a 502 naming the reason, and one
    row with the failure's class and no status."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()
    with Ledger(tmp_path / "calls.db") as ledger:
        with Proxy(f"http://127.0.0.1:{port}", recorder=Recorder(ledger)) as p, \
                httpx.Client(base_url=p.base_url) as client:
            response = client.get("/v1/models", headers={"x-api-key": A_KEY})
        (record,) = ledger.records()
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "upstream_unreachable"
    assert record.wire_format == "unknown" and record.status_code is None
    assert record.error_class is not None and record.verdict_detail["response_bytes"] is None


def test_lint_reads_a_capture_of_a_mixed_run(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``--capture`` keeps the recorded calls only (an unanalysed request has no request to
    lint), and ``stableprompt lint`` reads the capture of a mixed run."""
    capture = tmp_path / "cap"
    with Proxy("http://api.anthropic.com", transport=httpx.MockTransport(upstream),
               capture=str(capture)) as p:
        _send_mix(p.base_url)
    (path,) = capture.glob("proxy-*.jsonl")
    assert len(path.read_text().splitlines()) == 1
    assert main(["lint", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"stableprompt lint {path}") and "PASS breaks 0" in out


def test_a_path_with_an_encoded_newline_is_forwarded_and_recorded(tmp_path: Path) -> None:
    """A path holding ``%0a`` or ``%0d`` (Starlette's ``{path:path}`` stops at a newline) is
    forwarded to the upstream, a real loopback server, whose JSON answer comes back, and gets
    its one row naming the path as decoded, not the proxy's plain-text 404 and no row."""
    from stableprompt.emulator import Emulator, FakeClock

    paths = ["/v1%0a/models", "/v1/mess%0Dages", "/v1/models%0a", "/%0a%0d"]
    with Ledger(tmp_path / "calls.db") as ledger, Emulator(clock=FakeClock()) as emu:
        with Proxy(emu.base_url, recorder=Recorder(ledger)) as p, \
                httpx.Client(base_url=p.base_url) as client:
            responses = [client.post(path, json=MESSAGE) for path in paths]
        rows = ledger.records()
    for response in responses:
        assert response.headers["content-type"].startswith("application/json"), response.text
        assert response.status_code in (404, 405)
    assert [(r.verdict_detail["path"], r.status_code) for r in rows] == [
        ("/v1\n/models", responses[0].status_code), ("/v1/mess\rages", responses[1].status_code),
        ("/v1/models\n", responses[2].status_code), ("/\n\r", responses[3].status_code)]
    assert all("not an LLM endpoint" in str(r.verdict_detail["unknown_reason"]) for r in rows)
