"""The proxy's ASGI application: forward every request, record the LLM calls among them.

Every request goes to the upstream through one
:class:`~stableprompt._recording._transport.AsyncRecordingTransport` wrapping an
``httpx.AsyncHTTPTransport``, so a call is recorded by the same code path as under the
official SDKs: the transport decides what is recordable (:meth:`Recorder.recordable
<stableprompt.Recorder.recordable>`), starts the call with the exact request bytes, wraps the
response stream so the :class:`~stableprompt._recording._observer.ResponseObserver` sees each
raw chunk as it passes, and finishes the call (usage, verdict, cause, ledger row, spill on a
ledger failure) when the body ends or is cut. There is no second usage parser here.

Byte identity (unless ``stabilize``, see :class:`ProxyConfig`): the request body is read
whole (at most ``max_body_bytes``, else 413) and sent unchanged with the client's headers
minus the hop-by-hop ones (``_headers``); the
response is sent with the upstream's status and headers (minus hop-by-hop) and its *raw* body
chunks (still compressed when the upstream compressed them, so ``Content-Encoding`` and
``Content-Length`` stay true), each chunk forwarded as it arrives (no buffering). A client that
disconnects mid-stream closes the upstream stream (recorded as incomplete, verdict
``unknown``).

Not recorded by the transport, answered as usual: other paths and methods (no ledger row), and
``POST`` to a known endpoint whose body is not a JSON object (one row, verdict ``unknown``,
``verdict_detail["unknown_reason"]`` says why). The proxy's own answers: 401 (missing or wrong
access token), 413 (body too large), 502 (upstream unreachable, naming it), 504 (upstream
timed out), all JSON (``_headers.error_body``). Upstream errors pass through as they are.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._canonical import loads
from .._ledger._usage_record import UsageRecord, scrubbed
from .._recording._call import Pending
from .._recording._errors import error_class_of
from .._recording._recorder import SESSION_HEADER, Recorder
from .._recording._transport import PENDING_EXTENSION, AsyncRecordingTransport
from .._redact import redact, secrets_in_headers
from .._wire._formats import REQUEST_FORMATS, detect, endpoint, provider_for
from ._capture import CaptureWriter
from ._headers import authorized, error_body, forwarded_headers
from ._pool import ShardedTransport
from ._worker import DeferredRecorder, RecordingWorker

__all__ = ["DEFAULT_MAX_BODY_BYTES", "CallLog", "ProxyApp", "ProxyConfig"]

_log = logging.getLogger("stableprompt.proxy")

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
"""Largest request body forwarded (bytes; Anthropic's Messages limit is 32 MB)."""

_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_JSON = [(b"content-type", b"application/json")]


@dataclass(frozen=True)
class ProxyConfig:
    """What the proxy forwards to and what it accepts.

    Attributes:
        upstream: Base URL of the upstream (``https://api.anthropic.com``,
            ``http://127.0.0.1:8080``); a path prefix is kept (``http://host/prefix`` + the
            request path).
        access_token: When set, every request must carry it (``x-stableprompt-token`` or
            ``Proxy-Authorization: Bearer``), else 401; it is never forwarded.
        max_body_bytes: Largest request body accepted (bytes), else 413.
        connect_timeout_s: Connecting to the upstream (and waiting for a pooled connection).
        read_timeout_s: Longest silence between two chunks of the upstream's answer (and for
            sending the request).
        max_connections: Connections kept to the upstream at most.
        provider: Provider family behind the upstream (``"vllm"``, ``"llama-cpp"``, ...),
            else inferred from its host and the wire format.
        stabilize: Rewrite recorded requests in ways that cannot change their meaning
            (``RecordingTransport(stabilize=True)``, ``_recording._stabilize``: tools sorted by
            name, schemas in canonical key order, an OpenAI ``prompt_cache_key``, Anthropic
            breakpoints when the client placed none; a request already in that form passes
            byte-identical). Captures keep what the client sent.
        record_in_thread: Finish recorded calls (attribution, ledger write, log line) on one
            worker thread instead of the event loop (``_worker``: exactly once, in order,
            each call still compared with the calls before it); the CLI's default.
    """

    upstream: str
    access_token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 600.0
    max_connections: int = 256
    provider: str | None = None
    stabilize: bool = False
    record_in_thread: bool = False


CallLog = Callable[[str, str, int, "UsageRecord | None"], None]
"""Told of each forwarded request when its answer ended: method, path, the status sent to
the client and the ledger row (``None`` for calls that are not recorded)."""


class _Forwarded(Response):
    """The upstream's answer, streamed to the client raw, chunk by chunk; ``on_end`` runs once
    the body ended or the client went away (the upstream stream is closed first)."""

    def __init__(self, upstream: httpx.Response, on_end: Callable[[], None]) -> None:
        self.status_code = upstream.status_code
        self.raw_headers = forwarded_headers(upstream.headers.raw, request=False)
        self.background = None
        self._upstream = upstream
        self._on_end = on_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream: Any = self._upstream.stream
        try:
            async with anyio.create_task_group() as group:
                async def disconnected() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(disconnected)
                await send({"type": "http.response.start", "status": self.status_code,
                            "headers": self.raw_headers})
                try:
                    async for chunk in stream:
                        if chunk:
                            await send({"type": "http.response.body", "body": chunk,
                                        "more_body": True})
                except Exception as exc:
                    # The upstream (or the client) connection died mid-body: cut the client
                    # too. Without the final chunk it sees an incomplete body, never an end.
                    _log.warning("response body cut short: %s",
                                 redact(f"{type(exc).__name__}: {exc}"))
                else:
                    await send({"type": "http.response.body", "body": b"",
                                "more_body": False})
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await stream.aclose()
                self._on_end()


def _declined(path: str, body: bytes) -> bool:
    """Whether the recorder declines ``body`` (what :meth:`Recorder.start` checks before it
    registers a call: a JSON object of a request format), without registering anything."""
    try:
        decoded = loads(body)
    except ValueError:
        return True
    return not isinstance(decoded, dict) or detect(decoded, path) not in REQUEST_FORMATS


class ProxyApp:
    """The ASGI application of ``stableprompt proxy`` (a :class:`starlette.applications.
    Starlette` with one catch-all route).

    Args:
        config: Upstream and limits.
        recorder: Records the calls (default: an in-memory :class:`Recorder`).
        capture: Writes each recorded request to a capture file (``--capture``).
        transport: The async transport that really sends (default
            :class:`~._pool.ShardedTransport` with ``config.max_connections``); tests may pass
            ``httpx.MockTransport``.
        on_call: Told of each request when its answer ended (the CLI's log line).

    Attributes:
        recorder: The recorder.
    """

    def __init__(self, config: ProxyConfig, *, recorder: Recorder | None = None,
                 capture: CaptureWriter | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 on_call: CallLog | None = None) -> None:
        self.config = config
        self.recorder = recorder if recorder is not None else Recorder()
        self._capture = capture
        self._on_call = on_call
        base = httpx.URL(config.upstream)
        self._base = base
        self._prefix = base.raw_path.split(b"?", 1)[0].rstrip(b"/")
        self.upstream_name = redact(str(base))
        self._token = None if config.access_token is None else config.access_token.encode()
        self._timeout = {"connect": config.connect_timeout_s, "read": config.read_timeout_s,
                         "write": config.read_timeout_s, "pool": config.connect_timeout_s}
        inner = transport if transport is not None else ShardedTransport(
            max_connections=config.max_connections)
        self._worker = RecordingWorker() if config.record_in_thread else None
        self.transport = AsyncRecordingTransport(
            inner, recorder=self.recorder if self._worker is None else DeferredRecorder(
                self.recorder, self._worker),
            provider=config.provider, stabilize=config.stabilize)
        self.app = Starlette(routes=[Route("/{path:path}", self._handle, methods=_METHODS)],
                             lifespan=self._lifespan)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            try:
                await self.transport.aclose()
            finally:
                if self._worker is not None:
                    self._worker.close()

    def drain(self) -> None:
        """Finish every call whose recording is queued (``record_in_thread``), blocking;
        later calls still record. Nothing to do inline."""
        if self._worker is not None:
            self._worker.wait()

    def _url(self, scope: Scope) -> httpx.URL:
        raw = scope.get("raw_path") or scope["path"].encode("utf-8")
        query = scope.get("query_string") or b""
        return self._base.copy_with(raw_path=self._prefix + raw + (b"?" + query if query else b""))

    async def _body(self, request: Request) -> bytes | None:
        """The whole request body, or ``None`` when it exceeds ``max_body_bytes``."""
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return None
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                return None
        return bytes(body)

    def _refuse(self, status: int, kind: str, message: str) -> Response:
        return Response(error_body(kind, message), status_code=status,
                        media_type="application/json")

    async def _handle(self, request: Request) -> Response:
        scope = request.scope
        method, path = request.method, request.url.path
        if self._token is not None and not authorized(scope["headers"], self._token):
            self._logged(method, path, 401, None)
            return self._refuse(401, "proxy_unauthorized",
                                "stableprompt proxy: this proxy requires its access token "
                                "(header x-stableprompt-token or Proxy-Authorization: Bearer)")
        body = await self._body(request)
        if body is None:
            self._logged(method, path, 413, None)
            return self._refuse(413, "request_too_large",
                                f"stableprompt proxy: request body larger than "
                                f"{self.config.max_body_bytes} bytes (--max-body-bytes)")
        headers = forwarded_headers(scope["headers"], request=True)
        outgoing = httpx.Request(method, self._url(scope), headers=headers, content=body,
                                 extensions={"timeout": self._timeout})
        started = time.monotonic()
        try:
            upstream = await self.transport.handle_async_request(outgoing)
        except httpx.TimeoutException as exc:
            self._unrecorded(method, path, outgoing, None, exc, started)
            self._logged(method, path, 504, None)
            return self._refuse(504, "upstream_timeout",
                                f"stableprompt proxy: upstream {self.upstream_name} timed out "
                                f"({type(exc).__name__})")
        except httpx.HTTPError as exc:
            self._unrecorded(method, path, outgoing, None, exc, started)
            self._logged(method, path, 502, None)
            reason = redact(f"{type(exc).__name__}: {exc}")
            return self._refuse(502, "upstream_unreachable",
                                f"stableprompt proxy: upstream {self.upstream_name} is "
                                f"unreachable ({reason})")
        pending: Pending | None = upstream.extensions.get(PENDING_EXTENSION)
        if pending is None:
            self._unrecorded(method, path, outgoing, upstream.status_code, None, started)

        def ended() -> None:
            record = None if pending is None else pending.record
            if pending is not None and self._capture is not None:
                self._capture.write(path=path, body=body, headers=outgoing.headers,
                                    wire_format=pending.wire_format,
                                    session=outgoing.headers.get(SESSION_HEADER))
            self._logged(method, path, upstream.status_code, record)

        worker = self._worker
        if worker is not None and pending is not None:  # after the call's record is made
            return _Forwarded(upstream, lambda: worker.submit(ended))
        return _Forwarded(upstream, ended)

    def _logged(self, method: str, path: str, status: int, record: UsageRecord | None) -> None:
        if self._on_call is not None:
            try:
                self._on_call(method, path, status, record)
            except Exception as exc:  # a log line must not break a call
                _log.warning("proxy call log failed: %s: %s", type(exc).__name__, exc)

    def _unrecorded(self, method: str, path: str, request: httpx.Request,
                    status_code: int | None, error: BaseException | None, started: float
                    ) -> None:
        """One ``unknown`` row for a ``POST`` to a known endpoint the recorder declined (its
        body is not a JSON object of that format). Other paths get no row. Never raises."""
        wire = endpoint(path) if method == "POST" else None
        ledger = self.recorder.ledger
        if wire is None or ledger is None:
            return
        if error is not None and not _declined(path, request.content):
            return  # a call the transport started: it recorded the failed send
        try:
            secrets = secrets_in_headers(request.headers)
            record = UsageRecord(
                ts_utc=datetime.now(timezone.utc),
                wire_format=wire,  # type: ignore[arg-type]
                provider=provider_for(request.url.host, wire, self.config.provider),
                status_code=status_code,
                error_class=error_class_of(error),
                latency_ms=max((time.monotonic() - started) * 1000.0, 0.0),
                verdict="unknown",
                verdict_detail={"unknown_reason": "request body is not a JSON object of this "
                                "endpoint's format: forwarded unanalysed",
                                "proxy": "unrecorded", "path": path},
            )
            ledger.write(scrubbed(record, secrets))
        except Exception as exc:
            _log.warning("proxy could not record an unanalysed call: %s: %s",
                         type(exc).__name__, redact(str(exc)))
