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

Every request forwarded gets exactly one ledger row. A request the transport does not record
(another path, any method: ``GET /v1/models``, ``/v1/messages/count_tokens``, Gemini's
paths; or a ``POST`` to a known endpoint whose body is not a JSON object of its format) is
forwarded untouched and recorded when its answer ended as *unanalysed*
(:meth:`Recorder.unanalysed <stableprompt.Recorder.unanalysed>`: wire format and verdict
``unknown``, status, path without the query string, body sizes, latency; no body or header),
through :meth:`Recorder.store <stableprompt.Recorder.store>` like every other row (sinks see
it, a ledger failure spills it; on the worker thread with ``record_in_thread``). A harness's
side traffic thus shows in the ledger, and ``stableprompt report`` counts it apart from the
LLM calls (excluded from hit rates with a note). A request path with a dot segment (``/../``,
also percent-encoded: ``%2e%2e``, ``..%2F``; ``_leaves_prefix``) could leave the upstream's path
prefix: it is answered 400 (``path_outside_upstream``), not forwarded, and gets an unanalysed
row with that status (after the access token check: a client without the token writes no
row). The proxy's other refusals are not forwarded either and get an unanalysed row with
their status and reason too: 413 (body larger than ``max_body_bytes``), 408 (a request body
silent for ``body_timeout_s``: a slow-body attack would otherwise hold a ``max_concurrency``
slot forever), 503 (more than ``max_concurrency`` requests in flight) — except 401 (missing or
wrong access token): a client without the token writes no row. Every HTTP method reaches the
upstream (WebDAV's ``PROPFIND`` too). Its other answers: 502 (upstream unreachable, naming
it), 504 (upstream timed out), all JSON (``_headers.error_body``). Upstream errors pass
through as they are.

A request still running when the server cuts it (uvicorn cancels its task once the
``--shutdown-timeout`` ran out) ends with one warning naming its method and path; the
cancellation is not re-raised (the task ends there; raised, uvicorn would log a traceback),
and its row is written as for any cut body (the response's cleanup is shielded; verdict
``unknown``, incomplete).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, request_response
from starlette.types import Message, Receive, Scope, Send

from .._canonical import loads
from .._economics._cache_policy import CachePolicy
from .._ledger._ledger import Ledger
from .._ledger._usage_record import UsageRecord
from .._recording._call import Pending
from .._recording._deferred import DeferredRecorder
from .._recording._gemini_caches import CACHE_RECORD_EXTENSION
from .._recording._http import SESSION_HEADER
from .._recording._recorder import Recorder
from .._recording._transport import PENDING_EXTENSION, AsyncRecordingTransport
from .._recording._worker import RecordingWorker
from .._redact import redact
from .._wire._formats import REQUEST_FORMATS, detect
from ._capture import CaptureWriter
from ._headers import authorized, error_body, forwarded_headers
from ._pool import ShardedTransport

__all__ = ["DEFAULT_HEADER_TIMEOUT_S", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_CONCURRENCY",
           "CallLog", "ProxyApp", "ProxyConfig", "recover",
           "upstream_name"]

_log = logging.getLogger("stableprompt.proxy")

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
"""Largest request body forwarded (bytes; Anthropic's Messages limit is 32 MB)."""

DEFAULT_MAX_CONCURRENCY = 256
"""Requests in flight at which the proxy answers 503 (``ProxyConfig.max_concurrency``)."""

DEFAULT_HEADER_TIMEOUT_S = 10.0
"""Seconds a connection has to complete a request's headers (``ProxyConfig.header_timeout_s``,
``--header-timeout``): an SDK sends them in one write; a slow link needs a round trip or two."""

_EVERY_PATH = re.compile(r"(?P<path>.*)", re.DOTALL)
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
            name, schemas in canonical key order, a ``prompt_cache_key`` when the provider is
            OpenAI (``provider``, else the host ``api.openai.com``), Anthropic
            breakpoints when the client placed none; a request already in that form passes
            byte-identical). Captures keep what the client sent.
        cache_policy: With ``stabilize``, the TTLs of the Anthropic breakpoints
            (``RecordingTransport(cache_policy=...)``, ``_recording._stabilize_ttls``:
            request kind ``main``; the client's markers with a ``ttl`` keep it).
        record_in_thread: Finish recorded calls (attribution, ledger write, log line) on one
            worker thread instead of the event loop (``_recording._deferred``: exactly once,
            in order, each call still compared with the calls before it); the CLI's default.
        max_concurrency: Requests in flight at most (from the request's arrival until the
            end of its answer is sent, streams included); one more is answered 503 (JSON,
            ``proxy_overloaded``), not forwarded, an unanalysed row. ``None``: no limit here.
        header_timeout_s: Seconds a connection has to complete a request's headers, else it
            is closed (the server's, ``_connections``: a slowloris defence).
        body_timeout_s: Longest silence (seconds) between two chunks of a request body, else
            408 (``request_timeout``, not forwarded, an unanalysed row): a body trickled
            forever would hold a ``max_concurrency`` slot.
    """

    upstream: str
    access_token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 600.0
    max_connections: int = 256
    provider: str | None = None
    stabilize: bool = False
    cache_policy: CachePolicy | None = None
    record_in_thread: bool = False
    max_concurrency: int | None = DEFAULT_MAX_CONCURRENCY
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = 30.0


CallLog = Callable[[str, str, int, "UsageRecord | None"], None]
"""Told of each forwarded request when its answer ended: method, path, the status sent to
the client and the ledger row (``None`` for calls that are not recorded)."""


class _Forwarded(Response):
    """The upstream's answer, streamed to the client raw, chunk by chunk; ``on_end`` runs once
    the body ended or the client went away (the upstream stream is closed first).
    ``on_body`` (if given) is told the body bytes sent, once: before the client can see the
    body complete (before the chunk that reaches the upstream's ``Content-Length``, else
    before the end of a body of unknown length), or at the end when the body was cut."""

    def __init__(self, upstream: httpx.Response, on_end: Callable[[], object],
                 on_body: Callable[[int], None] | None = None) -> None:
        self.status_code = upstream.status_code
        self.raw_headers = forwarded_headers(upstream.headers.raw, request=False)
        self.background = None
        self._upstream = upstream
        self._on_end = on_end
        self._on_body = on_body
        self._sent = 0
        length = upstream.headers.get("content-length")
        self._length = int(length) if length is not None and length.isdigit() else None

    def _body_ended(self) -> None:
        on_body, self._on_body = self._on_body, None
        if on_body is not None:
            on_body(self._sent)

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
                            self._sent += len(chunk)
                            if self._length is not None and self._sent >= self._length:
                                self._body_ended()  # the client has it all with this chunk
                            await send({"type": "http.response.body", "body": chunk,
                                        "more_body": True})
                    self._body_ended()
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
                self._body_ended()
                self._on_end()


_SEPARATORS = re.compile(r"[/\\]")
"""What an upstream may take for a path separator once it decoded the path: ``/`` and ``\\``."""
_DECODINGS = 4
"""Percent-decodings a path gets before it is judged (``%252e`` is ``%2e`` once decoded)."""


def _leaves_prefix(raw_path: bytes) -> bool:
    """Whether a request's raw path could leave the upstream's path prefix once joined to it:
    it does not start with ``/``, or a segment is ``.`` or ``..`` after percent-decoding (up
    to :data:`_DECODINGS` times) and splitting at ``/`` and ``\\`` (``/../``, ``%2e%2e``,
    ``..%2F``, ``..%5C``, ``%252e%252e``). httpx removes a literal dot segment (so
    ``/prefix/../x`` goes to ``/x``); an upstream may decode and remove the others. A segment
    only holding dots among other characters (``..x``) and an encoded slash inside a segment
    (``a%2Fb``) are not dot segments and pass."""
    if not raw_path.startswith(b"/"):
        return True
    text = raw_path.decode("latin-1")
    for _ in range(_DECODINGS):
        decoded = urllib.parse.unquote(text, encoding="latin-1")
        if decoded == text:
            break
        text = decoded
    else:
        if urllib.parse.unquote(text, encoding="latin-1") != text:
            return True  # still encoded after that many decodings: refused, not guessed
    return any(segment in (".", "..") for segment in _SEPARATORS.split(text))


def _declined(path: str, body: bytes) -> bool:
    """Whether the recorder declines ``body`` (what :meth:`Recorder.start` checks before it
    registers a call: a JSON object of a request format), without registering anything."""
    try:
        decoded = loads(body)
    except ValueError:
        return True
    return not isinstance(decoded, dict) or detect(decoded, path) not in REQUEST_FORMATS


def upstream_name(config: ProxyConfig) -> str:
    """The upstream as messages show it (the banner, log lines): its URL, secrets redacted."""
    return redact(str(httpx.URL(config.upstream)))


def recover(ledger: Ledger | None) -> int:
    """:meth:`ProxyApp.recover` for ``ledger`` (``stableprompt proxy --workers N`` runs it
    once, before the workers start): the records imported; a failure is logged."""
    if ledger is None:
        return 0
    try:
        count = ledger.replay_spill()
    except Exception as exc:
        _log.warning("proxy could not import earlier unstored records into %s: %s",
                     ledger.location, redact(f"{type(exc).__name__}: {exc}"))
        return 0
    if count:
        _log.warning("proxy imported %d record(s) an earlier run left outside ledger %s",
                     count, ledger.location)
    return count


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
        self._in_flight = 0
        base = httpx.URL(config.upstream)
        self._base = base
        self._prefix = base.raw_path.split(b"?", 1)[0].rstrip(b"/")
        self.upstream_name = upstream_name(config)
        self._token = None if config.access_token is None else config.access_token.encode()
        self._timeout = {"connect": config.connect_timeout_s, "read": config.read_timeout_s,
                         "write": config.read_timeout_s, "pool": config.connect_timeout_s}
        inner = transport if transport is not None else ShardedTransport(
            max_connections=config.max_connections)
        ledger = self.recorder.ledger
        self._worker = None if not config.record_in_thread else RecordingWorker(
            None if ledger is None else ledger.pending_journal(), log=_log)
        deferred = None if self._worker is None else DeferredRecorder(self.recorder,
                                                                      self._worker)
        self._store: Callable[[UsageRecord], None] = (
            self.recorder.store if deferred is None else deferred.store)
        self.transport = AsyncRecordingTransport(
            inner, recorder=self.recorder if deferred is None else deferred,
            provider=config.provider, stabilize=config.stabilize,
            cache_policy=config.cache_policy)
        route = Route("/{path:path}", _AnyMethod(self._handle))
        # Every path, a newline in it too: {path:path} is ``.*``, which stops at one, and a
        # path with %0a got Starlette's plain-text 404, unforwarded and without a row.
        route.path_regex = _EVERY_PATH
        self.app = Starlette(routes=[route], lifespan=self._lifespan)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.config.max_concurrency
        if limit is not None and self._in_flight >= limit:
            method, path = scope["method"], scope["path"]
            if self._token is None or authorized(scope["headers"], self._token):
                record = self._refused(method, path, scope, 503, "more than --max-concurrency "
                                       "requests in flight: refused (503), not forwarded")
            else:
                record = None
            self._logged(method, redact(path), 503, record)
            await self._refuse(503, "proxy_overloaded",
                               f"stableprompt proxy: {limit} request"
                               f"{'' if limit == 1 else 's'} in flight already "
                               f"(--max-concurrency); retry later")(scope, receive, send)
            return
        self._in_flight += 1
        counted = True

        async def sent(message: Message) -> None:
            nonlocal counted
            if counted and message["type"] == "http.response.body" \
                    and not message.get("more_body", False):
                counted = False  # the answer is complete once this is sent: no longer in flight
                self._in_flight -= 1
            await send(message)

        try:
            await self.app(scope, receive, sent)
        except anyio.get_cancelled_exc_class():
            # Only the server cancels a request's task: uvicorn, when --shutdown-timeout ran
            # out. The call's row is written (the response's cleanup is shielded); one line
            # names it. Not re-raised: this task ends here, and uvicorn would log a traceback.
            _log.warning("cut %s %s at shutdown: still running when the shutdown timeout "
                         "ran out (recorded as incomplete)", scope["method"],
                         redact(scope["path"]))
        finally:
            if counted:
                self._in_flight -= 1

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

    def recover(self) -> int:
        """Store what earlier runs left outside the ledger (its spill files, and the pending
        journals of proxies that were killed: :meth:`Ledger.replay_spill
        <stableprompt.Ledger.replay_spill>`); run at startup, before serving (the CLI,
        :class:`~._server.Proxy`). Returns the records imported;
        a failure is logged (the files are kept for the next start), never raised."""
        return recover(self.recorder.ledger)

    def drain(self) -> None:
        """Finish every call whose recording is queued (``record_in_thread``), blocking;
        later calls still record. Nothing to do inline."""
        if self._worker is not None:
            self._worker.wait()

    def _url(self, scope: Scope) -> httpx.URL:
        raw = scope.get("raw_path") or scope["path"].encode("utf-8")
        query = scope.get("query_string") or b""
        return self._base.copy_with(raw_path=self._prefix + raw + (b"?" + query if query else b""))

    async def _body(self, request: Request) -> bytes | int:
        """The whole request body, or the status refusing it: 413 when it exceeds
        ``max_body_bytes``, 408 when it fell silent for ``body_timeout_s``."""
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return 413
        body = bytearray()
        silence = self.config.body_timeout_s
        loop = asyncio.get_running_loop()
        try:
            # one deadline moved on at each chunk (no task per chunk, as wait_for makes)
            async with asyncio.timeout(silence) as deadline:
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > limit:
                        return 413
                    deadline.reschedule(loop.time() + silence)
        except TimeoutError:
            return 408
        return bytes(body)

    def _refuse(self, status: int, kind: str, message: str) -> Response:
        return Response(error_body(kind, message), status_code=status,
                        media_type="application/json")

    async def _handle(self, request: Request) -> Response:
        scope = request.scope
        # scope["path"], not request.url.path: urlsplit drops \t, \r and \n from that
        method, path = request.method, scope["path"]
        if self._token is not None and not authorized(scope["headers"], self._token):
            self._logged(method, path, 401, None)
            return self._refuse(401, "proxy_unauthorized",
                                "stableprompt proxy: this proxy requires its access token "
                                "(header x-stableprompt-token, or Proxy-Authorization with "
                                "scheme Bearer)")
        if _leaves_prefix(scope.get("raw_path") or path.encode("utf-8")):
            self._logged(method, path, 400, self._refused_path(method, path, scope))
            return self._refuse(400, "path_outside_upstream",
                                "stableprompt proxy: the request path has a dot segment ('.' "
                                "or '..', also percent-encoded): it could leave the upstream's "
                                "path prefix; send the path without it")
        body = await self._body(request)
        if isinstance(body, int):  # refused: 413 (too large) or 408 (fell silent)
            kind, reason, message = (
                ("request_too_large", "request body larger than --max-body-bytes",
                 f"request body larger than {self.config.max_body_bytes} bytes "
                 "(--max-body-bytes)") if body == 413 else
                ("request_timeout", "request body silent for --body-timeout",
                 f"the request body fell silent for {self.config.body_timeout_s:g} s "
                 "(--body-timeout)"))
            self._logged(method, path, body, self._refused(
                method, path, scope, body, f"{reason}: refused ({body}), not forwarded"))
            return self._refuse(body, kind, f"stableprompt proxy: {message}")
        headers = forwarded_headers(scope["headers"], request=True)
        outgoing = httpx.Request(method, self._url(scope), headers=headers, content=body,
                                 extensions={"timeout": self._timeout})
        started = time.monotonic()
        try:
            upstream = await self.transport.handle_async_request(outgoing)
        except httpx.TimeoutException as exc:
            self._unanalysed(method, path, outgoing, started, error=exc)
            self._logged(method, path, 504, None)
            return self._refuse(504, "upstream_timeout",
                                f"stableprompt proxy: upstream {self.upstream_name} timed out "
                                f"({type(exc).__name__})")
        except anyio.get_cancelled_exc_class() as exc:  # shutdown cut it (``__call__``)
            self._unanalysed(method, path, outgoing, started, error=exc)
            raise
        except Exception as exc:  # httpx's, or e.g. h11's LocalProtocolError on a body it
            # cannot frame: a JSON 502 and a row, never a plain-text 500 and a traceback
            self._unanalysed(method, path, outgoing, started, error=exc)
            self._logged(method, path, 502, None)
            reason = redact(f"{type(exc).__name__}: {exc}")
            if isinstance(exc, httpx.HTTPError):
                return self._refuse(502, "upstream_unreachable",
                                    f"stableprompt proxy: upstream {self.upstream_name} is "
                                    f"unreachable ({reason})")
            return self._refuse(502, "upstream_request_failed",
                                f"stableprompt proxy: the request could not be sent to "
                                f"upstream {self.upstream_name} ({reason})")
        pending: Pending | None = upstream.extensions.get(PENDING_EXTENSION)
        if CACHE_RECORD_EXTENSION in upstream.extensions:  # a Gemini cache call: its row made
            cached: UsageRecord | None = upstream.extensions[CACHE_RECORD_EXTENSION]
            return _Forwarded(upstream, lambda: self._logged(
                method, path, upstream.status_code, cached))
        if pending is None:  # forwarded unanalysed: its row once the body ended
            unanalysed: list[UsageRecord | None] = [None]

            def body_ended(sent: int) -> None:
                unanalysed[0] = self._unanalysed(method, path, outgoing, started,
                                                 status_code=upstream.status_code, sent=sent)

            return _Forwarded(upstream, lambda: self._logged(
                method, path, upstream.status_code, unanalysed[0]), body_ended)

        def ended() -> None:
            record = pending.record
            if self._capture is not None:
                self._capture.write(path=path, body=body, headers=outgoing.headers,
                                    wire_format=pending.wire_format,
                                    session=outgoing.headers.get(SESSION_HEADER))
            self._logged(method, path, upstream.status_code, record)

        worker = self._worker
        if worker is not None:  # after the call's record is made
            return _Forwarded(upstream, lambda: worker.submit(ended))
        return _Forwarded(upstream, ended)

    def _logged(self, method: str, path: str, status: int, record: UsageRecord | None) -> None:
        if self._on_call is not None:
            try:
                self._on_call(method, path, status, record)
            except Exception as exc:  # a log line must not break a call
                _log.warning("proxy call log failed: %s: %s", type(exc).__name__, exc)

    def _unanalysed(self, method: str, path: str, request: httpx.Request, started: float, *,
                    status_code: int | None = None, error: BaseException | None = None,
                    sent: int | None = None) -> UsageRecord | None:
        """Record a forwarded request the transport did not record (module docstring) and
        return its row; ``None`` when the transport recorded it (a failed send of a call it
        started) or no row could be made. Never raises."""
        try:
            recordable = self.recorder.recordable(path, method)
            if error is not None and recordable and not _declined(path, request.content):
                return None  # a call the transport started: it recorded the failed send
            if recordable:
                reason = ("request body is not a JSON object of this endpoint's format: "
                          "forwarded unanalysed")
            else:
                reason = "not an LLM endpoint (path or method): forwarded unanalysed"
        except Exception as exc:
            _log.warning("proxy could not record an unanalysed request: %s: %s",
                         type(exc).__name__, redact(str(exc)))
            return None
        return self._record_unanalysed(
            method, path, reason, request.headers, status_code=status_code, error=error,
            latency_ms=(time.monotonic() - started) * 1000.0,
            request_bytes=len(request.content), response_bytes=sent)

    def _refused_path(self, method: str, path: str, scope: Scope) -> UsageRecord | None:
        """Record a request refused for its path (400, not forwarded, body not read) as
        unanalysed, as :meth:`_unanalysed` records forwarded ones. Never raises."""
        return self._refused(method, path, scope, 400, "request path has a dot segment that "
                             "could leave the upstream's path prefix: refused (400), not "
                             "forwarded")

    def _refused(self, method: str, path: str, scope: Scope, status: int,
                 reason: str) -> UsageRecord | None:
        """Record a request the proxy refused (not forwarded) as unanalysed with its status
        and ``reason``. Never raises."""
        try:
            headers = httpx.Headers(forwarded_headers(scope["headers"], request=True))
        except Exception:
            headers = httpx.Headers()
        return self._record_unanalysed(method, path, reason, headers, status_code=status)

    def _record_unanalysed(self, method: str, path: str, reason: str, headers: httpx.Headers,
                           *, status_code: int | None = None,
                           error: BaseException | None = None,
                           latency_ms: float | None = None, request_bytes: int | None = None,
                           response_bytes: int | None = None) -> UsageRecord | None:
        """Build and store the unanalysed row (:meth:`Recorder.unanalysed
        <stableprompt.Recorder.unanalysed>`) and return it; ``None`` when no row could be
        made or stored. Never raises."""
        try:
            record = self.recorder.unanalysed(
                method=method, path=path, reason=reason, headers=headers,
                host=self._base.host, provider=self.config.provider,
                status_code=status_code, error=error, latency_ms=latency_ms,
                request_bytes=request_bytes, response_bytes=response_bytes)
            if record is not None:
                self._store(record)
            return record
        except Exception as exc:
            _log.warning("proxy could not record an unanalysed request: %s: %s",
                         type(exc).__name__, redact(str(exc)))
            return None


class _AnyMethod:
    """The proxy's one endpoint as an ASGI app, so its route takes every HTTP method
    (Starlette gives a function endpoint ``GET`` only unless told a list: ``PROPFIND`` got a
    plain-text 405 and no row)."""

    def __init__(self, handle: Callable[[Request], Any]) -> None:
        self._app = request_response(handle)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)
