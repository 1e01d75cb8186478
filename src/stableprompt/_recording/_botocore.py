"""Recording ``boto3`` / ``botocore`` ``bedrock-runtime`` calls: the botocore ``before-send`` seam.

botocore sends over urllib3, not httpx, so :class:`RecordingTransport` cannot sit under it.
Its event system can: a ``before-send`` handler receives the fully prepared and **signed**
request (``AWSPreparedRequest``: method, URL, headers with the SigV4 ``Authorization``, body
bytes) and may return the response itself, which botocore then parses as if it had sent the
request (the mechanism botocore's own stubs use). :func:`record_bedrock` registers such a
handler for ``Converse`` and ``ConverseStream`` that sends those exact bytes through an httpx
client whose transport is a :class:`RecordingTransport`, and hands botocore the answer:

* nothing the caller wrote changes (one call at client construction; every
  ``client.converse(...)`` / ``client.converse_stream(...)`` stays as written);
* the signed request is sent as signed: same method, URL, headers and body bytes (httpx adds
  no header that SigV4 signs), so the signature stays valid against AWS;
* streams stay streams: ConverseStream's ``application/vnd.amazon.eventstream`` body is
  read by botocore's ``EventStream`` as it arrives, through the recording stream, which sees
  every frame (usage is in the ``metadata`` event);
* failures stay botocore's: an httpx transport error (refused connection, timeout, a
  connection closed mid-answer) is raised as the ``botocore.exceptions`` error urllib3's
  would have become (``EndpointConnectionError``, ``ConnectTimeoutError``,
  ``ReadTimeoutError``, ``ConnectionClosedError``, else ``HTTPClientError``; botocore
  ``httpsession.py``), so the caller's ``except`` clauses and botocore's retries still apply.

Why not the alternatives: ``after-call`` fires before a ConverseStream body is read (the usage
is at its end) and would need the urllib3 stream wrapped after the fact; a custom
``http`` adapter (``client._endpoint.http_session``) is private API; ``endpoint_url`` on a
loopback proxy works (see the proxy's docs) but makes the proxy the signed host, so it can
only forward to a server that does not check SigV4 (the emulator), not to AWS.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

from .._exceptions import ConfigurationError
from .._public import public

__all__ = ["record_bedrock"]

_OPERATIONS = ("Converse", "ConverseStream")


def _botocore_error(exc: Exception, url: str) -> Exception:
    """The ``botocore.exceptions`` error botocore's own urllib3 session raises for what
    ``exc`` (an httpx transport error) says happened (``botocore/httpsession.py``
    ``URLLib3Session.send``); ``exc`` itself for any other exception."""
    import httpx
    from botocore import exceptions as boto  # type: ignore[import-untyped]

    if not isinstance(exc, httpx.TransportError):
        return exc
    if isinstance(exc, httpx.ConnectTimeout):
        return boto.ConnectTimeoutError(endpoint_url=url, error=exc)  # type: ignore[no-any-return]
    if isinstance(exc, httpx.TimeoutException):
        return boto.ReadTimeoutError(endpoint_url=url, error=exc)  # type: ignore[no-any-return]
    if isinstance(exc, httpx.ConnectError):
        return boto.EndpointConnectionError(  # type: ignore[no-any-return]
            endpoint_url=url, error=exc)
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return boto.ConnectionClosedError(  # type: ignore[no-any-return]
            endpoint_url=url, error=exc)
    return boto.HTTPClientError(error=exc)  # type: ignore[no-any-return]


class _RawStream:
    """What botocore reads an HTTP body through (``urllib3.HTTPResponse``'s ``stream`` /
    ``read`` / ``close``), over an httpx response streamed through the recording transport."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._chunks: Iterator[bytes] | None = None

    def stream(self, amt: int = 1024, decode_content: bool | None = None) -> Iterator[bytes]:
        try:
            yield from self._response.iter_raw(amt)
        except Exception as exc:
            raise _botocore_error(exc, str(self._response.url)) from exc
        finally:
            self._response.close()

    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
        try:
            data: bytes = self._response.read()
        except Exception as exc:
            raise _botocore_error(exc, str(self._response.url)) from exc
        finally:
            self._response.close()
        return data

    def close(self) -> None:
        self._response.close()


def record_bedrock(client: Any, *, recorder: Any, provider: str | None = "bedrock",
                   http: Any = None, timeout_s: float = 600.0) -> Any:
    """Record a ``boto3.client("bedrock-runtime")``'s Converse and ConverseStream calls.

    Args:
        client: The botocore client (its ``meta.events`` gets the handlers).
        recorder: The :class:`~stableprompt.Recorder` calls are recorded to.
        provider: Provider family for cache rules (``"bedrock"``; ``None``: by host).
        http: An ``httpx.Client`` to send through (its transport is wrapped); default: a new
            one with a :class:`RecordingTransport` over ``httpx.HTTPTransport``.
        timeout_s: Read timeout of the default client (seconds; ConverseStream may be long).

    Returns:
        The handler registered (pass it to ``client.meta.events.unregister`` to stop).

    Raises:
        ConfigurationError: ``client`` is not a botocore client (code ``record-client``).
    """
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is None or not hasattr(events, "register"):
        raise ConfigurationError(f"record_bedrock needs a boto3/botocore client, got "
                                 f"{type(client).__name__}", code="record-client")
    import httpx
    from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]

    from ._transport import RecordingTransport

    if http is None:
        http = httpx.Client(transport=RecordingTransport(
            httpx.HTTPTransport(), recorder=recorder, provider=provider),
            timeout=httpx.Timeout(timeout_s, connect=30.0))
        weakref.finalize(client, http.close)  # the client's lifetime is the sender's

    def send(request: Any, **_: Any) -> Any:
        body = request.body
        if hasattr(body, "read"):
            body = body.read()
        headers = {k: (v.decode() if isinstance(v, bytes) else v)
                   for k, v in request.headers.items()}
        outgoing = http.build_request(request.method, request.url, headers=headers,
                                      content=body or b"")
        try:
            response = http.send(outgoing, stream=True)
        except Exception as exc:
            raise _botocore_error(exc, str(request.url)) from exc
        raw = _RawStream(response)
        answer = AWSResponse(str(response.url), response.status_code,
                             dict(response.headers.items()), raw)
        if not request.stream_output:
            answer._content = raw.read()  # botocore reads .content for a non-stream body
        return answer

    for operation in _OPERATIONS:
        events.register(f"before-send.bedrock-runtime.{operation}", send)
    return send


public(record_bedrock)
