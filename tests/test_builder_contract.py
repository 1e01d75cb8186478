"""Tests for the builder's contract edges: tool protocol, resume/pickle, idempotent renders,
argument validation and where errors point."""

from __future__ import annotations

import copy
import pickle
import warnings
from typing import Any

import pytest
from pydantic import BaseModel

from stableprompt import (
    BreakpointError,
    CanonicalizationError,
    HistoryError,
    InputError,
    PinnedHeadError,
    PromptBuilder,
    TailSlotError,
    Tool,
    ToolError,
    VolatileContentWarning,
    diff,
)

SEARCH = Tool("search", "Search the web.",
              {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})


def _head(**kw: Any) -> Any:
    return PromptBuilder(tokenizer="cl100k_base").system("Be brief.").tools([SEARCH]).tail_slot(
        "now").freeze(**kw)


def _conv() -> Any:
    conv = _head().conversation()
    conv.user("find x")
    conv.assistant(tool_calls=[{"id": "c1", "name": "search", "arguments": {"q": "x"}}])
    conv.tool_result("c1", "found")
    conv.assistant("Here it is.")
    return conv


def test_open_tool_calls_block_user_assistant_and_render() -> None:
    """A tool call must be answered before the next user/assistant message or a render."""
    conv = _head().conversation()
    conv.user("go")
    conv.assistant(tool_calls=[{"id": "c1", "name": "search", "arguments": {"q": "x"}}])
    assert conv.open_tool_calls == ("c1",)
    for action in (lambda: conv.user("never mind"), lambda: conv.assistant("hm"),
                   lambda: conv.render(tail={"now": "t"}), conv.summarization_request):
        with pytest.raises(HistoryError) as info:
            action()
        assert info.value.code == "history-open-calls"
    conv.tool_result("c1", "ok")
    conv.render(tail={"now": "t"})


def test_duplicate_ids_in_one_message_and_empty_text() -> None:
    """Repeated call ids in one message and empty text blocks are rejected with pointers."""
    conv = _head().conversation()
    conv.user("go")
    with pytest.raises(HistoryError) as info:
        conv.assistant(tool_calls=[{"id": "x", "name": "search", "arguments": {}},
                                   {"id": "x", "name": "search", "arguments": {}}])
    assert (info.value.code, info.value.pointer) == ("history-duplicate-call", "/tool_calls/1/id")
    with pytest.raises(HistoryError) as info:
        conv.assistant("", tool_calls=[{"id": "y", "name": "search", "arguments": {}}])
    assert (info.value.code, info.value.pointer) == ("history-empty-text", "/content/0/text")
    with pytest.raises(HistoryError) as info:
        conv.user(5)
    assert (info.value.code, info.value.pointer) == ("history-type", "/content")


def test_is_error_must_be_bool_and_nan_pointer() -> None:
    """is_error is not coerced; NaN in arguments points inside the message."""
    conv = _head().conversation()
    conv.user("go")
    with pytest.raises(HistoryError) as info:
        conv.assistant(tool_calls=[{"id": "c", "name": "search",
                                    "arguments": {"q": float("nan")}}])
    assert (info.value.code, info.value.pointer) == ("canonical-nan", "/content/0/arguments/q")
    conv.assistant(tool_calls=[{"id": "c", "name": "search", "arguments": {"q": "x"}}])
    with pytest.raises(HistoryError) as info:
        conv.tool_result("c", "ok", is_error="no")
    assert (info.value.code, info.value.pointer) == ("history-type", "/is_error")


def test_history_cannot_be_mutated_through_tool_calls() -> None:
    """Changing a returned ToolCall's arguments does not change history or bodies."""
    conv = _conv()
    call = conv.messages[1].tool_calls[0]
    call.arguments["q"] = "EVIL"
    body = conv.render(tail={"now": "t"}).to_anthropic(model="m", max_tokens=5).content
    assert b"EVIL" not in body


def test_head_mappings_are_read_only() -> None:
    """tail_slots of a frozen head cannot be changed."""
    head = _head()
    with pytest.raises(TypeError):
        head.tail_slots["evil"] = True


def test_export_resume_is_byte_identical() -> None:
    """A resumed conversation renders byte-identically and keeps the tool protocol state."""
    conv = _conv()
    conv.render(tail={"now": "a"})
    exported = conv.export()
    resumed = conv.head.resume(exported)
    a = conv.render(tail={"now": "t"}).to_anthropic(model="m", max_tokens=5)
    b = resumed.render(tail={"now": "t"}).to_anthropic(model="m", max_tokens=5)
    assert a.content == b.content
    other = PromptBuilder(tokenizer=None).system("Other.").tools([SEARCH]).freeze()
    with pytest.raises(HistoryError) as info:
        other.resume(exported)
    assert info.value.code == "history-other-head"
    tampered = exported.replace(b"found", b"FOUND ")
    with pytest.raises(HistoryError):
        conv.head.resume(tampered.replace(b'"data":"{', b'"data":"{ ', 1))
    with pytest.raises(HistoryError) as info:
        conv.head.resume(b"not json")
    assert info.value.code == "history-export"


def test_pickle_and_copy() -> None:
    """Heads, messages and conversations pickle and copy to equal bytes."""
    conv = _conv()
    for clone in (pickle.loads(pickle.dumps(conv)), copy.deepcopy(conv), copy.copy(conv)):
        assert clone.head.fingerprint == conv.head.fingerprint
        assert [m.data for m in clone.messages] == [m.data for m in conv.messages]
        assert clone.render(tail={"now": "t"}).data == conv.render(tail={"now": "t"}).data
    assert pickle.loads(pickle.dumps(conv.messages[0])) == conv.messages[0]


def test_render_is_idempotent() -> None:
    """Rendering the same state twice gives the same bytes (breakpoint carry included)."""
    conv = _head().conversation()
    conv.user("q")
    conv.render(tail={"now": "t"})
    for i in range(11):
        conv.assistant(f"a{i}")
        conv.user(f"u{i}")
    first = conv.render(tail={"now": "t"}).to_anthropic(model="m", max_tokens=1).content
    second = conv.render(tail={"now": "t"}).to_anthropic(model="m", max_tokens=1).content
    assert first == second
    assert first.count(b"cache_control") == 3  # head, carry at the previous position, history


@pytest.mark.parametrize(
    ("kwargs", "error", "code"),
    [
        ({"model": 5, "max_tokens": 1}, InputError, "render-param"),
        ({"model": "m", "max_tokens": "lots"}, InputError, "render-param"),
        ({"model": "m", "max_tokens": 1, "history_ttl": "10m"}, BreakpointError,
         "breakpoint-ttl"),
        ({"model": "m", "max_tokens": 1, "max_breakpoints": 9}, BreakpointError,
         "breakpoint-budget"),
        ({"model": "m", "max_tokens": 1, "temperature": float("nan")}, CanonicalizationError,
         "canonical-nan"),
    ],
)
def test_anthropic_render_arguments(kwargs: dict[str, Any], error: type[Exception],
                                    code: str) -> None:
    """Bad render arguments raise typed errors instead of producing bad bodies."""
    rendered = _conv().render(tail={"now": "t"})
    with pytest.raises(error) as info:
        rendered.to_anthropic(**kwargs)
    assert info.value.code == code  # type: ignore[attr-defined]


def test_param_error_points_at_the_param() -> None:
    """A NaN request parameter names its body pointer."""
    with pytest.raises(CanonicalizationError) as info:
        _conv().render(tail={"now": "t"}).to_anthropic(model="m", max_tokens=1,
                                                       temperature=float("nan"))
    assert info.value.pointer == "/temperature"


@pytest.mark.parametrize(
    "kwargs",
    [{"model": ""}, {"model": "m", "system_role": "assistant"},
     {"model": "m", "prompt_cache_key": 5}, {"model": "m", "tail_role": "tool"}],
)
def test_openai_render_arguments(kwargs: dict[str, Any]) -> None:
    """Bad OpenAI render arguments raise InputError (code render-param)."""
    rendered = _conv().render(tail={"now": "t"})
    for method in (rendered.to_openai_chat, rendered.to_openai_responses):
        with pytest.raises(InputError) as info:
            method(**kwargs)
        assert info.value.code == "render-param"


def test_ttl_labels_and_reserved_slots() -> None:
    """Bad TTL labels are BreakpointErrors; SDK slot names are reserved."""
    with pytest.raises(BreakpointError):
        PromptBuilder(tokenizer=None).system("x", cache_ttl="10m")
    with pytest.raises(BreakpointError):
        PromptBuilder(tokenizer=None).system("x").freeze(head_ttl=None)  # type: ignore[arg-type]
    with pytest.raises(TailSlotError) as info:
        PromptBuilder(tokenizer=None).tail_slot("allowed_tools")
    assert info.value.code == "tail-slot-reserved"


def test_allowed_tools_and_summary_validation() -> None:
    """allowed_tools must be a non-empty list of names; the summary instruction non-empty."""
    conv = _conv()
    for bad in ("search", [], [3]):
        with pytest.raises(ToolError):
            conv.render(tail={"now": "t"}, allowed_tools=bad)
    for instruction in ("", 5):
        with pytest.raises(HistoryError):
            conv.summarization_request(instruction)


def test_volatile_content_in_tool_schema_warns() -> None:
    """Volatile values inside tool input schemas are found at freeze."""
    tool = Tool("t", "A tool.", {"type": "object", "properties": {"since": {
        "type": "string", "description": "Data as of 2026-11-30T10:00:00Z."}}})
    with pytest.warns(VolatileContentWarning) as record:
        head = PromptBuilder(tokenizer=None).tools([tool]).freeze()
    warning = record[0].message
    assert isinstance(warning, VolatileContentWarning) and warning.segment == "tool:t"
    assert head.data[warning.offset:warning.offset + 20] == b"2026-11-30T10:00:00Z"


def test_rebase_and_compaction_edges() -> None:
    """Rebasing onto the same head invalidates nothing; a tool lacking in a new head is named;
    compaction spans must keep call/result pairs together."""
    conv = _conv()
    same, event = conv.rebase(conv.head)
    assert event.invalidated_tokens == 0
    assert same.render(tail={"now": "t"}).data == conv.render(tail={"now": "t"}).data
    bare = PromptBuilder(tokenizer=None).system("Be brief.").freeze()
    with pytest.raises(HistoryError) as info:
        conv.rebase(bare)
    assert (info.value.code, info.value.pointer) == ("history-unknown-tool",
                                                      "/messages/1/tool_calls/0/name")
    with pytest.raises(HistoryError) as info:
        conv.compact("s", start=1, end=2)
    assert info.value.code == "history-compact-span"
    with pytest.raises(HistoryError):
        conv.compact("s", start=3, end=1)
    with pytest.raises(HistoryError):
        conv.compact("")


def test_diff_refuses_mixed_kinds() -> None:
    """diff() of a render and a provider request is a typed error, not a bogus cause."""
    rendered = _conv().render(tail={"now": "t"})
    with pytest.raises(InputError) as info:
        diff(rendered, rendered.to_anthropic(model="m", max_tokens=1))
    assert info.value.code == "diff-mismatch"


def test_from_pydantic_self_referencing_model() -> None:
    """A recursive pydantic model becomes an object schema with its $defs kept."""

    class Node(BaseModel):
        """A tree node."""

        name: str
        children: list[Node] = []

    Node.model_rebuild()
    tool = Tool.from_pydantic(Node)
    schema = tool.input_schema
    assert schema["type"] == "object" and "Node" in schema["$defs"]
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_frozen_head_pickles_without_warning() -> None:
    """Unpickling a head does not re-run the volatility lint (no duplicate warnings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        head = PromptBuilder(tokenizer=None).system("Today is 2026-11-30T10:00:00Z.").freeze()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clone = pickle.loads(pickle.dumps(head))
    assert clone == head
    with pytest.raises(PinnedHeadError):
        clone.head_ttl = "1h"


def test_empty_conversation_cannot_be_sent_and_diff_needs_segments() -> None:
    """A render with no message and no tail raises instead of producing messages: []; diff()
    of plain dicts is a typed error."""
    head = PromptBuilder(tokenizer=None).system("s").freeze()
    rendered = head.conversation().render()
    with pytest.raises(HistoryError) as info:
        rendered.to_anthropic(model="m", max_tokens=5)
    assert info.value.code == "history-empty"
    with pytest.raises(HistoryError) as info:
        rendered.to_openai_chat(model="m")
    assert info.value.code == "history-empty"
    with pytest.raises(HistoryError) as info:
        rendered.to_openai_responses(model="m")
    assert info.value.code == "history-empty"
    with pytest.raises(InputError) as err:
        diff({}, {})  # type: ignore[arg-type]
    assert err.value.code == "diff-type"
