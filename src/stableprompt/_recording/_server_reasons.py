"""The provider's own cache-miss reason, joined to our verdict: one pure function.

Anthropic (``diagnostics.previous_message_id`` -> ``diagnostics.cache_miss_reason``) and
OpenAI Responses (``prompt_cache_options.comparison_response_id`` ->
``prompt_cache_diagnostics``) say why a request could not reuse the prefix of the request it
was compared with. That is the one independent witness of a closed provider's cache:
:func:`server_diagnosis` reads it from a record's stored diagnostics and says whether it and
our verdict agree.

Sources (shapes and reason types as the official SDKs define them, 2026-12):
``anthropic`` 2.17 ``types/diagnostics.py``, ``types/cache_miss_*.py`` (reasons
``model_changed``, ``system_changed``, ``tools_changed``, ``messages_changed``,
``previous_message_not_found``, ``unavailable``; ``cache_missed_input_tokens``; ``null``: the
diagnosis is still pending) and ``openai`` 3.63 ``types/responses/response.py``
(``PromptCacheDiagnostics``: ``cache_hit``, ``cache_miss`` with ``reason`` and
``cache_missed_tokens``, ``comparison_response_not_found``, ``unavailable``);
``../shared/reference/PROVIDERS.md`` §15.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["AGREEMENTS", "SERVER_REASONS", "server_diagnosis"]

Agreement = Literal["agree", "disagree", "server-only", "ours-only", "no-comparison"]

AGREEMENTS: tuple[Agreement, ...] = ("agree", "disagree", "server-only", "ours-only",
                                     "no-comparison")
"""How the server's reason and our verdict relate: ``agree`` (both say the same thing),
``disagree``, ``server-only`` (the server blames itself, ``unavailable``, or names a change
we do not see: provider-side, unexplained), ``ours-only`` (we name a change the server
does not report), ``no-comparison`` (the server had nothing to compare with:
``previous_message_not_found`` / ``comparison_response_not_found``, or no reason yet)."""

_MUTATION = "client_mutation"

#: Server reason -> what our side says about the same miss: the segment kinds and causes of a
#: ``client_mutation`` that name it (``None``: any), or another verdict.
SERVER_REASONS: Mapping[str, tuple[frozenset[str] | None, frozenset[str] | None]] = {
    # Anthropic
    "model_changed": (None, frozenset({"model-change"})),
    "system_changed": (frozenset({"system"}), None),
    "tools_changed": (frozenset({"tool"}), None),
    "messages_changed": (frozenset({"message"}), None),
    # OpenAI Responses
    "prompt_cache_key_changed": (frozenset({"param"}), None),
    "text_format_changed": (frozenset({"param"}), None),
    "reasoning_effort_changed": (frozenset({"param"}), None),
    "verbosity_changed": (frozenset({"param"}), None),
    "service_tier_changed": (frozenset({"param"}), None),
    "input_changed": (frozenset({"message", "system"}), None),
    "context_compacted": (frozenset({"message"}), None),
}
"""The server's reasons that name a change of the request, with the segment kinds (``param``,
``tool``, ``system``, ``message``) or causes of ours that name the same change. OpenAI
``tools_changed`` and ``model_changed`` share Anthropic's entries; ``input_changed`` covers
instructions (our ``system`` kind) and input items."""

_NO_COMPARISON = frozenset({"previous_message_not_found", "comparison_response_not_found"})
_UNAVAILABLE = "unavailable"
_READLESS_OURS = frozenset({"cold", "ttl_expired", "below_minimum", "no_breakpoint",
                            "provider_miss"})


def _reason(diagnostics: Mapping[str, Any]) -> tuple[str | None, int | None] | None:
    """``(reason, missed tokens)`` from the stored response diagnostics (``reason``
    ``"cache_hit"`` for OpenAI's hit, ``None`` while Anthropic's is pending), or ``None``
    when the response carried none."""
    response = diagnostics.get("response")
    if not isinstance(response, Mapping):
        return None
    if "cache_miss_reason" in response:  # Anthropic
        reason = response.get("cache_miss_reason")
        if not isinstance(reason, Mapping):
            return None, None
        missed = reason.get("cache_missed_input_tokens")
        return _text(reason.get("type")), missed if isinstance(missed, int) else None
    kind = _text(response.get("type"))  # OpenAI
    if kind == "cache_miss":
        missed = response.get("cache_missed_tokens")
        return _text(response.get("reason")), missed if isinstance(missed, int) else None
    return kind, None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_CHANGE_AFTER_READ = frozenset({"messages_changed", "input_changed"})
"""Server reasons a ``hit`` agrees with when the missed tokens are what our prediction left
unread anyway: the compared request's volatile tail, or the branch another conversation took
(we predicted the read up to there). A ``ttl_expired`` call agrees the same way, measured
against its prediction without the TTL (``expired_tokens`` more): diagnostics compare the
requests' structure, "independent of whether the cache actually hit" (Anthropic's
cache-diagnostics page), so a change found only after the expired prefix confirms it."""

EXPECTED_LOSS_TOLERANCE = 0.05
"""How far (share of the expected loss, plus :data:`EXPECTED_LOSS_SLACK_TOKENS`) the server's
missed tokens may exceed what our prediction left unread and still agree with a ``hit``: the
two counts come from different token estimates of the same span."""

EXPECTED_LOSS_SLACK_TOKENS = 16


def server_diagnosis(diagnostics: Mapping[str, Any] | None, verdict: str,
                     detail: Mapping[str, Any], *,
                     expected_loss_tokens: int | None = None) -> dict[str, Any] | None:
    """The provider's reason beside ours, or ``None`` when the provider gave none.

    Args:
        diagnostics: A record's ``diagnostics`` (``{"provider", "requested", "response"}``:
            ``response`` is the provider's diagnostics object as received).
        verdict: Our verdict for the call.
        detail: Our ``verdict_detail`` (``segment_kind`` and ``cause`` of a
            ``client_mutation``).
        expected_loss_tokens: What our prediction left unread of the compared request
            (its reported input total minus our predicted read, provider tokens), when known:
            a ``hit`` agrees with a server naming a change in the messages that cost no more,
            and so does a ``ttl_expired`` call, less its ``expired_tokens``.

    Returns:
        ``{"reason": str | None, "missed_tokens": int | None, "agreement": one of
        AGREEMENTS, "why": str}``: ``reason`` is the server's type (``"cache_hit"`` for an
        OpenAI hit), ``missed_tokens`` its ``cache_missed(_input)_tokens`` (provider tokens).
        Pure; never raises on odd shapes (an unknown reason is ``disagree`` unless ours is
        a hit, which it then contradicts too).
    """
    if not isinstance(diagnostics, Mapping):
        return None
    found = _reason(diagnostics)
    if found is None:
        return None
    reason, missed = found
    agreement, why = _agreement(reason, verdict, detail)
    expected = expected_loss_tokens
    if verdict == "ttl_expired" and expected is not None:
        expired = detail.get("expired_tokens")
        expected = max(expected - expired, 0) if isinstance(expired, int) else None
    if verdict in ("hit", "ttl_expired") and reason in _CHANGE_AFTER_READ \
            and missed is not None and expected is not None and missed <= expected * (
                1 + EXPECTED_LOSS_TOLERANCE) + EXPECTED_LOSS_SLACK_TOKENS:
        where = "we predicted read" if verdict == "hit" else "that had expired (TTL)"
        agreement, why = "agree", (f"{reason} after the prefix {where} ({missed} missed, "
                                   f"{expected} expected unread)")
    return {"reason": reason, "missed_tokens": missed, "agreement": agreement, "why": why}


def _agreement(reason: str | None, verdict: str, detail: Mapping[str, Any]
               ) -> tuple[Agreement, str]:
    """How ``reason`` and our verdict relate, and why (one sentence)."""
    if reason is None:
        return "no-comparison", ("the server gave no reason (its diagnosis was pending when "
                                 "the answer was sent)")
    if reason in _NO_COMPARISON:
        return "no-comparison", "the server had no earlier request to compare with"
    if verdict == "unknown":
        return "server-only", "our verdict is unknown (the call failed or was cut)"
    if reason == "cache_hit":
        if verdict == "hit":
            return "agree", "both report a hit"
        return "disagree", f"the server reports a hit, we say {verdict}"
    if reason == _UNAVAILABLE:
        if verdict == _MUTATION and detail.get("segment_kind") == "param":
            # Anthropic: "unavailable" includes changed thinking / tool_choice (cache_miss_
            # unavailable.py), which we name as a parameter change.
            return "agree", "a changed parameter the server does not diagnose"
        return "server-only", "the server gives no diagnosis (provider-side, unexplained)"
    expected = SERVER_REASONS.get(reason)
    if expected is None:
        return "disagree", f"unknown server reason {reason!r}"
    shared = detail.get("shared_prefix") if verdict == "cold" else None
    compared = shared.get("differs_at_kind") if isinstance(shared, Mapping) else None
    if isinstance(shared, Mapping) and isinstance(compared, str):
        # A new conversation compared with another session's request (``_tree``): the
        # server compares with that request too, so both name where the two differ.
        kinds = expected[0]
        where = (f"a new conversation whose head differs from session "
                 f"{shared.get('session')}'s at {shared.get('differs_at')}")
        if kinds is not None and compared in kinds:
            return "agree", f"both name {reason}: {where}"
        return "disagree", f"the server names {reason}, we see {where} ({compared})"
    if verdict != _MUTATION:
        if verdict in _READLESS_OURS or verdict == "hit":
            return "server-only", f"the server names {reason}, we see no change ({verdict})"
        return "disagree", f"the server names {reason}, we say {verdict}"
    kinds, causes = expected
    if causes is not None and detail.get("cause") in causes:
        return "agree", f"both name {reason}"
    if kinds is not None and detail.get("segment_kind") in kinds and \
            detail.get("cause") != "model-change":
        return "agree", f"both name {reason}"
    return "disagree", (f"the server names {reason}, we name {detail.get('cause')} in "
                        f"{detail.get('segment_kind')}")
