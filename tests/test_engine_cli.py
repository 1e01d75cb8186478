"""Tests for ``stableprompt engine`` without a real server: records, messages, exit codes
(the real serve/status/stop round trip is in ``test_engine_real``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from stableprompt._cli import main
from stableprompt._engine import _model, _server
from stableprompt._engine._server import LlamaServer


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache."""
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def fake_server() -> Iterator[subprocess.Popen[bytes]]:
    """A process that looks like ``llama-server --port 41010`` in /proc (Python, sleeping)."""
    process = subprocess.Popen(["llama-server", "-c", "print(1, flush=True); import time; "
                                "time.sleep(60)", "--port", "41010"],
                               executable=sys.executable, stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"1\n"
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()
    process.stdout.close()


def _record(pid: int, port: int = 41010) -> LlamaServer:
    return LlamaServer(base_url=f"http://127.0.0.1:{port}", pid=pid, port=port,
                       model_path=Path("/m.gguf"), log_path=Path("/l.log"), template="qwen2.5")


def test_stop_and_status_without_a_record(cache: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """With no server recorded, ``stop`` and ``status`` say so; stop exits 0, status 3 (LSB:
    not running)."""
    assert main(["engine", "stop"]) == 0
    assert main(["engine", "status"]) == 3
    assert capsys.readouterr().out.splitlines() == ["no engine server is recorded"] * 2
    assert main(["engine", "status", "--json"]) == 3
    assert json.loads(capsys.readouterr().out) == {"running": False, "server": None}


def test_status_and_stop_of_a_recorded_server(cache: Path, fake_server: subprocess.Popen[bytes],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``status`` reports a recorded llama-server as running (not answering /health here);
    ``stop`` ends it and removes the record."""
    _server.write_state(_record(fake_server.pid))
    assert main(["engine", "status"]) == 4
    assert "running, not answering /health" in capsys.readouterr().out
    assert main(["engine", "stop", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stopped"] is True and out["server"]["pid"] == fake_server.pid
    assert fake_server.wait(5) == -15
    assert _server.read_state() is None


def test_a_stale_record_is_reported_and_cleared(cache: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A record whose pid is now another process: ``status`` says not running; ``stop``
    refuses to signal it (exit 1, one line) and removes the record."""
    _server.write_state(_record(os.getpid()))
    assert main(["engine", "status"]) == 1
    assert "not running (stale record" in capsys.readouterr().out
    assert main(["engine", "stop"]) == 1
    err = capsys.readouterr().err
    assert "refusing to stop pid" in err and "stale record was removed" in err
    assert len(err.strip().splitlines()) == 1
    assert _server.read_state() is None


def test_serve_refuses_while_the_recorded_server_runs(
        cache: Path, fake_server: subprocess.Popen[bytes],
        capsys: pytest.CaptureFixture[str]) -> None:
    """``serve`` with a live recorded server exits 1 and says to stop it first."""
    _server.write_state(_record(fake_server.pid))
    assert main(["engine", "serve"]) == 1
    assert "already running at http://127.0.0.1:41010" in capsys.readouterr().err
    assert fake_server.poll() is None


def test_bad_options_are_usage_errors(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Out-of-range options exit 2 naming the option."""
    assert main(["engine", "serve", "--port", "70000"]) == 2
    assert "port must be 0..65535" in capsys.readouterr().err
    assert main(["engine", "serve", "--cache-ram", "-2"]) == 2
    assert "--cache-ram" in capsys.readouterr().err
    assert main(["engine"]) == 2


def _no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_build(**_kwargs: object) -> Path:
        raise AssertionError("built before the template was checked")

    monkeypatch.setattr(_server, "build_server", no_build)


def _unblock_a_reader(fifo: Path, stop: threading.Event) -> None:
    """Open ``fifo`` for writing as soon as something opened it for reading (then close it:
    the reader sees end of file), so code that blocks on opening it returns instead of
    hanging the test."""
    while not stop.is_set():
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: no reader yet
            stop.wait(0.05)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory", "too-large"])
def test_serve_refuses_a_template_that_is_no_regular_file_of_bounded_size(
        kind: str, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--template`` naming /dev/zero (read forever: MemoryError), a FIFO (blocks on open), a
    directory or a file over MAX_TEMPLATE_BYTES is refused at once with one line naming the
    path (engine-template-invalid), before anything is built."""
    _no_build(monkeypatch)
    path = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "t.jinja",
            "directory": tmp_path / "d.jinja", "too-large": tmp_path / "big.jinja"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "too-large":
        path.write_text("{{ messages }}" + " " * _model.MAX_TEMPLATE_BYTES)
    stop = threading.Event()
    guard = threading.Thread(target=_unblock_a_reader, args=(path, stop), daemon=True)
    if kind == "fifo":
        guard.start()
    try:
        assert main(["engine", "serve", "--json", "--template", str(path)]) == 1
    finally:
        stop.set()
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["code"] == "engine-template-invalid" and str(path) in error["message"]
    assert ("not a regular file" if kind != "too-large" else "bytes") in error["message"]
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
