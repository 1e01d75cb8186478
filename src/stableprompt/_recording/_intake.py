"""The request half of recording: a request about to be sent becomes a
:class:`~stableprompt._recording._call.Pending` (:func:`register`), then is analysed
(:func:`analyse`: decoded if it was not, segmented, counted, given its turn and what it is
compared with, by the recorder's :class:`~stableprompt._recording._memory.CallMemory`).

:class:`~stableprompt.Recorder` calls these with itself as the :class:`IntakeConfig` (its
attributes are read at each call, so a recorder reconfigured between calls is honoured).
Nothing here raises into the user's call: a request that is not recordable gives ``None``; an
analysis that fails sets ``pending.problem`` (logged) and the call is still recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .._ledger._ledger import Ledger
from .._ledger._usage_record import new_record_id
from .._redact import redact, secrets_in_headers
from .._wire._formats import (
    REQUEST_FORMATS,
    UsageDialects,
    chosen_dialect,
    detect,
    diagnostics_request,
    endpoint,
    provider_for,
    usage_format,
    with_path_model,
)
from .._wire._resegment import Resegmented
from ._call import Pending
from ._http import cache_headers
from ._identity import agent_from_headers, session_from_headers
from ._memory import CallMemory
from ._predecessor import session_from_request

__all__ = ["MODEL_IN_PATH", "IntakeConfig", "analyse", "recordable", "register",
           "session_of"]

_log = logging.getLogger("stableprompt.recorder")

MODEL_IN_PATH = frozenset({"gemini", "bedrock-converse"})
"""Request formats whose model id is in the URL path (``_wire._formats.with_path_model``)."""


class IntakeConfig(Protocol):
    """What the intake reads of its recorder, at each call."""

    session_id: str | None
    provider: str | None
    usage_dialect: UsageDialects
    store_content: bool
    ledger: Ledger | None
    clock: Callable[[], float]
    monotonic: Callable[[], float]


def recordable(path: str, method: str = "POST") -> bool:
    """True when a call to ``path`` would be recorded: a ``POST`` to an LLM endpoint of a
    known format (``_wire._formats.endpoint``). Decided from the path alone, so other calls
    pass through without their body being read."""
    return method.upper() == "POST" and endpoint(path) is not None


def register(config: IntakeConfig, memory: CallMemory, path: str, headers: Any,
             body: bytes | bytearray | memoryview | None, *, host: str | None,
             method: str, provider: str | None, decoded: Mapping[str, Any] | None,
             resegmented: Resegmented | None, rendered: bool, decode: bool
             ) -> Pending | None:
    """The :class:`Pending` of a call about to be sent, its analysis left to :func:`analyse`
    (arguments as :meth:`Recorder.register <stableprompt.Recorder.register>`), or ``None``
    when it is not recorded. Never raises."""
    try:
        named = endpoint(path) if method.upper() == "POST" else None  # recordable(), once
        if body is None or named is None:
            return None
        rendered = rendered or decoded is not None  # stableprompt rendered these bytes
        in_path = named in MODEL_IN_PATH
        if decoded is None and decode:
            decoded, resegmented = memory.decode(None if in_path else named, body)
        if decoded is not None and not isinstance(decoded, dict):
            return None
        wire = named if decoded is None else detect(decoded, path)
        if wire not in REQUEST_FORMATS:
            return None
        if decoded is not None and wire in MODEL_IN_PATH:
            # the model is a URL path parameter: segmented (never sent) with the body
            decoded, resegmented, rendered = with_path_model(wire, decoded, path), None, False
        secrets = secrets_in_headers(headers)
        kept = cache_headers(headers, wire)
    except Exception:
        return None
    assert wire is not None
    family = provider_for(host, wire, provider or config.provider)
    pending = Pending(
        record_id=new_record_id(), ts=config.clock(), started=config.monotonic(), path=path,
        wire_format=wire, provider=family, secrets=secrets, headers=kept,
        usage_format=usage_format(family, wire,
                                  chosen_dialect(config.usage_dialect, host, family)))
    if decoded is None:  # what is known without the body, for a provisional record
        pending.lazy_body = True
        pending.session_id = config.session_id or session_from_headers(headers)
    else:
        _read_request(config, pending, decoded, headers)
    pending.deferred = (decoded, headers, body, resegmented, rendered)
    return pending


def analyse(config: IntakeConfig, memory: CallMemory, pending: Pending) -> None:
    """Analyse a registered call (the body decoded when :func:`register` did not, segments,
    our token counts, its conversation, turn and predecessor); nothing for a call already
    analysed. Never raises."""
    deferred, pending.deferred = pending.deferred, None
    if deferred is None:
        return
    decoded, headers, body, resegmented, rendered = deferred
    try:
        if decoded is None:
            try:
                in_path = pending.wire_format in MODEL_IN_PATH
                decoded, resegmented = memory.decode(
                    None if in_path else pending.wire_format, body)
                if not isinstance(decoded, dict):
                    raise ValueError("the request body is not a JSON object")
                if in_path:
                    decoded, rendered = with_path_model(pending.wire_format, decoded,
                                                        pending.path), False
                _read_request(config, pending, decoded, headers)
            finally:
                pending.lazy_body = False  # what the body says is known (or never)
        if config.store_content:
            pending.content = bytes(body).decode("utf-8", "replace")
        memory.analyse(pending, decoded, body, resegmented, rendered=rendered,
                       ledger=config.ledger, problem=problem)
    except Exception as exc:
        problem(pending, exc)


def session_of(config: IntakeConfig, body: Mapping[str, Any], headers: Any) -> str | None:
    """The recorder's session id, else the session the request names (its
    ``x-stableprompt-session`` header first, then a harness's session header, then its body:
    ``_predecessor.session_from_request``)."""
    return config.session_id or session_from_request(body, headers)


def problem(pending: Pending, exc: BaseException) -> None:
    """Note why ``pending``'s request could not be analysed (scrubbed, logged)."""
    pending.problem = redact(f"{type(exc).__name__}: {exc}", secrets=pending.secrets)
    _log.warning("stableprompt could not analyse a request to %s: %s", pending.path,
                 pending.problem)


def _read_request(config: IntakeConfig, pending: Pending, decoded: Mapping[str, Any],
                  headers: Any) -> None:
    """What the response observer and a provisional record read of the request: model,
    session id, the diagnostics asked for. Never raises."""
    try:
        model = decoded.get("model")
        pending.model = model if isinstance(model, str) else None
        pending.session_id = session_of(config, decoded, headers)
        pending.agent = agent_from_headers(headers)
        pending.diagnostics_requested = diagnostics_request(pending.wire_format, decoded)
    except Exception as exc:
        problem(pending, exc)
