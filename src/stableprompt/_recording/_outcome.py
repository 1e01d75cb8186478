"""What a finished call amounts to: failure class, scrubbed fields, diagnostics.

Pure helpers of :meth:`Recorder.finish <stableprompt.Recorder.finish>`: they turn the
response, the error and the provider's diagnostics into record fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._canonical import json_safe

if TYPE_CHECKING:
    from ._call import Pending

__all__ = [
    "diagnostics",
    "diagnostics_request",
    "error_class_of",
    "failure",
    "raw_usage",
]

def failure(error: BaseException | str | None, status_code: int | None, success: bool,
            body: bytes | None, parsed: Any, provider_error: str | None,
            detail: dict[str, Any]) -> str | None:
    """The call's ``error_class``, or ``None`` when it succeeded.

    Failed: an exception (its class, httpx errors mapped to ``ProviderTimeoutError`` /
    ``ProviderConnectionError``); a status >= 300 (``ProviderHTTPError``, the body's error
    type in ``detail["error_type"]``); a 2xx answer that carried an error event in its stream
    (``error_code`` ``provider-stream-error``), a body that is not a JSON object
    (``provider-invalid-json``: an HTML page, a truncated body) or an error object without
    usage (``provider-error-body``): ``ProviderError``, ``detail["error_code"]`` set.
    """
    error_class = error_class_of(error)
    if error_class is not None:
        return error_class
    if status_code is not None and status_code >= 300:  # redirects are not followed here
        if isinstance(parsed, Mapping):
            detail["error_type"] = _error_type(parsed)
        return "ProviderHTTPError"
    if not success:
        return None
    if provider_error is not None:
        detail.update(error_code="provider-stream-error", error_type=provider_error)
        return "ProviderError"
    if body is not None and not isinstance(parsed, Mapping):
        detail["error_code"] = "provider-invalid-json"
        return "ProviderError"
    if isinstance(parsed, Mapping) and parsed.get("error") and parsed.get("usage") is None:
        detail.update(error_code="provider-error-body", error_type=_error_type(parsed))
        return "ProviderError"
    return None


def raw_usage(parsed: Any, detail: dict[str, Any]) -> dict[str, Any] | None:
    """The body's usage object as received, when it could not be parsed (kept for audit)."""
    value = parsed.get("usage") if isinstance(parsed, Mapping) else None
    if isinstance(value, Mapping):
        result: dict[str, Any] = json_safe(value)
        return result
    if value is not None:
        detail["usage_raw_invalid"] = json_safe(value)
    return None


def error_class_of(error: BaseException | str | None) -> str | None:
    """The ``error_class`` of an exception (or its given name), ``None`` for no error."""
    if error is None:
        return None
    if isinstance(error, str):
        return error
    names = [c.__name__ for c in type(error).__mro__]
    if names[0].startswith("Provider"):
        return names[0]
    if "TimeoutException" in names:
        return "ProviderTimeoutError"
    if "TransportError" in names or "RequestError" in names:
        return "ProviderConnectionError"
    return names[0]


def _error_type(body: Mapping[str, Any]) -> str | None:
    error = body.get("error")
    if isinstance(error, Mapping):
        kind = error.get("type") or error.get("code")
        return None if kind is None else str(kind)
    return None if error is None else str(error)[:200]


def diagnostics_request(wire_format: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The provider-diagnostics fields a request body asks for (Anthropic ``diagnostics``,
    OpenAI ``prompt_cache_options.comparison_response_id``), or ``None``."""
    if wire_format == "anthropic" and isinstance(body.get("diagnostics"), Mapping):
        return {"diagnostics": dict(body["diagnostics"])}
    options = body.get("prompt_cache_options")
    if isinstance(options, Mapping) and "comparison_response_id" in options:
        return {"comparison_response_id": options["comparison_response_id"]}
    return None


def diagnostics(pending: Pending, received: Any) -> dict[str, Any] | None:
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
