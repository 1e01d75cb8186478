"""Provider clients on httpx that send the exact rendered bytes and record every call.

``AnthropicClient`` (Messages), ``OpenAIClient`` (Chat Completions and Responses) and
``OpenAICompatibleClient`` (vLLM, SGLang, llama-server, DeepSeek, OpenRouter, xAI, ...), each
with an ``Async`` twin. A client sends :attr:`ProviderRequest.content` byte for byte (a ``dict``
is serialized once with ``wire_json``, in its insertion order) through a
:class:`~stableprompt.RecordingTransport`, so every attempt becomes one
:class:`~stableprompt.UsageRecord` in the client's :class:`~stableprompt.Recorder`.

Body additions, when configured, are appended as new top-level members after the last byte
of the body (the caller's object and every byte of its rendering are left as they are):
``stream``/``stream_options`` for ``send(..., stream=True)``, the vLLM ``cache_salt``, and the
provider cache-diagnostics fields. A conflicting value already in the body raises
:class:`~stableprompt.InputError` (code ``client-body-conflict``).

Retries: up to ``max_retries`` more attempts on 408/409/429/5xx answers and on connection
errors and timeouts (also while reading a non-streaming body), waiting
``retry-after-ms``/``retry-after`` when the provider sends it (up to 60 s), else
``min(backoff_s * 2**attempt, max_backoff_s)`` scaled by a random factor in ``[0.5, 1.0)``
(full jitter would allow near-zero waits). A stream is never retried once its
body started. Errors are mapped in one place (``_recording._errors``: ``map_transport_error`` and
``http_status_error``) to :class:`ProviderHTTPError` / :class:`ProviderConnectionError` /
:class:`ProviderTimeoutError`, whose ``retryable`` says whether a retry could help.

API keys come from the argument or the documented variable (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``; for compatible servers the ``api_key_env`` you name). They are sent as a
header and are never logged, never part of a record (records hold no headers), and scrubbed
from error messages and reprs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import itertools
import os
import random
import time
from collections.abc import (
    Awaitable,
    Callable,
    Generator,
    Mapping,
)
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar

import httpx

from .._canonical import loads, wire_json
from .._exceptions import ConfigurationError, InputError, ProviderError
from .._ledger._usage_record import UsageRecord
from .._public import public
from .._recording._call import Pending
from .._recording._diagnose import diagnostics_asked, with_members
from .._recording._errors import http_status_error, map_transport_error
from .._recording._recorder import Recorder
from .._recording._transport import (
    BODY_EXTENSION,
    DETAIL_EXTENSION,
    PENDING_EXTENSION,
    RENDERED_EXTENSION,
    SEGMENTED_EXTENSION,
    AsyncRecordingTransport,
    RecordingTransport,
)
from .._wire import anthropic, openai_chat
from .._wire._formats import detect, endpoint_path, provider_for
from .._wire._request import ProviderRequest
from .._wire._segmenter import SegmentedRequest
from ._events import RECORD_WAIT_S, AsyncEventStream, EventStream

__all__ = [
    "ANTHROPIC_VERSION",
    "DIAGNOSTICS_BETA",
    "AnthropicClient",
    "AsyncAnthropicClient",
    "AsyncEventStream",
    "AsyncOpenAIClient",
    "AsyncOpenAICompatibleClient",
    "EventStream",
    "OpenAIClient",
    "OpenAICompatibleClient",
]

ANTHROPIC_VERSION = "2023-06-01"
"""``anthropic-version`` header sent by :class:`AnthropicClient`."""

DIAGNOSTICS_BETA = anthropic.DIAGNOSTICS_BETA

_MAX_RETRY_AFTER_S = 60.0

def retry_after_s(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds the provider asks to wait: ``retry-after-ms``, else ``retry-after`` (seconds or
    an HTTP date); ``None`` when absent, unparsable or negative."""
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            value = float(ms) / 1000.0
            return value if value >= 0 else None
        raw = headers.get("retry-after")
        if raw is None:
            return None
        try:
            value = float(raw)
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(str(raw))
            value = parsed.timestamp() - (time.time() if now is None else now)
        return value if value >= 0 else None
    except Exception:
        return None


@dataclass(frozen=True)
class _Prepared:
    wire_format: str
    path: str
    content: bytes
    stream: bool
    headers: dict[str, str]
    decoded: Mapping[str, Any] | None = None  # ``content`` decoded, when it is known
    segmented: Any = None  # its Resegmented, when the recorder made it for ``_prepare``
    rendered: bool = False  # ``content`` is the SDK's rendering (+ ``_append``), undecoded
    detail: Mapping[str, Any] | None = None  # evidence for the row (``DETAIL_EXTENSION``)

    @property
    def extensions(self) -> dict[str, Any] | None:
        """What the recording transport is told about the body (``_recording._transport``)."""
        out: dict[str, Any] | None = None
        if self.decoded is not None:
            out = {BODY_EXTENSION: self.decoded, SEGMENTED_EXTENSION: self.segmented}
        elif self.rendered:
            out = {RENDERED_EXTENSION: True}
        if self.detail:
            out = {**(out or {}), DETAIL_EXTENSION: dict(self.detail)}
        return out


@dataclass(frozen=True)
class _Failure:
    """An attempt that failed: the mapped error, the answer's headers (for ``retry-after``)
    and the original exception."""

    error: ProviderError
    headers: Any = None
    cause: BaseException | None = None


@dataclass(frozen=True)
class _Done:
    value: Any


_Step = tuple[str, Any]
"""One I/O step of :meth:`_Base._exchange`: ``("send", request)`` -> response,
``("read", response)`` -> body bytes (the response is closed after), ``("sleep", seconds)``."""


def _advance(steps: Generator[_Step, Any, Any], ok: bool, value: Any) -> _Step | _Done:
    """Resume ``steps`` with a step's result (``ok``) or its exception; its next step, or
    :class:`_Done` with its return value."""
    try:
        return steps.send(value) if ok else steps.throw(value)
    except StopIteration as stop:
        return _Done(stop.value)


def _append(content: bytes, body: Mapping[str, Any], fields: Mapping[str, Any]) -> bytes:
    """Append ``fields`` as new members after the body's last byte (keys already present with
    the same value are skipped; a different value raises)."""
    extra = b""
    for key, value in fields.items():
        if key in body:
            if body[key] != value:
                raise InputError(
                    f"request body has {key}={body[key]!r} but the client is configured to "
                    f"send {value!r}; remove it from the body or change the client setting",
                    code="client-body-conflict",
                    pointer=f"/{key}",
                )
            continue
        extra += b"," + wire_json(key) + b":" + wire_json(value)
    if not extra:
        return content
    stripped = content.rstrip()
    if not stripped.endswith(b"}"):
        raise InputError("request body is not a JSON object", code="client-body-shape")
    head = stripped[:-1].rstrip()
    if head.endswith(b"{"):
        extra = extra[1:]
    return head + extra + b"}"


def _parse_json(data: bytes, what: str) -> Any:
    try:
        return loads(data)
    except ValueError as exc:
        raise ProviderError(
            f"{what} is not valid JSON ({exc})", code="provider-invalid-json"
        ) from exc


class _Base:
    """Configuration, body preparation and retry policy shared by all clients."""

    provider: ClassVar[str] = "openai"
    env_var: ClassVar[str | None] = None
    default_base_url: ClassVar[str] = ""
    wire_formats: ClassVar[tuple[str, ...]] = ()
    _http: httpx.Client | httpx.AsyncClient

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        recorder: Recorder | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 2,
        diagnostics: bool = False,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        api_key_env: str | None = None,
        cache_salt: str | None = None,
        provider: str | None = None,
        record_in_thread: bool = False,
    ) -> None:
        if max_retries < 0:
            raise InputError("max_retries must be >= 0", code="client-config")
        if timeout_s <= 0:
            raise InputError("timeout_s must be > 0", code="client-config")
        env = api_key_env if api_key_env is not None else self.env_var
        if api_key is None and env:
            api_key = os.environ.get(env) or None
            if api_key is None:
                raise ConfigurationError(
                    f"no API key: set the {env} environment variable or pass api_key=",
                    code="api-key-missing",
                )
        if cache_salt is not None and (not isinstance(cache_salt, str) or not cache_salt):
            raise InputError("cache_salt must be a non-empty string", code="client-config")
        self.__api_key = api_key
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        if not self.base_url:
            raise InputError("base_url is required", code="client-config")
        self._owns_recorder = recorder is None
        self.recorder = recorder if recorder is not None else Recorder()
        self.record_in_thread = record_in_thread
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.diagnostics = diagnostics
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.cache_salt = cache_salt
        self.call_provider = provider
        self._last: Pending | None = None
        self._random = random.Random()

    @property
    def last_record(self) -> UsageRecord | None:
        """The record of the last call whose response was read (a stream's once it ended or
        was closed) or whose attempt failed without a response, ``None`` before. With
        ``record_in_thread`` it waits for that call's recording, at most
        :data:`RECORD_WAIT_S` seconds (blocking: reading it right after each call puts the
        finishing back on the caller's path; an async client's event loop stalls meanwhile:
        ``await asyncio.to_thread(client.flush)`` first)."""
        pending = self._last
        return None if pending is None else pending.wait(RECORD_WAIT_S)

    def flush(self, timeout_s: float | None = None) -> bool:
        """:meth:`Recorder.flush`: block until every call recorded in thread so far is stored
        (False: ``timeout_s`` seconds passed first; async code: ``asyncio.to_thread``)."""
        return self.recorder.flush(timeout_s)

    def _drain(self) -> None:
        """At close, after the HTTP pool (whose recording transport already waited for the
        calls still recording): a recorder the client made is closed, its thread stops."""
        if self._owns_recorder:
            self.recorder.close()

    def __repr__(self) -> str:
        key = "None" if self.__api_key is None else "'[REDACTED]'"
        return f"{type(self).__name__}(base_url={self.base_url!r}, api_key={key})"

    @property
    def _secrets(self) -> tuple[str, ...]:
        return (self.__api_key,) if self.__api_key else ()

    def _auth_headers(self) -> dict[str, str]:
        key = self.__api_key
        return {} if key is None else {"authorization": f"Bearer {key}"}

    def _default_headers(self) -> dict[str, str]:
        return {"content-type": "application/json", "accept": "application/json",
                **self._auth_headers()}

    def _http_options(self, transport: Any) -> dict[str, Any]:
        """Keyword arguments of the ``httpx.Client``/``AsyncClient`` behind the client."""
        return {"headers": self._default_headers(), "timeout": httpx.Timeout(self.timeout_s),
                "transport": transport}

    def _url(self, path: str) -> str:
        if self.base_url.endswith("/v1") and path.startswith("/v1/"):
            path = path[3:]
        return self.base_url + path

    def _wire_of(self, body: Mapping[str, Any]) -> str:
        if len(self.wire_formats) == 1:
            return self.wire_formats[0]
        return "openai-responses" if detect(body) == "openai-responses" else (
            "openai-chat")

    def _prepare(self, request: ProviderRequest | Mapping[str, Any], stream: bool | None
                 ) -> _Prepared:
        fresh = False  # the body is decoded here, so nobody changed it since
        found = None
        params = None  # a rendered request's params stand for its body (not decoded here)
        if self.diagnostics and self.record_in_thread:  # read the recorder's state below:
            self.flush(RECORD_WAIT_S)  # the predecessor's response id recorded, nothing racing
        if isinstance(request, ProviderRequest):
            wire, path, content = request.wire_format, request.path, request.content
            fresh = "body" not in request.__dict__
            if fresh and not self.diagnostics:
                params = request.params  # everything the checks below read of the body
            # A turn of a recorded conversation: its body is rebuilt from the previous
            # request's and the new items only (the bytes are not decoded again).
            found = self.recorder.segment_rendered(wire, content) if fresh and \
                params is None else None
            body: Mapping[str, Any] = params if params is not None else \
                request.body if found is None else found.segmented._body_view
        elif isinstance(request, Mapping):
            body = request
            wire = self._wire_of(body)
            path, content = endpoint_path(wire), wire_json(dict(body))
        else:
            raise InputError(
                f"send() takes a ProviderRequest or a dict, not {type(request).__name__}",
                code="client-request-type",
            )
        if wire not in self.wire_formats:
            raise InputError(
                f"{type(self).__name__} cannot send {wire!r} requests "
                f"(it sends {', '.join(self.wire_formats)})",
                code="client-wire-format",
            )
        if stream is None:
            stream = body.get("stream") is True
        fields: dict[str, Any] = {}
        if stream:
            fields["stream"] = True
            if wire == openai_chat.WIRE_FORMAT:
                fields.update({k: v for k, v in openai_chat.STREAM_FIELDS.items()
                               if k not in body})
        elif body.get("stream") is True:
            raise InputError("the body asks for a stream but send(stream=False) was given",
                             code="client-body-conflict", pointer="/stream")
        if self.cache_salt is not None:
            fields["cache_salt"] = self.cache_salt
        headers: dict[str, str] = {"accept": "text/event-stream"} if stream else {}
        sent, extra_headers = self._diagnose(wire, body, _append(content, body, fields),
                                             None if found is None else found.segmented)
        if isinstance(request, ProviderRequest):
            extra_headers = merge_headers(request.headers, extra_headers)
        headers.update(extra_headers)
        if params is not None:  # the recorder segments the bytes sent against the previous
            # request's (members appended after the last byte keep them compact: ``_append``)
            return _Prepared(wire, path, sent, stream, headers, rendered=True)
        # The recorder reuses the body decoded here when the bytes sent are the request's.
        decoded = body if fresh and sent is content else None
        return _Prepared(wire, path, sent, stream, headers, decoded,
                         found if decoded is not None else None)

    def _diagnose(self, wire: str, body: Mapping[str, Any], content: bytes,
                  segmented: SegmentedRequest | None = None) -> tuple[bytes, dict[str, str]]:
        """With ``diagnostics``, the provider cache-diagnostics members and headers
        (``_recording._diagnose``: Anthropic's ``diagnostics.previous_message_id`` and beta
        header, OpenAI Responses' ``prompt_cache_options.comparison_response_id``), compared
        with the request our attribution compares with."""
        if not self.diagnostics:
            return content, {}
        host = httpx.URL(self.base_url).host
        members, headers = diagnostics_asked(
            wire, body, lambda: self.recorder.previous_response_id(
                wire, body, provider=self.call_provider, host=host, segmented=segmented),
            policies=self.recorder.policies,
            provider=provider_for(host, wire, self.call_provider))
        sent = with_members(content, body, members)
        return (content, {}) if sent is None else (sent, headers)

    def _delay_s(self, attempt: int, headers: Any) -> float:
        asked = retry_after_s(headers) if headers is not None else None
        if asked is not None and asked <= _MAX_RETRY_AFTER_S:
            return asked
        base = min(self.backoff_s * (2.0**attempt), self.max_backoff_s)
        return base * (0.5 + self._random.random() / 2)

    def _retry_delay(self, attempt: int, failure: _Failure) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` (0-based), or ``None``: raise."""
        if not failure.error.retryable or attempt >= self.max_retries:
            return None
        return self._delay_s(attempt, failure.headers)

    def _exchange(self, prepared: _Prepared, url: str, stream_class: type[Any]
                  ) -> Generator[_Step, Any, Any]:
        """One call with its retries, as I/O steps (see :data:`_Step`) that the sync and async
        clients perform; ``httpx.HTTPError`` from a step is thrown back in here.

        Returns:
            The parsed JSON body, or ``stream_class(response, self)`` for a 2xx stream.

        Raises:
            ProviderError: the last attempt's mapped error (see :meth:`_SyncClient.send`).
        """
        for attempt in itertools.count():
            request = self._http.build_request(
                "POST", url, content=prepared.content, headers=prepared.headers,
                extensions=prepared.extensions)
            try:
                response = yield ("send", request)
            except httpx.HTTPError as exc:
                self._done(request)  # the failed attempt is the last call
                failure = _Failure(map_transport_error(exc, secrets=self._secrets), cause=exc)
            else:
                if prepared.stream and response.status_code < 300:
                    return stream_class(response, self)
                try:
                    data = yield ("read", response)  # a read timeout is retried too
                except httpx.HTTPError as exc:
                    data = None
                    failure = _Failure(map_transport_error(exc, secrets=self._secrets),
                                       cause=exc)
                self._done(response)
                if data is not None and response.status_code < 300:
                    return _parse_json(data, "response body")
                if data is not None:
                    failure = _Failure(self._status_error(response, data), response.headers)
            delay = self._retry_delay(attempt, failure)
            if delay is None:
                raise failure.error from failure.cause
            yield ("sleep", delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _status_error(self, response: httpx.Response, body: bytes) -> ProviderError:
        return http_status_error(response.status_code, body, url=str(response.request.url),
                                 secrets=self._secrets)

    def _done(self, exchange: httpx.Response | httpx.Request) -> None:
        """The response was read or closed, or the request failed without one: its call is
        :attr:`last_record`'s."""
        pending = exchange.extensions.get(PENDING_EXTENSION)
        self._last = pending if isinstance(pending, Pending) else None


_LIST_HEADERS = frozenset({"anthropic-beta"})
"""Headers whose values are comma-separated lists: merged, not replaced."""


def merge_headers(first: Mapping[str, str], second: Mapping[str, str]) -> dict[str, str]:
    """``first`` and ``second`` as one header dict: a list header both set (``anthropic-beta``)
    keeps every value once, sorted (a stable order: a gateway was seen reordering them per
    request), any other header takes ``second``'s value."""
    merged = dict(first)
    for name, value in second.items():
        if name.lower() in _LIST_HEADERS and name in merged:
            values = {v.strip() for v in f"{merged[name]},{value}".split(",") if v.strip()}
            merged[name] = ",".join(sorted(values))
        else:
            merged[name] = value
    return merged


class _AnthropicMixin(_Base):
    provider = "anthropic"
    env_var = "ANTHROPIC_API_KEY"
    default_base_url = "https://api.anthropic.com"
    wire_formats = ("anthropic",)

    def _auth_headers(self) -> dict[str, str]:
        secrets = self._secrets
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if secrets:
            headers["x-api-key"] = secrets[0]
        return headers

class _OpenAIMixin(_Base):
    provider = "openai"
    env_var = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"
    wire_formats = ("openai-chat", "openai-responses")


# --------------------------------------------------------------------------- sync


class _SyncClient(_Base):
    _http: httpx.Client

    def __init__(
        self,
        api_key: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        **kwargs: Any,
    ) -> None:
        super().__init__(api_key, **kwargs)
        self._sleep = sleep
        self._http = httpx.Client(**self._http_options(
            RecordingTransport(transport if transport is not None else httpx.HTTPTransport(),
                               recorder=self.recorder, provider=self.call_provider,
                               record_in_thread=self.record_in_thread)))

    def send(self, request: ProviderRequest | Mapping[str, Any], *,
             stream: bool | None = None) -> Any:
        """Send one request (exact bytes), retrying transient failures.

        Args:
            request: A :class:`ProviderRequest` (its ``content`` is sent as is) or a body
                ``dict`` (serialized once, insertion order).
            stream: ``True`` streams (adds ``"stream": true``, and for Chat Completions
                ``stream_options.include_usage``, when absent); ``None`` follows the body.

        Returns:
            The parsed JSON response, or for streams an :class:`EventStream`. The call's
            record is :attr:`last_record` (streams: ``EventStream.record`` at the end).

        Raises:
            ProviderHTTPError: non-2xx answer after the retries (``status_code``, ``body``).
            ProviderConnectionError, ProviderTimeoutError: transport failure after retries.
            ProviderError: a 2xx body that is not JSON (code ``provider-invalid-json``).
            InputError: the request cannot be sent by this client or conflicts with its
                configuration.
        """
        return self._send(self._prepare(request, stream))

    def _send_marked(self, request: ProviderRequest | Mapping[str, Any],
                     detail: Mapping[str, Any]) -> Any:
        """:meth:`send` without streaming, ``detail`` added to the call's ``verdict_detail``
        (``DETAIL_EXTENSION``: the keep-alive's requests, ``_keepalive``)."""
        return self._send(dataclasses.replace(self._prepare(request, False), detail=detail))

    def _send(self, prepared: _Prepared) -> Any:
        steps = self._exchange(prepared, self._url(prepared.path), EventStream)
        step = _advance(steps, True, None)
        while not isinstance(step, _Done):
            try:
                step = _advance(steps, True, self._perform(*step))
            except httpx.HTTPError as exc:
                step = _advance(steps, False, exc)
        return step.value

    def _perform(self, op: str, arg: Any) -> Any:
        if op == "send":
            return self._http.send(arg, stream=True)
        if op == "read":
            try:
                return arg.read()
            finally:
                arg.close()
        return self._sleep(arg)

    def close(self) -> None:
        """Close the HTTP connection pool and wait for the calls still recording
        (``record_in_thread``: :meth:`flush`)."""
        try:
            self._http.close()
        finally:
            self._drain()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class AnthropicClient(_AnthropicMixin, _SyncClient):
    """Anthropic Messages API client (``POST /v1/messages``), sync.

    Args:
        api_key: API key; default ``ANTHROPIC_API_KEY`` (missing: :class:`ConfigurationError`
            naming the variable).
        base_url: Server root (default ``https://api.anthropic.com``; the emulator's loopback
            URL in tests and demos).
        recorder: Where calls are recorded (default: a new in-memory :class:`Recorder`).
        timeout_s: Per-request timeout (connect, read, write, pool), seconds.
        max_retries: Extra attempts on 408/409/429/5xx, connection errors and timeouts.
        diagnostics: Ask Anthropic for cache diagnostics: the ``anthropic-beta:
            cache-diagnosis-2026-04-07`` header on every request and ``diagnostics:
            {"previous_message_id": <previous response id of this lineage>}`` in the body;
            the answer is stored in ``UsageRecord.diagnostics`` beside our verdict.
        transport: The httpx transport that really sends (default ``httpx.HTTPTransport()``;
            ``httpx.MockTransport`` in tests). It is wrapped in a RecordingTransport.
        backoff_s: First retry backoff (seconds), doubled per attempt.
        max_backoff_s: Backoff cap (seconds).
        sleep: How to wait between retries (``time.sleep``).
        record_in_thread: Record on the recorder's thread (:attr:`Recorder.worker`, while
            the request is in flight) instead of the caller's, which only sends (a rendered
            :class:`ProviderRequest` is not decoded: its :attr:`~ProviderRequest.params`
            suffice; it is with ``diagnostics=True``, which needs the predecessor first).
            ``last_record`` / ``EventStream.record`` wait for their call; :meth:`flush`,
            :meth:`close`, the context exit and interpreter exit for all. With a ledger,
            queued calls are journaled: a killed process loses none
            (:meth:`Ledger.replay_spill` stores them, verdict ``unknown``).

    Attributes:
        recorder: The recorder.
        last_record: The record of the last call (see ``record_in_thread``).
    """


class OpenAIClient(_OpenAIMixin, _SyncClient):
    """OpenAI client for Chat Completions and Responses (chosen by the request), sync.

    Args as :class:`AnthropicClient`; the key comes from ``OPENAI_API_KEY`` and the default
    ``base_url`` is ``https://api.openai.com/v1``. ``diagnostics=True`` adds
    ``prompt_cache_options.comparison_response_id`` to Responses requests (Chat Completions has
    no such field); the response's ``prompt_cache_diagnostics`` is stored on the record.
    """


class OpenAICompatibleClient(_OpenAIMixin, _SyncClient):
    """Client for OpenAI-compatible servers: vLLM, SGLang, llama-server, DeepSeek,
    OpenRouter, xAI, ...

    Args:
        base_url: Server root (``http://127.0.0.1:8000`` or ``.../v1``).
        api_key: Key, if the server wants one; else read from ``api_key_env`` if given, else
            no ``Authorization`` header is sent.
        api_key_env: Environment variable holding the key (``DEEPSEEK_API_KEY``, ...).
        provider: Provider family for cache rules and usage parsing (``"vllm"``,
            ``"sglang"``, ``"llama-cpp"``, ``"deepseek"``, ``"openrouter"``, ``"xai"``; default
            ``"vllm"``).
        cache_salt: Tenant salt added to every body as ``cache_salt`` (vLLM). Set it from
            configuration, one per trust domain, never derived from prompt content: vLLM mixes
            it into the first block's hash "ensuring that only requests with the same salt can
            reuse cached KV blocks. This prevents timing-based attacks" where one tenant times
            requests to learn which prefixes another tenant has cached
            (``vllm-project/vllm`` ``docs/design/prefix_caching.md``). vLLM asks for a random,
            secret, unpredictable value (e.g. 43 characters of base64, 256 bits).
        **kwargs: As :class:`AnthropicClient` (``recorder``, ``timeout_s``, ``max_retries``,
            ``diagnostics``, ``transport``, ...).
    """

    def __init__(self, base_url: str, *, api_key: str | None = None,
                 api_key_env: str | None = None, provider: str = "vllm",
                 cache_salt: str | None = None, **kwargs: Any) -> None:
        recorder = kwargs.pop("recorder", None)
        super().__init__(api_key, base_url=base_url, api_key_env=api_key_env or "",
                         provider=provider, cache_salt=cache_salt, recorder=recorder, **kwargs)


# --------------------------------------------------------------------------- async


class _AsyncClient(_Base):
    _http: httpx.AsyncClient

    def __init__(
        self,
        api_key: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **kwargs: Any,
    ) -> None:
        super().__init__(api_key, **kwargs)
        self._sleep = sleep
        self._http = httpx.AsyncClient(**self._http_options(
            AsyncRecordingTransport(
                transport if transport is not None else httpx.AsyncHTTPTransport(),
                recorder=self.recorder, provider=self.call_provider,
                record_in_thread=self.record_in_thread)))

    async def send(self, request: ProviderRequest | Mapping[str, Any], *,
                   stream: bool | None = None) -> Any:
        """Async :meth:`_SyncClient.send`: same arguments, result, retries and errors;
        streams come back as an :class:`AsyncEventStream`."""
        if self.diagnostics and self.record_in_thread:  # the wait _prepare makes, off the loop
            await asyncio.to_thread(self.flush, RECORD_WAIT_S)
        return await self._send(self._prepare(request, stream))

    async def _send_marked(self, request: ProviderRequest | Mapping[str, Any],
                           detail: Mapping[str, Any]) -> Any:
        """Async :meth:`_SyncClient._send_marked`."""
        if self.diagnostics and self.record_in_thread:
            await asyncio.to_thread(self.flush, RECORD_WAIT_S)
        return await self._send(dataclasses.replace(self._prepare(request, False),
                                                    detail=detail))

    async def _send(self, prepared: _Prepared) -> Any:
        steps = self._exchange(prepared, self._url(prepared.path), AsyncEventStream)
        step = _advance(steps, True, None)
        while not isinstance(step, _Done):
            try:
                step = _advance(steps, True, await self._perform(*step))
            except httpx.HTTPError as exc:
                step = _advance(steps, False, exc)
        return step.value

    async def _perform(self, op: str, arg: Any) -> Any:
        if op == "send":
            return await self._http.send(arg, stream=True)
        if op == "read":
            try:
                return await arg.aread()
            finally:
                await arg.aclose()
        return await self._sleep(arg)

    async def aclose(self) -> None:
        """Close the HTTP connection pool and wait (off the event loop) for the calls still
        recording (``record_in_thread``: :meth:`flush`)."""
        try:
            await self._http.aclose()
        finally:
            if self._owns_recorder:  # its close waits for its thread: off the loop
                await asyncio.to_thread(self._drain)

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


class AsyncAnthropicClient(_AnthropicMixin, _AsyncClient):
    """Async :class:`AnthropicClient` (``sleep`` is an async callable, ``transport`` an
    ``httpx.AsyncBaseTransport``)."""


class AsyncOpenAIClient(_OpenAIMixin, _AsyncClient):
    """Async :class:`OpenAIClient`."""


class AsyncOpenAICompatibleClient(_OpenAIMixin, _AsyncClient):
    """Async :class:`OpenAICompatibleClient`."""

    def __init__(self, base_url: str, *, api_key: str | None = None,
                 api_key_env: str | None = None, provider: str = "vllm",
                 cache_salt: str | None = None, **kwargs: Any) -> None:
        recorder = kwargs.pop("recorder", None)
        super().__init__(api_key, base_url=base_url, api_key_env=api_key_env or "",
                         provider=provider, cache_salt=cache_salt, recorder=recorder, **kwargs)


public(AnthropicClient, AsyncAnthropicClient, AsyncOpenAIClient, AsyncOpenAICompatibleClient,
       OpenAIClient, OpenAICompatibleClient)
