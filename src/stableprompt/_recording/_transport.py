"""Recording transports for httpx and httpx2.

:class:`RecordingTransport` / :class:`AsyncRecordingTransport` wrap any transport so that every
Messages, Chat Completions and Responses call through it is recorded by a
:class:`~stableprompt._recording._recorder.Recorder`, without changing the calling code::

    import anthropic, httpx2
    from stableprompt import Ledger, Recorder, RecordingTransport

    recorder = Recorder(Ledger("calls.db"))
    client = anthropic.Anthropic(
        http_client=httpx2.Client(transport=RecordingTransport(recorder=recorder)))

One implementation serves both HTTP stacks: the official ``anthropic`` 2.x and ``openai`` 3.x
SDKs require ``httpx2`` objects, other code uses ``httpx``. The transports only duck-type the
request and response objects; the module (``httpx`` or ``httpx2``) is read from the request's
class, and ``wrapped=None`` means that module's ``HTTPTransport()`` (``AsyncHTTPTransport()``),
created on first use. Response streams are wrapped in a subclass of that module's
``SyncByteStream``/``AsyncByteStream``, as its client requires.

Guarantees (unless ``stabilize=True``, which may rewrite a request body, see
``_stabilize``): request and response bytes are passed on unchanged (the request body is read,
with ``request.read()`` when it was a stream, which keeps its bytes, only for paths that are
recorded: :meth:`Recorder.recordable`); response chunks reach the caller as they arrive (the
observer copies, never holds back); a stream closed or cut before its final event is recorded
as incomplete with what was seen (verdict ``unknown``, ``verdict_detail["stream"]``);
transport exceptions are recorded and re-raised unchanged. Calls that are not ``POST`` to
``.../messages`` (directly under ``/v1``), ``.../chat/completions`` or ``.../responses`` with a
JSON object body pass through unrecorded. Recording work (tokenizing, SQLite) runs inline when
the body ends, also in the async transport, unless ``record_in_thread=True``: then the
caller's thread only registers the call (the body is not even decoded there; a stabilizing
transport still parses it to rewrite it) and sends it, and the recorder's thread
(:attr:`Recorder.worker <stableprompt.Recorder.worker>`, ``_deferred``) decodes and analyses
the request while it is in flight and finishes the call when its body ends (without a ledger
the response too is observed there, from its chunks kept with their arrival times); the
record is
``pending.record`` once :meth:`Recorder.flush <stableprompt.Recorder.flush>` returned or
``pending.wait()`` did.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from .._canonical import loads
from .._economics._cache_policy import CachePolicy
from .._exceptions import ConfigurationError, InputError
from .._ledger._usage_record import UsageRecord
from .._policy import cache_rules
from .._public import public
from .._wire import gemini
from .._wire._formats import detect, known_provider, provider_for
from ._call import Pending
from ._deferred import DeferredRecorder
from ._diagnose import DIAGNOSTICS_WAIT_S, diagnostics_asked, merge_header_values, with_members
from ._gemini_caches import cache_call, cache_call_async
from ._http import byte_stream_class, in_memory, module_of
from ._observer import BodyObserver, Observation
from ._recorder import Recorder
from ._stabilize import Stabilizer

__all__ = [
    "BODY_EXTENSION",
    "DETAIL_EXTENSION",
    "PENDING_EXTENSION",
    "RENDERED_EXTENSION",
    "SEGMENTED_EXTENSION",
    "AsyncRecordingTransport",
    "CallRecorder",
    "RecordingTransport",
]

if TYPE_CHECKING:  # typed as a transport of both stacks, so either Client(transport=...) accepts it
    import httpx2

    class _SyncBase(httpx.BaseTransport, httpx2.BaseTransport):
        def handle_request(self, request: Any) -> Any: ...

    class _AsyncBase(httpx.AsyncBaseTransport, httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: Any) -> Any: ...

else:  # at run time both stacks only duck-type transports
    _SyncBase = httpx.BaseTransport
    _AsyncBase = httpx.AsyncBaseTransport

PENDING_EXTENSION = "stableprompt.pending"
"""Key of the :class:`Pending` in ``response.extensions``; ``pending.record`` holds the record
once the body has been read (``record_in_thread``: once its job ran, ``pending.wait()``)."""

RENDERED_EXTENSION = "stableprompt.rendered"
"""Key in ``request.extensions`` set (``True``) by stableprompt's clients when the body is
their own rendering (members they append after its last byte included), left undecoded: the
recorder segments it against the conversation's previous request
(``Recorder.start(rendered=True)``)."""

SEGMENTED_EXTENSION = "stableprompt.segmented"
"""Key in ``request.extensions`` of the body's segmenting, when stableprompt's client made it
(:meth:`Recorder.segment_rendered`) to prepare the request without decoding the body."""

BODY_EXTENSION = "stableprompt.body"
"""Key in ``request.extensions`` of the request body already decoded (set by stableprompt's
clients, which decoded it to prepare the request): the recorder does not parse it again."""

DETAIL_EXTENSION = "stableprompt.detail"
"""Key in ``request.extensions`` of evidence the sender adds to the call's
``verdict_detail`` (a mapping of JSON values; stableprompt's keep-alive marks its requests
``{"keepalive": true, ...}``, ``_client._keepalive``). Never sent on the wire."""

class CallRecorder(Protocol):
    """What a recording transport needs of its recorder (:class:`Recorder` is one): judge a
    path, start a call, observe its response, and finish a call that got no response.

    Like httpx's ``BaseTransport`` for a client, it lets transport tests pass a stand-in
    (``tests/conftest.py``'s ``FakeRecorder``).
    """

    def recordable(self, path: str, method: str = "POST") -> bool:
        """Whether a call to ``path`` is recorded, from the path alone (no body read)."""
        ...

    def start(self, path: str, headers: Any = None,
              body: bytes | bytearray | memoryview | None = None, *, host: str | None = None,
              method: str = "POST", provider: str | None = None,
              decoded: Mapping[str, Any] | None = None,
              resegmented: Any = None, rendered: bool = False) -> Pending | None:
        """Register a call about to be sent (``None``: pass it through unrecorded);
        ``decoded`` is ``body`` already decoded and ``resegmented`` its segmenting, when the
        client knows them; ``rendered``: ``body`` is stableprompt's rendering (passed only
        when true)."""
        ...

    def observe(self, pending: Pending, *, status_code: int, headers: Any,
                content_encoding: str | None = None) -> BodyObserver:
        """The observer of the response of ``pending`` (its close finishes the call)."""
        ...

    def finish(self, pending: Pending, observation: Observation) -> UsageRecord | None:
        """Finish a call without an observed body: the send raised (``observation.error``,
        no status), or observing the response failed (``observation.detail``)."""
        ...


class _Observed:
    """A wrapped response stream and its observer (shared by the sync and async streams).

    A stream dropped unread and unclosed (``del`` of an SDK's stream object, a caller that
    returns early) still gets its row: when the wrapper is collected (or at interpreter
    exit) its observer is closed as incomplete; the observer's close is idempotent, so a
    stream read or closed before loses nothing."""

    def __init__(self, inner: Any, observer: BodyObserver) -> None:
        self._inner = inner
        self._observer = observer
        self._ended = False
        weakref.finalize(self, _dropped, observer)

    def _chunk(self, chunk: bytes) -> bytes:
        self._observer.feed(chunk)
        return chunk

    def _failed(self, exc: BaseException) -> None:
        self._observer.close(complete=False, error=exc if isinstance(exc, Exception) else None)

    def _end(self) -> None:
        self._ended = True
        self._observer.close(complete=True)


def _dropped(observer: BodyObserver) -> None:
    """A stream collected unread: its call is recorded as incomplete (never raises)."""
    with contextlib.suppress(Exception):
        observer.close(complete=False)


class _SyncStream(_Observed):
    """Passes each chunk of the wrapped stream through, feeding a copy to the observer."""

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from map(self._chunk, self._inner)
        except GeneratorExit:
            raise
        except BaseException as exc:
            self._failed(exc)
            raise
        self._end()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._observer.close(complete=self._ended)


class _AsyncStream(_Observed):
    """Async twin of :class:`_SyncStream`."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield self._chunk(chunk)
        except GeneratorExit:
            raise
        except BaseException as exc:
            self._failed(exc)
            raise
        self._end()

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._observer.close(complete=self._ended)


def _recorded(recorder: CallRecorder, request: Any) -> bool:
    """Whether ``request`` may be recorded, from its method and path alone (no body read)."""
    try:
        return recorder.recordable(str(request.url.path), str(request.method))
    except Exception:
        return False


def _stabilized(request: Any, body: bytes, recorder: CallRecorder, provider: str | None,
                stabilizer: Stabilizer) -> tuple[Any, bytes, dict[str, Any]]:
    """``request`` with its body stabilized (``_stabilize``): the same request when nothing
    was rewritten, else a new one of its module with the new body and ``Content-Length``,
    and the row's evidence (``{"stabilized": [rewrites...], ...}``, empty when none). The
    recorder's token counts and policy table (when it has them, as :class:`Recorder` does)
    decide which breakpoints are below the model's minimum; the provider named (``provider``,
    else the upstream's host when it is a known API's) decides whether an OpenAI body gets a
    ``prompt_cache_key``."""
    table = getattr(recorder, "policies", None)
    host = request.url.host
    new, rewrites, evidence = stabilizer.stabilize(
        body, str(request.url.path), count=getattr(recorder, "segment_tokens", None),
        policy=lambda model: cache_rules(provider or "anthropic", model, table),
        provider=known_provider(str(host) if host else None, provider))
    if not rewrites:  # only a skip's reason: the row says why nothing was rewritten
        return request, body, {k: v for k, v in evidence.items() if k == "stabilize_skipped"}
    headers = request.headers.copy()
    headers.pop("transfer-encoding", None)
    headers["content-length"] = str(len(new))
    rebuilt = module_of(request).Request(request.method, request.url, headers=headers,
                                         content=new, extensions=request.extensions)
    return rebuilt, new, {"stabilized": list(rewrites), **evidence}


def _diagnosed(request: Any, body: bytes, recorder: Recorder | DeferredRecorder,
               provider: str | None) -> tuple[Any, bytes]:
    """``request`` asking the provider for cache diagnostics (``Recorder(diagnostics=True)``,
    ``_diagnose``): the same request when its format has none or it already asks, else a new
    one of its module with the members added (``Content-Length`` set) and the beta value merged
    into its ``anthropic-beta`` header. A body that is not a JSON object, or that the members
    cannot be added to without changing its other bytes, is sent as it is; nothing here
    raises (asking is never worth a request)."""
    try:
        return _with_diagnostics(request, body, recorder, provider)
    except Exception:
        return request, body


def _with_diagnostics(request: Any, body: bytes, recorder: Recorder | DeferredRecorder,
                      provider: str | None) -> tuple[Any, bytes]:
    try:
        decoded = loads(body)
        wire = detect(decoded, str(request.url.path)) if isinstance(decoded, dict) else None
    except ValueError:
        return request, body
    if wire is None:
        return request, body
    host = str(request.url.host) if request.url.host else None
    family = provider_for(host, wire, provider or recorder.provider)
    members, asked = diagnostics_asked(
        wire, decoded, lambda: recorder.previous_response_id(
            wire, decoded, request.headers, provider=provider, host=host),
        policies=recorder.policies, provider=family)
    if not members and all(request.headers.get(k) == merge_header_values(request.headers.get(k), v)
                           for k, v in asked.items()):
        return request, body
    new = with_members(body, decoded, members)
    if new is None:  # a member to replace in a body that does not re-serialize exactly
        return request, body
    headers = request.headers.copy()
    for name, value in asked.items():
        headers[name] = merge_header_values(headers.get(name), value)
    headers.pop("transfer-encoding", None)
    headers["content-length"] = str(len(new))
    return module_of(request).Request(request.method, request.url, headers=headers, content=new,
                                      extensions=request.extensions), new


def _start(recorder: CallRecorder, request: Any, body: bytes, provider: str | None,
           stabilized: Mapping[str, Any] | None = None, *, rewritten: bool = False
           ) -> Pending | None:
    url = request.url
    extensions = getattr(request, "extensions", {})
    # only stableprompt's own clients set the decoded body (a Recorder accepts it); a
    # stabilized body (or one asking for diagnostics: ``rewritten``) is another body, so it
    # is parsed afresh (only a skip's reason: the body is the one sent)
    rewritten = rewritten or (stabilized is not None and "stabilized" in stabilized)
    decoded = None if rewritten else extensions.get(BODY_EXTENSION)
    if decoded is not None:
        pending = recorder.start(str(url.path), request.headers, body,
                                 host=str(url.host) if url.host else None,
                                 method=str(request.method), provider=provider,
                                 decoded=decoded,
                                 resegmented=extensions.get(SEGMENTED_EXTENSION))
    elif extensions.get(RENDERED_EXTENSION) and not rewritten:
        pending = recorder.start(str(url.path), request.headers, body,
                                 host=str(url.host) if url.host else None,
                                 method=str(request.method), provider=provider, rendered=True)
    else:
        pending = recorder.start(str(url.path), request.headers, body,
                                 host=str(url.host) if url.host else None,
                                 method=str(request.method), provider=provider)
    if pending is not None and stabilized:
        pending.detail.update(stabilized)
    marked = extensions.get(DETAIL_EXTENSION) if isinstance(extensions, Mapping) else None
    if pending is not None and isinstance(marked, Mapping):
        pending.detail.update(marked)
    if pending is not None and isinstance(extensions, dict):
        extensions[PENDING_EXTENSION] = pending  # a send that fails has no response to hold it
    return pending


def _observe(recorder: CallRecorder, response: Any, pending: Pending, *, is_async: bool
             ) -> BodyObserver | None:
    """Attach ``pending`` to ``response`` and observe its body.

    Returns:
        An observer for the caller to feed with the (already decoded) in-memory body and
        close, or ``None`` when the body is a stream: it was wrapped so the observer sees each
        chunk as the caller reads it.
    """
    with contextlib.suppress(Exception):  # read-only extensions: the record is still kept
        response.extensions[PENDING_EXTENSION] = pending
    try:
        decoded = in_memory(response)
        observer = recorder.observe(pending, status_code=response.status_code,
                                    headers=response.headers,
                                    content_encoding="" if decoded else None)
        if decoded:
            return observer
        mixin, name = (_AsyncStream, "AsyncRecordingStream") if is_async else (
            _SyncStream, "RecordingStream")
        stream = byte_stream_class(module_of(response), mixin, name=name, is_async=is_async)
        response.stream = stream(response.stream, observer)
    except Exception as exc:
        recorder.finish(pending, Observation(
            status_code=response.status_code,
            detail={"observer_error": f"{type(exc).__name__}: {exc}"}))
    return None


class _Wrapping:
    """What both transports share: the wrapped transport (created on first use from the
    request's module: ``_default`` names its class), the recorder and the provider."""

    _default: str = "HTTPTransport"

    def __init__(
        self, wrapped: Any = None, *, recorder: CallRecorder | None = None,
        provider: str | None = None, stabilize: bool = False, record_in_thread: bool = False,
        cache_policy: CachePolicy | None = None,
    ) -> None:
        if cache_policy is not None and not isinstance(cache_policy, CachePolicy):
            raise InputError(f"cache_policy must be a CachePolicy, got "
                             f"{type(cache_policy).__name__}", code="cache-policy")
        if cache_policy is not None and not stabilize:
            raise InputError("cache_policy sets the TTLs of the breakpoints stabilizing places: "
                             "pass stabilize=True too (or drop cache_policy)",
                             code="cache-policy-without-stabilize")
        if not isinstance(record_in_thread, bool):
            raise ConfigurationError(
                f"record_in_thread must be True or False, got {record_in_thread!r}",
                code="record-in-thread")
        self._wrapped = wrapped
        self._owns_recorder = recorder is None
        self.recorder: CallRecorder = recorder if recorder is not None else Recorder()
        self.provider = provider
        self.stabilize = stabilize
        self.cache_policy = cache_policy
        # what stabilizing remembers (carry, pins, evidence), and the TTLs it gives breakpoints
        self._stabilizer = Stabilizer(cache_policy)
        self.record_in_thread = record_in_thread
        self._calls: CallRecorder = self.recorder
        if record_in_thread:
            if not isinstance(self.recorder, Recorder):
                raise ConfigurationError(
                    f"record_in_thread=True needs a Recorder (it records on the recorder's "
                    f"thread), got {type(self.recorder).__name__}", code="record-in-thread")
            self._calls = DeferredRecorder(self.recorder, decode=False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._wrapped!r}, recorder={self.recorder!r})"

    def _drain(self) -> None:
        """At close, with ``record_in_thread``: the calls still recording are stored (a
        recorder the transport made is closed: its thread stops; a recorder passed in is
        flushed and stays open)."""
        recorder = self.recorder
        if not self.record_in_thread or not isinstance(recorder, Recorder):
            return
        if self._owns_recorder:
            recorder.close()
        else:
            recorder.flush()

    def _cache_operation(self, request: Any) -> str | None:
        """What ``request`` does to a Gemini explicit cache (``_gemini_caches``: recorded as
        such), ``None`` for any other request or a recorder that is not a :class:`Recorder`."""
        try:
            op = gemini.cache_operation(str(request.method), str(request.url.path))
        except Exception:
            return None
        return op if op is not None and isinstance(self.recorder, Recorder) else None

    def _asks_diagnostics(self) -> Recorder | DeferredRecorder | None:
        """The recorder, when it asks providers for cache diagnostics
        (``Recorder(diagnostics=True)``; a :class:`DeferredRecorder` over one)."""
        calls = self._calls
        if isinstance(calls, (Recorder, DeferredRecorder)) and calls.diagnostics:
            return calls
        return None

    def _with_diagnostics(self, request: Any, body: bytes) -> tuple[Any, bytes]:
        """``request`` asking for diagnostics (``_diagnosed``) when the recorder does; calls
        still recording on a recording thread are waited for first (at most
        ``DIAGNOSTICS_WAIT_S``): the compared response id comes from them."""
        calls = self._asks_diagnostics()
        if calls is None:
            return request, body
        if isinstance(calls, DeferredRecorder):
            calls.flush(DIAGNOSTICS_WAIT_S)
        return _diagnosed(request, body, calls, self.provider)

    def _inner(self, request: Any) -> Any:
        if self._wrapped is None:
            self._wrapped = getattr(module_of(request), self._default)()
        return self._wrapped


class RecordingTransport(_Wrapping, _SyncBase):
    """A sync httpx/httpx2 transport that records LLM calls passing through it.

    Args:
        wrapped: The transport that really sends (``httpx.HTTPTransport``,
            ``httpx2.MockTransport``, ...). ``None``: the request's own module's
            ``HTTPTransport()``, created on first use.
        recorder: Where calls are recorded (default: a new in-memory :class:`Recorder`; any
            :class:`CallRecorder`).
        provider: Provider family of the server behind this transport (``"vllm"``,
            ``"llama-cpp"``, ...) for cache rules and usage parsing; default: the recorder's,
            else inferred from the host and wire format (``_wire._formats.provider_for``).
        stabilize: Rewrite recorded requests in flight in ways that cannot change their
            meaning (tools sorted by name, schemas in canonical key order, a
            ``prompt_cache_key`` when the provider is OpenAI (``provider``, else the host
            ``api.openai.com``), Anthropic head and end-of-history breakpoints when the
            client placed none, never below the model minimum by the recorder's token
            counts; a request already in that form is sent byte-identical), see
            ``_stabilize``; the rewrites made are ``verdict_detail["stabilized"]`` on the
            call's row, with ``stabilized_tools`` / ``client_shared_tokens`` /
            ``stabilized_shared_tokens`` for the
            report's savings estimate.
        cache_policy: With ``stabilize``, a :class:`~stableprompt.CachePolicy` whose TTLs
            (request kind ``main``) the Anthropic breakpoints get: the head and history ones
            stabilizing places, and the client's own markers without a ``ttl``
            (``_recording._stabilize_ttls``; markers with a ``ttl`` keep it; longer TTLs
            always before shorter). Without ``stabilize``: :class:`InputError` (code
            ``cache-policy-without-stabilize``); with ``explicit_cache`` (Gemini's):
            :class:`PolicyError` (code ``cache-policy-explicit-cache``).
        record_in_thread: Record on the recorder's thread (:attr:`Recorder.worker
            <stableprompt.Recorder.worker>`): the caller's thread neither decodes nor
            analyses the body (module docstring); the records are complete after
            :meth:`Recorder.flush <stableprompt.Recorder.flush>` (also run by
            :meth:`Recorder.close <stableprompt.Recorder.close>` and at interpreter exit).
            Needs a :class:`Recorder` (else :class:`ConfigurationError`, code
            ``record-in-thread``).

    Attributes:
        recorder: The recorder.
    """

    def handle_request(self, request: Any) -> Any:
        """Send ``request`` through the wrapped transport, recording it if it is an LLM call
        (other paths pass through without their body being read)."""
        inner = self._inner(request)
        op = self._cache_operation(request)
        if op is not None:
            request.read()
            return cache_call(self.recorder, inner.handle_request, request, op)
        if not _recorded(self._calls, request):
            return inner.handle_request(request)
        try:
            body = request.content
        except Exception:
            body = request.read()
        stabilized: dict[str, Any] = {}
        if self.stabilize:
            request, body, stabilized = _stabilized(request, body, self._calls,
                                                    self.provider, self._stabilizer)
        sent = body
        request, body = self._with_diagnostics(request, body)
        pending = _start(self._calls, request, body, self.provider, stabilized,
                         rewritten=body is not sent)
        if pending is None:
            return inner.handle_request(request)
        try:
            response = inner.handle_request(request)
        except Exception as exc:
            self._calls.finish(pending, Observation(error=exc))
            raise
        observer = _observe(self._calls, response, pending, is_async=False)
        if observer is not None:
            observer.feed(response.read())
            observer.close()
        return response

    def close(self) -> None:
        """Close the wrapped transport; with ``record_in_thread``, then wait for the calls
        still recording (a recorder the transport made is closed)."""
        try:
            if self._wrapped is not None:
                self._wrapped.close()
        finally:
            self._drain()

    def __enter__(self) -> RecordingTransport:
        if self._wrapped is not None and hasattr(self._wrapped, "__enter__"):
            self._wrapped.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        try:
            if self._wrapped is not None and hasattr(self._wrapped, "__exit__"):
                self._wrapped.__exit__(exc_type, exc, tb)
        finally:
            self._drain()


class AsyncRecordingTransport(_Wrapping, _AsyncBase):
    """The async twin of :class:`RecordingTransport` (``handle_async_request``).

    Args:
        wrapped: The async transport that really sends; ``None``: the request's module's
            ``AsyncHTTPTransport()``, created on first use.
        recorder: Where calls are recorded (default: a new in-memory :class:`Recorder`).
        provider: As :class:`RecordingTransport`.
        stabilize: As :class:`RecordingTransport`.
        record_in_thread: As :class:`RecordingTransport`.
        cache_policy: As :class:`RecordingTransport`.
    """

    _default = "AsyncHTTPTransport"

    async def handle_async_request(self, request: Any) -> Any:
        """Send ``request`` through the wrapped transport, recording it if it is an LLM call
        (other paths pass through without their body being read)."""
        inner = self._inner(request)
        op = self._cache_operation(request)
        if op is not None:
            await request.aread()
            return await cache_call_async(self.recorder, inner.handle_async_request, request,
                                          op)
        if not _recorded(self._calls, request):
            return await inner.handle_async_request(request)
        try:
            body = request.content
        except Exception:
            body = await request.aread()
        stabilized: dict[str, Any] = {}
        if self.stabilize:
            request, body, stabilized = _stabilized(request, body, self._calls,
                                                    self.provider, self._stabilizer)
        sent = body
        if self._asks_diagnostics() is not None:  # it may wait: off the event loop
            request, body = await asyncio.to_thread(self._with_diagnostics, request, body)
        pending = _start(self._calls, request, body, self.provider, stabilized,
                         rewritten=body is not sent)
        if pending is None:
            return await inner.handle_async_request(request)
        try:
            response = await inner.handle_async_request(request)
        except (Exception, asyncio.CancelledError) as exc:  # cancelled: a server shutting down
            self._calls.finish(pending, Observation(error=exc))
            raise
        observer = _observe(self._calls, response, pending, is_async=True)
        if observer is not None:
            observer.feed(await response.aread())
            observer.close()
        return response

    async def aclose(self) -> None:
        """Close the wrapped transport; with ``record_in_thread``, then wait (off the event
        loop) for the calls still recording (a recorder the transport made is closed)."""
        try:
            if self._wrapped is not None:
                await self._wrapped.aclose()
        finally:
            if self.record_in_thread:
                await asyncio.to_thread(self._drain)

    async def __aenter__(self) -> AsyncRecordingTransport:
        if self._wrapped is not None and hasattr(self._wrapped, "__aenter__"):
            await self._wrapped.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        try:
            if self._wrapped is not None and hasattr(self._wrapped, "__aexit__"):
                await self._wrapped.__aexit__(exc_type, exc, tb)
        finally:
            if self.record_in_thread:
                await asyncio.to_thread(self._drain)


public(AsyncRecordingTransport, RecordingTransport)
