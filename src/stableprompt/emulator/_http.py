"""Stdlib HTTP plumbing for the emulator: a loopback threading server and request helpers.

Every answer, including the ones the stdlib would give as HTML (unparsable request lines, bad
HTTP versions, oversized header lines, unknown methods), goes through the emulator and comes
out as JSON in the provider's error shape.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from ._answers import Flavor, WireError

__all__ = ["MAX_BODY_BYTES", "LoopbackServer", "api_key", "check_json_content_type",
           "guess_flavor", "is_loopback", "make_server", "read_body", "request_path"]

MAX_BODY_BYTES = 32 * 1024 * 1024
"""Default request body limit (bytes): Anthropic's documented maximum request size for the
Messages API, "32 MB" (https://docs.claude.com/en/api/getting-started, "Request size limits";
the 413 ``request_too_large`` answer: https://platform.claude.com/docs/en/api/errors), read
here as 32 MiB = 33,554,432 bytes (the docs do not say which). OpenAI documents no request
size limit for Chat Completions or Responses; the emulator applies the same limit to them
(an emulator limit)."""

_DRAIN_BYTES = 256 * 1024 * 1024  # larger oversized bodies are not read: the connection closes

Dispatch = Callable[[BaseHTTPRequestHandler, str], None]
Reject = Callable[[BaseHTTPRequestHandler, int, str], None]


class LoopbackServer(ThreadingHTTPServer):
    """A threading HTTP server whose handlers call :attr:`dispatch` (handler, method), or
    :attr:`reject` (handler, status, message) for requests the stdlib cannot parse."""

    daemon_threads = True
    # The stdlib default listen backlog is 5: with tens of clients connecting at once the
    # kernel's accept queue overflows and connections are reset. The kernel caps this value
    # at net.core.somaxconn.
    request_queue_size = 1024
    dispatch: Dispatch
    reject: Reject

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

    def do_HEAD(self) -> None:
        self.server.dispatch(self, "HEAD")

    def do_OPTIONS(self) -> None:
        self.server.dispatch(self, "OPTIONS")

    def parse_request(self) -> bool:
        # A kept-alive handler still holds the previous request's path and headers; clear
        # them so an error on this request's first line is not attributed to the last one.
        self.path = ""
        self.headers = self.MessageClass()
        return super().parse_request()

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """The stdlib's error path (bad request line or version, header lines too long, an
        unknown method): answer in the provider's JSON error shape instead of HTML, and close
        the connection, since the rest of the request was not read."""
        self.close_connection = True
        if self.request_version in ("HTTP/0.9", ""):
            # The stdlib assumes HTTP/0.9 (no status line, no headers) when the request line is
            # unreadable, and leaves it empty for one over 64 KiB (414); the client is almost
            # certainly not a 0.9 client: answer with headers.
            self.request_version = "HTTP/1.0"
        if not hasattr(self, "headers"):  # a request line over 64 KiB: nothing was parsed
            self.headers = self.MessageClass()
        if code == HTTPStatus.NOT_IMPLEMENTED and self.command:
            # A method without a do_* handler (TRACE, FOO, ...): route it like any other
            # method, which answers 405 on an endpoint and 404 elsewhere.
            self.server.dispatch(self, self.command)
            return
        if not message:
            try:
                message = HTTPStatus(code).phrase
            except ValueError:
                message = f"HTTP error {code}"
        self.server.reject(self, int(code), message)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's per-request stderr line (the emulator keeps its own log)."""


def make_server(host: str, port: int, dispatch: Dispatch, reject: Reject) -> LoopbackServer:
    """Bind ``host:port`` (IPv4 or IPv6). Raises ``OSError`` when the port is taken."""
    server_class = _LoopbackServer6 if ":" in host else LoopbackServer
    server = server_class((host, port), _RequestHandler)
    server.dispatch = dispatch
    server.reject = reject
    return server


def read_body(handler: BaseHTTPRequestHandler, limit: int) -> bytes:
    """The request body (``Content-Length`` bytes, ``b""`` when absent).

    Raises:
        WireError: 411 for chunked bodies, 400 for a bad length, 413 above ``limit`` bytes,
            400 for a body that ends (client closed its side, or 60 s of silence) before
            ``Content-Length`` bytes arrived; each marks the connection for closing.
    """
    length = handler.headers.get("Content-Length")
    if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
        # Also with a Content-Length: Transfer-Encoding would override it (RFC 9112 6.3), and
        # the emulator does not decode chunks.
        handler.close_connection = True
        raise WireError("chunked request bodies are not supported; send Content-Length",
                        status=411)
    if length is None:
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
        _discard(handler, size)
        raise WireError(f"Request exceeds the maximum allowed number of bytes: the body has "
                        f"{size} bytes, the limit is {limit}", status=413)
    try:
        body = handler.rfile.read(size)
    except OSError as exc:  # reset, or the handler's idle timeout
        handler.close_connection = True
        raise WireError(f"incomplete request body: reading it failed after Content-Length "
                        f"{size} was announced ({type(exc).__name__})") from None
    if len(body) != size:
        handler.close_connection = True
        raise WireError(f"incomplete request body: got {len(body)} of the {size} bytes "
                        "announced by Content-Length")
    return body


_DRAIN_IDLE_S = 0.5


def _discard(handler: BaseHTTPRequestHandler, size: int) -> None:
    """Read and drop up to ``size`` bytes of an oversized body (at most :data:`_DRAIN_BYTES`),
    so that a client writing its whole body before reading gets the 413 instead of a reset
    connection. Stops early when the client stops sending: each read waits at most
    :data:`_DRAIN_IDLE_S` for more bytes (``read1`` returns what has arrived)."""
    left = min(size, _DRAIN_BYTES)
    connection = handler.connection
    previous = connection.gettimeout()
    try:
        connection.settimeout(_DRAIN_IDLE_S)
        while left > 0:
            chunk = handler.rfile.read1(min(left, 1 << 20))
            if not chunk:
                return
            left -= len(chunk)
    except OSError:
        return
    finally:
        with contextlib.suppress(OSError):
            connection.settimeout(previous)


def check_json_content_type(handler: BaseHTTPRequestHandler) -> None:
    """Require ``Content-Type: application/json`` (parameters such as ``charset`` allowed).

    Both providers take JSON bodies only; Anthropic documents the header as required
    (https://docs.claude.com/en/api/getting-started, "Content types").

    Raises:
        WireError: 400 when the header is missing or names another media type.
    """
    value = handler.headers.get("Content-Type")
    media = (value or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        got = "no Content-Type header" if value is None else f"Content-Type {value!r}"
        raise WireError(f"request bodies must be JSON with Content-Type: application/json; "
                        f"got {got}")


def request_path(handler: BaseHTTPRequestHandler) -> str:
    """The path of the request target without query or fragment (``""`` if unparsable)."""
    try:
        return urlsplit(handler.path).path
    except ValueError:  # e.g. an absolute-form target with a broken IPv6 literal
        return ""


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
    if headers is None:
        return "openai"
    return "anthropic" if "anthropic-version" in headers or "x-api-key" in headers else "openai"


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP literal."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
