"""Running the proxy on uvicorn: in the foreground (the CLI) or on a background thread.

The listening socket is bound here before uvicorn starts (so a busy port fails at once, with
the OS's reason, and port 0 names the port it got). uvicorn serves HTTP/1.1 with its own
graceful shutdown: on SIGTERM or SIGINT it stops accepting, lets requests in flight (streams
included) finish, for at most ``shutdown_timeout_s``, then runs the app's lifespan shutdown.
Requests in flight are limited by the app (``ProxyConfig.max_concurrency``: one more gets
the proxy's JSON 503). uvicorn's ``limit_concurrency`` counts open connections (idle
keep-alive ones and the one being accepted included) as well as requests, and answers a
plain-text 503 beyond it; it is set to ``CONNECTION_FACTOR`` times the app's limit, a backstop
for clients holding many idle connections, never reached by requests alone. uvicorn's
access log is off (a query string may carry a key); the ``Server`` and ``Date`` headers are
the upstream's, not uvicorn's. Event loop and HTTP parser are uvicorn's ``auto`` choice: uvloop
and httptools (the ``proxy`` extra installs both; C; on the load benchmark they changed the
saturated rate by less than its noise, ``benchmarks/RESULTS.md``: the proxy's time is elsewhere),
else asyncio and h11.
"""

from __future__ import annotations

import ipaddress
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

__all__ = ["CONNECTION_FACTOR", "Proxy", "base_url", "bind", "is_loopback", "server_for"]

CONNECTION_FACTOR = 4
"""uvicorn's ``limit_concurrency`` (open connections, idle ones included, and requests) per
request the app admits (``ProxyConfig.max_concurrency``): a backstop that requests alone
never reach; ``--help`` states it (a test keeps the two equal)."""



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


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (port 0: a free one), not yet listening; the
    connections it accepts send without delay (``TCP_NODELAY``, set by asyncio).

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
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def server_for(app: ProxyApp, *, shutdown_timeout_s: int = 30,
               log_config: Any = None) -> uvicorn.Server:
    """A uvicorn server for ``app`` (see the module docstring for its settings; the
    connection backstop is ``CONNECTION_FACTOR`` x ``app.config.max_concurrency``)."""
    limit = app.config.max_concurrency
    config = uvicorn.Config(
        app, lifespan="on", access_log=False, log_level="warning", log_config=log_config,
        server_header=False, date_header=False,
        limit_concurrency=None if limit is None else CONNECTION_FACTOR * limit,
        timeout_graceful_shutdown=shutdown_timeout_s, loop="auto", http="auto")
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
            (``access_token``, ``max_body_bytes``, ``provider``, timeouts).

    Attributes:
        app: The :class:`ProxyApp`.
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
        self._server = server_for(self.app, shutdown_timeout_s=shutdown_timeout_s)
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
