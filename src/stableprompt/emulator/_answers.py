"""Wire plumbing shared by the emulated endpoints: errors in each provider's shape, results, SSE.

Error shapes (status codes and ``type`` slugs as documented by each provider):

* Anthropic: ``{"type": "error", "error": {"type": "invalid_request_error", "message": ...},
  "request_id": ...}`` (docs: https://platform.claude.com/docs/en/api/errors).
* OpenAI: ``{"error": {"message": ..., "type": "invalid_request_error", "param": ...,
  "code": ...}}`` (docs: https://platform.openai.com/docs/guides/error-codes).
* Gemini: ``{"error": {"code": 400, "message": ..., "status": "INVALID_ARGUMENT"}}``
  (google.rpc.Status as JSON; ai.google.dev/gemini-api/docs/troubleshooting).
* Bedrock: ``{"message": ...}`` with the ``x-amzn-ErrorType`` header
  (``ValidationException``, ``ResourceNotFoundException``...; the service model's errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._canonical import wire_json
from .._exceptions import CanonicalizationError
from .._policy import PolicyTable
from ._diagnostics import FingerprintStore
from ._responders import Responder
from ._store import PendingWrite, PrefixStore
from ._tokens import BlockTokenizer

__all__ = [
    "Flavor",
    "Usage",
    "WireContext",
    "WireError",
    "WireResult",
    "error_result",
    "json_result",
    "render",
    "split_text",
    "sse_data",
    "sse_event",
]

Flavor = Literal["anthropic", "openai", "gemini", "bedrock"]

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    405: "invalid_request_error",
    411: "invalid_request_error",
    413: "request_too_large",
    500: "api_error",
}
_OPENAI_TYPES = {500: "server_error"}
_GEMINI_STATUS = {404: "NOT_FOUND", 405: "INVALID_ARGUMENT", 500: "INTERNAL"}
_BEDROCK_TYPES = {404: "ResourceNotFoundException", 500: "InternalServerException"}


class WireError(Exception):
    """A request the emulated provider rejects; rendered in the provider's error shape.

    Attributes:
        status: HTTP status (400, 404, 405, 411, 413, 500).
        message: Human-readable reason naming the offending field.
        param: Dotted/indexed location of the offending field (OpenAI ``param``), or ``None``.
        code: OpenAI ``code`` slug, or ``None``.
    """

    def __init__(
        self, message: str, *, status: int = 400, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code


@dataclass(frozen=True, slots=True)
class Usage:
    """Normalized usage of one emulated call, in tokens.

    ``input_tokens_total == uncached + cache_read_tokens + cache_write_tokens`` always holds.
    ``cache_read_tokens`` is the reported (possibly floored) value.
    """

    input_tokens_total: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class WireResult:
    """What an endpoint hands back to the HTTP layer.

    Attributes:
        status: HTTP status.
        content_type: ``application/json`` or ``text/event-stream``.
        chunks: Body pieces, written in order with a flush after each (SSE events).
        pending: Cache writes to publish once the response has started (headers sent).
        model: Model id of the request, when known.
        usage: Usage of a successful call, else ``None``.
        streamed: The body is an SSE stream.
        error: ``(type, message)`` of an error answer, else ``None``.
    """

    status: int
    content_type: str
    chunks: tuple[bytes, ...]
    pending: tuple[PendingWrite, ...] = ()
    model: str | None = None
    usage: Usage | None = None
    streamed: bool = False
    error: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class WireContext:
    """Everything an endpoint needs to answer one request.

    Attributes:
        tokenizer: Block tokenizer (shared, cached).
        store: Prefix-cache store (shared).
        policies: Provider cache rules (minimums, granularity, TTLs).
        responder: Scripted assistant output.
        now: Clock time (seconds) at which the request started.
        seq: Request sequence number (1-based), the source of deterministic ids.
        scope: Isolation scope bytes (a digest of the API key): caches are per key, as
            providers isolate them per organization/workspace.
        fingerprints: Diagnostics fingerprints of earlier requests, by response id (shared).
        betas: The request's ``anthropic-beta`` header values (empty for none).
    """

    tokenizer: BlockTokenizer
    store: PrefixStore
    policies: PolicyTable
    responder: Responder
    now: float
    seq: int
    scope: bytes
    fingerprints: FingerprintStore
    betas: frozenset[str] = frozenset()


def render(obj: Any, where: str) -> bytes:
    """Serialize a received JSON value keeping key order (as a provider tokenizes it).

    Raises:
        WireError: The value has no JSON form (e.g. an integer beyond 64 bits), naming ``where``.
    """
    try:
        return wire_json(obj)
    except CanonicalizationError as exc:
        raise WireError(f"{where}: {exc.message}", param=where) from exc


def json_result(obj: Any, **fields: Any) -> WireResult:
    """A 200 JSON answer."""
    return WireResult(200, "application/json", (wire_json(obj),), **fields)


def error_result(flavor: Flavor, err: WireError, *, request_id: str) -> WireResult:
    """Render ``err`` as ``flavor``'s error body with the matching status."""
    body: dict[str, Any]
    if flavor == "gemini":
        kind = _GEMINI_STATUS.get(err.status, "INVALID_ARGUMENT")
        body = {"error": {"code": err.status, "message": err.message, "status": kind}}
        return WireResult(err.status, "application/json", (wire_json(body),),
                          error=(kind, err.message))
    if flavor == "bedrock":
        kind = _BEDROCK_TYPES.get(err.status, "ValidationException")
        return WireResult(err.status, "application/json",
                          (wire_json({"message": err.message}),), error=(kind, err.message))
    if flavor == "anthropic":
        kind = _ANTHROPIC_TYPES.get(err.status, "invalid_request_error")
        body = {
            "type": "error",
            "error": {"type": kind, "message": err.message},
            "request_id": request_id,
        }
    else:
        kind = _OPENAI_TYPES.get(err.status, "invalid_request_error")
        body = {"error": {"message": err.message, "type": kind, "param": err.param,
                          "code": err.code}}
    return WireResult(err.status, "application/json", (wire_json(body),), error=(kind, err.message))


def sse_event(name: str, data: Mapping[str, Any]) -> bytes:
    """One SSE event with an ``event:`` line (Anthropic, OpenAI Responses)."""
    return b"event: " + name.encode() + b"\ndata: " + wire_json(data) + b"\n\n"


def sse_data(data: Mapping[str, Any] | str) -> bytes:
    """One SSE ``data:`` line without an event name (OpenAI Chat; ``"[DONE]"`` as a str)."""
    payload = data.encode() if isinstance(data, str) else wire_json(data)
    return b"data: " + payload + b"\n\n"


def split_text(text: str, size: int = 24) -> list[str]:
    """Split ``text`` into deterministic pieces of at most ``size`` characters (stream deltas)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
