"""Headers on the way through the proxy: hop-by-hop removal, the access token, error bodies.

Hop-by-hop headers (RFC 9110 §7.6.1: ``Connection`` and every header it names,
``Keep-Alive``, ``Proxy-Authenticate``, ``Proxy-Authorization``, ``TE``, ``Trailer``,
``Transfer-Encoding``, ``Upgrade``) describe one connection and are never forwarded; neither is
``Host`` (the upstream's is set) nor the proxy's own ``x-stableprompt-token``. Every other header
passes in order, duplicates kept. ``Content-Length`` is kept: bodies pass unchanged, so it stays
true; ``Content-Encoding`` is kept: compressed bodies pass as the raw bytes they are.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence

from .._canonical import canonical_json

__all__ = ["TOKEN_HEADER", "authorized", "error_body", "forwarded_headers"]

TOKEN_HEADER = b"x-stableprompt-token"
"""Request header carrying the proxy's access token (also accepted: ``Proxy-Authorization:
Bearer <token>``); stripped before forwarding."""

_HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
    b"trailer", b"transfer-encoding", b"upgrade",
})
_REQUEST_ONLY = frozenset({b"host", b"expect", TOKEN_HEADER})

RawHeaders = Sequence[tuple[bytes, bytes]]


def _connection_named(headers: RawHeaders) -> set[bytes]:
    named: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            named.update(part.strip().lower() for part in value.split(b",") if part.strip())
    return named


def forwarded_headers(headers: RawHeaders, *, request: bool) -> list[tuple[bytes, bytes]]:
    """``headers`` without the hop-by-hop ones (and, for a request, without ``Host``,
    ``Expect`` and the access token); names lower-cased (as ASGI sends them), values and
    order unchanged."""
    drop = _HOP_BY_HOP | _connection_named(headers)
    if request:
        drop = drop | _REQUEST_ONLY
    return [(name.lower(), value) for name, value in headers if name.lower() not in drop]


def authorized(headers: Iterable[tuple[bytes, bytes]], token: bytes) -> bool:
    """Whether the request carries ``token`` in ``x-stableprompt-token`` or as
    ``Proxy-Authorization: Bearer <token>`` (compared in constant time)."""
    for name, value in headers:
        name = name.lower()
        if name == TOKEN_HEADER:
            candidate = value.strip()
        elif name == b"proxy-authorization":
            scheme, _, rest = value.strip().partition(b" ")
            if scheme.lower() != b"bearer":
                continue
            candidate = rest.strip()
        else:
            continue
        if hmac.compare_digest(candidate, token):
            return True
    return False


def error_body(kind: str, message: str, **extra: str) -> bytes:
    """A JSON error body both SDK families read: ``{"type": "error", "error": {"type",
    "message", ...}}`` (Anthropic's shape; OpenAI's SDK reads ``error.message`` too)."""
    return canonical_json({"type": "error", "error": {"type": kind, "message": message, **extra}})
