"""Running the proxy on uvicorn: in the foreground (the CLI) or on a background thread.

The listening socket is bound here before uvicorn starts (so a busy port fails at once, with
the OS's reason, and port 0 names the port it got). uvicorn serves HTTP/1.1 with its own
graceful shutdown: on SIGTERM or SIGINT it stops accepting, lets requests in flight (streams
included) finish, for at most ``shutdown_timeout_s``, then runs the app's lifespan shutdown.
Requests in flight are limited by the app (``ProxyConfig.max_concurrency``: one more gets
the proxy's JSON 503). Connections are watched by a :class:`~._connections.ConnectionGuard`
(uvicorn's own ``limit_concurrency`` is not set: it counted connections that never sent a
request, so a client holding enough of them got everyone a 503): each must complete a
request's headers within ``ProxyConfig.header_timeout_s``, and at most ``CONNECTION_FACTOR``
times the app's limit are open (lowered to what the process's open-file limit allows,
:func:`connection_cap`); one more closes the connection waiting longest for its headers.
uvicorn's access log is off (a query string may carry a key); the ``Server`` and ``Date``
headers are the upstream's, not uvicorn's. Event loop and HTTP parser are uvicorn's ``auto``
choice: uvloop and httptools (the ``proxy`` extra installs both; C; on the load benchmark
they changed the saturated rate by less than its noise, ``benchmarks/RESULTS.md``: the
proxy's time is elsewhere), else asyncio and h11.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from types import TracebackType
from typing import Any

import httpx
import uvicorn

from .._recording._recorder import Recorder
from ._app import DEFAULT_MAX_CONCURRENCY, CallLog, ProxyApp, ProxyConfig
from ._capture import CaptureWriter
from ._connections import ConnectionGuard, guarded_protocol

__all__ = ["BACKLOG", "CONNECTION_FACTOR", "FILES_RESERVED", "KEEP_ALIVE_TIMEOUT_S", "Proxy",
           "base_url", "bind", "connection_cap", "connection_guard", "is_loopback", "server_for"]

_log = logging.getLogger("stableprompt.proxy")

CONNECTION_FACTOR = 4
"""Open connections at most (idle and half-open ones included) per request the app admits
(``ProxyConfig.max_concurrency``): room for idle keep-alive connections beyond the requests
in flight; ``--help`` states it (a test keeps the two equal)."""

KEEP_ALIVE_TIMEOUT_S = 75
"""Seconds an idle keep-alive connection stays open (uvicorn's ``timeout_keep_alive``, whose
default is 5 s). It must outlast the clients' own idle expiry, so that the client, not the
proxy, closes an idle connection: httpx (the Anthropic and OpenAI SDKs) keeps one 5 s, the
same as uvicorn's default, so a request sent on a connection the server was closing failed
with "Server disconnected without sending a response" (seen under load). 75 s is nginx's
``keepalive_timeout`` default; idle connections cost no request slot, and the connection cap
closes the oldest idle ones first (``_connections``)."""

BACKLOG = 2048
"""Connections waiting to be accepted at most, per listening socket (uvicorn's default
``backlog``; ``--workers`` listens on each worker's socket with it before uvicorn does)."""

FILES_RESERVED = 64
"""Open files kept for other than connections when the open-file limit lowers the cap
(:func:`connection_cap`): the listening socket, the ledger and its WAL, journals, captures,
the event loop's own."""


def base_url(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 address in brackets (``http://[::1]:8080``)."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A TCP socket bound to ``host:port`` (port 0: a free one), not yet listening; the
    connections it accepts send without delay (``TCP_NODELAY``, set by asyncio). With
    ``reuse_port``, ``SO_REUSEPORT`` is set, so that further sockets of this user bound
    with it to the same address share the port (Linux hashes each new connection to one
    of the listening ones: ``--workers``).

    Raises:
        OSError: The address is in use, not local, or not permitted.
    """
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets whose proto says TCP; with
    # proto 0 the accepted connections keep Nagle's algorithm, and a response's body chunk
    # waits for the client's delayed ACK of its headers (~40 ms per response on Linux).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def connection_cap(config: ProxyConfig) -> int | None:
    """Open connections at most for a proxy with ``config``: ``CONNECTION_FACTOR`` x
    ``max_concurrency`` (``None``: no cap), lowered so that they, the upstream connections
    (``max_connections``) and :data:`FILES_RESERVED` fit in the process's soft open-file limit
    (``RLIMIT_NOFILE``; a common default is 1,024, which leaves 704 with the default 256
    upstream connections): past that limit the server could not accept anyone, and the
    guard could not make room. At least 16."""
    limit = config.max_concurrency
    if limit is None:
        return None
    cap = CONNECTION_FACTOR * limit
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return cap
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return cap
    return max(16, min(cap, soft - config.max_connections - FILES_RESERVED))


def connection_guard(config: ProxyConfig) -> ConnectionGuard:
    """The :class:`~._connections.ConnectionGuard` of a proxy with ``config``: its header
    timeout, and :func:`connection_cap` (a warning when the open-file limit lowered it)."""
    cap = connection_cap(config)
    requested = config.max_concurrency
    if cap is not None and requested is not None and cap < CONNECTION_FACTOR * requested:
        _log.warning("the open-file limit (ulimit -n) allows %d open connections, not %d "
                     "(%d x --max-concurrency); raise it to accept more", cap,
                     CONNECTION_FACTOR * requested, CONNECTION_FACTOR)
    return ConnectionGuard(header_timeout_s=config.header_timeout_s, max_connections=cap)


def server_for(app: ProxyApp, *, guard: ConnectionGuard | None = None,
               shutdown_timeout_s: int = 30, log_config: Any = None) -> uvicorn.Server:
    """A uvicorn server for ``app`` (see the module docstring for its settings), its
    connections watched by ``guard`` (default :func:`connection_guard` of ``app.config``)."""
    guard = guard if guard is not None else connection_guard(app.config)
    config = uvicorn.Config(
        app, lifespan="on", access_log=False, log_level="warning", log_config=log_config,
        server_header=False, date_header=False, limit_concurrency=None,
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT_S, backlog=BACKLOG,
        timeout_graceful_shutdown=shutdown_timeout_s, loop="auto",
        # no WebSocket upgrade: the proxy forwards HTTP only, and an upgraded connection
        # would leave the guard's protocol (so the guard could not count it any more)
        http=guarded_protocol(guard), ws="none")
    return uvicorn.Server(config)


class Proxy:
    """The proxy on a background thread, for tests and embedding::

        with Proxy(emulator.base_url, recorder=recorder) as proxy:
            client = anthropic.Anthropic(base_url=proxy.base_url, api_key=...)

    Args:
        upstream: Base URL of the upstream.
        recorder: Records the calls (default: an in-memory :class:`Recorder`).
        host: Address to bind (loopback by default).
        port: TCP port (0: a free one).
        capture: Directory for request captures (``--capture``), or ``None``.
        max_concurrency: As :class:`~stableprompt._proxy._app.ProxyConfig`.
        shutdown_timeout_s: As :func:`server_for`.
        on_call: As :class:`~stableprompt._proxy._app.ProxyApp`.
        transport: As :class:`~stableprompt._proxy._app.ProxyApp` (the sending transport).
        **options: Further :class:`~stableprompt._proxy._app.ProxyConfig` fields
            (``access_token``, ``max_body_bytes``, ``provider``, timeouts,
            ``header_timeout_s``).

    Attributes:
        app: The :class:`ProxyApp`.
        guard: Its connections' :class:`~._connections.ConnectionGuard`.
        base_url: ``http://host:port`` once entered.
    """

    def __init__(self, upstream: str, *, recorder: Recorder | None = None,
                 host: str = "127.0.0.1", port: int = 0, capture: str | None = None,
                 max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
                 shutdown_timeout_s: int = 5, on_call: CallLog | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, **options: Any) -> None:
        self._capture = None if capture is None else CaptureWriter(capture)
        self.app = ProxyApp(ProxyConfig(upstream, max_concurrency=max_concurrency, **options),
                            recorder=recorder, capture=self._capture, on_call=on_call,
                            transport=transport)
        self._host, self._port = host, port
        self.guard = connection_guard(self.app.config)
        self._server = server_for(self.app, guard=self.guard,
                                  shutdown_timeout_s=shutdown_timeout_s)
        self._thread: threading.Thread | None = None
        self.base_url = ""

    @property
    def recorder(self) -> Recorder:
        """The recorder."""
        return self.app.recorder

    def __enter__(self) -> Proxy:
        self.app.recover()
        sock = bind(self._host, self._port)
        host, port = sock.getsockname()[:2]
        self.base_url = base_url(host, port)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="stableprompt-proxy", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the proxy did not start")
            time.sleep(0.005)
        return self

    def __exit__(self, exc_type: type[BaseException] | None = None,
                 exc: BaseException | None = None, tb: TracebackType | None = None) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15.0)
        if self._capture is not None:
            self._capture.close()
