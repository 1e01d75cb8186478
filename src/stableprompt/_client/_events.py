"""The streamed responses of stableprompt's clients: iterators over a response's events.

:class:`EventStream` (sync) and :class:`AsyncEventStream` decode each SSE ``data`` as JSON
as the bytes arrive (``[DONE]`` skipped; a ``data`` that is not JSON is yielded as a
``str``); closing one, or reaching its end, tells the client the call is done (its record is
then :attr:`EventStream.record`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import Any, Protocol

import httpx

from .._canonical import loads
from .._ledger._usage_record import UsageRecord
from .._recording._call import Pending
from .._recording._errors import map_transport_error
from .._recording._transport import PENDING_EXTENSION
from .._sse import SSEParser

__all__ = ["RECORD_WAIT_S", "AsyncEventStream", "EventStream"]

RECORD_WAIT_S = 30.0
"""Seconds ``last_record`` / ``EventStream.record`` wait for a call recorded in thread (then
``None``; the record is still kept: :meth:`Recorder.flush`)."""


class _Client(Protocol):
    """What a stream reads of the client that sent it."""

    @property
    def _secrets(self) -> tuple[str, ...]: ...

    def _done(self, response: httpx.Response) -> None: ...


class _Events:
    """A streamed response and the client that sent it (shared by both event streams)."""

    def __init__(self, response: httpx.Response, client: _Client) -> None:
        self.response = response
        self._client = client

    @property
    def record(self) -> UsageRecord | None:
        """The call's record, once the stream ended or was closed (``record_in_thread``:
        waiting for its recording, at most :data:`RECORD_WAIT_S` seconds)."""
        pending = self.response.extensions.get(PENDING_EXTENSION)
        return pending.wait(RECORD_WAIT_S) if isinstance(pending, Pending) else None


class EventStream(_Events):
    """Iterator over a streamed response's events (each SSE ``data`` JSON-decoded).

    ``[DONE]`` sentinels are skipped; a ``data`` that is not JSON is yielded as a ``str``. The
    call is recorded when the stream ends or is closed (:attr:`record`). Use as a context
    manager, or exhaust it, so the connection is released.
    """

    def __iter__(self) -> Iterator[Any]:
        parser = SSEParser()
        try:
            for chunk in self.response.iter_bytes():
                yield from _decode_events(parser.feed(chunk))
            yield from _decode_events(parser.close())
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, secrets=self._client._secrets) from exc
        finally:
            self.close()

    def close(self) -> None:
        """Close the response (records the call if it was not yet)."""
        self.response.close()
        self._client._done(self.response)

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _decode_events(events: Any) -> Iterator[Any]:
    for event in events:
        data = event.data
        if data.strip() == "[DONE]":
            continue
        try:
            yield loads(data)
        except ValueError:
            yield data


class AsyncEventStream(_Events):
    """Async iterator over a streamed response's events (see :class:`EventStream`)."""

    async def __aiter__(self) -> AsyncIterator[Any]:
        parser = SSEParser()
        try:
            async for chunk in self.response.aiter_bytes():
                for item in _decode_events(parser.feed(chunk)):
                    yield item
            for item in _decode_events(parser.close()):
                yield item
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, secrets=self._client._secrets) from exc
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the response (records the call if it was not yet)."""
        await self.response.aclose()
        self._client._done(self.response)

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()
