"""Asking the provider why a request missed its cache: the one place that adds the
diagnostics fields to a request (stableprompt's clients, the recording transport with
``Recorder(diagnostics=True)``, ``stableprompt proxy --diagnostics``).

- Anthropic: ``diagnostics: {"previous_message_id": <id>}`` (``null`` on a lineage's first
  call, which opts in without a comparison) and the ``anthropic-beta`` value
  :data:`~stableprompt._wire.anthropic.DIAGNOSTICS_BETA` (GA on the newer docs pages, beta on
  others: PROVIDERS.md §15; sending it is harmless where GA);
- OpenAI Responses: ``prompt_cache_options.comparison_response_id`` (GPT-5.6+; nothing on a
  first call, and nothing for Chat Completions, which has no such field:
  ``openai-python`` ``chat/completion_create_params.py``).

The compared id is the response id of the request our own attribution compares with
(:meth:`Recorder.previous_response_id <stableprompt.Recorder.previous_response_id>`), so the
server's reason and ours are about the same pair. A body that already asks is left as it is.
The answer is stored on the record and joined to our verdict
(``_server_reasons.server_diagnosis``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._canonical import loads, wire_json
from .._exceptions import ConfigurationError
from .._policy import PolicyTable, takes_cache_options
from .._wire import anthropic, openai_responses

__all__ = ["DIAGNOSTICS_WAIT_S", "diagnostics_asked", "diagnostics_flag", "merge_header_values",
           "with_members"]

DIAGNOSTICS_WAIT_S = 30.0
"""Most seconds a caller asking for diagnostics waits for the calls still recording on the
recorder's thread (``record_in_thread``): the compared response id must be known first."""

PreviousId = Callable[[], str | None]
"""Returns the response id of the request this one will be compared with (``None``: none)."""


def diagnostics_flag(value: object) -> bool:
    """``Recorder(diagnostics=...)`` checked: ``True`` or ``False``, nothing coerced.

    Raises:
        ConfigurationError: anything else (code ``diagnostics``).
    """
    if not isinstance(value, bool):
        raise ConfigurationError(f"diagnostics must be True or False, got {value!r}",
                                 code="diagnostics")
    return value


def diagnostics_asked(wire: str, body: Mapping[str, Any], previous: PreviousId, *,
                      policies: PolicyTable, provider: str
                      ) -> tuple[dict[str, Any], dict[str, str]]:
    """The body members and headers that ask for cache diagnostics on a request of ``wire``
    (module docstring) to ``provider``: ``({}, {})`` when the format has none, the body
    already asks, the provider is not Anthropic's own API (Messages: a llama-server or a
    gateway speaking the format has no such field), or (Responses) the model takes no
    ``prompt_cache_options``
    (:func:`~stableprompt._policy.takes_cache_options` of its policy in ``policies``: older
    models answer 400). ``previous`` is called only when its id is needed."""
    if wire == anthropic.WIRE_FORMAT:
        if provider != "anthropic":  # Anthropic's own API only (a llama-server, a gateway...)
            return {}, {}
        headers = {"anthropic-beta": anthropic.DIAGNOSTICS_BETA}
        if "diagnostics" in body:
            return {}, headers
        return anthropic.diagnostics_fields(previous()), headers
    if wire != openai_responses.WIRE_FORMAT:
        return {}, {}
    if openai_responses.diagnostics_request(body) is not None:
        return {}, {}
    model = body.get("model")
    try:
        policy = policies.lookup(provider, model if isinstance(model, str) else "")
    except Exception:
        return {}, {}
    if not takes_cache_options(policy):
        return {}, {}
    options = body.get(openai_responses.DIAGNOSTICS_OPTION)
    if options is not None and not isinstance(options, Mapping):
        return {}, {}  # not ours to fix: sent as it is
    compared = previous()
    if compared is None:
        return {}, {}
    return {openai_responses.DIAGNOSTICS_OPTION: {**(options or {}),
                                                  "comparison_response_id": compared}}, {}


def with_members(content: bytes, body: Mapping[str, Any], members: Mapping[str, Any]
                 ) -> bytes | None:
    """``content`` (the bytes of the JSON object ``body``) with top-level ``members`` set:
    new members appended after its last member (the bytes before stay as they were); an
    existing member replaced by re-serializing the object in its order (compact JSON) only
    when that reproduces ``content`` exactly otherwise, else ``None`` (re-serializing would
    change other bytes, or values: an integer beyond 64 bits is read as a float, a body
    nested past 255 levels cannot be written).

    Raises:
        ValueError: ``content`` is not a JSON object's bytes.
    """
    if not members:
        return content
    if any(key in body for key in members):  # decoded afresh: ``body`` may be a view
        try:
            fresh = loads(content)
            if wire_json(fresh) != content.strip():
                return None
            return wire_json({**fresh, **members})
        except Exception:
            return None
    stripped = content.rstrip()
    if not stripped.endswith(b"}"):
        raise ValueError("request body is not a JSON object")
    head = stripped[:-1].rstrip()
    extra = b"".join(b"," + wire_json(key) + b":" + wire_json(value)
                     for key, value in members.items())
    return head + (extra[1:] if head.endswith(b"{") else extra) + b"}"


def merge_header_values(existing: str | None, added: str) -> str:
    """A comma-separated header value (``anthropic-beta``) with ``added`` appended when it
    is not among the values already there."""
    if not existing:
        return added
    values = [value.strip() for value in existing.split(",")]
    return existing if added in values else f"{existing},{added}"
