"""The proxy's upstream connection pool: several small httpx pools instead of one large one.

httpcore 1.x's ``AsyncConnectionPool`` re-examines every connection it holds each time a
request is queued or a response ends (``_assign_requests_to_connections``: per connection an
expiry check that polls its socket, and an idle count over all connections inside that loop,
so O(n^2) per event). With 50 concurrent streams that bookkeeping was 42% of the proxy's CPU
(py-spy, ``benchmarks/bench_proxy_load.py``). :class:`ShardedTransport` spreads the
connections over ``shards`` independent pools of HTTP/1.1 connections (``http2=False``:
upstream LLM APIs stream over HTTP/1.1, and one HTTP/2 connection would serialize every
stream through one socket), and sends each request through the pool with the fewest
requests in flight (ties: the lowest index), so each pool holds only a few connections.

A request is in flight from its send until its response stream is closed (or the send
raised); the count is decremented exactly once either way.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import httpx

__all__ = ["CONNECTIONS_PER_SHARD", "ShardedTransport"]

CONNECTIONS_PER_SHARD = 4
"""Connections per pool: ``max_connections`` is split into pools of at most this many."""


class _Counted(httpx.AsyncByteStream):
    """A response stream that tells its pool, once, when it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, done: list[int], index: int) -> None:
        self._stream = stream
        self._done = done
        self._index = index
        self._open = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            if self._open:
                self._open = False
                self._done[self._index] -= 1


class ShardedTransport(httpx.AsyncBaseTransport):
    """``shards`` HTTP/1.1 ``httpx.AsyncHTTPTransport`` pools sharing ``max_connections``.

    Args:
        max_connections: Connections to the upstream at most, over all pools (each pool
            gets ``ceil(max_connections / shards)``, all of them kept alive).
        shards: Number of pools (default: ``ceil(max_connections / 4)``).
    """

    def __init__(self, *, max_connections: int, shards: int | None = None) -> None:
        count = shards if shards is not None else math.ceil(
            max_connections / CONNECTIONS_PER_SHARD)
        count = max(1, min(count, max_connections))
        per = math.ceil(max_connections / count)
        limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
        context = httpx.create_ssl_context()  # one for all: loading CA certificates is slow
        self._pools = [httpx.AsyncHTTPTransport(verify=context, limits=limits, http1=True,
                                                http2=False) for _ in range(count)]
        self._busy = [0] * count

    @property
    def shards(self) -> int:
        """How many pools there are."""
        return len(self._pools)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the least busy pool."""
        busy = self._busy
        index = busy.index(min(busy))
        busy[index] += 1
        try:
            response = await self._pools[index].handle_async_request(request)
        except BaseException:
            busy[index] -= 1
            raise
        if isinstance(response.stream, httpx.AsyncByteStream):
            response.stream = _Counted(response.stream, busy, index)
        else:  # pragma: no cover - httpx's transports always stream
            busy[index] -= 1
        return response

    async def aclose(self) -> None:
        """Close every pool."""
        for pool in self._pools:
            await pool.aclose()
