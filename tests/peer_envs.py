"""The peers' virtualenvs: Pydantic AI, LiteLLM and LangChain Anthropic at pinned versions,
each in its own virtualenv, created once per machine and shared by the render benchmark
(``benchmarks/run.py``, with pyperf added) and the proxy tests marked ``peers``
(``tests/test_proxy_peers.py``); and the Python harnesses from PyPI (:data:`HARNESSES`: the
OpenAI Agents SDK and aider) run by ``tests/test_harness_pypi.py`` (marker ``harness``).

Layout (outside the repository, so a fresh clone or CI reuses what an earlier run made)::

    <stableprompt cache>/peers/<peer>-<key>/      a virtualenv (``_cache.cache_root()``)
        .installed                                 the requirements, written last
    <stableprompt cache>/peers/<peer>-<key>.lock   held while one process creates it

``key`` is 12 hex digits of SHA-256 over the requirements and the base interpreter's version
and path: another pin, another extra or another Python gives another virtualenv, never a
half-matching one. pip's own wheel cache (``~/.cache/pip``) makes a re-creation cheap.

Failures (:class:`PeerEnvError`) say whether the package registry was unreachable (pip's
network error: callers skip) or pip failed on a reachable registry (a wrong pin, a build
failure: callers fail), with pip's error line as the reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator, Sequence
from pathlib import Path

from stableprompt._cache import cache_root, pip_reason

__all__ = ["HARNESSES", "PEERS", "PeerEnvError", "locked", "peer_python", "venv_dir"]

PEERS: dict[str, tuple[str, ...]] = {  # peer -> pinned requirements (checked 2026-12-01 on PyPI)
    "pydantic_ai": ("pydantic-ai-slim[anthropic]==2.68.0",),
    "litellm": ("litellm==1.110.2",),
    "langchain": ("langchain-anthropic==1.7.10",),
}

HARNESSES: dict[str, tuple[str, ...]] = {  # harness -> pinned requirements (PyPI, 2026-12-07)
    "openai_agents": ("openai-agents==0.24.0",),
    "aider": ("aider-chat==0.86.2",),
}
"""Python agent harnesses from PyPI, in virtualenvs made the same way as the peers'."""

_ALL: dict[str, tuple[str, ...]] = {**PEERS, **HARNESSES}

_PIP_TIMEOUT_S = 900.0
#: pip's words for "could not reach the index" (its retry warnings and final errors).
_NETWORK = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Name or service not known"
    r"|Temporary failure in name resolution|No route to host|Network is unreachable"
    r"|Connection refused|ConnectTimeoutError|Read timed out|ProxyError"
    r"|certificate verify failed|Could not fetch URL", re.IGNORECASE)


class PeerEnvError(RuntimeError):
    """A peer's virtualenv could not be created.

    Attributes:
        peer: The peer (a :data:`PEERS` or :data:`HARNESSES` key).
        reason: pip's error line (``_cache.pip_reason``), or why pip could not run.
        unreachable: The package registry could not be reached (pip reported a network
            error); ``False`` for a failure on a reachable registry.
    """

    def __init__(self, peer: str, reason: str, *, unreachable: bool) -> None:
        super().__init__(f"{peer} ({' '.join(_ALL[peer])}): {reason}")
        self.peer, self.reason, self.unreachable = peer, reason, unreachable


def _requirements(peer: str, extra: Sequence[str]) -> list[str]:
    if peer not in _ALL:
        raise KeyError(f"unknown peer {peer!r}: one of {', '.join(sorted(_ALL))}")
    return [*_ALL[peer], *extra]


def venv_dir(peer: str, extra: Sequence[str] = ()) -> Path:
    """Where the virtualenv of ``peer`` (plus the ``extra`` requirements) lives; nothing is
    created here.

    Raises:
        KeyError: ``peer`` is not in :data:`PEERS` or :data:`HARNESSES`.
    """
    base = getattr(sys, "_base_executable", sys.executable)
    text = "\n".join([*_requirements(peer, extra), sys.version, base])
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    return cache_root() / "peers" / f"{peer}-{key}"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (made with its folder when missing), held across
    processes while a cache entry is installed (pytest-xdist workers, parallel runs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def peer_python(peer: str, extra: Sequence[str] = ()) -> Path:
    """The interpreter of the virtualenv of ``peer`` with its pinned requirements and
    ``extra`` ones, creating the virtualenv first when it is missing or incomplete (minutes
    the first time on a machine; a check of one file afterwards).

    Raises:
        KeyError: ``peer`` is not in :data:`PEERS` or :data:`HARNESSES`.
        PeerEnvError: pip failed; ``unreachable`` says whether the registry was the cause.
    """
    where = venv_dir(peer, extra)
    wanted = "\n".join(_requirements(peer, extra)) + "\n"
    marker, python = where / ".installed", where / "bin" / "python"
    if marker.is_file() and marker.read_text() == wanted and python.exists():
        return python
    with locked(where.with_name(where.name + ".lock")):
        if marker.is_file() and marker.read_text() == wanted and python.exists():
            return python  # another process made it while this one waited
        shutil.rmtree(where, ignore_errors=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(where)
        command = [str(python), "-m", "pip", "install", "--quiet", "--no-input",
                   "--disable-pip-version-check", *_requirements(peer, extra)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False,
                                  timeout=_PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise PeerEnvError(peer, f"pip install timed out after {_PIP_TIMEOUT_S:.0f} s",
                               unreachable=True) from exc
        if done.returncode:
            output = f"{done.stdout}\n{done.stderr}"
            raise PeerEnvError(peer, f"pip install failed (exit {done.returncode}): "
                               f"{pip_reason(output)}",
                               unreachable=_NETWORK.search(output) is not None)
        marker.write_text(wanted)
    return python
