"""The peers' virtualenvs (``tests/peer_envs.py``): where they live, reuse without pip, and
the line between "registry unreachable" (the ``peers`` tests skip) and "pip failed on a
reachable registry" (they fail), checked offline against loopback indexes."""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
import threading
import venv
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import peer_envs


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private stableprompt cache and a pip that reads no configuration but ours."""
    root = tmp_path / "cache"
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(root))
    for key in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_RETRIES", "1")  # pip names a network error only when it retries
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    return root


@pytest.fixture
def empty_index(tmp_path: Path) -> Iterator[str]:
    """A reachable package index on loopback that has no project (404 for every page)."""
    (tmp_path / "index").mkdir()

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(tmp_path / "index"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_venv_dir_is_keyed_by_requirements_under_the_cache(cache: Path) -> None:
    """One directory per peer, pins and extras, under ``<cache>/peers``; the same inputs name
    the same directory, an extra requirement another one."""
    plain = peer_envs.venv_dir("litellm")
    assert plain.parent == cache / "peers" and plain.name.startswith("litellm-")
    assert peer_envs.venv_dir("litellm") == plain
    assert peer_envs.venv_dir("litellm", ("pyperf==2.11.0",)) != plain
    assert peer_envs.venv_dir("langchain") != plain
    with pytest.raises(KeyError, match="unknown peer 'crewai'"):
        peer_envs.venv_dir("crewai")


def test_a_complete_virtualenv_is_reused_without_pip(cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory whose ``.installed`` lists exactly the requirements is returned as it is:
    no virtualenv is made and pip is not run."""
    where = peer_envs.venv_dir("pydantic_ai")
    (where / "bin").mkdir(parents=True)
    (where / "bin" / "python").symlink_to(sys.executable)
    (where / ".installed").write_text("\n".join(peer_envs.PEERS["pydantic_ai"]) + "\n")

    def no_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("pip was run for a complete virtualenv")

    monkeypatch.setattr(subprocess, "run", no_run)
    monkeypatch.setattr(venv, "EnvBuilder", no_run)
    assert peer_envs.peer_python("pydantic_ai") == where / "bin" / "python"


def test_an_unreachable_registry_is_reported_as_unreachable(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip against an index nobody answers on: ``PeerEnvError`` with ``unreachable`` and
    pip's network error in the reason; no ``.installed`` marker is left behind."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    try:
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed.getsockname()[1]}/")
        with pytest.raises(peer_envs.PeerEnvError) as caught:
            peer_envs.peer_python("langchain")
    finally:
        closed.close()
    assert caught.value.unreachable and caught.value.peer == "langchain"
    assert "langchain-anthropic==1.7.10" in caught.value.reason
    assert "Connection refused" in caught.value.reason
    assert not (peer_envs.venv_dir("langchain") / ".installed").exists()


def test_a_failure_on_a_reachable_registry_is_not_unreachable(
        cache: Path, empty_index: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip against an index that answers but has no such project: ``unreachable`` is false
    (the ``peers`` tests fail instead of skipping) and the reason is pip's error line."""
    monkeypatch.setenv("PIP_INDEX_URL", empty_index)
    with pytest.raises(peer_envs.PeerEnvError) as caught:
        peer_envs.peer_python("langchain")
    assert not caught.value.unreachable
    assert caught.value.reason.startswith("pip install failed (exit 1): Could not find a "
                                          "version that satisfies the requirement "
                                          "langchain-anthropic==1.7.10")
    assert not (peer_envs.venv_dir("langchain") / ".installed").exists()
