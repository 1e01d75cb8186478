"""The content-shape rule: a string content vs one text block (issue 14 item 6).

One rule (``_policy.CONTENT_SHAPES``), followed by the emulator, the attribution and lint;
the tests also flip it to check that each one reads it rather than its own copy.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from stableprompt import _policy, cache_rules, parse_usage
from stableprompt._lint._findings import FINDING_FIXES
from stableprompt._lint._linter import lint_requests
from stableprompt._policy import CONTENT_SHAPES, content_shape_change, text_block_of
from stableprompt._recording._attribution import attribute
from stableprompt._recording._call import RequestState
from stableprompt._tokens import ByteTokenizer
from stableprompt._wire._formats import segment_request
from stableprompt.emulator import Emulator, FakeClock

SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(200))
TEXT = "Summarize the quarterly report for the board. " * 40


def _history(shape: str) -> list[dict[str, Any]]:
    """The first message (a string or one text block), then turns that dwarf it."""
    first: Any = TEXT if shape == "string" else [{"type": "text", "text": TEXT}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for t in range(4):
        messages += [{"role": "assistant", "content": [{"type": "text", "text": f"{TEXT} {t}"}]},
                     {"role": "user", "content": [{"type": "text", "text": f"And then {t}?"}]}]
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return messages


def _anthropic(shape: str) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 64,
            "system": [{"type": "text", "text": SYSTEM}], "messages": _history(shape)}


@pytest.fixture
def alike(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The rule flipped: both providers documented as caching the two shapes alike."""
    flipped = {k: dataclasses.replace(v, cache_alike=True) for k, v in CONTENT_SHAPES.items()}
    monkeypatch.setattr(_policy, "CONTENT_SHAPES", flipped)
    yield


def test_the_rule_is_data_with_sources() -> None:
    """Neither provider documents that the shapes cache alike, so both are different; each
    entry names what was read (SDK file, doc) and when."""
    assert {k: r.cache_alike for k, r in CONTENT_SHAPES.items()} == {
        "anthropic": False, "openai": False}
    assert "anthropic-sdk-python" in CONTENT_SHAPES["anthropic"].source
    assert "equivalent" in CONTENT_SHAPES["anthropic"].finding
    assert "openai-python" in CONTENT_SHAPES["openai"].source
    assert all(r.as_of == "2026-12-01" for r in CONTENT_SHAPES.values())
    assert text_block_of("anthropic", "x") is None and text_block_of("nope", "x") is None
    assert all(r.url.startswith("https://") and r.url in r.source
               for r in CONTENT_SHAPES.values())


def test_the_fix_text_is_one_sentence_with_one_url_per_provider() -> None:
    """The lint fix says what to do and cites one page per provider; the long evidence
    (SDK files, quotes, what was searched) stays in ``CONTENT_SHAPES``."""
    fix = FINDING_FIXES["content-shape-changed"][1]
    assert len(fix) < 450 and fix.count("https://") == len(CONTENT_SHAPES)
    assert "no provider documents that they cache alike" in fix
    assert all(f"{r.provider}: {r.url}" in fix for r in CONTENT_SHAPES.values())
    assert "anthropic-sdk-python" not in fix and ". " not in fix


@pytest.mark.parametrize(("a", "b", "changed"), [
    (b'{"role":"user","content":"x"}', b'{"role":"user","block":{"text":"x","type":"text"}}',
     True),
    (b'{"role":"user","block":{"type":"input_text","text":"x"}}',
     b'{"role":"user","content":"x"}', True),
    (b'{"role":"user","content":"x"}', b'{"role":"user","content":"y"}', False),
    (b'{"role":"user","content":"x"}', b'{"role":"assistant","block":{"text":"x",'
     b'"type":"text"}}', False),
    (b'{"role":"user","content":"x"}', b'{"role":"user","block":{"text":"x","type":"text",'
     b'"citations":[]}}', False),
    (b'not json', b'{"role":"user","content":"x"}', False),
])
def test_content_shape_change(a: bytes, b: bytes, changed: bool) -> None:
    """A string and one text block with the same text and role are a shape change; other
    edits, other roles, extra block fields and bad bytes are not."""
    assert content_shape_change(a, b) is changed


def test_lint_names_the_shape_change_with_the_rule() -> None:
    """Lint reports the re-shaped message as a break and a ``content-shape-changed`` finding
    whose fix quotes the rule and its sources (Anthropic and OpenAI Chat)."""
    report = lint_requests([_anthropic("string"), _anthropic("blocks")])
    assert report.summary.breaks == 1
    found = report.finding("content-shape-changed")
    assert found is not None and found.requests == (1,) and found.severity == "error"
    assert "messages[0] -> messages[0].content[0]" in found.message
    assert found.fix == FINDING_FIXES["content-shape-changed"][1]
    chat: list[dict[str, Any]] = [
        {"model": "gpt-5.6", "messages": [{"role": "system", "content": SYSTEM},
                                          {"role": "user", "content": c}]}
        for c in (TEXT, [{"type": "text", "text": TEXT}])]
    chat[1]["messages"].append({"role": "assistant", "content": "ok"})
    assert lint_requests(chat, sessions=["s", "s"]).finding("content-shape-changed") is not None


def test_lint_follows_a_flipped_rule(alike: None) -> None:
    """With the rule saying alike, the segmenter renders both shapes as one form: no break."""
    report = lint_requests([_anthropic("string"), _anthropic("blocks")])
    assert report.summary.breaks == 0 and report.finding("content-shape-changed") is None


def _state(body: dict[str, Any], ts: float) -> RequestState:
    seg = segment_request("anthropic", body)
    tok = ByteTokenizer()
    return RequestState.of(seg, [tok.count(seg.data[s.start:s.end].decode())
                                 for s in seg.segments], ts, record_id=f"r{ts}")


def test_attribution_names_the_shape_change() -> None:
    """The attribution's client_mutation carries the rule's finding and source."""
    one, two = _state(_anthropic("string"), 0.0), _state(_anthropic("blocks"), 10.0)
    assert two.request_tokens is not None
    usage = parse_usage("anthropic", {"input_tokens": two.request_tokens,
                                      "cache_read_input_tokens": 0,
                                      "cache_creation_input_tokens": 0, "output_tokens": 3})
    result = attribute(two, predecessor=one, policy=cache_rules("anthropic",
                                                                 "claude-sonnet-4-6"),
                       usage=usage)
    assert result.verdict == "client_mutation"
    assert result.detail["cause"] == "history-rewrite"
    assert "treated as different" in result.detail["content_shape"]
    assert "anthropic-sdk-python" in result.detail["content_shape"]
    edited = _anthropic("string")
    edited["messages"][0]["content"] = TEXT + " (edited)"
    three = _state(edited, 20.0)
    assert "content_shape" not in attribute(three, predecessor=one, policy=cache_rules(
        "anthropic", "claude-sonnet-4-6"), usage=usage).detail


def _emulated_reads(kind: str) -> tuple[int, int]:
    """Cache reads of the second request (the first message re-shaped) and of a third that
    repeats the second exactly, on the emulator through the official SDK."""
    with Emulator(clock=FakeClock()) as emu:
        if kind == "anthropic":
            with anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0) as c:
                def send(shape: str) -> int:
                    body = copy.deepcopy(_anthropic(shape))
                    body["system"][0]["cache_control"] = {"type": "ephemeral"}
                    u = c.messages.create(**body).usage
                    return u.cache_read_input_tokens or 0
                send("string")
                return send("blocks"), send("blocks")
        with openai.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0) as o:
            def chat(shape: str) -> int:
                content: Any = TEXT if shape == "string" else [{"type": "text", "text": TEXT}]
                r = o.chat.completions.create(model="gpt-4.1", messages=[
                    {"role": "system", "content": SYSTEM * 2},
                    {"role": "user", "content": content}])
                assert r.usage is not None and r.usage.prompt_tokens_details is not None
                return r.usage.prompt_tokens_details.cached_tokens or 0
            chat("string")
            return chat("blocks"), chat("blocks")


@pytest.mark.parametrize("kind", ["anthropic", "openai-chat"])
def test_emulator_treats_the_shapes_as_different(kind: str) -> None:
    """The emulator reads less after a re-shaped message than after an exact repeat."""
    reshaped, repeated = _emulated_reads(kind)
    assert reshaped < repeated


@pytest.mark.parametrize("kind", ["anthropic", "openai-chat"])
def test_emulator_follows_a_flipped_rule(kind: str, alike: None) -> None:
    """With the rule saying alike, the re-shaped message reads as much as an exact repeat."""
    reshaped, repeated = _emulated_reads(kind)
    assert reshaped == repeated > 0
