"""Fields of a record derived from what came back: provider diagnostics beside our verdict,
the raw usage object kept for audit, usage completed by a backend fact, and the engine client
an ``engine`` URL names. Used by :class:`~stableprompt.Recorder` only."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .._canonical import json_safe
from .._exceptions import ConfigurationError
from .._ledger._provisional import usage_fields
from .._policy import CachePolicy
from .._redact import redact
from .._usage import CacheUsage
from ._call import Pending
from ._engine_view import EngineTokens

__all__ = ["automatic_writes", "engine_of", "engine_tokenizer", "identity_fields",
           "provider_diagnostics", "raw_usage", "usage_fields"]


def identity_fields(pending: Pending, scenario: str | None) -> dict[str, Any]:
    """The record fields that name the request (same for its final and provisional rows):
    id, send time, session, turn, scenario, formats, provider, model, and what its analysis
    found (lineage, fingerprint, our token count; ``None`` before or without one)."""
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
    }


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


def automatic_writes(usage: CacheUsage, policy: CachePolicy,
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


def engine_tokenizer(base_url: str) -> EngineTokens:
    """The llama-server token client for ``base_url``."""
    from ._engine_tokens import EngineTokenizer

    return EngineTokenizer(base_url)


def raw_usage(parsed: Any, detail: dict[str, Any]) -> dict[str, Any] | None:
    """The body's usage object as received, when it could not be parsed (kept for audit)."""
    value = parsed.get("usage") if isinstance(parsed, Mapping) else None
    if isinstance(value, Mapping):
        result: dict[str, Any] = json_safe(value)
        return result
    if value is not None:
        detail["usage_raw_invalid"] = json_safe(value)
    return None


def engine_of(engine: EngineTokens | str | None) -> EngineTokens | None:
    """The engine client for ``Recorder(engine=...)``.

    Raises:
        ConfigurationError: not an ``http(s)://host...`` URL nor an engine client (code
            ``engine-url``).
    """
    if engine is None:
        return None
    if isinstance(engine, str):
        scheme, _, rest = engine.partition("://")
        if scheme not in ("http", "https") or not rest.strip("/"):
            raise ConfigurationError(
                f"engine must be the engine's base URL (http://host:port), got "
                f"{redact(engine)!r}", code="engine-url")
        return engine_tokenizer(engine)
    if not all(callable(getattr(engine, name, None))
               for name in ("prompt_tokens", "generated_tokens", "detokenize")):
        raise ConfigurationError(
            f"engine must be a base URL or an engine client (prompt_tokens, generated_tokens, "
            f"detokenize), got {type(engine).__name__}", code="engine-url")
    return engine
