"""Tests for starting and stopping llama-server (``_engine._server``) with fake processes:
stop signals only a llama-server (on the right port), escalates to SIGKILL, and a server that
exits or never gets healthy is reported with its log and killed."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stableprompt import EngineError
from stableprompt._engine import _server
from stableprompt._engine._server import LlamaServer, is_llama_server, stop


def _spawn(code: str, *args: str, argv0: str = "llama-server") -> subprocess.Popen[bytes]:
    """A Python process whose /proc cmdline reads ``argv0 -c code args...``, ready to be
    signalled (it has installed its handlers) when this returns."""
    process = subprocess.Popen([argv0, "-c", f"import sys; {code}; print(1, flush=True); "
                                "import time; time.sleep(60)", *args],
                               executable=sys.executable, stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"1\n"
    return process


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test spawns, killed and reaped afterwards whatever happened."""
    spawned: list[subprocess.Popen[bytes]] = []
    yield spawned
    for process in spawned:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _server_of(process: subprocess.Popen[bytes], port: int) -> LlamaServer:
    return LlamaServer(base_url=f"http://127.0.0.1:{port}", pid=process.pid, port=port,
                       model_path=Path("m.gguf"), log_path=Path("l.log"), template="qwen2.5")


def test_stop_refuses_a_pid_that_is_not_a_llama_server(
        processes: list[subprocess.Popen[bytes]]) -> None:
    """A live process that is not llama-server is not signalled: engine-stop-refused."""
    other = _spawn("pass", argv0="python3")
    processes.append(other)
    with pytest.raises(EngineError, match=f"refusing to stop pid {other.pid}") as info:
        stop(other.pid)
    assert info.value.code == "engine-stop-refused"
    time.sleep(0.1)
    assert other.poll() is None


def test_stop_refuses_a_llama_server_on_another_port(
        processes: list[subprocess.Popen[bytes]]) -> None:
    """Given a LlamaServer, the pid must be a llama-server with that ``--port`` (a reused pid
    running another server is left alone)."""
    fake = _spawn("pass", "--port", "41000")
    processes.append(fake)
    assert is_llama_server(fake.pid) and is_llama_server(fake.pid, port=41000)
    assert not is_llama_server(fake.pid, port=41001)
    with pytest.raises(EngineError, match="not a llama-server on port 41001"):
        stop(_server_of(fake, 41001))
    assert fake.poll() is None
    assert stop(_server_of(fake, 41000)) is True
    assert fake.wait(5) == -15


def test_stop_escalates_to_sigkill(processes: list[subprocess.Popen[bytes]]) -> None:
    """A server ignoring SIGTERM is killed after ``timeout_s``."""
    stubborn = _spawn("import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)",
                      "--port", "41002")
    processes.append(stubborn)
    started = time.monotonic()
    assert stop(stubborn.pid, timeout_s=0.3) is True
    assert 0.3 <= time.monotonic() - started < 5
    assert stubborn.wait(5) == -9


def test_stop_of_a_gone_pid_is_false(processes: list[subprocess.Popen[bytes]]) -> None:
    """A pid that no longer runs (exited, reaped or not) is reported as already gone."""
    done = _spawn("pass")
    processes.append(done)
    done.kill()
    time.sleep(0.1)  # a zombie until reaped: its cmdline is empty
    assert stop(done.pid) is False
    done.wait()
    assert stop(done.pid) is False


@pytest.fixture
def fake_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache whose installed llama-server is a shell script the test writes."""
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "cache"))
    binary = tmp_path / "cache" / "llama" / "0.3.36" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    return binary


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_a_server_that_exits_is_reported_with_its_log(fake_binary: Path,
                                                      tmp_path: Path) -> None:
    """serve() raises engine-start-failed with the exit status, the log path and its last
    lines; the arguments it passed are the documented ones."""
    _script(fake_binary, 'echo "args: $*"; echo "error: failed to load model" >&2; exit 3')
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    before = dict(_server._CHILDREN)  # a session's real server may be running
    with pytest.raises(EngineError) as info:
        _server.serve(model, port=41003, ctx_size=4096, slots=2, cache_ram_mib=-1,
                      extra_args=("--seed", "7"))
    assert info.value.code == "engine-start-failed"
    text = str(info.value)
    assert "exited with status 3" in text and "error: failed to load model" in text
    assert (f"args: -m {model} --host 127.0.0.1 --port 41003 -c 4096 -t 2 -np 2 --cache-ram -1 "
            "--jinja --no-webui --seed 7") in text
    assert str(fake_binary.parent.parent / "logs" / "server-41003.log") in text
    assert dict(_server._CHILDREN) == before  # the failed one was reaped


def test_a_server_that_never_gets_healthy_is_killed(fake_binary: Path, tmp_path: Path) -> None:
    """When /health does not answer 200 in time, the process is killed (its pid is gone) and
    the error says so."""
    _script(fake_binary, "echo loading; exec sleep 60")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    before = dict(_server._CHILDREN)
    started = time.monotonic()
    with pytest.raises(EngineError, match=r"did not answer 200 within 0\.5 s") as info:
        _server.serve(model, startup_timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert "loading" in str(info.value)
    assert dict(_server._CHILDREN) == before  # the failed one was reaped


def test_a_missing_model_file_is_named(fake_binary: Path, tmp_path: Path) -> None:
    """serve() with a model path that does not exist fails before starting anything."""
    _script(fake_binary, "exit 0")
    with pytest.raises(EngineError, match="does not exist") as info:
        _server.serve(tmp_path / "nope.gguf")
    assert info.value.code == "engine-start-failed"


def test_state_round_trips_and_garbage_reads_as_none(fake_binary: Path) -> None:
    """server.json holds pid, port, base_url, model, log and template; a damaged file reads as
    no record, and clearing twice is fine."""
    server = LlamaServer(base_url="http://127.0.0.1:5", pid=12, port=5,
                         model_path=Path("/m.gguf"), log_path=Path("/l.log"),
                         template="hermes-3")
    path = _server.write_state(server)
    assert path == fake_binary.parent.parent.parent / "server.json"
    assert _server.read_state() == server
    assert set(server.to_json()) == {"pid", "port", "base_url", "model", "log", "template"}
    assert server.openai_base_url == "http://127.0.0.1:5/v1"
    path.write_text("{not json")
    assert _server.read_state() is None
    _server.clear_state()
    _server.clear_state()
    assert _server.read_state() is None
