"""Start and stop ``llama-server`` on loopback, and remember the detached one of the CLI.

:func:`serve` runs the built binary (:func:`._build.build_server`) on a model (default: the
tiny one of :func:`._model.write_model`) as::

    llama-server -m MODEL --host 127.0.0.1 --port P -c 16384 -t 2 -np 1 --cache-ram 0 \
        --jinja --no-webui [EXTRA_ARGS...]

in a new session (its own process group, so a Ctrl-C in the caller's terminal does not reach
it), with stdout and stderr in ``<cache>/llama/0.3.36/logs/server-<port>.log``, and waits for
``GET /health`` to answer 200. One slot and no host-memory prompt cache (``-np 1
--cache-ram 0``) make the cache exactly "the previous request's tokens plus what was
decoded" (ENGINES.md); ``--jinja`` renders the model's embedded chat template, tools included.
Every flag is checked against llama.cpp ``common/arg.cpp`` of this version (``--cache-ram`` is
in MiB, ``0`` disables it; ``--no-webui`` turns the web UI off). Ready in well under a second.

:func:`stop` sends SIGTERM, waits, then SIGKILL, and only to a pid whose ``/proc/PID/cmdline``
is a ``llama-server`` (listening on the server's port, when given a :class:`LlamaServer`): a
pid reused by another process is never signalled.

``stableprompt engine serve`` records its detached server in ``<cache>/llama/server.json``
(:func:`write_state`, :func:`read_state`, :func:`clear_state`)::

    {"pid": int, "port": int, "base_url": "http://127.0.0.1:<port>", "model": path,
     "log": path, "template": name}

Sources: llama.cpp ``tools/server/README.md`` (``/health`` is 503 while loading, 200 when
ready), ``common/arg.cpp`` (flags).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .._exceptions import EngineError
from ._build import build_server, engine_dir, version_dir
from ._model import check_template, write_model

__all__ = [
    "LlamaServer",
    "clear_state",
    "free_port",
    "is_llama_server",
    "read_state",
    "serve",
    "state_path",
    "stop",
    "write_state",
]

_HOST = "127.0.0.1"
_LOG_TAIL_LINES = 20
#: Popen objects of the servers this process started, by pid: reaped on stop (a zombie would
#: still answer ``kill(pid, 0)``), and kept referenced while they run.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class LlamaServer:
    """A running ``llama-server`` started by :func:`serve`.

    Attributes:
        base_url: ``"http://127.0.0.1:<port>"``; the OpenAI-compatible API is under
            ``/v1`` (:attr:`openai_base_url`), Anthropic's ``/v1/messages`` too.
        pid: Process id (a session leader: its own process group).
        port: TCP port on 127.0.0.1.
        model_path: The GGUF it serves.
        log_path: Its stdout and stderr.
        template: Chat template name (``"qwen2.5"``, ...) or path, as given to :func:`serve`.
    """

    base_url: str
    pid: int
    port: int
    model_path: Path
    log_path: Path
    template: str

    @property
    def openai_base_url(self) -> str:
        """``base_url + "/v1"``, the ``base_url`` the OpenAI SDK takes."""
        return f"{self.base_url}/v1"

    def to_json(self) -> dict[str, Any]:
        """The ``server.json`` object (see the module docstring)."""
        return {"pid": self.pid, "port": self.port, "base_url": self.base_url,
                "model": str(self.model_path), "log": str(self.log_path),
                "template": self.template}

    @classmethod
    def from_json(cls, data: Any) -> LlamaServer:
        """The inverse of :meth:`to_json`.

        Raises:
            ValueError: ``data`` is not such an object.
        """
        try:
            return cls(base_url=str(data["base_url"]), pid=int(data["pid"]),
                       port=int(data["port"]), model_path=Path(data["model"]),
                       log_path=Path(data["log"]), template=str(data.get("template", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a server record: {exc}") from exc


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((_HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def _cmdline(pid: int) -> list[str] | None:
    """``/proc/PID/cmdline`` as arguments; ``None`` when there is no such process (or it
    is a zombie, whose cmdline is empty)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError as exc:
        raise EngineError(f"cannot read /proc/{pid}/cmdline to check what pid {pid} is: {exc}",
                          code="engine-stop-refused") from exc
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part] or None


def is_llama_server(pid: int, *, port: int | None = None) -> bool:
    """Whether ``pid`` is a live ``llama-server`` (its argv[0]'s name), listening on ``port``
    when given (its ``--port`` argument). Linux only (``/proc``)."""
    argv = _cmdline(pid)
    if not argv or Path(argv[0]).name != "llama-server":
        return False
    if port is None:
        return True
    return any(a == "--port" and b == str(port) for a, b in itertools.pairwise(argv))


def _gone(pid: int) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is None:
            return False
        del _CHILDREN[pid]
        return True
    return _cmdline(pid) is None


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if _gone(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def stop(server_or_pid: LlamaServer | int, *, timeout_s: float = 10.0) -> bool:
    """Stop a ``llama-server``: SIGTERM, up to ``timeout_s`` seconds, then SIGKILL.

    Args:
        server_or_pid: What :func:`serve` returned, or a pid.
        timeout_s: Seconds to wait after SIGTERM (and again after SIGKILL).

    Returns:
        ``True`` when it was running and is gone now, ``False`` when it was already gone.

    Raises:
        EngineError: ``pid`` is a live process but not a ``llama-server`` (on the server's
            port, for a :class:`LlamaServer`), or ``/proc`` cannot tell (code
            ``engine-stop-refused``): it is not signalled; or it survived SIGKILL
            (``engine-stop-refused`` too).
    """
    if isinstance(server_or_pid, LlamaServer):
        pid, port = server_or_pid.pid, server_or_pid.port
    else:
        pid, port = int(server_or_pid), None
    if _gone(pid):
        return False
    if not is_llama_server(pid, port=port):
        if _gone(pid):  # it exited between the two looks
            return False
        what = " ".join(_cmdline(pid) or ["?"])[:200]
        expected = "llama-server" + (f" on port {port}" if port is not None else "")
        raise EngineError(f"refusing to stop pid {pid}: it is not a {expected} ({what!r})",
                          code="engine-stop-refused")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if _wait_gone(pid, timeout_s):
            return True
    raise EngineError(f"llama-server pid {pid} survived SIGKILL for {timeout_s:.0f} s",
                      code="engine-stop-refused")


def _health(client: httpx.Client, base_url: str) -> int | None:
    try:
        return client.get(f"{base_url}/health").status_code
    except httpx.HTTPError:
        return None


def serve(
    model: str | os.PathLike[str] | None = None,
    *,
    template: str = "qwen2.5",
    port: int = 0,
    ctx_size: int = 16384,
    threads: int = 2,
    slots: int = 1,
    cache_ram_mib: int = 0,
    extra_args: Sequence[str] = (),
    startup_timeout_s: float = 60.0,
) -> LlamaServer:
    """Start ``llama-server`` on 127.0.0.1 and wait until ``GET /health`` answers 200.

    Builds the server first when it is not in the cache (:func:`._build.build_server`, minutes)
    and writes the tiny model when ``model`` is ``None`` (:func:`._model.write_model`,
    seconds). The process outlives this call; stop it with :func:`stop`.

    Args:
        model: A GGUF file; ``None`` serves the tiny model with chat template ``template``.
        template: The tiny model's chat template (``"qwen2.5"``, ``"mistral-nemo"``,
            ``"hermes-3"`` or a ``.jinja`` path); recorded as given when ``model`` is set (the
            model's own template is then used).
        port: TCP port; ``0`` picks a free one.
        ctx_size: Context size in tokens (``-c``), shared by all slots.
        threads: CPU threads (``-t``).
        slots: Parallel slots (``-np``); 1 makes the cache "the previous request".
        cache_ram_mib: Host-memory prompt cache in MiB (``--cache-ram``; 0 disables it,
            -1 is unlimited).
        extra_args: More ``llama-server`` arguments, appended last.
        startup_timeout_s: Seconds to wait for ``/health`` == 200.

    Returns:
        The running :class:`LlamaServer`.

    Raises:
        EngineError: The process exited, or ``/health`` did not answer 200 in time (code
            ``engine-start-failed``; the process is killed and the message holds the log's
            last 20 lines and its path); see :func:`._build.build_server` and
            :func:`._model.write_model` for the build and model errors.
    """
    if model is None:
        check_template(template)  # a wrong file fails now, not after a build of minutes
    binary = build_server()
    model_path = Path(model) if model is not None else write_model(template)
    if not model_path.is_file():
        raise EngineError(f"model file {str(model_path)!r} does not exist",
                          code="engine-start-failed")
    port = port or free_port()
    logs = version_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"server-{port}.log"
    command = [
        str(binary), "-m", str(model_path), "--host", _HOST, "--port", str(port),
        "-c", str(ctx_size), "-t", str(threads), "-np", str(slots),
        "--cache-ram", str(cache_ram_mib), "--jinja", "--no-webui", *extra_args,
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    _CHILDREN[process.pid] = process
    base_url = f"http://{_HOST}:{port}"
    server = LlamaServer(base_url=base_url, pid=process.pid, port=port, model_path=model_path,
                         log_path=log_path, template=str(template))
    deadline = time.monotonic() + startup_timeout_s
    problem = f"GET /health did not answer 200 within {startup_timeout_s:g} s"
    try:
        with httpx.Client(timeout=2.0, trust_env=False) as client:  # loopback: no proxies
            while True:
                if process.poll() is not None:
                    problem = f"llama-server exited with status {process.returncode}"
                    break
                if _health(client, base_url) == 200:
                    return server
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
    except BaseException:
        _kill(process)
        raise
    _kill(process)
    raise EngineError(f"cannot start llama-server on port {port}: {problem}; log: {log_path}\n"
                      f"--- last lines of the log ---\n{_tail(log_path)}",
                      code="engine-start-failed")


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()
    _CHILDREN.pop(process.pid, None)


def state_path() -> Path:
    """``<cache>/llama/server.json``: the server ``stableprompt engine serve`` left running."""
    return engine_dir() / "server.json"


def write_state(server: LlamaServer) -> Path:
    """Record ``server`` in :func:`state_path` (written to a temp file, then renamed)."""
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".server-{os.getpid()}.json")
    temp.write_text(json.dumps(server.to_json(), indent=2) + "\n", encoding="utf-8")
    os.replace(temp, path)
    return path


def read_state() -> LlamaServer | None:
    """The recorded server, or ``None`` when there is no (readable) record."""
    try:
        return LlamaServer.from_json(json.loads(state_path().read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def clear_state() -> None:
    """Remove the record (no error when there is none)."""
    with contextlib.suppress(FileNotFoundError):
        state_path().unlink()
