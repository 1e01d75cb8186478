"""``stableprompt proxy --workers N``: N worker processes serving one address.

Design: the supervisor (the ``stableprompt proxy`` process) binds N sockets to the same
``host:port`` with ``SO_REUSEPORT`` (:func:`~._server.bind`; the first resolves port 0) and
forks one worker per socket; each worker builds its own app, recorder and ledger connection
and runs uvicorn on its socket, exactly as the single-process proxy does. Linux hashes each
new connection to one listening socket, so the workers share connections evenly (a shared
accept socket would let the worker that wakes first take a burst), and a keep-alive
connection stays with the worker that accepted it. uvicorn's own multi-worker supervisor
was not used: it re-imports the app from an import string in spawned processes, while the
proxy's app is built from the parsed command line (recorder, ledger, capture writer, the
connection guard's protocol class), which a forked worker inherits as it is.

Signals: SIGTERM or SIGINT to the supervisor is passed on as SIGTERM to every worker (a
Ctrl-C in a terminal also reaches the workers themselves, as SIGINT: the same graceful
stop); each worker then stops accepting, finishes its calls in flight and its queued rows
(uvicorn's graceful shutdown and the app's lifespan), and exits; the supervisor waits for
all of them. A worker that exits on its own (a crash) makes the supervisor stop the others
and exit 1: it is not restarted. A supervisor killed outright (``kill -9``) takes its workers
down with it (``PR_SET_PDEATHSIG``: each gets SIGTERM and stops gracefully).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from types import FrameType

__all__ = ["READY_TIMEOUT_S", "bind_workers", "supervise"]

_log = logging.getLogger("stableprompt.proxy")

READY_TIMEOUT_S = 60.0
"""Seconds the supervisor waits for every worker to be ready to serve before giving up."""

Worker = Callable[[socket.socket, Callable[[], None]], int]
"""A worker's body: serves on the socket, calls ``ready()`` once it accepts connections,
returns its exit status after a graceful stop."""


def bind_workers(host: str, port: int, workers: int) -> list[socket.socket]:
    """``workers`` sockets bound to ``host:port`` with ``SO_REUSEPORT`` (port 0: a free
    port, the same for all of them), not yet listening.

    The address is first bound once without ``SO_REUSEPORT`` (and released): that fails
    while anything listens there, another ``stableprompt proxy --workers`` included, whose
    ``SO_REUSEPORT`` sockets would otherwise let this one silently take half its
    connections. (A process binding the port between that check and these binds is not
    detected.)

    Raises:
        OSError: The address is in use, not local, or not permitted; no socket is left
            open.
    """
    from ._server import bind

    probe = bind(host, port)
    port = probe.getsockname()[1]
    probe.close()
    socks: list[socket.socket] = []
    try:
        for _ in range(workers):
            socks.append(bind(host, port, reuse_port=True))
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


class _Stopped(BaseException):
    """SIGTERM in a worker, after uvicorn's graceful stop (uvicorn raises the signal it
    caught again once it has stopped): unwind, so that the worker's ``finally`` blocks
    close its capture file and ledger. A BaseException, as KeyboardInterrupt is."""


def _stopped(_signum: int, _frame: FrameType | None) -> None:
    raise _Stopped


def _stop_with_supervisor(supervisor: int) -> None:
    """SIGTERM to this worker when the supervisor dies, ``kill -9`` included (Linux
    ``prctl(PR_SET_PDEATHSIG)``): an orphaned worker would go on serving the port, holding
    the terminal's or a caller's output pipes; it stops gracefully instead, its rows kept.
    If the supervisor is already gone, the signal is sent now."""
    import ctypes

    pr_set_pdeathsig = 1  # <linux/prctl.h>
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0) != 0:
        _log.warning("proxy worker: prctl(PR_SET_PDEATHSIG) failed (errno %d): it will not "
                     "stop by itself if the supervisor is killed", ctypes.get_errno())
    if os.getppid() != supervisor:  # died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _child(sock: socket.socket, socks: list[socket.socket], worker: Worker,
           ready_fd: int, supervisor: int) -> int:
    """In a forked worker: SIGTERM unwinds (:class:`_Stopped`), SIGINT raises
    KeyboardInterrupt (uvicorn installs its own handlers while serving and raises the
    signal again after its graceful stop), only its own socket kept, ``worker`` run; its
    exit status: 0 when it stopped on a signal, 1 and a traceback on an exception. It stops
    (SIGTERM) when the ``supervisor`` process dies (:func:`_stop_with_supervisor`)."""
    signal.signal(signal.SIGTERM, _stopped)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _stop_with_supervisor(supervisor)
    for other in socks:
        if other is not sock:
            other.close()

    def ready() -> None:
        os.write(ready_fd, b"1")
        os.close(ready_fd)

    try:
        return worker(sock, ready)
    except (_Stopped, KeyboardInterrupt):
        return 0  # stopped as asked, after its graceful shutdown
    except BaseException:  # a worker never returns into the supervisor's code
        traceback.print_exc()
        return 1


def supervise(socks: list[socket.socket], worker: Worker, on_ready: Callable[[], None]
              ) -> int:
    """Fork one process per socket running ``worker`` on it, call ``on_ready()`` (the
    banner) once every worker is ready, pass SIGTERM/SIGINT on to all of them as SIGTERM
    and wait for them. When every worker stopped cleanly after a signal, that signal is
    raised again with the handlers the caller had (as uvicorn does in one process: the
    CLI then exits 143 on SIGTERM, 130 on SIGINT); else returns 1 (a worker failed to
    start, crashed, or exited non-zero)."""
    stopping = False
    received: list[int] = []
    pids: set[int] = set()

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        stop_all()

    def stop_all() -> None:
        nonlocal stopping
        stopping = True
        for pid in list(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    read_fd, write_fd = os.pipe()
    failed = False
    supervisor = os.getpid()
    try:
        for sock in socks:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - measured in the worker processes
                os.close(read_fd)
                code = 1
                try:
                    code = _child(sock, socks, worker, write_fd, supervisor)
                finally:
                    with contextlib.suppress(Exception):
                        sys.stdout.flush()
                        sys.stderr.flush()
                    os._exit(code)
            pids.add(pid)
        os.close(write_fd)
        for sock in socks:
            sock.close()  # the workers hold them
        if stopping:
            stop_all()  # a signal during the forks: the workers forked after it too
        if _await_ready(read_fd, len(socks), pids):
            if not stopping:
                on_ready()
        else:
            failed = not stopping  # a worker stopped by a signal before it was ready: asked
            stop_all()
        while pids:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            pids.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            if code != 0 or not stopping:
                failed = True
                if not stopping:
                    _log.error("proxy worker %d exited (status %d) while serving; stopping "
                               "the other workers", pid, code)
                    stop_all()
    finally:
        os.close(read_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failed:
        return 1
    for signum in received[:1]:
        signal.raise_signal(signum)
    return 0


def _await_ready(read_fd: int, workers: int, pids: set[int]) -> bool:
    """Whether all ``workers`` wrote their ready byte within :data:`READY_TIMEOUT_S`
    (``False`` as soon as one of them has exited)."""
    import time

    deadline = time.monotonic() + READY_TIMEOUT_S
    got = 0
    while got < workers:
        left = deadline - time.monotonic()
        if left <= 0:
            _log.error("proxy workers not ready within %.0f s", READY_TIMEOUT_S)
            return False
        readable, _, _ = select.select([read_fd], [], [], min(left, 0.2))
        if readable:
            data = os.read(read_fd, workers)
            if not data:
                return False  # every worker closed its end: none can become ready
            got += len(data)
            continue
        for pid in list(pids):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                pids.discard(pid)
                _log.error("proxy worker %d exited (status %d) before serving", pid,
                           os.waitstatus_to_exitcode(status))
                return False
    return True
