"""Which calls are recorded, and as what: endpoint, wire format, provider, session.

Pure functions of the URL path, host and request body, shared by the recorder and the
transports (a path is judged before any body is read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "REQUEST_FORMATS",
    "SESSION_HEADER",
    "endpoint",
    "provider_for",
    "request_format",
    "session_from_request",
    "usage_wire_format",
]

SESSION_HEADER = "x-stableprompt-session"
"""Request header naming the session/conversation id (read by the recorder, never stored)."""

_ENDPOINTS = (
    ("/chat/completions", "openai-chat"),
    ("/responses", "openai-responses"),
    ("/messages", "anthropic"),
)
_HOSTS = {
    "api.anthropic.com": "anthropic",
    "api.openai.com": "openai",
    "api.deepseek.com": "deepseek",
    "openrouter.ai": "openrouter",
    "api.x.ai": "xai",
}
_COMPATIBLE = {"vllm", "sglang", "openrouter", "xai"}
REQUEST_FORMATS = frozenset(wire for _, wire in _ENDPOINTS)
"""The request formats recorded."""


def provider_for(host: str | None, wire_format: str, override: str | None = None) -> str:
    """The provider family (``cache_policy`` key) of a call.

    ``override`` wins; else the host (``api.anthropic.com`` -> ``anthropic``,
    ``api.openai.com`` -> ``openai``, ``api.deepseek.com`` -> ``deepseek``, ``openrouter.ai`` ->
    ``openrouter``, ``api.x.ai`` -> ``xai``); else the wire format (``anthropic`` ->
    ``anthropic``, OpenAI formats -> ``openai``, e.g. the loopback emulator).
    """
    if override:
        return override
    if host:
        known = _HOSTS.get(host.lower())
        if known is not None:
            return known
    return "anthropic" if wire_format == "anthropic" else "openai"


def usage_wire_format(provider: str, wire_format: str) -> str:
    """The usage parser for a request format at a provider.

    Anthropic -> ``anthropic``; Responses -> ``openai-responses``; chat: ``deepseek``,
    ``llama-cpp`` for those providers, ``openai-compatible`` for vLLM, SGLang, OpenRouter and
    xAI, else ``openai-chat``.
    """
    if wire_format in ("anthropic", "openai-responses"):
        return wire_format
    if provider in ("deepseek", "llama-cpp"):
        return provider
    return "openai-compatible" if provider in _COMPATIBLE else "openai-chat"


def request_format(usage_format: str) -> str:
    if usage_format in ("anthropic", "openai-responses"):
        return usage_format
    return "openai-chat"


def endpoint(path: str) -> str | None:
    """The request format a URL path names, or ``None`` for any other endpoint.

    ``.../messages`` is Anthropic only directly after ``/v1`` (or at the root, or under a
    proxy prefix without ``/v1``): ``/v1/threads/{id}/messages`` (OpenAI Assistants) is not.
    """
    path = path.rstrip("/")
    for suffix, wire in _ENDPOINTS:
        if path.endswith(suffix):
            prefix = path[: -len(suffix)]
            if wire == "anthropic" and "/v1" in prefix and not prefix.endswith("/v1"):
                return None
            return wire
    return None


def session_from_request(body: Mapping[str, Any], session_header: str | None = None
                         ) -> str | None:
    """The session id a request names, or ``None``.

    Order: the ``x-stableprompt-session`` header's value (``session_header``, read by the
    caller), Anthropic ``metadata.user_id``, then OpenAI ``prompt_cache_key`` unless it is one
    stableprompt derived from the head fingerprint (``sp-...``: that names a lineage, not a
    conversation).
    """
    if session_header:
        return session_header
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("user_id"), str):
        return str(metadata["user_id"])
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and key and not key.startswith("sp-"):
        return key
    return None
