"""Opt-in stabilizing of requests in flight (``_recording._stabilize``), in the transport and
in the proxy."""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stableprompt import BreakpointWarning, PromptBuilder, Recorder, RecordingTransport, Tool
from stableprompt._proxy._server import Proxy
from stableprompt._recording._stabilize import Stabilizer, stabilize, stabilize_with_evidence
from stableprompt.emulator import Emulator, FakeClock

SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))
SCHEMA = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
          "required": ["b", "a"]}
# properties keep the order sent ("b", "a": the order a model writes them); keywords and
# ``required`` are sorted
CANONICAL = {"properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
             "required": ["a", "b"], "type": "object"}


def a_tools(names: list[str], schema: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [{"name": n, "description": f"{n} things " * 20,
             "input_schema": schema or {"properties": {"q": {"type": "string"}},
                                        "type": "object"}} for n in names]


def a_body(tools: list[dict[str, Any]], question: str = "hi") -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 16, "tools": tools,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": question}]}


@contextlib.contextmanager
def stabilizing_sdk(recorder: Recorder, stabilize: bool) -> Iterator[anthropic.Anthropic]:
    """The official Anthropic SDK on an emulator (fake clock, session ``s``), recorded into
    ``recorder`` through ``RecordingTransport(stabilize=stabilize)``."""
    with Emulator(clock=FakeClock()) as emu, anthropic.Anthropic(
            base_url=emu.base_url, api_key="sk-ant-api03-stabilizetest-0123456789",
            max_retries=0, default_headers={"x-stableprompt-session": "s"},
            http_client=httpx2.Client(transport=RecordingTransport(
                recorder=recorder, stabilize=stabilize))) as client:
        yield client


def test_a_stable_request_is_left_byte_identical() -> None:
    """Sorted tools with canonical schemas: the very same bytes come back, whatever the
    client's whitespace, with no rewrite named."""
    raw = json.dumps(a_body(a_tools(["alpha", "beta"])), indent=2).encode()
    out, rewrites = stabilize(raw, "/v1/messages")
    assert out is raw and rewrites == []


def test_tools_are_sorted_and_breakpoints_stay_in_place() -> None:
    """Tools come back sorted by name; the last tool's ``cache_control`` stays on the last
    tool; everything else keeps its values and key order."""
    tools = a_tools(["gamma", "alpha", "beta"])
    tools[-1]["cache_control"] = {"type": "ephemeral"}
    body = a_body(tools)
    out, rewrites = stabilize(json.dumps(body).encode(), "/v1/messages")
    got = json.loads(out)
    assert rewrites == ["tool-order"]
    assert [t["name"] for t in got["tools"]] == ["alpha", "beta", "gamma"]
    assert [("cache_control" in t) for t in got["tools"]] == [False, False, True]
    assert list(got) == list(body) and got["system"] == body["system"]
    assert stabilize(out, "/v1/messages") == (out, [])  # idempotent


def test_schemas_get_canonical_key_order_in_every_format() -> None:
    """Schema keys and ``required`` sorted in Anthropic, Chat and Responses tool shapes;
    ``properties`` keep the order sent."""
    anthropic_body = a_body(a_tools(["alpha"], SCHEMA))
    chat = {"model": "gpt-5.6", "messages": [{"role": "user", "content": "hi"}],
            "prompt_cache_key": "mine",
            "tools": [{"type": "function", "function": {"name": "alpha", "parameters": SCHEMA}}]}
    responses = {"model": "gpt-5.6", "input": "hi", "prompt_cache_key": "mine",
                 "tools": [{"type": "function", "name": "alpha", "parameters": SCHEMA}]}
    cases: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
        ("/v1/messages", anthropic_body, ("input_schema",)),
        ("/v1/chat/completions", chat, ("function", "parameters")),
        ("/v1/responses", responses, ("parameters",))]
    for path, body, keys in cases:
        out, rewrites = stabilize(json.dumps(body).encode(), path)
        assert rewrites == ["schema-key-order"], path
        schema = json.loads(out)["tools"][0]
        for key in keys:
            schema = schema[key]
        assert json.dumps(schema) == json.dumps(CANONICAL)


@pytest.mark.parametrize("raw", [
    b"not json",
    b"[1, 2]",
    json.dumps({"model": "m", "messages": [], "tools": [{"name": "b"}, {"desc": "no name"}]})
    .encode(),
    json.dumps(a_body(a_tools(["b", "b"]))).encode(),  # duplicate names: order kept
    json.dumps(a_body(a_tools(["a"], {"type": "object", "required": "oops"}))).encode(),
    # integers beyond 64 bits (orjson reads them as floats): a rewrite would change them
    json.dumps(a_body(a_tools(["b", "a"], {"type": "integer",
                                           "maximum": 123456789012345678901234567890}))).encode(),
    json.dumps(a_body(a_tools(["b", "a"]))).replace(
        '"max_tokens": 16', '"max_tokens": 18446744073709551616').encode(),
])
def test_what_cannot_be_stabilized_safely_is_left_alone(raw: bytes) -> None:
    """Non-JSON, non-objects, unnamed or duplicate tools, invalid schemas and integers a
    rewrite could not keep exactly pass unchanged."""
    assert stabilize(raw, "/v1/messages") == (raw, [])


@given(st.permutations(["delta", "alpha", "charlie", "bravo", "echo"]))
def test_any_tool_order_stabilizes_to_the_same_bytes(names: list[str]) -> None:
    """Every permutation of the same tools gives one body (permutation invariance)."""
    reference, _ = stabilize(json.dumps(a_body(a_tools(sorted(names)))).encode(),
                             "/v1/messages")
    out, _ = stabilize(json.dumps(a_body(a_tools(names))).encode(), "/v1/messages")
    assert json.loads(out) == json.loads(reference)
    assert [t["name"] for t in json.loads(out)["tools"]] == sorted(names)
    assert stabilize(out, "/v1/messages") == (out, [])


ORDERS = [["alpha", "beta", "delta", "gamma"], ["delta", "gamma", "beta", "alpha"],
          ["beta", "alpha", "delta", "gamma"], ["gamma", "delta", "alpha", "beta"]]


def _verdicts(recorder: Recorder) -> list[str]:
    return [r.verdict for r in recorder.records]


def test_transport_stabilize_turns_tool_reorders_into_hits() -> None:
    """Through ``RecordingTransport(stabilize=True)`` a client reordering its tools every
    call hits after the cold call, each rewrite named on the row; without it, every reorder
    is a ``client_mutation`` caused by ``tool-reorder``."""
    results = {}
    for flag in (False, True):
        recorder = Recorder()
        with stabilizing_sdk(recorder, flag) as client:
            for names in ORDERS:
                client.messages.create(**a_body(a_tools(names)))
        results[flag] = recorder
    plain, stable = results[False], results[True]
    assert _verdicts(stable) == ["cold", "hit", "hit", "hit"]
    assert [r.verdict_detail.get("stabilized") for r in stable.records] == [
        None, ["tool-order"], ["tool-order"], ["tool-order"]]
    assert _verdicts(plain) == ["cold"] + ["client_mutation"] * 3
    assert {r.verdict_detail.get("cause") for r in plain.records[1:]} == {"tool-reorder"}
    assert (stable.records[-1].cache_read_tokens or 0) > 1024


def test_proxy_stabilize_with_the_openai_sdk() -> None:
    """``Proxy(stabilize=True)``: Chat Completions tools reordered per call are all hits
    after the first, and the client still gets the upstream's answer."""
    recorder = Recorder()
    tools: list[Any] = [{"type": "function", "function": {
        "name": n, "description": f"{n} things " * 20, "parameters": SCHEMA}}
        for n in ORDERS[0]]
    by_name = {t["function"]["name"]: t for t in tools}
    with Emulator(clock=FakeClock()) as emu, \
            Proxy(emu.base_url, recorder=recorder, stabilize=True, provider="openai") as proxy, \
            openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="sk-proj-stab-0123456789ab",
                          max_retries=0) as client:
        for names in ORDERS:
            reply = client.chat.completions.create(
                model="gpt-5.6", tools=[by_name[n] for n in names],
                messages=[{"role": "system", "content": SYSTEM},
                          {"role": "user", "content": "hi"}])
            assert reply.choices
    assert _verdicts(recorder) == ["cold", "hit", "hit", "hit"]
    assert recorder.records[0].verdict_detail.get("stabilized") == ["schema-key-order",
                                                                    "prompt-cache-key"]
    assert recorder.records[1].verdict_detail.get("stabilized") == [
        "tool-order", "schema-key-order", "prompt-cache-key"]
    assert len({r.lineage for r in recorder.records}) == 1


def test_openai_requests_without_a_key_get_the_lineage_key() -> None:
    """A Chat or Responses body without ``prompt_cache_key`` gets ``sp-`` + the head's
    digest, the same for every tool order; a client's own key is kept."""
    def chat(names: list[str], **extra: Any) -> bytes:
        return json.dumps({"model": "gpt-5.6", **extra, "tools": [
            {"type": "function", "function": {"name": n, "parameters": CANONICAL}}
            for n in names], "messages": [{"role": "system", "content": SYSTEM},
                                          {"role": "user", "content": "hi"}]}).encode()

    keys = set()
    for names in ORDERS:
        out, rewrites = stabilize(chat(names), "/v1/chat/completions", provider="openai")
        assert rewrites[-1] == "prompt-cache-key"
        keys.add(json.loads(out)["prompt_cache_key"])
        assert stabilize(out, "/v1/chat/completions", provider="openai") == (out, [])
    (key,) = keys
    assert key.startswith("sp-") and len(key) == 27
    own = chat(ORDERS[0], prompt_cache_key="mine")
    assert stabilize(own, "/v1/chat/completions", provider="openai") == (own, [])
    responses = json.dumps({"model": "gpt-5.6", "input": "hi"}).encode()
    out, rewrites = stabilize(responses, "/v1/responses", provider="openai")
    assert rewrites == ["prompt-cache-key"] and json.loads(out)["input"] == "hi"


def bare_body(question: Any = "hi", *, system: Any = None, **extra: Any) -> dict[str, Any]:
    """An Anthropic body with tools, a system prompt and no breakpoint anywhere."""
    return {"model": "claude-sonnet-4-6", "max_tokens": 16, "tools": a_tools(["alpha", "beta"]),
            "system": [{"type": "text", "text": SYSTEM}] if system is None else system,
            "messages": [{"role": "user", "content": question}], **extra}


def test_anthropic_without_breakpoints_gets_head_and_history_ones() -> None:
    """No client breakpoint: one on the last system block and one on the last content
    block, both 5-minute markers; the result is left alone when stabilized again."""
    body = bare_body([{"type": "text", "text": "first"}, {"type": "text", "text": "hi"}])
    out, rewrites = stabilize(json.dumps(body).encode(), "/v1/messages")
    got = json.loads(out)
    assert rewrites == ["head-breakpoint", "history-breakpoint"]
    assert got["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [("cache_control" in b) for b in got["messages"][-1]["content"]] == [False, True]
    assert all("cache_control" not in t for t in got["tools"]) and "cache_control" not in got
    assert stabilize(out, "/v1/messages") == (out, [])


def test_string_content_gets_automatic_caching_and_keeps_its_shape() -> None:
    """A last message with string content keeps its shape: the history breakpoint is the
    top-level ``cache_control`` (automatic caching); a string system with tools marks the
    last tool instead; a string system without tools has no head breakpoint."""
    out, rewrites = stabilize(json.dumps(bare_body(system="be brief")).encode(),
                              "/v1/messages")
    got = json.loads(out)
    assert rewrites == ["head-breakpoint", "history-breakpoint"]
    assert got["messages"][-1]["content"] == "hi" and got["system"] == "be brief"
    assert got["cache_control"] == {"type": "ephemeral"}
    assert [("cache_control" in t) for t in got["tools"]] == [False, True]
    plain = {k: v for k, v in bare_body(system="be brief").items() if k != "tools"}
    out, rewrites = stabilize(json.dumps(plain).encode(), "/v1/messages")
    assert rewrites == ["history-breakpoint"]


@pytest.mark.parametrize("marked", ["top", "tool", "message", "nested"])
def test_a_client_with_its_own_breakpoint_is_left_alone(marked: str) -> None:
    """Any client breakpoint (top-level, on a tool, on a content block, nested in a tool
    result) means none added."""
    body = bare_body([{"type": "text", "text": "hi"}])
    if marked == "nested":
        body["messages"][-1]["content"] = [{"type": "tool_result", "tool_use_id": "t1",
                                            "content": [{"type": "text", "text": "r",
                                                         "cache_control": {"type": "ephemeral"}}]}]
    elif marked == "top":
        body["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    elif marked == "tool":
        body["tools"][-1]["cache_control"] = {"type": "ephemeral"}
    else:
        body["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    raw = json.dumps(body).encode()
    assert stabilize(raw, "/v1/messages") == (raw, [])


def test_breakpoints_below_the_model_minimum_are_not_placed() -> None:
    """With a token counter, the builder's rule (``surely_below_minimum``) decides: a short
    system is not marked, a history long enough is; nothing long enough, nothing placed."""
    recorder = Recorder()
    short_system = [{"type": "text", "text": "be brief"}]
    long_question = [{"type": "text", "text": SYSTEM * 2}]
    body = {k: v for k, v in bare_body(long_question, system=short_system).items()
            if k != "tools"}
    out, rewrites = stabilize(json.dumps(body).encode(), "/v1/messages",
                              count=recorder.segment_tokens)
    assert rewrites == ["history-breakpoint"]
    assert "cache_control" not in json.loads(out)["system"][-1]
    tiny = json.dumps({**body, "messages": [{"role": "user", "content": "hi"}]}).encode()
    assert stabilize(tiny, "/v1/messages", count=recorder.segment_tokens) == (tiny, [])
    _, rewrites = stabilize(tiny, "/v1/messages")  # no counter: placed regardless
    assert rewrites == ["head-breakpoint", "history-breakpoint"]


def test_transport_stabilize_places_breakpoints_so_later_turns_hit() -> None:
    """A client sending no breakpoints: unstabilized, no turn reads the cache; stabilized,
    turn 2 onwards reads the previous turn's prefix and each row names the breakpoints."""
    results = {}
    for flag in (False, True):
        recorder = Recorder()
        with stabilizing_sdk(recorder, flag) as client:
            messages: list[dict[str, Any]] = []
            for turn in range(3):
                messages.append({"role": "user", "content": f"question {turn}"})
                reply = client.messages.create(**{**bare_body(), "messages": messages})
                messages.append({"role": "assistant", "content": [
                    {"type": "text", "text": reply.content[0].text}]})
        results[flag] = recorder
    plain, stable = results[False], results[True]
    assert all(not r.cache_read_tokens for r in plain.records)
    assert [r.verdict_detail.get("stabilized") for r in stable.records] == [
        ["head-breakpoint", "history-breakpoint"]] * 3
    assert all((r.cache_read_tokens or 0) > 1024 for r in stable.records[1:])


@pytest.mark.parametrize(("provider", "host", "keyed"), [
    ("openai", "upstream.invalid", True),   # --provider openai
    (None, "api.openai.com", True),         # OpenAI's own host
    ("vllm", "api.openai.com", False),      # the override wins over the host
    ("llama-cpp", "127.0.0.1", False),
    ("deepseek", "api.deepseek.com", False),
    (None, "api.deepseek.com", False),      # a known host that is not OpenAI's
    (None, "127.0.0.1", False),             # unknown (a local server, a gateway)
])
def test_prompt_cache_key_only_when_the_provider_is_openai(
        provider: str | None, host: str, keyed: bool) -> None:
    """``RecordingTransport(stabilize=True)`` adds ``prompt_cache_key`` to a Chat body only
    when the call goes to OpenAI (``provider="openai"`` or ``api.openai.com``); elsewhere the
    body the upstream receives has no such field and the row names no such rewrite, while
    the tool rewrites still apply."""
    sent: list[dict[str, Any]] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json={
            "id": "c1", "object": "chat.completion", "model": "gpt-5.6", "choices": [],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}})

    recorder = Recorder()
    transport = RecordingTransport(httpx.MockTransport(upstream), recorder=recorder,
                                   provider=provider, stabilize=True)
    body = {"model": "gpt-5.6", "tools": [
        {"type": "function", "function": {"name": n, "parameters": CANONICAL}}
        for n in ORDERS[1]], "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(transport=transport) as client:
        client.post(f"http://{host}/v1/chat/completions", json=body).raise_for_status()
    (forwarded,) = sent
    assert ("prompt_cache_key" in forwarded) is keyed
    assert [t["function"]["name"] for t in forwarded["tools"]] == sorted(ORDERS[1])
    (record,) = recorder.records
    assert record.verdict_detail["stabilized"] == (
        ["tool-order", "prompt-cache-key"] if keyed else ["tool-order"])


def test_long_digit_runs_in_strings_do_not_stop_the_rewrites() -> None:
    """A nanosecond timestamp or an id inside a message is text: the body is still
    stabilized (it once switched ``--stabilize`` off for the rest of the conversation); a
    real integer literal beyond 64 bits leaves it as sent, and the evidence says why."""
    from stableprompt._recording._stabilize import stabilize_with_evidence
    text = a_body(a_tools(["b", "a"]), question='ts=1764617628123456789 id "9' + "1" * 25 + '"')
    out, rewrites, _ = stabilize_with_evidence(json.dumps(text).encode(), "/v1/messages")
    assert rewrites == ["tool-order"]
    assert json.loads(out)["messages"] == text["messages"]
    wide = json.dumps(a_body(a_tools(["b", "a"]))).replace(
        '"max_tokens": 16', '"max_tokens": 18446744073709551616').encode()
    out, rewrites, evidence = stabilize_with_evidence(wide, "/v1/messages")
    assert out is wide and rewrites == []
    assert "integer literal" in evidence["stabilize_skipped"]
    assert str(wide.index(b"18446744073709551616")) in evidence["stabilize_skipped"]
    for edge in ("18446744073709551615", "-9223372036854775808"):  # orjson keeps these exact
        exact = json.dumps(a_body(a_tools(["b", "a"]))).replace(
            '"max_tokens": 16', f'"max_tokens": 16, "metadata": {{"n": {edge}}}').encode()
        out, rewrites, _ = stabilize_with_evidence(exact, "/v1/messages")
        assert rewrites == ["tool-order"] and edge.encode() in out


# --- issue 26 item 6: regressions built from captured bodies (tests/fixtures/stabilize) ------

CAPTURES = Path(__file__).parent / "fixtures" / "stabilize"


def _capture(name: str) -> bytes:
    return (CAPTURES / name).read_bytes()


def _marked(body: bytes) -> list[int]:
    """Indexes of the messages holding a ``cache_control`` marker."""
    return [i for i, m in enumerate(json.loads(body)["messages"])
            if isinstance(m["content"], list) and any("cache_control" in c for c in m["content"])]


def _unmarked(body: bytes) -> bytes:
    """``body`` without any ``cache_control`` (as a client that places none sends it)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "cache_control"}
        return [strip(v) for v in value] if isinstance(value, list) else value
    return json.dumps(strip(json.loads(body))).encode()


def test_strict_tool_properties_keep_the_order_the_sdk_wrote() -> None:
    """The openai SDK's strict tool (fields ``reasoning, confidence, answer``, the order
    Structured Outputs generate them in) has its keywords sorted, never its properties."""
    raw = _capture("openai_strict_tool.json")
    out, rewrites = stabilize(raw, "/v1/chat/completions")
    assert rewrites == ["schema-key-order"]  # the SDK writes "title" after "required"
    schema = json.loads(out)["tools"][0]["function"]["parameters"]
    assert list(schema["properties"]) == ["reasoning", "confidence", "answer"]
    assert list(schema) == sorted(schema)
    assert json.loads(out)["tools"][0]["function"]["strict"] is True


def test_a_harness_that_shuffles_properties_gets_its_first_order_pinned() -> None:
    """A harness whose hash-ordered maps shuffle a tool's properties on every call: the
    stabilizer sends every call with the order of the first (``property-order``), so the
    tools' bytes stop changing, and never a sorted order the harness did not write."""
    first = json.loads(_capture("openai_strict_tool.json"))
    stabilizer = Stabilizer()
    outs = []
    for order in (["reasoning", "confidence", "answer"], ["answer", "reasoning", "confidence"],
                  ["confidence", "answer", "reasoning"]):
        body = json.loads(json.dumps(first))
        props = body["tools"][0]["function"]["parameters"]["properties"]
        body["tools"][0]["function"]["parameters"]["properties"] = {n: props[n] for n in order}
        out, rewrites, _ = stabilizer.stabilize(json.dumps(body).encode(),
                                                "/v1/chat/completions")
        outs.append(json.loads(out)["tools"])
        assert ("property-order" in rewrites) == (order[0] != "reasoning")
    assert outs[0] == outs[1] == outs[2]
    assert list(outs[0][0]["function"]["parameters"]["properties"]) == [
        "reasoning", "confidence", "answer"]


def test_a_body_with_duplicate_keys_is_left_as_sent() -> None:
    """A captured Messages body with a second ``max_tokens`` spliced in (a harness that
    concatenates JSON text) needs breakpoints, but a rewrite would keep one of the two
    values: the very same bytes go out, and the row says why."""
    raw = _capture("anthropic_turn1.json")
    assert stabilize(raw, "/v1/messages")[1]  # without the duplicate it is rewritten
    duplicated = b'{"max_tokens":64,' + raw[1:]
    out, rewrites, evidence = stabilize_with_evidence(duplicated, "/v1/messages")
    assert out is duplicated and rewrites == []
    assert "duplicate key \"max_tokens\"" in evidence["stabilize_skipped"]
    # a key ending in a backslash (the one spelling the member count cannot see) is checked
    # exactly: duplicated, it is caught; once, it is rewritten
    tricky = b'{"a\\\\":1,' + raw[1:]
    assert stabilize(tricky, "/v1/messages")[1]
    twice = b'{"a\\\\":1,"a\\\\":2,' + raw[1:]
    assert stabilize(twice, "/v1/messages") == (twice, [])
    # a colon and an escaped quote inside strings are not members
    noisy = raw.replace(b"Find every", b'Find \\": every')
    assert stabilize(noisy, "/v1/messages")[1]


def test_the_lookback_carry_is_the_builders_after_a_26_block_turn() -> None:
    """After a turn of 13 tool_use and 13 tool_result blocks (the official anthropic SDK's
    bodies, no breakpoints), the stabilizer marks messages [0, 2] as the builder does on the
    same conversation: the first turn's history breakpoint is 26 blocks back, beyond the
    20-block lookback, so it is kept (``anthropic.lookback_carry``, one rule for both)."""
    stabilizer = Stabilizer()
    one, _, _ = stabilizer.stabilize(_capture("anthropic_turn1.json"), "/v1/messages")
    two, rewrites, _ = stabilizer.stabilize(_capture("anthropic_turn2_26_blocks.json"),
                                            "/v1/messages")
    assert _marked(one) == [0] and _marked(two) == [0, 2]
    assert rewrites[-2:] == ["head-breakpoint", "history-breakpoint"]
    # the builder, on the same conversation, and the stabilizer on its bodies unmarked
    body = json.loads(_capture("anthropic_turn1.json"))
    head = PromptBuilder().system(body["system"]).tools(
        [Tool.from_dict(t) for t in body["tools"]]).freeze()
    conversation = head.conversation()
    conversation.user(body["messages"][0]["content"][0]["text"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BreakpointWarning)  # a short head for Opus 5
        first = conversation.render().to_anthropic(model="claude-opus-5", max_tokens=1024)
        conversation.assistant(tool_calls=[
            {"id": f"toolu_{i:02d}", "name": "grep", "arguments": {"path": f"src/mod_{i}.py"}}
            for i in range(13)])
        for i in range(13):
            conversation.tool_result(f"toolu_{i:02d}", f"src/mod_{i}.py:{10 + i}: found")
        second = conversation.render().to_anthropic(model="claude-opus-5", max_tokens=1024)
    again = Stabilizer()
    assert _marked(again.stabilize(_unmarked(first.content), "/v1/messages")[0]) == \
        _marked(first.content) == [0]
    assert _marked(again.stabilize(_unmarked(second.content), "/v1/messages")[0]) == \
        _marked(second.content) == [0, 2]


def test_tools_without_a_name_are_sorted_after_the_named_ones() -> None:
    """The openai SDK's Responses body with a hosted ``web_search`` tool (no name) between
    two function tools out of order: the function tools are sorted, the hosted tool goes
    after them, and any input order gives the same bytes."""
    raw = _capture("responses_hosted_tool.json")
    out, rewrites = stabilize(raw, "/v1/responses")
    assert rewrites == ["tool-order", "schema-key-order"]  # the SDK writes "type" first
    tools = json.loads(out)["tools"]
    assert [t.get("name", t["type"]) for t in tools] == ["fetch_page", "search_docs",
                                                          "web_search"]
    body = json.loads(raw)
    body["tools"] = [body["tools"][1], body["tools"][2], body["tools"][0]]
    assert stabilize(json.dumps(body).encode(), "/v1/responses")[0] == out
