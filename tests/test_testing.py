"""Tests for stableprompt.testing.assert_prefix_stable."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stableprompt import PromptBuilder, Tool, divergences, lint_requests
from stableprompt._diff import diff
from stableprompt._wire._formats import segment_request
from stableprompt.testing import assert_prefix_stable

WEATHER = Tool("get_weather", "Weather for a city.",
               {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]})


def _bodies(turns: int = 3) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Plan the release."}]
    out = []
    for t in range(turns):
        out.append({"model": "claude-sonnet-4-5", "max_tokens": 8,
                    "system": [{"type": "text", "text": "Be brief."}],
                    "messages": copy.deepcopy(messages)})
        messages += [{"role": "assistant", "content": f"Step {t} done."},
                     {"role": "user", "content": f"Next {t}."}]
    return out


def _conversation() -> Any:
    head = (PromptBuilder(tokenizer=None).system("Be brief.").tools([WEATHER])
            .tail_slot("now").freeze())
    conv = head.conversation()
    conv.user("Weather in Paris?")
    return conv


def _turns(conv: Any, n: int) -> list[Any]:
    renders = []
    for t in range(n):
        renders.append(conv.render(tail={"now": f"10:0{t}"}))
        conv.assistant(f"Answer {t}.")
        conv.user(f"Question {t}.")
    return renders


def test_append_only_bodies_pass() -> None:
    """Append-only request bodies pass, with the wire format given or detected."""
    assert_prefix_stable(_bodies())
    assert_prefix_stable(_bodies(), wire_format="anthropic")


def test_break_raises_with_the_divergence_message() -> None:
    """A rewritten message raises AssertionError with the lint's message for that pair: the
    JSON path, the character offset in the differing value, the segment-data byte offset, and
    snippets of the value itself (no segment wrapper)."""
    bodies = _bodies()
    bodies[2]["messages"][1]["content"] = "Step 0 done!"
    expected = diff(segment_request("anthropic", bodies[1]),
                    segment_request("anthropic", bodies[2]))
    assert expected is not None
    with pytest.raises(AssertionError) as info:
        assert_prefix_stable(bodies)
    pair = lint_requests(bodies).pair(2)
    assert pair.is_break
    assert str(info.value) == f"request 2 does not extend request 1: {pair.describe()}"
    assert str(info.value) == (
        "request 2 does not extend request 1: prefix diverges at /messages/1/content (segment "
        f"messages[1], character 11 of the value; common prefix {expected.offset} bytes of "
        "segment data): history-rewrite (already-sent messages[1] changed (value))\n"
        "  before: 'Step 0 done.'\n  after:  'Step 0 done!'")


def test_a_break_names_the_later_divergences_of_the_pair() -> None:
    """A pair that breaks in several places (a system text, then two history messages, as a
    resume that changes a tool text and a system text and re-serializes history) names the
    first in full and the later ones, in cache order, as ``divergences()`` lists them: what
    the next fix reveals."""
    bodies = _bodies()
    bodies[2]["system"][0]["text"] = "Be very brief."
    bodies[2]["messages"][1]["content"] = "Step 0 done!"
    bodies[2]["messages"][2]["content"] = "Next 0!"
    every = divergences(segment_request("anthropic", bodies[1]),
                        segment_request("anthropic", bodies[2]))
    assert [d.path for d in every] == ["/system/0/text", "/messages/1/content",
                                       "/messages/2/content"]
    with pytest.raises(AssertionError) as info:
        assert_prefix_stable(bodies)
    message = str(info.value)
    assert message.startswith("request 2 does not extend request 1: prefix diverges at "
                              "/system/0/text")
    assert message.endswith(f"; then 2 more: {every[1].cause} /messages/1/content, "
                            f"{every[2].cause} /messages/2/content")
    one = _bodies()
    one[2]["messages"][1]["content"] = "Step 0 done!"
    with pytest.raises(AssertionError) as single:
        assert_prefix_stable(one)
    assert "more:" not in str(single.value)


def test_rendered_prompts_and_provider_requests_pass() -> None:
    """RenderedPrompt objects (tail segments ignored) and ProviderRequests whose tail follows
    the last breakpoint pass."""
    renders = _turns(_conversation(), 3)
    assert_prefix_stable(renders)
    assert_prefix_stable([r.to_anthropic(model="claude-sonnet-4-5", max_tokens=8)
                          for r in renders])
    assert_prefix_stable([r.to_openai_chat(model="gpt-5.6") for r in renders])


def test_rendered_prompt_history_edit_fails() -> None:
    """For RenderedPrompts only tail segments are exempt: a different history fails."""
    first = _turns(_conversation(), 2)
    other = _conversation()
    other.assistant("Another answer.")
    with pytest.raises(AssertionError, match="does not extend"):
        assert_prefix_stable([first[1], other.render(tail={"now": "x"})])


def test_min_prefix_ratio() -> None:
    """min_prefix_ratio fails when the mean pair ratio is below it, naming the lowest pair."""
    bodies = _bodies(3)
    assert_prefix_stable(bodies, min_prefix_ratio=0.5)
    with pytest.raises(AssertionError, match=r"mean prefix ratio 0\.\d+ is below 0\.99"):
        assert_prefix_stable(bodies, min_prefix_ratio=0.99)


def test_bad_items() -> None:
    """Unsupported items raise TypeError; a body with no detectable format fails clearly."""
    with pytest.raises(TypeError, match="request 0 is a int"):
        assert_prefix_stable([1, 2])
    with pytest.raises(AssertionError, match="cannot tell the wire format"):
        assert_prefix_stable([{"prompt": "x"}])


def _system_marked(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 8,
            "system": [{"type": "text", "text": "Be brief. " * 200,
                        "cache_control": {"type": "ephemeral"}}],
            "messages": copy.deepcopy(messages)}


def test_rewrite_after_the_last_breakpoint_fails() -> None:
    """An already-sent assistant message rewritten behind a system-only breakpoint fails: only
    the predecessor's last message can hold the volatile tail."""
    first = [{"role": "user", "content": "Plan the release."},
             {"role": "assistant", "content": "Step 1 done."},
             {"role": "user", "content": "Next."}]
    later = [*copy.deepcopy(first), {"role": "assistant", "content": "Step 2"},
             {"role": "user", "content": "Next 2."}]
    assert_prefix_stable([_system_marked(first), _system_marked(later)])
    later[1]["content"] = "Step 1 was REWRITTEN entirely."
    with pytest.raises(AssertionError, match=r"at /messages/1/content .*history-rewrite"):
        assert_prefix_stable([_system_marked(first), _system_marked(later)])


def test_min_prefix_ratio_needs_pairs_and_a_valid_threshold() -> None:
    """min_prefix_ratio with no pair fails instead of passing vacuously; NaN or a value
    outside 0..1 is a ValueError."""
    bodies = _bodies(2)
    with pytest.raises(AssertionError, match=r"no pair to judge min_prefix_ratio=0\.9"):
        assert_prefix_stable(bodies[:1], min_prefix_ratio=0.9)
    assert_prefix_stable(bodies[:1])  # no threshold: nothing to judge, nothing asserted
    for bad in (float("nan"), 1.5, -0.1):
        with pytest.raises(ValueError, match="between 0 and 1"):
            assert_prefix_stable(bodies, min_prefix_ratio=bad)
