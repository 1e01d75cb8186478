"""The one place where httpx/httpx2 exceptions and HTTP error answers become ours.

Both the clients (which raise) and the recorder (which stores an ``error_class``) map through
here, so a call fails the same way in both. Transport exceptions map by their class tree
(duck-typed on class names, so ``httpx`` and ``httpx2`` map alike), the most specific match
winning::

    httpx.RequestError              -> ProviderConnectionError  (DecodingError, TooManyRedirects)
    └── httpx.TransportError        -> ProviderConnectionError  (network, protocol, proxy, ...)
        └── httpx.TimeoutException  -> ProviderTimeoutError     (connect, read, write, pool)
    a non-2xx answer                -> ProviderHTTPError        (retryable for 408/409/429/5xx)
    a 2xx answer that is an error   -> ProviderError            (an error event in the stream,
                                                                  not JSON, an error object)

Every message is scrubbed of the request's secrets and of anything key-shaped
(:func:`~stableprompt._redact.redact`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._exceptions import (
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
)
from .._redact import redact

__all__ = [
    "ERROR_MESSAGE_CHARS",
    "TRANSPORT_ERRORS",
    "error_class_of",
    "failure",
    "http_status_error",
    "map_transport_error",
    "provider_error_class",
]

ERROR_MESSAGE_CHARS = 600
"""How much of an error answer's ``error.message`` a record keeps (``error_message``)."""
_CONNECTION = (ProviderConnectionError, "connection to the provider failed")
TRANSPORT_ERRORS: Mapping[str, tuple[type[ProviderError], str]] = {
    "TimeoutException": (ProviderTimeoutError, "request timed out"),
    "TransportError": _CONNECTION,
    "RequestError": _CONNECTION,
}
"""httpx/httpx2 exception class name -> our class and the message it starts with."""


def _mapped(exc: BaseException) -> tuple[type[ProviderError], str] | None:
    """The entry of the most specific class of ``exc`` in :data:`TRANSPORT_ERRORS`, if any."""
    for cls in type(exc).__mro__:  # most derived first
        found = TRANSPORT_ERRORS.get(cls.__name__)
        if found is not None:
            return found
    return None


def provider_error_class(exc: BaseException) -> type[ProviderError] | None:
    """Our class for an httpx/httpx2 transport exception (see the module docstring), or
    ``None`` when ``exc`` is not one."""
    found = _mapped(exc)
    return None if found is None else found[0]


def map_transport_error(exc: BaseException, *, secrets: tuple[str, ...] = ()) -> ProviderError:
    """Map an httpx/httpx2 exception to :class:`ProviderTimeoutError` (any
    ``TimeoutException``) or :class:`ProviderConnectionError` (any other error).

    The message names the request (method and URL, when the exception carries it), the
    original class and text, scrubbed of ``secrets`` and of anything key-shaped (URL
    passwords included); raise the result ``from exc``.
    """
    cls, what = _mapped(exc) or _CONNECTION
    target = _request_line(exc)
    message = redact(f"{what}{target} ({type(exc).__name__}: {exc})", secrets=secrets)
    return cls(message)


def _request_line(exc: BaseException) -> str:
    """``": POST http://host/v1/messages"`` for an httpx exception that carries its request,
    ``""`` otherwise (httpx raises RuntimeError from ``.request`` when none was set). The
    query string and user info are left out: they can carry a key (Gemini's ``?key=``)."""
    try:
        request = exc.request  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        return ""
    method, url = getattr(request, "method", None), getattr(request, "url", None)
    scheme, host = getattr(url, "scheme", None), getattr(url, "host", None)
    if not isinstance(method, str) or not isinstance(scheme, str) or not isinstance(host, str):
        return ""
    port = getattr(url, "port", None)
    host = f"[{host}]" if ":" in host else host  # IPv6 literal
    where = f"{scheme}://{host}{'' if port is None else f':{port}'}{getattr(url, 'path', '')}"
    return f": {method} {where}"


def http_status_error(
    status_code: int, body: bytes, *, url: str = "", secrets: tuple[str, ...] = ()
) -> ProviderHTTPError:
    """A :class:`ProviderHTTPError` for a non-2xx answer (``retryable`` for 408, 409, 429,
    5xx), with the body text (first 4,000 bytes; 300 characters in the message) and the URL
    scrubbed of ``secrets`` and key-shaped strings."""
    text = redact(body[:4000].decode("utf-8", "replace"), secrets=secrets)
    where = f" from {redact(url, secrets=secrets)}" if url else ""
    return ProviderHTTPError(
        f"HTTP {status_code}{where}: {text[:300]}", status_code=status_code, body=text
    )


def error_class_of(error: BaseException | str | None) -> str | None:
    """The ``error_class`` of an exception (or its given name), ``None`` for no error.

    Our ``Provider*`` errors keep their name, httpx/httpx2 transport exceptions become the
    name of :func:`provider_error_class`, any other exception keeps its own class name.
    """
    if error is None:
        return None
    if isinstance(error, str):
        return error
    name = type(error).__name__
    if name.startswith("Provider"):
        return name
    mapped = provider_error_class(error)
    return name if mapped is None else mapped.__name__


def failure(error: BaseException | str | None, status_code: int | None, success: bool,
            body: bytes | None, parsed: Any, provider_error: str | None,
            detail: dict[str, Any]) -> str | None:
    """The call's ``error_class``, or ``None`` when it succeeded.

    Failed: an exception (:func:`error_class_of`); a status >= 300 (``ProviderHTTPError``, the
    body's error type in ``detail["error_type"]`` and its message in
    ``detail["error_message"]``); a 2xx answer that carried an error event in
    its stream (``error_code`` ``provider-stream-error``), a body that is not a JSON object
    (``provider-invalid-json``: an HTML page, a truncated body) or an error object without
    usage (``provider-error-body``): ``ProviderError``, ``detail["error_code"]`` set.

    Args:
        error: The exception (or its class name) the call failed with, if any.
        status_code: HTTP status, ``None`` when no answer arrived.
        success: The answer was 2xx and no exception was raised.
        body: The whole response body (non-streaming calls).
        parsed: ``body`` decoded as JSON (``None`` when it is not JSON).
        provider_error: The provider's error type from an error event in a 2xx stream.
        detail: ``verdict_detail`` being built; ``error_type``/``error_code`` are added.
    """
    error_class = error_class_of(error)
    if error_class is not None:
        return error_class
    if status_code is not None and status_code >= 300:  # redirects are not followed here
        if isinstance(parsed, Mapping):
            detail["error_type"] = _error_type(parsed)
            message = _error_message(parsed)
            if message is not None:
                detail["error_message"] = message
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


def _error_message(body: Mapping[str, Any]) -> str | None:
    """The error object's ``message`` (first :data:`ERROR_MESSAGE_CHARS` characters), e.g. a
    chat template's exception on a self-hosted engine; ``None`` without one."""
    error = body.get("error")
    message = error.get("message") if isinstance(error, Mapping) else None
    if not isinstance(message, str) or not message:
        return None
    if len(message) <= ERROR_MESSAGE_CHARS:
        return message
    return message[:ERROR_MESSAGE_CHARS] + "... (truncated)"


def _error_type(body: Mapping[str, Any]) -> str | None:
    """The error ``type`` (else ``code``) of an error body, or its ``error`` text (200 chars)."""
    error = body.get("error")
    if isinstance(error, Mapping):
        kind = error.get("type") or error.get("code")
        return None if kind is None else str(kind)
    return None if error is None else str(error)[:200]
