"""Connections the proxy holds: a deadline for each request's headers, and a cap on open
connections that connections without a request cannot exhaust (a slowloris defence).

uvicorn arms its keep-alive timeout only once a response ended, and any byte received cancels
it: a connection that never completes its request headers (connect and send nothing, or part
of a request line, or a byte now and then) was held forever, and uvicorn's
``limit_concurrency`` counted it, so one client holding 1,024 of them got every other
client's request a 503. :class:`ConnectionGuard` replaces that limit (uvicorn's is not set):

* **header deadline**: a connection must complete its request's headers within
  ``header_timeout_s`` seconds of opening (and, on a keep-alive connection, of the first byte
  after a response), else it is closed without an answer (it sent no request to answer).
  Bytes trickling in do not extend it. An idle keep-alive connection that sends nothing is
  closed by uvicorn's keep-alive timeout (``_server.KEEP_ALIVE_TIMEOUT_S``).
* **connection cap**: at most ``max_connections`` open; the connection that makes one too many
  closes the one waiting longest for its headers (else the oldest idle keep-alive one, else
  itself), so half-open connections make room for a client that sends its request at once. A
  connection inside a request is never closed for it: requests are limited by the app
  (``ProxyConfig.max_concurrency``, a JSON 503, well under the cap), so the cap is reached
  only with connections waiting or idle.

:func:`guarded_protocol` wraps uvicorn's HTTP protocol (httptools, else h11: what
``http="auto"`` picks) in one that tells the guard where each connection is. All on the event
loop's thread. The server allows no WebSocket upgrade (it would hand the connection to
another protocol, out of the guard's sight).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["ConnectionGuard", "GuardedConnection", "guarded_protocol"]

_log = logging.getLogger("stableprompt.proxy")

class ConnectionGuard:
    """The header deadline and the connection cap of one server (module docstring).

    Args:
        header_timeout_s: Seconds to complete a request's headers.
        max_connections: Open connections at most (``None``: no cap).

    Attributes:
        timed_out: Connections closed at their header deadline so far.
        evicted: Connections closed to make room under the cap so far.
    """

    def __init__(self, *, header_timeout_s: float, max_connections: int | None) -> None:
        self.header_timeout_s = header_timeout_s
        self.max_connections = max_connections
        self.timed_out = 0
        self.evicted = 0
        self._live: dict[GuardedConnection, None] = {}  # insertion order: oldest first
        self._waiting: dict[GuardedConnection, asyncio.TimerHandle] = {}  # longest first

    def opened(self, connection: GuardedConnection) -> None:
        """A connection was accepted: its header deadline starts; one too many makes room."""
        self._live[connection] = None
        self.waiting(connection)
        cap = self.max_connections
        while cap is not None and len(self._live) > cap:
            victim = next((c for c in self._waiting if c is not connection), None) or next(
                (c for c in self._live if c is not connection and c.idle), connection)
            if self.evicted == 0:
                _log.warning("%d connections open (the cap: 4 x --max-concurrency, or what "
                             "the open-file limit allows): closing the ones waiting longest "
                             "for their request headers", cap)
            self.evicted += 1
            self._close(victim)

    def waiting(self, connection: GuardedConnection) -> None:
        """``connection`` waits for a request's headers (from now, if it was not already)."""
        if connection in self._live and connection not in self._waiting:
            self._waiting[connection] = asyncio.get_running_loop().call_later(
                self.header_timeout_s, self._expired, connection)

    def started(self, connection: GuardedConnection) -> None:
        """``connection`` completed a request's headers: no deadline while it is served."""
        handle = self._waiting.pop(connection, None)
        if handle is not None:
            handle.cancel()

    def closed(self, connection: GuardedConnection) -> None:
        """``connection`` is gone (idempotent)."""
        self.started(connection)
        self._live.pop(connection, None)

    def _expired(self, connection: GuardedConnection) -> None:
        self._waiting.pop(connection, None)
        self.timed_out += 1
        self._close(connection)

    def _close(self, connection: GuardedConnection) -> None:
        self.closed(connection)  # now: its connection_lost comes on a later loop iteration
        connection.close()


class GuardedConnection(asyncio.Protocol):
    """uvicorn's HTTP protocol for one connection (:attr:`inner_class`, built with uvicorn's
    arguments) with :attr:`guard` told when it opens, completes a request's headers (the
    protocol starts a new request-response cycle), waits for the next request and closes.
    Use :func:`guarded_protocol` for a subclass bound to a guard."""

    guard: ClassVar[ConnectionGuard]
    inner_class: ClassVar[type[asyncio.Protocol]] = AutoHTTPProtocol

    def __init__(self, config: Any, server_state: Any, app_state: Any,
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._inner: Any = self.inner_class(  # type: ignore[call-arg] # uvicorn's signature
            config=config, server_state=server_state, app_state=app_state, _loop=_loop)
        self._transport: asyncio.BaseTransport | None = None

    @property
    def idle(self) -> bool:
        """No request in progress: none yet, or the last one's response ended."""
        cycle = self._inner.cycle
        return cycle is None or bool(cycle.response_complete)

    def close(self) -> None:
        """Close the connection (no answer is sent)."""
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._inner.connection_made(transport)
        self.guard.opened(self)

    def data_received(self, data: bytes) -> None:
        cycle = self._inner.cycle
        self._inner.data_received(data)
        if self._inner.cycle is not cycle:
            self.guard.started(self)  # headers complete: a new request-response cycle
        elif data and self.idle:
            self.guard.waiting(self)  # the first bytes of a request after a response

    def eof_received(self) -> bool | None:
        result: bool | None = self._inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.closed(self)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


def guarded_protocol(guard: ConnectionGuard,
                     inner: type[asyncio.Protocol] | None = None) -> type[asyncio.Protocol]:
    """A :class:`GuardedConnection` class bound to ``guard`` (one per server), wrapping
    ``inner`` (default uvicorn's ``auto`` choice): what ``uvicorn.Config(http=...)`` takes."""

    class _Bound(GuardedConnection):
        pass

    _Bound.guard = guard
    _Bound.inner_class = inner if inner is not None else AutoHTTPProtocol
    return _Bound
