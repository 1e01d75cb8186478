"""``stableprompt proxy --stabilize --cache-policy FILE``: the forwarded bodies carry the
policy's TTLs, the emulator writes 1-hour entries for them, and bad input is refused."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from conftest import proxy_process
from stableprompt import CachePolicy, Ledger, Recorder
from stableprompt._cli import main
from stableprompt._proxy._server import Proxy
from stableprompt.emulator import Emulator, FakeClock

A_KEY = "sk-ant-api03-cachepolicytest-0123456789abcdef"
MODEL = "claude-sonnet-4-6"
SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))


class Spy(httpx.AsyncBaseTransport):
    """Sends through a real transport and keeps every request body it forwarded."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bodies: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        if request.url.path.endswith("/messages"):
            self.bodies.append(json.loads(body))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def body(question: Any = "hi", **extra: Any) -> dict[str, Any]:
    """A Messages body with no breakpoint (``--stabilize`` places them)."""
    return {"model": MODEL, "max_tokens": 16, "system": [{"type": "text", "text": SYSTEM}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": question}]}],
            **extra}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


def test_proxy_gives_placed_breakpoints_the_policy_ttls(emu: Emulator) -> None:
    """``1h`` head + ``5m`` history through the proxy: the forwarded system block carries
    ``ttl: 1h``, the last block a 5-minute marker; the emulator reports the head's tokens as
    ``ephemeral_1h_input_tokens``, the ledger row as ``cache_write_1h_tokens``; 10 minutes
    later the head (1 hour) is still read, the history (5 minutes) is not."""
    spy = Spy()
    recorder = Recorder(clock=emu.clock)
    policy = CachePolicy(head="1h", history="5m")
    with Proxy(emu.base_url, recorder=recorder, transport=spy, stabilize=True,
               cache_policy=policy) as proxy, \
            anthropic.Anthropic(base_url=proxy.base_url, api_key=A_KEY, max_retries=0,
                                default_headers={"x-stableprompt-session": "s"}) as client:
        first = client.messages.create(**body())
        emu.advance(600)
        second = client.messages.create(**body())
    sent = spy.bodies[0]
    assert sent["system"][-1]["cache_control"] == {"ttl": "1h", "type": "ephemeral"}
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    created = first.usage.cache_creation
    assert created is not None
    assert created.ephemeral_1h_input_tokens > 1024  # the system prompt, at 1 hour
    assert created.ephemeral_5m_input_tokens > 0  # the message, at 5 minutes
    assert first.usage.cache_creation_input_tokens == \
        created.ephemeral_1h_input_tokens + created.ephemeral_5m_input_tokens
    one, two = recorder.records
    assert one.verdict_detail["stabilized"] == ["head-breakpoint", "history-breakpoint"]
    assert one.cache_write_1h_tokens == created.ephemeral_1h_input_tokens
    # 600 s later: the 1-hour head is read, the 5-minute history was rewritten
    assert second.usage.cache_read_input_tokens == created.ephemeral_1h_input_tokens
    assert two.cache_read_tokens == created.ephemeral_1h_input_tokens


def test_proxy_gives_a_clients_unset_markers_the_policy_ttl(emu: Emulator) -> None:
    """A client that marks its system and last block itself, without ``ttl``: under a
    ``1h`` policy both are forwarded with ``ttl: 1h`` (``breakpoint-ttl`` on the row), and
    every written token is a 1-hour write; a marker with its own ``ttl`` is forwarded as
    sent."""
    spy = Spy()
    recorder = Recorder()
    own = body()
    own["system"][-1]["cache_control"] = {"type": "ephemeral"}
    own["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    explicit = body("explicit")
    explicit["system"][-1]["cache_control"] = {"type": "ephemeral", "ttl": "5m"}
    with Proxy(emu.base_url, recorder=recorder, transport=spy, stabilize=True,
               cache_policy=CachePolicy(head="1h", history="1h")) as proxy, \
            anthropic.Anthropic(base_url=proxy.base_url, api_key=A_KEY,
                                max_retries=0) as client:
        reply = client.messages.create(**own)
        client.messages.create(**explicit)
    assert spy.bodies[0]["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert spy.bodies[0]["messages"][-1]["content"][-1]["cache_control"] == \
        {"type": "ephemeral", "ttl": "1h"}
    assert spy.bodies[1] == explicit
    created = reply.usage.cache_creation
    assert created is not None and created.ephemeral_5m_input_tokens == 0
    assert created.ephemeral_1h_input_tokens == reply.usage.cache_creation_input_tokens > 1024
    first, second = recorder.records
    assert first.verdict_detail["stabilized"] == ["breakpoint-ttl"]
    assert "stabilized" not in second.verdict_detail


def _wait_listening(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    deadline = time.monotonic() + 10  # the banner comes just before uvicorn listens
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
            return
        except ConnectionRefusedError:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_cli_cache_policy_file_reaches_the_emulator(tmp_path: Path, emu: Emulator) -> None:
    """The real command with ``--stabilize --cache-policy FILE``: the ledger row of one call
    holds 1-hour writes and names the breakpoints placed."""
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"name": "long head", "head": "1h", "history": "5m"}))
    db = tmp_path / "calls.db"
    with proxy_process(emu.base_url, db, "--stabilize", "--cache-policy", str(policy),
                       "--quiet") as (proc, url):
        _wait_listening(url)
        with anthropic.Anthropic(base_url=url, api_key=A_KEY, max_retries=0) as client:
            reply = client.messages.create(**body())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 143
    created = reply.usage.cache_creation
    assert created is not None and created.ephemeral_1h_input_tokens > 1024
    with Ledger(db, read_only=True) as ledger:
        (row,) = list(ledger.iter_records())
    assert row.cache_write_1h_tokens == created.ephemeral_1h_input_tokens
    assert row.verdict_detail["stabilized"] == ["head-breakpoint", "history-breakpoint"]


@pytest.mark.parametrize(("content", "needle"), [
    (None, "cannot read cache policy"),
    ("{not json", "invalid cache policy"),
    (json.dumps({"head": "5m", "history": "1h"}), "longer TTLs must come first"),
    (json.dumps({"head": "2h"}), "invalid cache policy"),
    (json.dumps({"head": "30m"}), "not one Anthropic breakpoints take"),
    pytest.param('{"head": "1h"}'.encode("utf-16"), "UTF-16 byte-order mark", id="utf-16"),
    pytest.param('{"name": "caf\u00e9"}'.encode("latin-1"),
                 "is not UTF-8 (byte offset 13)", id="latin-1"),
])
def test_cli_refuses_an_invalid_policy_file_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes | None,
        needle: str) -> None:
    """A missing, malformed, not UTF-8 or invalid policy file (TTL order, an unknown label,
    a TTL Anthropic breakpoints do not take) exits 2 before listening, one line naming the
    file; no ledger is created."""
    path = tmp_path / "policy.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    status = main(["proxy", "--upstream", "http://127.0.0.1:9", "--port", "0", "--stabilize",
                   "--cache-policy", str(path), "--ledger", str(tmp_path / "l.db")])
    err = capsys.readouterr().err
    assert status == 2
    assert str(path) in err and needle in err and err.count("\n") == 1
    assert not (tmp_path / "l.db").exists()


def test_cli_cache_policy_needs_stabilize(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``--cache-policy`` without ``--stabilize`` is a usage error (exit 2), before the file
    is even read."""
    status = main(["proxy", "--upstream", "http://127.0.0.1:9", "--port", "0",
                   "--cache-policy", str(tmp_path / "missing.json"),
                   "--ledger", str(tmp_path / "l.db")])
    err = capsys.readouterr().err
    assert status == 2 and "--cache-policy" in err and "--stabilize" in err
    assert not (tmp_path / "l.db").exists()


def test_cli_an_openai_upstream_takes_its_own_ttl_labels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """Behind ``--provider openai`` a ``30m`` policy is not refused (no Anthropic body goes
    there; the check is for Anthropic upstreams): the proxy gets as far as binding."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"head": "30m"}))

    def no_bind(host: str, port: int) -> socket.socket:
        raise OSError(98, "Address already in use")

    monkeypatch.setattr("stableprompt._proxy._server.bind", no_bind)
    status = main(["proxy", "--upstream", "http://127.0.0.1:9", "--port", "0", "--stabilize",
                   "--provider", "openai", "--cache-policy", str(path),
                   "--ledger", str(tmp_path / "l.db")])
    assert status == 1 and "cannot listen" in capsys.readouterr().err


class _NoServer:
    """Stands in for the uvicorn server: returns at once, so the command prints its banner
    and exits."""

    def run(self, sockets: list[socket.socket]) -> None:
        return None


@pytest.mark.parametrize(("provider", "shown"), [
    ("openai", "cache policy 1h head + 5m history (no effect on a openai upstream: only "
               "Anthropic Messages breakpoints get its TTLs)"),
    ("anthropic", "cache policy 1h head + 5m history);"),
])
def test_cli_banner_says_when_the_policy_has_no_effect(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        provider: str, shown: str) -> None:
    """With an OpenAI upstream the banner still names the policy but says, on its one line,
    that it changes nothing there (the stabilizer times Anthropic breakpoints only)."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"head": "1h", "history": "5m"}))
    monkeypatch.setattr("stableprompt._proxy._server.server_for",
                        lambda app, **kwargs: _NoServer())
    status = main(["proxy", "--upstream", "http://127.0.0.1:9", "--port", "0", "--stabilize",
                   "--provider", provider, "--cache-policy", str(path),
                   "--ledger", str(tmp_path / "l.db")])
    out = capsys.readouterr().out
    assert status == 0 and out.count("\n") == 1 and shown in out


def test_cli_refuses_an_explicit_cache_policy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """``explicit_cache`` (Gemini's ``cachedContents``) has no effect in the stabilizer:
    exit 2 before listening, naming the file and GeminiCache."""
    monkeypatch.setattr("stableprompt._proxy._server.server_for",
                        lambda app, **kwargs: _NoServer())  # a regression returns, not serves
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"explicit_cache": True}))
    status = main(["proxy", "--upstream", "http://127.0.0.1:9", "--port", "0", "--stabilize",
                   "--cache-policy", str(path), "--ledger", str(tmp_path / "l.db")])
    err = capsys.readouterr().err
    assert status == 2 and str(path) in err and "GeminiCache" in err
    assert "cache-policy-explicit-cache" in err and not (tmp_path / "l.db").exists()
