"""Records made without a request's analysis: what a call is known to be when its finishing
never ran (the proxy's pending journal) and the rows of forwarded requests that are no LLM
call of a known format (the proxy's other traffic).

Both are verdict ``unknown``, carry no predecessor, LCP or prediction, and are scrubbed of the
request's credential header values like every record; neither raises (``None``, logged, when
one cannot be built).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .._canonical import loads, wire_json
from .._ledger._provisional import (
    USAGE_AS_RECEIVED,
    USAGE_MEMBERS,
    usage_fields,
    with_parsed_usage,
)
from .._ledger._usage_record import UNANALYSED, UsageRecord, scrubbed, scrubbed_fields
from .._redact import redact, secrets_in_headers
from ._call import Pending, elapsed_ms
from ._errors import error_class_of, failure
from ._identity import session_from_headers
from ._observer import Observation
from ._outcome import identity_fields

__all__ = ["provisional_fields", "provisional_identity", "provisional_record",
           "unanalysed_record"]

_log = logging.getLogger("stableprompt.recorder")


def provisional_fields(pending: Pending, observation: Observation | None = None, *,
                       scenario: str | None = None, now: float) -> dict[str, Any] | None:
    """The row ``pending`` gets if its finishing never runs, as the JSON object of its line
    (the fields that are set; ``ts_utc`` in ISO 8601; text fields scrubbed): what
    :meth:`UsageRecord.from_json <stableprompt.UsageRecord.from_json>` reads. What is
    known without analysis, made cheaply on the caller's thread before the finishing is
    queued (the pending journal, ``_ledger._journal``, writes it as it is; replayed only when
    the process died first).

    Same ``record_id`` as the final row (which wins when both exist); the request's
    identity (time, session, format, provider, model; turn, lineage, fingerprint and our
    token count when its analysis ran: deferred, it may not have), status, failure class,
    latency, TTFT, response id and the usage the answer reported (a stream's; a 2xx JSON
    body's usage members as received, in ``verdict_detail["usage_as_received"]``, parsed
    only when the row is read: ``_ledger._provisional``); verdict ``unknown``,
    ``verdict_detail`` ``{"unknown_reason": ..., "recovered": "pending journal"}``
    (``"incomplete": True`` for a cut body).

    Args:
        pending: The call.
        observation: What its response amounted to (``None``, or no ``status_code``: no
            response; its ``error``: the exception the send raised).
        scenario: The recorder's scenario label.
        now: The recorder's monotonic clock now (seconds), for the latency.

    Returns:
        The object, or ``None`` (logged) if it cannot be made.
    """
    try:
        detail: dict[str, Any] = {"unknown_reason": _RECOVERED, "recovered": "pending journal"}
        observed = observation if observation is not None else Observation()
        status, body, error = observed.status_code, observed.body, observed.error
        response_id, ttft_ms = observed.response_id, observed.ttft_ms
        provider_error, parsed = observed.provider_error, None
        if observed.incomplete is not None:
            detail["incomplete"] = True
        if body is not None:
            with contextlib.suppress(ValueError):
                parsed = loads(body)
        usage = observed.usage if status is not None and 200 <= status < 300 else None
        success = status is not None and 200 <= status < 300 and error is None
        error_class = failure(error, status, success, body, parsed, provider_error, {})
        if usage is None and error_class is None and isinstance(parsed, Mapping):
            # parsed only if the row is ever read (``_ledger._provisional``)
            received = {key: parsed[key] for key in USAGE_MEMBERS if key in parsed}
            if received:
                detail[USAGE_AS_RECEIVED] = redact(received, secrets=pending.secrets)
            if response_id is None and isinstance(parsed.get("id"), str):
                response_id = parsed["id"]
        answer: dict[str, Any] = {} if usage is None else usage_fields(usage)
        answer["latency_ms"] = elapsed_ms(pending.started, now)
        if ttft_ms is not None:
            answer["ttft_ms"] = max(ttft_ms, 0.0)
        if status and 100 <= status <= 599:
            answer["status_code"] = status
        answer["error_class"], answer["response_id"] = error_class, response_id
        identity = pending.journal_identity
        if identity is None:
            identity = provisional_identity(pending, scenario)
        return {**identity,
                **scrubbed_fields({k: v for k, v in answer.items() if v is not None},
                                  pending.secrets),
                "verdict": "unknown",
                "verdict_detail": detail}  # our own text, and the usage scrubbed above
    except Exception as exc:
        _log.warning("stableprompt could not make a provisional record: %s",
                     redact(f"{type(exc).__name__}: {exc}", secrets=pending.secrets))
        return None


def provisional_identity(pending: Pending, scenario: str | None) -> dict[str, Any]:
    """The request's part of :func:`provisional_fields` (``identity_fields`` that are set,
    ``ts_utc`` in ISO 8601, scrubbed): made by the call's analysis job when the call is
    journaled (``pending.journal_identity``), which has just set what it holds, so the caller's
    thread does not. Raises what scrubbing raises (callers guard)."""
    fields = identity_fields(pending, scenario)
    fields["ts_utc"] = fields["ts_utc"].isoformat()
    return scrubbed_fields({k: v for k, v in fields.items() if v is not None}, pending.secrets)


_RECOVERED = ("the recording process stopped before this call was analysed: recovered from "
              "its pending journal")


def provisional_record(pending: Pending, observation: Observation | None = None, *,
                       scenario: str | None = None, now: float) -> UsageRecord | None:
    """The record of :func:`provisional_fields`, read from their JSON as a replay of the
    journal reads it (its usage parsed). Never raises: ``None``, logged, when it cannot be
    made."""
    fields = provisional_fields(pending, observation, scenario=scenario, now=now)
    if fields is None:
        return None
    try:
        return with_parsed_usage(UsageRecord.from_json(wire_json(fields)))
    except Exception as exc:
        _log.warning("stableprompt could not make a provisional record: %s",
                     redact(f"{type(exc).__name__}: {exc}", secrets=pending.secrets))
        return None


def unanalysed_record(*, method: str, path: str, reason: str, headers: Any = None,
                      ts: float, session_id: str | None = None, scenario: str | None = None,
                      provider: str | None, status_code: int | None = None,
                      error: BaseException | None = None, latency_ms: float | None = None,
                      request_bytes: int | None = None,
                      response_bytes: int | None = None) -> UsageRecord | None:
    """The record of a request forwarded without analysis: wire format and verdict
    ``unknown`` (:data:`~stableprompt._ledger._usage_record.UNANALYSED`), no usage,
    ``verdict_detail`` ``{"unknown_reason": reason, "method", "path", "request_bytes",
    "response_bytes"}`` (byte counts as sent on the wire, ``None`` when unknown). Nothing of
    the request is kept beyond that: no body, no header, no query string (``path`` is the URL
    path alone; a key may sit in a query, e.g. Gemini's ``?key=``); the session comes from
    ``x-stableprompt-session``, else ``session_id``.

    Args:
        method: HTTP method.
        path: URL path without the query string.
        reason: Why the request was not analysed (one sentence).
        headers: Request headers (session header and credentials to scrub; not stored).
        ts: Send time, seconds since the epoch.
        session_id: The recorder's session id, if any.
        scenario: The recorder's scenario label.
        provider: Provider family.
        status_code: The upstream's status (``None`` when it did not answer).
        error: The exception that stopped the exchange, if any (``error_class``).
        latency_ms: Request sent to the end of the answer (milliseconds).
        request_bytes: Request body size (bytes).
        response_bytes: Response body bytes sent to the client (as received, possibly
            compressed).
    """
    try:
        secrets = secrets_in_headers(headers)
        record = UsageRecord(
            ts_utc=datetime.fromtimestamp(ts, UTC),
            session_id=session_from_headers(headers) or session_id,
            scenario=scenario,
            wire_format=UNANALYSED,  # type: ignore[arg-type]
            provider=provider,
            status_code=status_code if status_code and 100 <= status_code <= 599
            else None,
            error_class=error_class_of(error),
            latency_ms=None if latency_ms is None else max(latency_ms, 0.0),
            verdict="unknown",
            verdict_detail={"unknown_reason": reason, "method": method.upper(),
                            "path": path.split("?", 1)[0],
                            "request_bytes": request_bytes,
                            "response_bytes": response_bytes},
        )
        return scrubbed(record, secrets)
    except Exception as exc:
        _log.warning("stableprompt could not record an unanalysed request: %s",
                     redact(f"{type(exc).__name__}: {exc}"))
        return None
