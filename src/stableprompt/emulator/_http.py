"""Stdlib HTTP plumbing for the emulator: a loopback threading server and request helpers."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._wire import Flavor, WireError

__all__ = ["LoopbackServer", "api_key", "guess_flavor", "is_loopback", "make_server",
           "read_body"]

Dispatch = Callable[[BaseHTTPRequestHandler, str], None]


class LoopbackServer(ThreadingHTTPServer):
    """A threading HTTP server whose handlers call :attr:`dispatch` (handler, method)."""

    daemon_threads = True
    dispatch: Dispatch

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connection-level failures (resets, timeouts) are the client's business: stay quiet."""


class _LoopbackServer6(LoopbackServer):
    address_family = socket.AF_INET6


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "stableprompt-emulator"
    timeout = 60  # idle keep-alive connections are closed after this many seconds
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms stall
    server: LoopbackServer

    def do_POST(self) -> None:
        self.server.dispatch(self, "POST")

    def do_GET(self) -> None:
        self.server.dispatch(self, "GET")

    def do_PUT(self) -> None:
        self.server.dispatch(self, "PUT")

    def do_PATCH(self) -> None:
        self.server.dispatch(self, "PATCH")

    def do_DELETE(self) -> None:
        self.server.dispatch(self, "DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's per-request stderr line (the emulator keeps its own log)."""


def make_server(host: str, port: int, dispatch: Dispatch) -> LoopbackServer:
    """Bind ``host:port`` (IPv4 or IPv6). Raises ``OSError`` when the port is taken."""
    server_class = _LoopbackServer6 if ":" in host else LoopbackServer
    server = server_class((host, port), _RequestHandler)
    server.dispatch = dispatch
    return server


def read_body(handler: BaseHTTPRequestHandler, limit: int) -> bytes:
    """The request body (``Content-Length`` bytes, ``b""`` when absent).

    Raises:
        WireError: 411 for chunked bodies, 400 for a bad length, 413 above ``limit`` bytes;
            each marks the connection for closing.
    """
    length = handler.headers.get("Content-Length")
    if length is None:
        if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
            handler.close_connection = True
            raise WireError("chunked request bodies are not supported; send Content-Length",
                            status=411)
        return b""
    try:
        size = int(length)
        if size < 0:
            raise ValueError(length)
    except ValueError:
        handler.close_connection = True
        raise WireError(f"invalid Content-Length header: {length!r}") from None
    if size > limit:
        handler.close_connection = True
        raise WireError(f"request body of {size} bytes exceeds the emulator limit of {limit}",
                        status=413)
    return handler.rfile.read(size)


def api_key(handler: BaseHTTPRequestHandler) -> str:
    """The caller's API key from ``x-api-key`` or ``Authorization: Bearer`` (``""`` if none)."""
    key = handler.headers.get("x-api-key")
    if key is None:
        auth = handler.headers.get("Authorization", "")
        key = auth[7:] if auth.lower().startswith("bearer ") else ""
    return key


def guess_flavor(handler: BaseHTTPRequestHandler) -> Flavor:
    """Error shape for a path that is no endpoint: Anthropic if its headers are present."""
    headers = handler.headers
    return "anthropic" if "anthropic-version" in headers or "x-api-key" in headers else "openai"


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP literal."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
