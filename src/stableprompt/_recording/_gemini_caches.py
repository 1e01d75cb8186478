"""Gemini explicit-cache calls recorded as such: one ledger row per ``cachedContents`` create,
update (new ``ttl`` / ``expireTime``) and delete.

An explicit cache is billed per token-hour of storage while it lives (PROVIDERS.md §4.3,
§15), and its life is set by these calls, not by the prompt requests that read it. So a
recording transport (and the proxy, whose transport it is) records each of them: the request
is sent as it came, the answer (a small JSON object) is read whole and handed to the caller
unchanged (same status, headers and raw bytes), and the row says what happened:

- ``wire_format`` ``gemini``, ``provider`` ``gemini``, the cache's model, the status,
  latency and failure class like any row; no usage (a cache call reads nothing and answers
  nothing; its storage is priced by ``_accounting._storage``);
- verdict ``unknown`` with ``unknown_reason`` saying it is a cache call, and
  ``verdict_detail["gemini_cache"]`` = ``{"op": "create" | "update" | "delete", "name":
  "cachedContents/...", "tokens"?: the cache's ``usageMetadata.totalTokenCount``,
  "ttl_s"?: seconds from the answer's ``updateTime`` (``createTime``) to its ``expireTime``:
  how long the cache now lives, on the server's clock}``, as the answer said.

No body, header or query string is kept (a key may sit in ``?key=``); credential header
values are scrubbed from the row like every record's.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from .._canonical import loads
from .._ledger._usage_record import UsageRecord, scrubbed
from .._redact import redact, secrets_in_headers
from ._decoders import decoder_for
from ._errors import failure
from ._http import SESSION_HEADER, header

__all__ = ["CACHE_DETAIL", "CACHE_RECORD_EXTENSION", "cache_call", "cache_call_async",
           "cache_record"]

_log = logging.getLogger("stableprompt.recorder")

CACHE_DETAIL = "gemini_cache"
"""Key of a cache call's facts in ``verdict_detail`` (module docstring)."""

CACHE_RECORD_EXTENSION = "stableprompt.cache_record"
"""Key in ``response.extensions`` of the row a recording transport made for a cache call
(the proxy then makes no unanalysed row for it)."""

_METHODS = {"create": "POST", "update": "PATCH", "delete": "DELETE"}
_REASON = ("a Gemini cachedContents call (explicit cache create / update / delete), not a "
           "prompt: its storage is priced per token-hour in the report")


def _epoch_s(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None


def cache_record(*, op: str, path: str, request_body: bytes, headers: Any, ts: float,
                 status_code: int | None, response_body: bytes | None,
                 session_id: str | None = None, scenario: str | None = None,
                 latency_ms: float | None = None,
                 error: BaseException | None = None) -> UsageRecord | None:
    """The row of one cache call (module docstring); ``None`` (logged) if it cannot be made.

    Args:
        op: :func:`stableprompt._wire.gemini.cache_operation` of the call.
        path: URL path (the query is dropped).
        request_body: The body sent (a create's names the model).
        headers: Request headers (session header and credentials to scrub; not stored).
        ts: Send time, seconds since the epoch.
        status_code: The answer's status, ``None`` without an answer.
        response_body: The answer's body, decoded (``None`` without one).
        session_id: The recorder's session id (``x-stableprompt-session`` wins).
        scenario: The recorder's scenario label.
        latency_ms: Request sent to the end of the answer (milliseconds).
        error: The exception that stopped the exchange, if any.
    """
    try:
        path = path.split("?", 1)[0]
        answer: Mapping[str, Any] = {}
        ok = status_code is not None and 200 <= status_code < 300 and error is None
        parsed_answer: Any = None
        if response_body:
            with contextlib.suppress(ValueError):
                parsed_answer = loads(response_body)
        if ok and isinstance(parsed_answer, Mapping):
            answer = parsed_answer
        sent: Mapping[str, Any] = {}
        if request_body:
            with contextlib.suppress(ValueError):
                parsed = loads(request_body)
                sent = parsed if isinstance(parsed, Mapping) else {}
        at = path.rfind("/cachedContents/")
        name = answer.get("name") or (path[at + 1:] if at >= 0 else None)
        model = answer.get("model") or sent.get("model")
        facts: dict[str, Any] = {"op": op, "name": name if isinstance(name, str) else None}
        usage = answer.get("usageMetadata")
        tokens = usage.get("totalTokenCount") if isinstance(usage, Mapping) else None
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
            facts["tokens"] = tokens  # any other value: unknown (the report says so)
        expire = _epoch_s(answer.get("expireTime"))
        since = _epoch_s(answer.get("updateTime") or answer.get("createTime"))
        if expire is not None and since is not None:
            facts["ttl_s"] = round(max(expire - since, 0.0), 3)
        detail: dict[str, Any] = {"unknown_reason": _REASON, CACHE_DETAIL: facts,
                                  "method": _METHODS[op], "path": path}
        error_class = failure(error, status_code, ok, response_body, parsed_answer, None,
                              detail)
        record = UsageRecord(
            ts_utc=datetime.fromtimestamp(ts, UTC),
            session_id=header(headers, SESSION_HEADER) or session_id,
            scenario=scenario,
            wire_format="gemini",
            provider="gemini",
            model=model.removeprefix("models/") if isinstance(model, str) else None,
            status_code=status_code if status_code and 100 <= status_code <= 599 else None,
            error_class=error_class,
            latency_ms=None if latency_ms is None else max(latency_ms, 0.0),
            verdict="unknown",
            verdict_detail=detail,
        )
        return scrubbed(record, secrets_in_headers(headers))
    except Exception as exc:
        _log.warning("stableprompt could not record a Gemini cache call: %s",
                     redact(f"{type(exc).__name__}: {exc}"))
        return None


def _decoded(raw: bytes, headers: Any) -> bytes | None:
    encoding = header(headers, "content-encoding")
    if not encoding:
        return raw
    try:
        decoder = decoder_for(encoding)
        return decoder.decode(raw) + decoder.flush()
    except Exception:
        return None


def _store(recorder: Any, record: UsageRecord | None) -> None:
    if record is not None:
        recorder.store(record)


def _answered(recorder: Any, request: Any, response: Any, raw: bytes, op: str, ts: float,
              started: float) -> Any:
    """Record the answered call and return the answer rebuilt from its raw bytes."""
    latency = (time.monotonic() - started) * 1000.0
    record = cache_record(op=op, path=str(request.url.path), request_body=request.content,
                          headers=request.headers, ts=ts, status_code=response.status_code,
                          response_body=_decoded(raw, response.headers),
                          session_id=recorder.session_id, scenario=recorder.scenario,
                          latency_ms=latency)
    _store(recorder, record)
    return type(response)(response.status_code, headers=response.headers, content=raw,
                          request=request,
                          extensions={**response.extensions, CACHE_RECORD_EXTENSION: record})


def _failed(recorder: Any, request: Any, op: str, ts: float, started: float,
            error: BaseException) -> None:
    _store(recorder, cache_record(
        op=op, path=str(request.url.path), request_body=request.content,
        headers=request.headers, ts=ts, status_code=None, response_body=None,
        session_id=recorder.session_id, scenario=recorder.scenario,
        latency_ms=(time.monotonic() - started) * 1000.0, error=error))


def cache_call(recorder: Any, send: Callable[[Any], Any], request: Any, op: str) -> Any:
    """Send a cache call with ``send`` and store its row in ``recorder`` (a
    :class:`~stableprompt.Recorder`); the answer is returned with its status, headers and
    raw bytes unchanged. A failed send is recorded and raised again."""
    ts, started = recorder.clock(), time.monotonic()
    try:
        response = send(request)
        try:
            raw = b"".join(response.iter_raw())
        finally:
            response.close()
    except BaseException as exc:
        _failed(recorder, request, op, ts, started, exc)
        raise
    return _answered(recorder, request, response, raw, op, ts, started)


async def cache_call_async(recorder: Any, send: Callable[[Any], Awaitable[Any]], request: Any,
                           op: str) -> Any:
    """The async twin of :func:`cache_call`."""
    ts, started = recorder.clock(), time.monotonic()
    try:
        response = await send(request)
        try:
            raw = b"".join([chunk async for chunk in response.aiter_raw()])
        finally:
            await response.aclose()
    except BaseException as exc:
        _failed(recorder, request, op, ts, started, exc)
        raise
    return _answered(recorder, request, response, raw, op, ts, started)
