"""A cache policy's TTLs on the Anthropic breakpoints of stabilized requests
(``_recording._stabilize_ttls``): the breakpoints the stabilizer places, the client's own
markers without a ``ttl``, the longer-before-shorter rule, and bad input."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stableprompt import CachePolicy, InputError, PolicyError, RecordingTransport
from stableprompt._policy import CacheRules, cache_rules
from stableprompt._recording._stabilize import Stabilizer
from stableprompt._recording._stabilize_ttls import markers, policy_ttls, retime

SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))
ONE_HOUR = {"ttl": "1h", "type": "ephemeral"}
FIVE_MINUTES = {"type": "ephemeral"}
TTL_S = {"5m": 300, "1h": 3600}


def bare(question: Any = "hi") -> dict[str, Any]:
    """An Anthropic body with tools and a system prompt, no breakpoint anywhere."""
    return {"model": "claude-sonnet-4-6", "max_tokens": 16,
            "tools": [{"name": n, "description": f"{n} things",
                       "input_schema": {"type": "object"}} for n in ("alpha", "beta")],
            "system": [{"type": "text", "text": SYSTEM}],
            "messages": [{"role": "user", "content": question}]}


def stabilized(body: dict[str, Any], cache_policy: CachePolicy | None, **kwargs: Any
               ) -> tuple[bytes, list[str], dict[str, Any]]:
    return Stabilizer(cache_policy).stabilize(json.dumps(body).encode(), "/v1/messages",
                                              **kwargs)


def test_placed_breakpoints_take_the_policys_head_and_history_ttls() -> None:
    """``1h`` head + ``5m`` history: the system block gets a 1-hour marker, the last content
    block a 5-minute one; stabilized again, the bytes come back unchanged."""
    policy = CachePolicy(head="1h", history="5m")
    out, rewrites, _ = stabilized(bare([{"type": "text", "text": "hi"}]), policy)
    got = json.loads(out)
    assert rewrites == ["head-breakpoint", "history-breakpoint"]
    assert got["system"][-1]["cache_control"] == ONE_HOUR
    assert got["messages"][-1]["content"][-1]["cache_control"] == FIVE_MINUTES
    again, rewrites, _ = Stabilizer(policy).stabilize(out, "/v1/messages")
    assert again is out and rewrites == []


def test_a_one_hour_policy_marks_automatic_caching_and_the_last_tool_too() -> None:
    """``1h`` everywhere: a string system with tools marks the last tool at 1 hour, and a
    string last message gets top-level ``cache_control`` at 1 hour (automatic caching)."""
    body = {**bare(), "system": "be brief"}
    out, rewrites, _ = stabilized(body, CachePolicy(head="1h", history="1h"))
    got = json.loads(out)
    assert rewrites == ["head-breakpoint", "history-breakpoint"]
    assert got["tools"][-1]["cache_control"] == ONE_HOUR
    assert got["cache_control"] == ONE_HOUR and got["messages"][-1]["content"] == "hi"


def test_without_a_policy_or_with_the_default_nothing_changes() -> None:
    """No policy, or a policy choosing the provider default: 5-minute markers as before, and
    a client's own markers untouched."""
    for policy in (None, CachePolicy(), CachePolicy(head="5m", history="5m")):
        out, _, _ = stabilized(bare([{"type": "text", "text": "hi"}]), policy)
        got = json.loads(out)
        assert got["system"][-1]["cache_control"] == FIVE_MINUTES
        own = bare([{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}])
        raw = json.dumps(own).encode()
        assert Stabilizer(policy).stabilize(raw, "/v1/messages")[:2] == (raw, [])


def test_client_markers_without_a_ttl_get_the_policy_ttl_of_their_place() -> None:
    """The client's system marker (no ``ttl``) becomes 1 hour (head), its message marker
    stays 5 minutes (history is ``5m``); a marker with its own ``ttl`` keeps it; the rewrite
    is ``breakpoint-ttl`` and no breakpoint is added."""
    body = bare([{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}])
    body["system"][-1]["cache_control"] = {"type": "ephemeral"}
    body["tools"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    out, rewrites, _ = stabilized(body, CachePolicy(head="1h", history="5m"))
    got = json.loads(out)
    assert rewrites == ["breakpoint-ttl"]
    assert got["tools"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert got["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert got["messages"][-1]["content"][-1]["cache_control"] == FIVE_MINUTES
    assert "cache_control" not in got["tools"][1] and "cache_control" not in got
    # everything but that one marker is as sent, key order included
    got["system"][-1]["cache_control"] = {"type": "ephemeral"}
    assert json.dumps(got) == json.dumps(body)


def test_a_client_marker_is_never_made_longer_than_one_before_it() -> None:
    """The client marked its system with an explicit ``5m``: its later markers without a
    ``ttl`` stay 5 minutes under a ``1h`` policy (a 1-hour entry after a 5-minute one is a
    400), and nothing is rewritten."""
    nested = {"type": "tool_result", "tool_use_id": "t1",
              "content": [{"type": "text", "text": "r", "cache_control": {"type": "ephemeral"}}]}
    body = bare([nested])
    body["system"][-1]["cache_control"] = {"type": "ephemeral", "ttl": "5m"}
    body["cache_control"] = {"type": "ephemeral"}
    raw = json.dumps(body).encode()
    assert Stabilizer(CachePolicy(head="1h", history="1h")).stabilize(
        raw, "/v1/messages")[:2] == (raw, [])


def test_nested_and_top_level_client_markers_are_history_places() -> None:
    """A marker nested in a tool result and the top-level one are history markers: under
    ``1h`` history (and head) both become 1 hour."""
    nested = {"type": "tool_result", "tool_use_id": "t1",
              "content": [{"type": "text", "text": "r", "cache_control": {"type": "ephemeral"}}]}
    body = {**bare([nested]), "cache_control": {"type": "ephemeral"}}
    out, rewrites, _ = stabilized(body, CachePolicy(head="1h", history="1h"))
    got = json.loads(out)
    assert rewrites == ["breakpoint-ttl"]
    assert got["messages"][0]["content"][0]["content"][0]["cache_control"] == \
        {"type": "ephemeral", "ttl": "1h"}
    assert got["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_a_ttl_the_model_does_not_offer_falls_back_to_the_default_and_says_so() -> None:
    """Rules offering only 5 minutes (a custom table): the policy's ``1h`` is not sent, the
    markers are 5-minute ones, and the row's evidence names the TTL and the model."""
    only_5m = cache_rules("anthropic", "claude-sonnet-4-6").model_copy(
        update={"ttls_s": (300,)})
    out, rewrites, evidence = stabilized(
        bare([{"type": "text", "text": "hi"}]), CachePolicy(head="1h", history="5m"),
        policy=lambda model: only_5m)
    got = json.loads(out)
    assert rewrites == ["head-breakpoint", "history-breakpoint"]
    assert got["system"][-1]["cache_control"] == FIVE_MINUTES
    assert "'1h'" in evidence["cache_policy_skipped"]
    assert "claude-sonnet-4-6" in evidence["cache_policy_skipped"]


def test_a_history_ttl_longer_than_the_default_head_is_capped_and_says_so() -> None:
    """``CachePolicy(history="1h")`` leaves the head at the 5-minute default: the history is
    sent at 5 minutes (longer TTLs first), and the row's evidence says so and how to fix
    it, instead of silence."""
    out, rewrites, evidence = stabilized(bare([{"type": "text", "text": "hi"}]),
                                         CachePolicy(history="1h"))
    got = json.loads(out)
    assert rewrites == ["head-breakpoint", "history-breakpoint"]
    assert got["messages"][-1]["content"][-1]["cache_control"] == FIVE_MINUTES
    note = evidence["cache_policy_skipped"]
    assert "history TTL '1h' is longer than the head's '5m'" in note
    assert "set head='1h'" in note


def test_an_explicit_cache_policy_is_refused_by_the_stabilizer() -> None:
    """``explicit_cache=True`` (Gemini's ``cachedContents``) has nothing to do in a
    stabilizer that places breakpoints: ``cache-policy-explicit-cache``, not silence."""
    for make in (lambda: Stabilizer(CachePolicy(explicit_cache=True)),
                 lambda: RecordingTransport(stabilize=True,
                                            cache_policy=CachePolicy(explicit_cache=True))):
        with pytest.raises(PolicyError, match="GeminiCache") as info:
            make()
        assert info.value.code == "cache-policy-explicit-cache"


def test_policy_ttls_resolution_by_hand() -> None:
    """``policy_ttls``: ``None`` labels are the 5-minute default; kind ``main`` is used even
    when a subagent override exists; unknown rules accept Anthropic's two labels."""
    rules: CacheRules = cache_rules("anthropic", "claude-sonnet-4-6")
    policy = CachePolicy(head="1h", by_kind={"subagent": {"head": "5m", "history": "5m"}})  # type: ignore[dict-item]
    got = policy_ttls(policy, rules, "claude-sonnet-4-6")
    assert (got.head, got.history, got.skipped) == ("1h", "5m", None)
    got = policy_ttls(CachePolicy(head="1h", history="1h"), None, None)
    assert (got.head, got.history) == ("1h", "1h")
    got = policy_ttls(None, rules, "m")
    assert (got.head, got.history) == ("5m", "5m")


def test_transport_refuses_a_policy_without_stabilize_or_of_the_wrong_type() -> None:
    """``RecordingTransport(cache_policy=...)`` needs ``stabilize=True`` (code
    ``cache-policy-without-stabilize``) and a :class:`CachePolicy` (code ``cache-policy``)."""
    with pytest.raises(InputError) as info:
        RecordingTransport(cache_policy=CachePolicy(head="1h"))
    assert info.value.code == "cache-policy-without-stabilize"
    with pytest.raises(InputError) as info:
        RecordingTransport(stabilize=True, cache_policy={"head": "1h"})  # type: ignore[arg-type]
    assert info.value.code == "cache-policy"
    transport = RecordingTransport(stabilize=True, cache_policy=CachePolicy(head="1h"))
    assert transport.cache_policy == CachePolicy(head="1h")


# --------------------------------------------------------------------------- property

_PLACES = ["tool0", "tool1", "system0", "system1", "msg0", "msg1", "nested", "top"]
_TTL_CHOICE = st.sampled_from([None, "5m", "1h"])  # None: a marker without ttl


def _body_with(marks: dict[str, str | None]) -> dict[str, Any]:
    def control(place: str) -> dict[str, Any]:
        ttl = marks[place]
        return {"type": "ephemeral"} if ttl is None else {"type": "ephemeral", "ttl": ttl}

    def item(place: str, value: dict[str, Any]) -> dict[str, Any]:
        return {**value, "cache_control": control(place)} if place in marks else value

    body: dict[str, Any] = {
        "model": "claude-sonnet-4-6", "max_tokens": 8,
        "tools": [item(f"tool{i}", {"name": f"t{i}", "input_schema": {"type": "object"}})
                  for i in range(2)],
        "system": [item(f"system{i}", {"type": "text", "text": f"s{i}"}) for i in range(2)],
        "messages": [
            {"role": "user", "content": [item("msg0", {"type": "text", "text": "q"})]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "t0",
                                               "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t",
                 "content": [item("nested", {"type": "text", "text": "r"})]},
                item("msg1", {"type": "text", "text": "more"})]}]}
    if "top" in marks:
        body["cache_control"] = control("top")
    return body


def _ttls(body: dict[str, Any]) -> list[tuple[str | None, int]]:
    return [(m["cache_control"].get("ttl"), TTL_S[m["cache_control"].get("ttl", "5m")])
            for m, _ in markers(body)]


@given(st.dictionaries(st.sampled_from(_PLACES), _TTL_CHOICE, min_size=1),
       _TTL_CHOICE, _TTL_CHOICE)
def test_retiming_keeps_explicit_ttls_and_never_breaks_the_order(
        marks: dict[str, str | None], head: str | None, history: str | None) -> None:
    """Any client markers, any valid policy: markers with a ``ttl`` keep it, a retimed one
    only grows to its place's TTL, a body whose markers were in longer-first order still is,
    and nothing but ``cache_control`` values changes."""
    if history == "1h" and head != "1h":
        return  # not a valid policy (longer TTLs first): CachePolicy refuses it
    policy = CachePolicy(head=head, history=history)
    body = _body_with(marks)
    before = _ttls(body)
    after_body = json.loads(json.dumps(body))
    changed = retime(after_body, policy_ttls(policy, None, None))
    after = _ttls(after_body)
    places = [place for _, place in markers(body)]
    wanted = {"head": TTL_S[head or "5m"], "history": TTL_S[history or "5m"]}
    assert changed == sum(a != b for a, b in zip(before, after, strict=True))
    for (ttl, seconds), (new_ttl, new_seconds), place in zip(before, after, places,
                                                             strict=True):
        if ttl is not None:
            assert (new_ttl, new_seconds) == (ttl, seconds)
        elif new_ttl is not None:
            assert seconds < new_seconds <= wanted[place]
    ordered = all(a[1] >= b[1] for a, b in itertools.pairwise(before))
    if ordered:
        assert all(a[1] >= b[1] for a, b in itertools.pairwise(after))
    for holder, _ in markers(after_body):
        holder["cache_control"].pop("ttl", None)
    for holder, _ in markers(body):
        holder["cache_control"].pop("ttl", None)
    assert after_body == body
