"""Fake API keys placed in headers, query strings, request bodies and server errors never
appear in any artifact (ledger, WAL, spill, JSONL/OTel export, report JSON/HTML, captures) or
CLI output (lint, report, emulator request log), issue 9 #8, #9 and the acceptance grep."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt import Ledger, Recorder, RecordingTransport, _redact, export_otel
from stableprompt._cli import main
from stableprompt.emulator import Emulator

ANTHROPIC_KEY = "sk-ant-api03-FAKEFAKEFAKE0123456789abcdefghijklmnopqrstuvwxyz-AAAA"
OPENAI_KEY = "sk-proj-FAKEFAKEFAKE0123456789abcdefghijklmnopqrstuvwxyzABCD"
KEYS = (ANTHROPIC_KEY, OPENAI_KEY)
# A key's distinctive middle: a truncated echo still counts as a leak.
FRAGMENTS = tuple(key[8:30] for key in KEYS)


def _leaks(text: str | bytes) -> list[str]:
    data = text if isinstance(text, str) else text.decode("utf-8", "replace")
    return [f for f in FRAGMENTS if f in data]


def _drive(emulator: Emulator, recorder: Recorder) -> None:
    """Official SDK calls carrying the keys everywhere a harness might put them."""
    a = anthropic.Anthropic(api_key=ANTHROPIC_KEY, base_url=emulator.base_url, max_retries=0,
                            http_client=httpx2.Client(transport=RecordingTransport(
                                recorder=recorder)))
    o = openai.OpenAI(api_key=OPENAI_KEY, base_url=emulator.openai_base_url, max_retries=0,
                      http_client=httpx2.Client(transport=RecordingTransport(
                          recorder=recorder)))
    messages = [{"role": "user", "content": f"my key is {ANTHROPIC_KEY}, keep it safe"}]
    a.messages.create(model="claude-sonnet-4-6", max_tokens=8, messages=messages,  # type: ignore[arg-type]
                      extra_query={"key": ANTHROPIC_KEY},
                      extra_headers={"x-stableprompt-session": "s1"})
    o.chat.completions.create(model="gpt-5.6", messages=[
        {"role": "user", "content": f"token {OPENAI_KEY}"}], extra_query={"api_key": OPENAI_KEY})
    # The server quotes the bad value back in its error: a key placed where a TTL goes.
    bad = [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {
        "type": "ephemeral", "ttl": ANTHROPIC_KEY}}]}]
    with pytest.raises(anthropic.BadRequestError):
        a.messages.create(model="claude-sonnet-4-6", max_tokens=8, messages=bad)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError):
        o.chat.completions.create(model="gpt-5.6", messages=[
            {"role": "user", "content": "x"}], extra_body={"prompt_cache_retention": OPENAI_KEY})
    a.close()
    o.close()


def test_no_key_in_any_artifact_or_cli_output(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Record real SDK calls (keys in headers, query, body, server errors), then grep every
    file written and every CLI output for the keys."""
    db = tmp_path / "calls.db"
    ledger = Ledger(db, store_content=True)
    recorder = Recorder(ledger, store_content=True, tokenizer="bytes/4")
    with Emulator() as emulator:
        _drive(emulator, recorder)
        assert [r.error_message for r in emulator.requests() if r.error_message and _leaks(
            r.error_message)] == []  # the in-process request log (item 9)
    assert len(recorder.records) == 4
    assert any(r.status_code == 400 for r in recorder.records)
    ledger.export_jsonl(tmp_path / "export.jsonl")
    (tmp_path / "otel.json").write_text(json.dumps(export_otel(recorder.records)))
    ledger.close()

    # A capture as a harness would log it, keys included: lint must not print them (item 8).
    capture = tmp_path / "capture.jsonl"
    capture.write_text("".join(json.dumps({"session": OPENAI_KEY, "request": {
        "model": "claude-sonnet-4-6", "max_tokens": 8, "metadata": {"user_id": ANTHROPIC_KEY},
        "system": [{"type": "text", "text": f"Key: {ANTHROPIC_KEY} at {i}:00"}],
        "messages": [{"role": "user", "content": f"hello {OPENAI_KEY}"}]}}) + "\n"
        for i in range(3)))
    capsys.readouterr()
    outputs = []
    for argv in (["lint", str(capture)], ["lint", "--json", str(capture)],
                 ["report", str(db)], ["report", "--json", str(db)],
                 ["report", str(db), "--html", str(tmp_path / "report.html")]):
        main(argv)
        captured = capsys.readouterr()
        outputs.append(captured.out + captured.err)
    assert all(outputs)
    for name, text in zip(("lint", "lint --json", "report", "report --json", "report --html"),
                          outputs, strict=True):
        assert _leaks(text) == [], name
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != capture]
    assert {p.name for p in written} >= {"calls.db", "export.jsonl", "otel.json", "report.html"}
    for path in written:
        assert _leaks(path.read_bytes()) == [], path


def test_emulator_serve_request_log_never_prints_a_key(tmp_path: Path) -> None:
    """``stableprompt emulator serve`` logs each request; a key echoed in a request value (a
    bad TTL) is scrubbed from that log line (item 9)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "stableprompt", "emulator", "serve",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        found = re.search(r"127\.0\.0\.1:(\d+)", banner)
        assert found, banner
        port = int(found.group(1))
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            response = client.post("/v1/messages", headers={"x-api-key": ANTHROPIC_KEY},
                                   json={"model": "claude-sonnet-4-6", "max_tokens": 4,
                                         "messages": [{"role": "user", "content": [{
                                             "type": "text", "text": "x", "cache_control": {
                                                 "type": "ephemeral", "ttl": ANTHROPIC_KEY}}]}]})
            assert response.status_code == 400
        deadline = time.monotonic() + 10
        line = ""
        while time.monotonic() < deadline and "/v1/messages" not in line:
            line = proc.stdout.readline()
        assert "/v1/messages" in line and _leaks(line) == []
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_snippets_never_show_the_tail_of_a_key(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Two requests whose system text ends in keys that differ in their last character: the
    divergence snippets (lint text, JSON and the public LintPair / Divergence values) are cut
    after the key is scrubbed, so its tail never shows (review finding)."""
    from stableprompt import diff, lint_requests, segment_request

    second = ANTHROPIC_KEY[:-1] + "B"
    bodies = [{"model": "claude-sonnet-4-6", "max_tokens": 8,
               "system": [{"type": "text", "text": "Be careful. " * 40 + key}],
               "messages": [{"role": "user", "content": "hi"}]} for key in (ANTHROPIC_KEY, second)]
    report = lint_requests(bodies, sessions=["s", "s"])
    texts = [repr(report.as_dict())]
    divergence = diff(segment_request("anthropic", bodies[0]),
                      segment_request("anthropic", bodies[1]))
    assert divergence is not None
    texts.append(repr(divergence.as_dict()))
    capture = tmp_path / "keys.jsonl"
    capture.write_text("".join(json.dumps({"session": "s", "request": b}) + "\n"
                               for b in bodies))
    for argv in (["lint", str(capture)], ["lint", "--json", "--all", str(capture)]):
        main(argv)
        captured = capsys.readouterr()
        texts.append(captured.out + captured.err)
    tail = ANTHROPIC_KEY[-20:-1]
    for text in texts:
        assert tail not in text and _leaks(text) == []
    assert "[REDACTED]" in texts[0]


def test_emulator_log_scrubs_the_requests_own_credentials() -> None:
    """A credential that is not key-shaped (an Azure-style hex key, a bearer token) is still
    scrubbed from the logged path and error message: the emulator scrubs the request's own
    credential header values, as the recorder does (review finding)."""
    opaque, token = "3f9a0c1d5e7b4a2f8c6d0e1f2a3b4c5d", "tok.Zq8RvN3kLpWx7Y"
    headers = {"x-api-key": opaque, "authorization": f"Bearer {token}"}
    bad = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": opaque}}]}]}
    with Emulator() as emulator, httpx2.Client(base_url=f"http://127.0.0.1:{emulator.port}",
                                               headers=headers, timeout=10) as client:
        assert client.post(f"/v1/{opaque}", json={}).status_code == 404
        assert client.post(f"/v1/messages/{token}", json={}).status_code == 404
        assert client.post("/v1/messages", json=bad).status_code == 400
        logged = " ".join(f"{r.path} {r.error_message}" for r in emulator.requests())
    assert "[REDACTED]" in logged
    assert opaque[:8] not in logged and token[4:12] not in logged


def test_url_passwords_and_basic_credentials_are_scrubbed() -> None:
    """An engine URL with user info, and a server echoing its Basic Authorization header,
    never reach a record (reviewer finding, session 3)."""
    from stableprompt._redact import redact

    text = ("HTTP 500 from http://admin:hunter2pass@127.0.0.1:37139/apply-template: "
            "Authorization: Basic YWRtaW46aHVudGVyMnBhc3M= and basic YWRtaW46aHVudGVyMnBhc3M=")
    out = redact(text)
    assert "hunter2pass" not in out and "YWRtaW46aHVudGVyMnBhc3M" not in out
    assert "http://admin:[REDACTED]@127.0.0.1:37139/apply-template" in out
    assert redact("see https://example.com/a@b") == "see https://example.com/a@b"


_KEYISH = ["sk-", "sk-ant-api03-", "AIza", "x-api-key: ", "API_KEY=", "Authorization: ",
           "Bearer ", "basic ", "https://u:", "@host", "abcdefghijklmnop0123456789_-",
           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abc", " ", "\"", "=", "é", "k"]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(_KEYISH), max_size=8))
def test_redaction_skips_only_texts_without_any_key_shape(parts: list[str]) -> None:
    """The one-search precheck (``_ANY_SECRET``) never skips a text a pattern would change:
    scrubbing equals applying every pattern in turn."""
    text = "".join(parts)
    expected = text
    for pattern in _redact._SECRET_PATTERNS:
        expected = pattern.sub(r"\1[REDACTED]" if pattern.groups else "[REDACTED]", expected)
    assert _redact.redact(text) == expected


_SHAPES = [*_KEYISH, "gsk_", "xai-", "pplx-", "hf_", "ghp_", "github_pat_", "xoxb-", "sk_live_",
           "rk_test_", "glpat-", "AKIA", "ASIA", "eyJ", ".", "aws_secret_access_key",
           "x-goog-api-key", "://", "SK-", "\u212a", "\u017f", "\u0131"]


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from(_SHAPES), max_size=10))
def test_the_key_literal_precheck_never_skips_a_key_shape(parts: list[str]) -> None:
    """``may_hold_key`` (the literal precheck of ``redact_slice`` and ``redact``) is ``True``
    for every text, str or bytes, in which a key pattern matches (Kelvin sign and long s
    included: case-insensitive patterns fold them onto ASCII letters), so a snippet is
    scrubbed exactly as by every pattern in turn."""
    text = "".join(parts)
    raw = text.encode()
    if any(p.search(text) for p in _redact._SECRET_PATTERNS):
        assert _redact.may_hold_key(text)
    if any(p.search(raw) for p in _redact._SECRET_PATTERNS_BYTES):
        assert _redact.may_hold_key(raw)
    lo, hi = len(raw) // 3, max(len(raw) - 1, 0)
    spans = [(m.end(1) if p.groups else m.start(), m.end())
             for p in _redact._SECRET_PATTERNS_BYTES for m in p.finditer(raw)]
    if not any(b < hi and e > lo for b, e in spans):
        assert _redact.redact_slice(raw, lo, hi) == raw[lo:hi]


@pytest.mark.parametrize("key", [
    "gsk_" + "A1b2C3d4" * 6 + "Zz9Y",               # Groq
    "xai-" + "Q" * 10 + "w" * 40 + "7" * 30,         # xAI
    "pplx-" + "0123456789abcdef" * 3,                # Perplexity
    "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",   # Hugging Face
    "ghp_" + "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",  # GitHub classic
    "github_pat_11ABCDEFG0" + "x" * 72,              # GitHub fine-grained
    "AKIAIOSFODNN7EXAMPLE",                          # AWS access key id
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp",  # Slack
    "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",         # Stripe
    "glpat-" + "xYz12_AbCdEfGhIjKlMnO",              # GitLab
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
])
def test_other_platforms_key_shapes_are_scrubbed(key: str) -> None:
    """A key of another platform pasted into a prompt or returned by a tool is scrubbed from
    stored texts (captures, snippets) like a provider key, and so is its bytes form."""
    from stableprompt._redact import redact, redact_slice
    text = f'{{"tool_result": "token {key} here"}}'
    assert key not in redact(text) and "[REDACTED]" in redact(text)
    raw = text.encode()
    assert key.encode() not in redact_slice(raw, 0, len(raw))
    assert redact("see AKIAIOSFODNN7EXAMPLEX and hf_short and eyJnot.a.token") == \
        "see AKIAIOSFODNN7EXAMPLEX and hf_short and eyJnot.a.token"


def test_an_aws_secret_key_assignment_is_scrubbed() -> None:
    """A 40-character AWS secret access key has no prefix of its own: scrubbed where it is
    assigned (``aws_secret_access_key = ...``, as in an ~/.aws/credentials file a tool read)."""
    from stableprompt._redact import redact
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    for text in (f"aws_secret_access_key = {secret}", f'"AWS_SECRET_ACCESS_KEY": "{secret}"'):
        assert secret not in redact(text) and "[REDACTED]" in redact(text)


_NAME_PARTS = ["x-", "api", "-", "_", "key", "KEY", "Key", "goog-", "authorization",
               "AUTHORIZATION", "proxy-", "\n", " ", "k", "\u212a", "\u017f", "\u0131", "é"]


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from(_NAME_PARTS), max_size=6))
def test_the_secret_name_set_agrees_with_the_pattern(parts: list[str]) -> None:
    """``is_secret_name`` (a set look-up for ASCII names) decides as ``_SECRET_KEYS`` does,
    case, a final newline and non-ASCII case folding included."""
    name = "".join(parts)
    assert _redact.is_secret_name(name) == (_redact._SECRET_KEYS.match(name) is not None)


def test_credentials_after_a_tab_or_sent_twice_are_secrets() -> None:
    """A credential not shaped like a known key is scrubbed by value only, so it must be found
    however its header was written: a tab (or several spaces) after the scheme, or the header
    sent twice (httpx joins the values with ", "), each value a secret of its own (reviewer's
    finding: both stayed in stored request content)."""
    import httpx2

    key, other = "3f9a0c1d5e7b4a2f8c6d0e1f2a3b4c5d", "9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d"
    cases = [{"Authorization": f"Bearer\t{key}"}, {"authorization": f"bearer   {key} "},
             httpx2.Headers([("x-api-key", key), ("x-api-key", other)]),
             httpx2.Headers([("authorization", f"Bearer {key}"),
                             ("authorization", f"Token\t{other}")])]
    for headers in cases:
        secrets = _redact.secrets_in_headers(headers)
        text = _redact.redact(f"key {key} and {other}", secrets=secrets, fragments=False)
        assert key not in text, headers
        if "," in str(dict(headers.items())):
            assert other not in text, headers
    assert _redact.secrets_in_headers({"x-api-key": "short, tiny"}) == ("short, tiny",)


def _slice_by_whole_text(text: str, start: int, end: int) -> str:
    """The reference: ``text[start:end]`` with every key found in the whole text redacted
    (what ``redact_slice`` did before it searched a window)."""
    spans = sorted((max(m.end(1) if p.groups else m.start(), start), min(m.end(), end))
                   for p in _redact._SECRET_PATTERNS for m in p.finditer(text)
                   if (m.end(1) if p.groups else m.start()) < end and m.end() > start)
    parts, pos = [], start
    for begin, stop in spans:
        if stop <= pos:
            continue
        parts += [text[pos:begin]] if begin > pos else []
        parts.append("[REDACTED]")
        pos = stop
    return "".join([*parts, text[pos:end]])


@pytest.mark.parametrize("escape", ["\n", "\t", "\r"])
def test_a_key_after_a_json_escape_is_scrubbed(escape: str) -> None:
    """A key on its own line of a prompt or tool result is, in the request's JSON text,
    preceded by the letter of ``\\n`` (``\\t``, ``\\r``): it was not key-shaped there, so
    every divergence snippet (``divergences``, ``report --call``, the ledger's
    ``verdict_detail``) showed it in clear. Checked on the public ``divergences`` too."""
    from stableprompt import divergences, segment_request
    from stableprompt._redact import redact, redact_slice
    aws = "AKIAIOSFODNN7EXAMPLE"
    text = json.dumps({"text": f"key file:{escape}{ANTHROPIC_KEY}{escape}{aws}{escape}"})
    assert ANTHROPIC_KEY[8:30] not in redact(text) and aws not in redact(text)
    raw = text.encode()
    assert ANTHROPIC_KEY[8:30].encode() not in redact_slice(raw, 20, len(raw))
    assert redact("a nsk-ant-api03-not-a-key-but-a-word") == "a nsk-ant-api03-not-a-key-but-a-word"
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [
        {"role": "user", "content": f"cat .key{escape}{ANTHROPIC_KEY}{escape}v1"}]}
    later = json.loads(json.dumps(body).replace("v1", "v2"))
    found = divergences(segment_request("anthropic", body), segment_request("anthropic", later))
    assert found and all(ANTHROPIC_KEY[8:30] not in f"{d.snippet_a}{d.snippet_b}"
                         for d in found)


def test_a_key_cut_at_a_snippets_edge_is_scrubbed() -> None:
    """``redact_slice`` searches a window around the snippet, not the whole text: a key whose
    prefix lies before the snippet's start, one cut by its end, and a bearer token far longer
    than the window's context reaching into the snippet are all scrubbed, and the far text
    (a key 10 KB away) costs nothing."""
    filler = "plain words " * 1000
    long_token = "A" * (3 * _redact.KEY_CONTEXT)
    text = f"{filler}{ANTHROPIC_KEY} middle Authorization: Bearer {long_token} end {filler}"
    at = text.index(ANTHROPIC_KEY)
    for lo, hi in ((at + 10, at + 40),              # inside the key: its prefix is outside
                   (at - 30, at + 5),               # cut after "sk-ant"
                   (at - 30, at + 2),               # cut inside "sk-"
                   (text.index(long_token) + 2 * _redact.KEY_CONTEXT,
                    text.index(long_token) + 2 * _redact.KEY_CONTEXT + 40)):
        shown = _redact.redact_slice(text, lo, hi)
        assert shown == _slice_by_whole_text(text, lo, hi), (lo, hi)
        assert "[REDACTED]" in shown and ANTHROPIC_KEY[8:20] not in shown
        raw = text.encode()
        assert _redact.redact_slice(raw, lo, hi) == shown.encode()
    assert _redact.redact_slice(text, 0, 40) == text[:40]
    assert "AAAA" not in _redact.redact_slice(text, text.index(" end ") - 8, text.index(" end "))


_WINDOW_PARTS = [*_KEYISH, "x" * 300, " " * 3, "\n", ",", "Authorization: Bearer ", "sk-",
                 "0123456789abcdefghij" * 20, "api_key=", "https://user:pw@host"]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(_WINDOW_PARTS), max_size=12),
       cut=st.tuples(st.floats(0, 1), st.floats(0, 1)))
def test_the_snippet_window_finds_what_the_whole_text_finds(
        parts: list[str], cut: tuple[float, float]) -> None:
    """For any slice of a text of key-ish parts (runs longer than the context included),
    the windowed search redacts exactly what a search of the whole text does."""
    text = "".join(parts)
    lo, hi = sorted(int(f * len(text)) for f in cut)
    assert _redact.redact_slice(text, lo, hi) == _slice_by_whole_text(text, lo, hi)


def test_report_json_is_scrubbed_string_by_string(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``report --json`` scrubs each string of its output (keys of the ``sessions`` map
    included) instead of scanning the printed text: a key in a hand-edited ledger's session
    id, scenario and snippet never reaches stdout."""
    import sqlite3

    from stableprompt import UsageRecord

    db = tmp_path / "edited.db"
    ledger = Ledger(db)
    ledger.write(UsageRecord(wire_format="anthropic", provider="anthropic",
                             model="claude-sonnet-4-6", session_id="s", scenario="x",
                             input_tokens_total=2000, cache_read_tokens=0,
                             cache_write_tokens=2000, uncached_tokens=0, output_tokens=5,
                             verdict="client_mutation",
                             verdict_detail={"cause": "volatile-token", "lost_tokens": 10}))
    ledger.close()
    conn = sqlite3.connect(db)  # what the ledger never writes: keys in its strings
    conn.execute('UPDATE calls SET "gen_ai.conversation.id" = ?, scenario = ?, '
                 "verdict_detail = ?", (f"sess {ANTHROPIC_KEY}", f"sc {OPENAI_KEY}", json.dumps(
                     {"cause": "volatile-token", "lost_tokens": 10,
                      "snippet_a": f"key={OPENAI_KEY}", "snippet_b": "x"})))
    conn.commit()
    conn.close()
    assert main(["report", str(db), "--json", "--sessions"]) == 0
    out = capsys.readouterr().out
    assert _leaks(out) == [] and "[REDACTED]" in out
    assert json.loads(out)["calls"][0]["before"] == "key=[REDACTED]"
    data = {f"k {ANTHROPIC_KEY}": [f"v {OPENAI_KEY}", 1, None], "api_key": "plain-value-1234"}
    assert _redact.scrub_json_in_place(data) is data
    assert _leaks(json.dumps(data)) == [] and "plain-value" not in json.dumps(data)
