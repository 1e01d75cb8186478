"""The provider's cache-miss reason joined to our verdict (``_recording._server_reasons``)."""

from __future__ import annotations

from typing import Any

import pytest

from stableprompt._recording._server_reasons import AGREEMENTS, server_diagnosis


def _anthropic(kind: str | None, missed: int | None = 1200) -> dict[str, Any]:
    reason = None if kind is None else {"type": kind, **(
        {} if missed is None else {"cache_missed_input_tokens": missed})}
    return {"provider": "anthropic", "requested": {"diagnostics": {"previous_message_id": "m"}},
            "response": {"cache_miss_reason": reason}}


def _openai(kind: str, reason: str | None = None, missed: int | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"type": kind}
    if reason is not None:
        response.update(reason=reason, cache_missed_tokens=missed)
    return {"provider": "openai", "response": response}


MUTATION = "client_mutation"

CASES = [
    # (diagnostics, our verdict, our detail, expected agreement)
    (_anthropic("system_changed"), MUTATION, {"segment_kind": "system", "cause": "volatile-token"},
     "agree"),
    (_anthropic("tools_changed"), MUTATION, {"segment_kind": "tool", "cause": "tool-reorder"},
     "agree"),
    (_anthropic("messages_changed"), MUTATION,
     {"segment_kind": "message", "cause": "history-rewrite"}, "agree"),
    (_anthropic("model_changed"), MUTATION, {"segment_kind": "param", "cause": "model-change"},
     "agree"),
    (_anthropic("model_changed"), MUTATION, {"segment_kind": "system", "cause": "content-edit"},
     "disagree"),
    (_anthropic("system_changed"), MUTATION, {"segment_kind": "message",
                                              "cause": "history-rewrite"}, "disagree"),
    (_anthropic("unavailable", None), MUTATION, {"segment_kind": "param",
                                                 "cause": "param-change"}, "agree"),
    (_anthropic("unavailable", None), "provider_miss", {}, "server-only"),
    (_anthropic("previous_message_not_found", None), "cold", {}, "no-comparison"),
    (_anthropic(None), "hit", {}, "no-comparison"),
    (_anthropic("messages_changed"), "hit", {}, "server-only"),
    (_anthropic("messages_changed"), "unknown", {}, "server-only"),
    (_anthropic("brand_new_reason"), MUTATION, {"segment_kind": "system"}, "disagree"),
    (_openai("cache_hit"), "hit", {}, "agree"),
    (_openai("cache_hit"), "provider_miss", {}, "disagree"),
    (_openai("cache_miss", "prompt_cache_key_changed", 900), MUTATION,
     {"segment_kind": "param", "cause": "param-change"}, "agree"),
    (_openai("cache_miss", "reasoning_effort_changed", 900), MUTATION,
     {"segment_kind": "param", "cause": "param-change"}, "agree"),
    (_openai("cache_miss", "input_changed", 900), MUTATION,
     {"segment_kind": "system", "cause": "volatile-token"}, "agree"),
    (_openai("cache_miss", "tools_changed", 900), MUTATION,
     {"segment_kind": "message", "cause": "history-rewrite"}, "disagree"),
    (_openai("comparison_response_not_found"), "cold", {}, "no-comparison"),
    (_openai("unavailable"), "ttl_expired", {}, "server-only"),
]


@pytest.mark.parametrize(("diagnostics", "verdict", "detail", "expected"), CASES)
def test_each_server_reason_maps_onto_our_verdict(
        diagnostics: dict[str, Any], verdict: str, detail: dict[str, Any], expected: str) -> None:
    """Every documented reason of both providers is joined to our verdict as agree,
    disagree, server-only (provider-side, unexplained) or no-comparison, with a reason."""
    joined = server_diagnosis(diagnostics, verdict, detail)
    assert joined is not None
    assert joined["agreement"] == expected and expected in AGREEMENTS
    assert isinstance(joined["why"], str) and joined["why"]


def test_missed_tokens_are_the_servers_count() -> None:
    """missed_tokens is the provider's cache_missed(_input)_tokens as reported."""
    anthropic = server_diagnosis(_anthropic("system_changed", 14_807), MUTATION,
                                 {"segment_kind": "system"})
    openai = server_diagnosis(_openai("cache_miss", "tools_changed", 321), MUTATION,
                              {"segment_kind": "tool"})
    assert anthropic is not None and anthropic["missed_tokens"] == 14_807
    assert anthropic["reason"] == "system_changed"
    assert openai is not None and openai["missed_tokens"] == 321


@pytest.mark.parametrize("diagnostics", [None, {}, {"response": None}, {"response": "odd"},
                                         {"response": {"cache_miss_reason": "odd"}}])
def test_no_diagnosis_when_the_server_said_nothing(diagnostics: Any) -> None:
    """No response diagnostics (or an odd shape without a reason object) gives no join,
    or a pending one, never an exception."""
    joined = server_diagnosis(diagnostics, "hit", {})
    assert joined is None or joined["agreement"] == "no-comparison"


def _new_conversation(kind: str | None) -> dict[str, Any]:
    """A ``cold`` row's detail when another session's request was compared (the demo's
    second BFCL session: its head differs from the first session's at ``/tools/0``)."""
    shared: dict[str, Any] = {"session": "multi_turn_base_0", "differs_at": "/tools/0",
                              "differs_at_segment": "tools[0]", "tokens": 57}
    if kind is not None:
        shared["differs_at_kind"] = kind
    return {"shared_prefix": shared}


@pytest.mark.parametrize(("kind", "reason", "expected"), [
    ("tool", "tools_changed", "agree"),
    ("system", "system_changed", "agree"),
    ("tool", "system_changed", "disagree"),
    (None, "tools_changed", "server-only"),  # nothing compared: we see no change
])
def test_a_new_conversation_agrees_with_the_change_the_server_names(
        kind: str | None, reason: str, expected: str) -> None:
    """A new session's first call (``cold``) compared with another session's request, whose
    head differs at a tool, agrees with a server naming ``tools_changed`` against that
    request: both name the same change. The demo counted 49 such calls per scenario as
    provider-side unexplained ("we see no change"), where README promises 0."""
    joined = server_diagnosis(_anthropic(reason, 6068), "cold", _new_conversation(kind))
    assert joined is not None and joined["agreement"] == expected
    if expected == "agree":
        assert "/tools/0" in joined["why"] and "multi_turn_base_0" in joined["why"]


@pytest.mark.parametrize(("expired", "missed", "expected"), [
    (5563, 34, "agree"),  # think-time demo: only the previous request's tail differs
    (5563, 400, "server-only"),  # the server found a change inside the expired prefix
    (None, 34, "server-only"),  # no expired_tokens: nothing to measure the change against
])
def test_a_ttl_expiry_agrees_with_a_change_found_only_after_the_expired_prefix(
        expired: int | None, missed: int, expected: str) -> None:
    """Diagnostics compare structure, not the TTL: a ttl_expired call whose server reason is
    messages_changed agrees when the missed tokens are what the no-TTL prediction left unread
    (the expected loss less expired_tokens), else the server names something we do not."""
    detail = {} if expired is None else {"expired_tokens": expired}
    joined = server_diagnosis(_anthropic("messages_changed", missed), "ttl_expired", detail,
                              expected_loss_tokens=5656)
    assert joined is not None and joined["agreement"] == expected
    if expected == "agree":
        assert "expired" in joined["why"] and "93 expected unread" in joined["why"]
