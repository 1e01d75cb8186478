"""From what came back to the record: two pure functions over values.

A call is recorded as a chain of values:

- :class:`~stableprompt._recording._call.Pending`: the request side (what was sent, its
  analysis, what it is compared with);
- :class:`~stableprompt._recording._observer.Observation`: the response side as observed
  (status, body or stream usage, times, errors);
- :class:`Outcome` (:func:`outcome_of`): what the answer amounts to for accounting (usage
  after automatic writes, failure class, why the verdict must be ``unknown``, response id,
  provider diagnostics, evidence);
- :class:`~stableprompt.UsageRecord` (:func:`record_of`): the ledger row, its fields
  assembled here and nowhere else (a provisional row, ``_unanalysed``, reuses
  :func:`identity_fields`).

The verdict is decided by :func:`~stableprompt._recording._attribution.attribute` alone (which
also turns a failed or incomplete call's verdict into ``unknown``); :func:`record_of` only
writes it down. :class:`~stableprompt.Recorder` is the stateful shell around these (analyse,
remember, store).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .._canonical import json_safe, loads
from .._ledger._provisional import usage_fields
from .._ledger._usage_record import UsageRecord
from .._policy import CacheRules, PolicyTable
from .._usage import CacheUsage
from .._wire._formats import request_format
from ..providers import parse_response
from ._attribution import Attribution, attribute
from ._call import Pending, RequestState, elapsed_ms
from ._engine_view import EngineEvidence
from ._errors import failure
from ._observer import Observation
from ._outline import encode_outline, row_outline
from ._server_reasons import server_diagnosis
from ._sizes import ReportedSizes
from ._tree import attribute_shared

__all__ = ["Outcome", "attribution_of", "automatic_writes", "failed_record", "identity_fields",
           "outcome_of", "provider_diagnostics", "raw_usage", "record_of"]

_SNIPPETS = ("snippet_a", "snippet_b")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one call's answer amounts to for accounting (made by :func:`outcome_of`).

    Attributes:
        status_code: HTTP status (100-599), ``None`` when no answer arrived.
        success: A 2xx answer and no exception while reading it.
        usage: The provider's usage (provider tokens), after automatic writes
            (:func:`automatic_writes`); ``None`` when none was reported or parsed.
        usage_raw: The usage object as received, kept for audit (JSON object), if any.
        error_class: The failure class (``ProviderHTTPError``, ``ProviderError``, an
            exception's class name), ``None`` for a call that did not fail.
        unknown_reason: Why the verdict must be ``unknown`` whatever the attribution says
            (the call failed, or its body is incomplete), ``None`` otherwise.
        response_id: The provider's message/response id, if seen.
        diagnostics: Provider cache diagnostics as received, if any.
        ttft_ms: Send to the first content token (milliseconds, streams), never negative.
        latency_ms: Send to the end of the answer (milliseconds).
        policy: The cache policy of the call's provider and model (``None``: no policy
            applies; ``detail["unknown_reason"]`` says why).
        response: The response body decoded as JSON (non-stream answers), for the engine view
            (the reply's text).
        detail: Evidence for ``verdict_detail`` read from the answer (``tokenizer``,
            ``response_body``, ``error_*``, ``usage_*``, ``policy``,
            ``cache_write_assumed_zero``, ``incomplete``).
    """

    status_code: int | None
    success: bool
    usage: CacheUsage | None
    usage_raw: Any
    error_class: str | None
    unknown_reason: str | None
    response_id: str | None
    diagnostics: Any
    ttft_ms: float | None
    latency_ms: float
    policy: CacheRules | None
    response: Any = field(default=None, repr=False)
    detail: Mapping[str, Any] = field(default_factory=dict)


def outcome_of(pending: Pending, observation: Observation, *, policies: PolicyTable,
               tokenizer: str, now: float) -> Outcome:
    """The :class:`Outcome` of ``pending`` answered as ``observation``. Pure.

    Args:
        pending: The call (request side).
        observation: Its answer (``status_code`` ``None``: none arrived; its ``usage`` counts
            only for a 2xx answer).
        policies: The recorder's cache policy table.
        tokenizer: The name of the tokenizer our estimates use (``detail["tokenizer"]``).
        now: The monotonic clock now (seconds): the latency when the observation has none.

    Raises:
        Whatever parsing raises beyond a usage error (the recorder guards the call).
    """
    status = _status(observation.status_code)
    error = observation.error
    success = status is not None and 200 <= status < 300 and error is None
    detail: dict[str, Any] = {"tokenizer": tokenizer}
    body, diagnostics = observation.body, observation.diagnostics
    response_id = observation.response_id if isinstance(observation.response_id, str) else None
    parsed: Any = None
    if body is not None:
        try:
            parsed = loads(body)
        except ValueError:
            detail["response_body"] = "not JSON"
    if isinstance(parsed, Mapping):
        if response_id is None and isinstance(parsed.get("id"), str):
            response_id = parsed["id"]
        if diagnostics is None:
            diagnostics = parsed.get("diagnostics", parsed.get("prompt_cache_diagnostics"))
    error_class = failure(error, status, success, body, parsed, observation.provider_error,
                          detail)
    invalid = observation.status_code is not None and (status is None or not 100 <= status <= 599)
    if error_class is None and invalid:
        detail["error_code"] = "provider-invalid-status"  # no HTTP answer says that
        error_class = "ProviderError"
    usage = observation.usage if status is not None and 200 <= status < 300 else None
    usage, usage_raw = _usage(pending, usage, error_class, parsed, detail)
    policy = _policy(policies, pending, detail)
    if usage is not None and policy is not None:
        usage = automatic_writes(usage, policy, detail)
    unknown_reason = None
    if error_class is not None:
        kind = detail.get("error_type") or detail.get("error_code")
        unknown_reason = f"the call failed ({error_class}{f': {kind}' if kind else ''})"
    elif observation.incomplete is not None:
        unknown_reason = observation.incomplete
        detail["incomplete"] = True
    latency_ms = _milliseconds(observation.latency_ms)
    ttft_ms = _milliseconds(observation.ttft_ms)
    return Outcome(
        status_code=status if status and 100 <= status <= 599 else None,
        success=success, usage=usage, usage_raw=usage_raw, error_class=error_class,
        unknown_reason=unknown_reason, response_id=response_id, diagnostics=diagnostics,
        ttft_ms=ttft_ms,
        latency_ms=elapsed_ms(pending.started, now) if latency_ms is None else latency_ms,
        policy=policy, response=parsed, detail=detail)


def _status(value: Any) -> int | None:
    """An HTTP status as an int, ``None`` for anything else (no answer is known)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _milliseconds(value: Any) -> float | None:
    """A duration in ms as a finite float clamped at 0, ``None`` when it is not a number
    (NaN, infinite, a string): an odd measurement never costs the call its record."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return max(float(value), 0.0) if math.isfinite(value) else None


def _usage(pending: Pending, usage: CacheUsage | None, error_class: str | None, parsed: Any,
           detail: dict[str, Any]) -> tuple[CacheUsage | None, Any]:
    """The call's usage (a stream's as observed, else parsed from the body of a call that
    did not fail) and the usage object kept for audit."""
    usage_raw: Any = None
    if usage is None and error_class is None and parsed is not None:
        try:
            usage = parse_response(pending.usage_format, parsed)
        except Exception as exc:
            detail["usage_error"] = f"{getattr(exc, 'code', type(exc).__name__)}: {exc}"
            usage_raw = raw_usage(parsed, detail)
    if usage is not None:
        if not usage.is_unknown:
            usage_raw = json_safe(usage.raw)
        if usage.inconsistent:
            detail["usage_inconsistency"] = usage.inconsistency
    return usage, usage_raw


def _policy(policies: PolicyTable, pending: Pending,
            detail: dict[str, Any]) -> CacheRules | None:
    """The cache policy of the call's provider and model (``None``: no policy applies,
    ``detail["unknown_reason"]`` says why)."""
    try:
        policy = policies.lookup(pending.provider, pending.model or "")
    except Exception as exc:
        detail["unknown_reason"] = f"no cache policy: {exc}"
        return None
    if policy.conservative:
        detail["policy"] = "conservative default (model not in the policy table)"
    return policy


def attribution_of(pending: Pending, outcome: Outcome,
                   engine: EngineEvidence | None = None,
                   sizes: ReportedSizes | None = None) -> Attribution | None:
    """:func:`~stableprompt._recording._attribution.attribute` of the call (with the
    engine's own token view when there is one, and the entry sizes the provider reported
    for earlier calls, ``_sizes``), ``None`` when its request could not be analysed or no
    cache policy applies. Pure."""
    if pending.state is None or outcome.policy is None:
        return None
    comparison = pending.comparison
    if comparison.rule == "shared-prefix":  # another lineage's call sharing part of the head
        return attribute_shared(pending.state, comparison, usage=outcome.usage,
                                policy=outcome.policy, engine=engine,
                                unknown_reason=outcome.unknown_reason, sizes=sizes)
    return attribute(pending.state, predecessor=comparison.predecessor,
                     session_previous=comparison.session_previous,
                     other_conversation=comparison.other_conversation, usage=outcome.usage,
                     policy=outcome.policy, engine=engine,
                     unknown_reason=outcome.unknown_reason, sizes=sizes)


def record_of(pending: Pending, outcome: Outcome, attribution: Attribution | None, *,
              scenario: str | None, store_snippets: bool = True,
              evidence: Mapping[str, Any] | None = None,
              extra: Mapping[str, Any] | None = None) -> UsageRecord:
    """The ledger row of a finished call. Pure; not yet scrubbed of the request's secrets
    (:func:`~stableprompt._ledger._usage_record.scrubbed`).

    Args:
        pending: The call (request side).
        outcome: Its :class:`Outcome`.
        attribution: Prediction and verdict (``None``: the request could not be analysed or
            no policy applies; the verdict is then ``unknown``).
        scenario: The recorder's scenario label.
        store_snippets: Keep ``snippet_a`` / ``snippet_b`` (the changed prompt text).
        evidence: Further recorder evidence for ``verdict_detail`` (the engine view's).
        extra: Evidence from the observer (``Observation.detail``), merged last.

    The provider's own cache-miss reason, when its diagnostics carry one, is joined to ours
    in ``verdict_detail["server_diagnosis"]`` (``_server_reasons.server_diagnosis``).

    Raises:
        pydantic.ValidationError: A field is out of range (the recorder guards the call).
    """
    detail: dict[str, Any] = {} if attribution is None else dict(attribution.detail)
    if not store_snippets:
        for key in _SNIPPETS:
            detail.pop(key, None)
    detail.update(outcome.detail)
    detail.update(_request_detail(pending))
    if evidence:
        detail.update(evidence)
    if attribution is None:
        detail.setdefault("unknown_reason", "request could not be analysed"
                          if pending.state is None else "no cache policy")
        if outcome.unknown_reason is not None:
            detail["unknown_reason"] = outcome.unknown_reason
    detail.update(pending.detail)
    if extra:
        detail.update(extra)
    usage = outcome.usage
    fields = {**identity_fields(pending, scenario), **usage_fields(usage)}
    found = attribution
    diagnostics = provider_diagnostics(pending, outcome.diagnostics)
    server = None if diagnostics is None else server_diagnosis(
        diagnostics, "unknown" if found is None else found.verdict, detail,
        expected_loss_tokens=_expected_loss(pending, outcome, found))
    if server is not None:
        detail["server_diagnosis"] = server
    return UsageRecord(
        **fields,
        predecessor_id=None if found is None else found.predecessor_id,
        lcp_bytes=None if found is None else found.lcp_bytes,
        lcp_tokens=None if found is None else found.lcp_tokens,
        predicted_cache_read_tokens=None if found is None else found.predicted_cache_read_tokens,
        usage_raw=outcome.usage_raw,
        verdict="unknown" if found is None else found.verdict,
        verdict_detail=json_safe(detail),
        latency_ms=outcome.latency_ms,
        ttft_ms=outcome.ttft_ms,
        status_code=outcome.status_code,
        error_class=outcome.error_class,
        diagnostics=diagnostics,
        response_id=outcome.response_id,
    )


def _expected_loss(pending: Pending, outcome: Outcome,
                   attribution: Attribution | None) -> int | None:
    """Tokens our prediction left unread (provider tokens): the larger of this request's and
    the compared request's reported input total minus the predicted read (OpenAI counts the
    missed tokens in this request, Anthropic in the one compared with); ``None`` when
    unknown."""
    predicted = None if attribution is None else attribution.predicted_cache_read_tokens
    base = pending.comparison.base
    totals = [None if outcome.usage is None else outcome.usage.input_tokens_total,
              None if base is None else base.input_tokens_total]
    known = [total for total in totals if total is not None]
    if predicted is None or not known:
        return None
    return max(max(known) - predicted, 0)


def _request_detail(pending: Pending) -> dict[str, Any]:
    """Evidence about the request: an analysis that failed, a retry, the turn boundary, the
    rule that chose the compared request, a request format other than the usage dialect."""
    detail: dict[str, Any] = {}
    if pending.problem:
        detail["analysis_error"] = pending.problem
    if pending.retry:
        detail["retry"] = True
    if pending.turn_boundary is not None:
        detail["turn_boundary"] = pending.turn_boundary
    if pending.comparison.rule is not None:
        detail["predecessor_rule"] = pending.comparison.rule
    # the agent a branch rule named (``_predecessor``); ``shared_prefix`` comes with the
    # attribution (``_tree``)
    detail.update((k, v) for k, v in pending.comparison.detail.items() if k != "shared_prefix")
    if pending.agent is not None:
        detail["agent"] = pending.agent.to_json()
    if request_format(pending.usage_format) != pending.wire_format:
        detail["request_format"] = pending.wire_format
    return detail


def failed_record(pending: Pending, status_code: Any, problem: str, *,
                  scenario: str | None = None) -> UsageRecord:
    """The minimal row of a call whose finishing failed (``verdict_detail["recorder_error"]``,
    verdict ``unknown``): it is still recorded, with what names the request."""
    status = _status(status_code)
    return UsageRecord(
        record_id=pending.record_id,
        ts_utc=datetime.fromtimestamp(pending.ts, UTC),
        wire_format=pending.usage_format,  # type: ignore[arg-type]
        provider=pending.provider,
        model=pending.model,
        session_id=pending.session_id,
        turn=pending.turn,
        scenario=scenario,
        status_code=status if status and 100 <= status <= 599 else None,
        verdict="unknown",
        verdict_detail={"recorder_error": problem},
        request_headers=pending.headers,
    )


def identity_fields(pending: Pending, scenario: str | None) -> dict[str, Any]:
    """The record fields that name the request (same for its final and provisional rows):
    id, send time, session, turn, scenario, formats, provider, model, and what its analysis
    found (lineage, fingerprint, our token count; ``None`` before or without one), and its
    allow-listed cache-relevant headers (``request_headers``), and its segment outline
    (``segment_digests``, ``_outline``: one pass over the segments it was analysed into)."""
    state = pending.state
    return {
        "record_id": pending.record_id,
        "ts_utc": datetime.fromtimestamp(pending.ts, UTC),
        "session_id": pending.session_id, "turn": pending.turn, "scenario": scenario,
        "wire_format": pending.usage_format, "provider": pending.provider,
        "model": pending.model,
        "lineage": None if state is None else state.head_fingerprint,
        "request_fingerprint": None if state is None else state.fingerprint,
        "request_tokens": None if state is None else state.request_tokens,
        "content": pending.content,
        "request_headers": pending.headers,
        "segment_digests": None if state is None else row_outline(pending)[0],
    }


def outline_of(state: RequestState) -> str | None:
    """``segment_digests`` of an analysed request: its outline (``_outline``) when its
    segments and token counts are known, else ``None``."""
    if state.segmented is None or state.segment_tokens is None:
        return None
    return encode_outline(state.segmented.segments, state.segment_tokens)


def provider_diagnostics(pending: Pending, received: Any) -> dict[str, Any] | None:
    """Provider diagnostics stored beside our verdict: what was asked and what came back."""
    if pending.diagnostics_requested is None and received is None:
        return None
    out: dict[str, Any] = {"provider": pending.provider}
    if pending.diagnostics_requested is not None:
        out["requested"] = pending.diagnostics_requested
    out["response"] = received
    ours = pending.predecessor or pending.session_previous
    out["our_comparison_response_id"] = None if ours is None else ours.response_id
    result: dict[str, Any] = json_safe(out)
    return result


def automatic_writes(usage: CacheUsage, policy: CacheRules,
                     detail: dict[str, Any]) -> CacheUsage:
    """An automatic cache behind the Anthropic shape writes nothing on request: a missing
    ``cache_creation_input_tokens`` is 0 written, so the prompt total (and the hit rate) is
    known. llama-server's ``/v1/messages`` answers with ``input_tokens`` (uncached) and
    ``cache_read_input_tokens`` only (``reference/ENGINES.md``, "What it reports"). Adds
    ``detail["cache_write_assumed_zero"]``; any other usage is returned unchanged."""
    if (not policy.automatic or usage.wire_format != "anthropic"
            or usage.cache_write_tokens is not None or usage.cache_read_tokens is None
            or usage.uncached_tokens is None or usage.input_tokens_total is not None):
        return usage
    detail["cache_write_assumed_zero"] = (
        f"{policy.provider}: an automatic cache reports no writes in the Anthropic shape")
    return usage.model_copy(update={
        "cache_write_tokens": 0,
        "input_tokens_total": usage.uncached_tokens + usage.cache_read_tokens})


def raw_usage(parsed: Any, detail: dict[str, Any]) -> dict[str, Any] | None:
    """The body's usage object as received, when it could not be parsed (kept for audit)."""
    value = parsed.get("usage") if isinstance(parsed, Mapping) else None
    if isinstance(value, Mapping):
        result: dict[str, Any] = json_safe(value)
        return result
    if value is not None:
        detail["usage_raw_invalid"] = json_safe(value)
    return None
