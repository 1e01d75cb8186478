"""Lint pairing without session ids, directory groups, cache events (issue 14 item 5)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from stableprompt import CacheEvent, InputError, PromptBuilder, Tool
from stableprompt._cli import main
from stableprompt._lint._linter import lint_capture, lint_requests
from stableprompt.testing import assert_prefix_stable

INSTRUCTIONS = "You are a coding agent. Follow the repository conventions. " * 12
TOOLS = [{"name": f"tool_{i}", "description": f"Tool {i} does a thing. " * 4,
          "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}
         for i in range(3)]


def _body(text: str, *, model: str = "claude-sonnet-4-5", system: str = INSTRUCTIONS,
          tools: list[dict[str, Any]] | None = None,
          history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    messages = [*(history or []), {"role": "user", "content": [{"type": "text", "text": text}]}]
    return {"model": model, "max_tokens": 64, "tools": copy.deepcopy(tools or TOOLS),
            "system": [{"type": "text", "text": system}], "messages": messages}


def _turns(opening: str, n: int, tag: str) -> list[dict[str, Any]]:
    """History of ``n`` answered turns after ``opening``."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": opening}]}]
    for t in range(n):
        history += [{"role": "assistant", "content": [
                        {"type": "text", "text": f"{tag}: a long enough answer number {t}."}]},
                    {"role": "user", "content": [{"type": "text", "text": f"{tag} next {t}"}]}]
    return history


def test_single_turn_lineage_with_a_changed_model_is_paired_and_named() -> None:
    """Single-turn requests on one head (each a new conversation) pair with the earlier
    request whose head they change: the model switch is a named break, the requests on an
    unchanged head start their own conversation, and another app's head stays apart."""
    other_app = _body("Summarize.", system="You are a summarizer for release notes. " * 12,
                      tools=[{"name": "fetch", "input_schema": {"type": "object"}}])
    report = lint_requests([_body("q1"), _body("q2"), other_app,
                            _body("q3", model="claude-opus-4-5"),
                            _body("q4", model="claude-opus-4-5")])
    assert [p.predecessor for p in report.pairs] == [None, None, None, 1, None]
    pair = report.pair(3)
    assert pair.divergence is not None and pair.is_break
    assert (pair.divergence.cause, pair.divergence.path) == ("model-change", "/model")
    assert report.summary.breaks == 1


def test_same_prompt_resent_with_a_tool_added_is_paired() -> None:
    """The same opening prompt re-sent with another tool pairs with its first send."""
    extra = {"name": "tool_9", "description": "Extra.", "input_schema": {"type": "object"}}
    report = lint_requests([_body("Fix the bug."), _body("Fix the bug.",
                                                         tools=[*TOOLS, extra])])
    pair = report.pair(1)
    assert pair.predecessor == 0 and pair.divergence is not None
    assert pair.divergence.cause == "tool-added"


def test_session_forked_from_another_head_with_its_own_env_block() -> None:
    """A new session whose system prompt is another's with its own env block (cwd) is paired
    with that head and the break is named in the system text."""
    a = _body("Task A.", system=INSTRUCTIONS + "\ncwd: /home/a/project")
    b = _body("Task B.", system=INSTRUCTIONS + "\ncwd: /home/b/other")
    report = lint_requests([a, b])
    pair = report.pair(1)
    assert pair.predecessor == 0 and pair.divergence is not None and pair.is_break
    assert pair.divergence.path == "/system/0/text"
    assert pair.value is not None and "/home/b" in pair.value.snippet_b


def test_resumed_conversation_with_a_re_rendered_first_message() -> None:
    """A conversation resumed later whose first message was re-rendered (a new date) pairs
    with the request it continues, not with a conversation that merely opens alike, and the
    break is a named history rewrite at the first message."""
    original = _turns("Context: 2026-11-30. Task A: refactor the parser.", 3, "a")
    other = _turns("Context: 2026-12-01. Task B: write docs.", 1, "b")
    resumed = copy.deepcopy(original)
    resumed[0]["content"][0]["text"] = "Context: 2026-12-01. Task A: refactor the parser."
    report = lint_requests([_body("go", history=original[:-2]), _body("go", history=original),
                            _body("go", history=other), _body("again", history=resumed)])
    pair = report.pair(3)
    assert pair.predecessor == 1 and pair.divergence is not None and pair.is_break
    assert (pair.divergence.cause, pair.divergence.detail, pair.divergence.path) == (
        "volatile-token", "date", "/messages/0/content/0/text")
    # A conversation the capture never saw (nothing re-sent) still starts its own.
    unseen = _turns("Context: 2026-12-01. Task C.", 3, "c")
    assert lint_requests([_body("go", history=original),
                          _body("go", history=unseen)]).pair(1).predecessor is None


def _chat(text: str, key: str) -> dict[str, Any]:
    return {"model": "gpt-5.6", "prompt_cache_key": key,
            "tools": [{"type": "function", "function": t} for t in
                      [{"name": t["name"], "description": t["description"],
                        "parameters": t["input_schema"]} for t in TOOLS]],
            "messages": [{"role": "system", "content": INSTRUCTIONS},
                         {"role": "user", "content": text}]}


def test_a_rotated_prompt_cache_key_is_paired_but_per_user_keys_stay_apart() -> None:
    """A prompt_cache_key replaced by another (one per day) pairs the same prompt re-sent
    under the new key with the last request under the old one and names the key; a new
    prompt under a new key is a conversation start (issue 26: fresh sessions start alike);
    keys used side by side (one per user) are never paired across."""
    rotated = lint_requests([_chat("q1", "day-1"), _chat("q1", "day-2")])
    pair = rotated.pair(1)
    assert pair.predecessor == 0 and pair.divergence is not None
    assert (pair.divergence.cause, pair.divergence.detail) == ("param-change",
                                                               "prompt_cache_key")
    fresh = lint_requests([_chat("q1", "day-1"), _chat("q2", "day-2")])
    assert fresh.pair(1).predecessor is None and fresh.summary.breaks == 0
    users = lint_requests([_chat("q1", "user-1"), _chat("q2", "user-2"),
                           _chat("q3", "user-1"), _chat("q4", "user-2")])
    assert users.pair(1).predecessor is None and users.summary.breaks == 0


@pytest.mark.parametrize("fmt", ["anthropic", "openai-chat", "openai-responses"])
def test_the_sdk_tail_re_sent_with_the_same_history_is_no_rewrite(fmt: str) -> None:
    """stableprompt's own volatile tail, re-sent with the same history (a new tail value),
    pairs with the earlier request as an expected divergence, never a history rewrite; in
    every format (the bug log's OpenAI case)."""
    head = PromptBuilder(system="Be brief.", tail_slots=["now"], tokenizer=None,
                         tools=[Tool("search", "Search.", {"type": "object"})]).freeze()
    conv = head.conversation()
    conv.user("hi")

    def send(now: str) -> Any:
        rendered = conv.render(tail={"now": now})
        if fmt == "anthropic":
            return rendered.to_anthropic(model="claude-sonnet-4-5", max_tokens=64)
        if fmt == "openai-chat":
            return rendered.to_openai_chat(model="gpt-5.6")
        return rendered.to_openai_responses(model="gpt-5.6")

    requests = [send("10:00"), send("10:05")]
    conv.assistant("ok")
    conv.user("more")
    requests += [send("10:06"), send("10:07")]
    report = lint_requests(requests)
    assert report.summary.breaks == 0
    assert [p.predecessor for p in report.pairs] == [None, 0, 1, 2]
    assert all(p.divergence is None or p.expected for p in report.pairs)


def _write_jsonl(path: Path, bodies: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(b) + "\n" for b in bodies))


def test_lint_dir_keeps_files_apart_unless_joined(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Two files of a directory holding the same conversation are two conversations by
    default; ``--join`` pairs across them."""
    history = _turns("Plan the release.", 2, "a")
    _write_jsonl(tmp_path / "a.jsonl", [_body("go", history=history[:-2])])
    _write_jsonl(tmp_path / "b.jsonl", [_body("go", history=history)])
    report = lint_capture(tmp_path)
    assert [p.predecessor for p in report.pairs] == [None, None]
    assert [p.predecessor for p in lint_capture(tmp_path, join=True).pairs] == [None, 0]
    assert main(["lint", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["sessions"] == 2
    assert main(["lint", str(tmp_path), "--json", "--join"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["pairs"] == 1


def _compacted_conversation(fmt: str) -> tuple[list[Any], list[CacheEvent]]:
    head = PromptBuilder(system="Be brief.", tokenizer=None).freeze()
    conv = head.conversation()

    def send() -> Any:
        rendered = conv.render()
        if fmt == "anthropic":
            return rendered.to_anthropic(model="claude-sonnet-4-5", max_tokens=64)
        return rendered.to_openai_chat(model="gpt-5.6")

    requests = []
    for text in ("one", "two", "three"):
        conv.user(f"Question {text}?")
        requests.append(send())
        conv.assistant(f"Answer {text}.")
    event = conv.compact("They asked one and two.", start=0, end=4)
    conv.user("Question four?")
    requests.append(send())
    return requests, [event]


@pytest.mark.parametrize("fmt", ["anthropic", "openai-chat"])
def test_deliberate_compaction_is_an_expected_break(fmt: str) -> None:
    """The CacheEvent of a compaction, passed as ``events``, makes the break it explains
    expected in ``lint_requests`` and ``assert_prefix_stable``; without it the break fails."""
    requests, events = _compacted_conversation(fmt)
    plain = lint_requests(requests)  # without session or event: looks like a new conversation
    assert plain.pair(3).predecessor is None and plain.summary.breaks == 0
    report = lint_requests(requests, events=events)
    pair = report.pair(3)
    assert pair.predecessor == 2 and pair.expected and pair.event == "compaction"
    assert report.summary.breaks == 0
    assert "deliberate compaction" in pair.describe()
    assert pair.as_dict()["divergence"]["event"] == "compaction"
    with pytest.raises(AssertionError, match="request 3 does not extend request 2"):
        assert_prefix_stable(requests)
    assert_prefix_stable(requests, events=events)


def test_an_event_explains_one_break_of_its_kind() -> None:
    """A compaction event does not excuse a head change, and each event is used once."""
    requests, events = _compacted_conversation("anthropic")
    head_changed = copy.deepcopy(requests[-1].body)
    head_changed["system"][0]["text"] = "Be very brief."
    with pytest.raises(AssertionError, match="request 4 does not extend request 3"):
        assert_prefix_stable([*requests, head_changed], events=events)
    head = PromptBuilder(system="Be brief.", tokenizer=None).freeze()
    conv = head.conversation()
    conv.user("hi")
    _, rebased = conv.rebase(PromptBuilder(system="Be very brief.", tokenizer=None).freeze())
    assert_prefix_stable([*requests, head_changed], events=[*events, rebased])


@pytest.mark.parametrize("events", [[1], "compaction", [{"kind": "compaction"}]])
def test_bad_events_are_typed_errors(events: Any) -> None:
    """``events`` must be CacheEvents: anything else is an InputError with code and
    location."""
    requests, _ = _compacted_conversation("anthropic")
    with pytest.raises(InputError) as info:
        lint_requests(requests, events=events)
    assert info.value.code == "lint-events"
    if isinstance(events, list):
        assert info.value.pointer == "/events/0"
    with pytest.raises(InputError):
        assert_prefix_stable(requests, events=events)


def test_known_session_single_turn_requests() -> None:
    """In a known session, single-turn requests with their own prompts are separate
    conversations (no compaction, no break), while the same prompt re-sent with a changed
    system prompt is paired and named."""
    separate = lint_requests([_body("q1"), _body("q2"), _body("q3")], sessions=["s"] * 3)
    assert [p.predecessor for p in separate.pairs] == [None, None, None]
    resent = lint_requests([_body("q1"), _body("q1", system=INSTRUCTIONS + " Be terse.")],
                           sessions=["s", "s"])
    pair = resent.pair(1)
    assert pair.predecessor == 0 and pair.is_break and pair.divergence is not None
    assert pair.divergence.path == "/system/0/text"


FIXTURES = Path(__file__).parent / "fixtures" / "lint"


def test_fresh_codex_sessions_are_three_starts() -> None:
    """Three identical fresh ``codex exec`` sessions, captured through the proxy (each its
    own ``prompt_cache_key`` and item ids, the same texts): three conversation starts, the
    same way each time, no break (they were one start and two ``param-change
    /prompt_cache_key`` breaks)."""
    report = lint_capture(FIXTURES / "codex_fresh_sessions.jsonl")
    assert [p.predecessor for p in report.pairs] == [None, None, None]
    assert report.summary.breaks == 0 and report.summary.sessions == 3


def _extract(text: str, names: list[str], *, fmt: str = "openai-chat") -> dict[str, Any]:
    """A single-turn structured-output request: fixed instructions, one user text, a JSON
    schema with ``names`` as its properties, in that order."""
    schema = {"type": "object", "properties": {n: {"type": "string"} for n in names},
              "required": names, "additionalProperties": False}
    if fmt == "openai-chat":
        return {"model": "gpt-5.6", "messages": [
            {"role": "system", "content": "Extract the fields of the document. " * 20},
            {"role": "user", "content": text}],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "fields", "strict": True, "schema": schema}}}
    return {"model": "gpt-5.6", "instructions": "Extract the fields of the document. " * 20,
            "prompt_cache_key": "extract-job-1", "input": [{"role": "user", "content": text}],
            "text": {"format": {"type": "json_schema", "name": "fields", "strict": True,
                                "schema": schema}}}


def test_a_single_turn_schema_change_within_a_session_is_found_and_labelled(
        tmp_path: Path) -> None:
    """Single-turn requests of one session (a capture session; a Responses
    ``prompt_cache_key``): a new document under the same schema starts its own conversation,
    a changed ``response_format`` / ``text.format`` schema is a break named at its pointer
    (properties added: ``schema changed``; the same properties in another order: reordered,
    which is another schema to the model)."""
    bodies = [_extract("doc 1", ["a", "b"]), _extract("doc 2", ["a", "b"]),
              _extract("doc 3", ["a", "b", "c"]), _extract("doc 4", ["c", "b", "a"])]
    capture = tmp_path / "jobs.jsonl"
    capture.write_text("".join(json.dumps({"session": "job-1", "wire_format": "openai-chat",
                                           "request": json.dumps(b)}) + "\n"
                               for b in bodies))
    report = lint_capture(capture)
    assert [p.predecessor for p in report.pairs] == [None, None, 1, 2]
    found = [(p.divergence.cause, p.divergence.detail, p.divergence.path)
             for p in report.pairs[2:] if p.divergence is not None]
    assert found == [
        ("param-change", "response_format schema changed",
         "/response_format/json_schema/schema/properties/c"),
        ("param-change", "response_format: schema properties reordered at /properties",
         "/response_format/json_schema/schema/properties")]
    responses = lint_requests([_extract("doc 1", ["a", "b"], fmt="openai-responses"),
                               _extract("doc 2", ["a", "b", "c"], fmt="openai-responses")])
    d = responses.pair(1).divergence
    assert d is not None and responses.pair(1).is_break
    assert (d.cause, d.detail, d.path) == ("param-change", "text.format schema changed",
                                           "/text/format/schema/properties/c")


def test_a_conversation_resumed_the_next_day_without_session_ids_is_paired() -> None:
    """Without any session id, a conversation resumed the next day (its system prompt's date
    moved; its first messages equal an earlier request's), after 100 other conversations on
    the same head, is paired with its own last request and the break named in the system
    prompt, not a new conversation."""
    def talk(first: str, turns: int, date: str) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
        for t in range(turns):
            messages += [{"role": "assistant", "content": f"answer {t}"},
                         {"role": "user", "content": f"question {t + 1}"}]
        return {"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": TOOLS,
                "system": [{"type": "text", "text": f"{INSTRUCTIONS} Today is {date}."}],
                "messages": messages}

    bodies = [talk("fix the parser", 0, "2026-12-06"), talk("fix the parser", 1, "2026-12-06")]
    for k in range(100):
        bodies += [talk(f"task {k}", 0, "2026-12-06"), talk(f"task {k}", 1, "2026-12-06")]
    bodies.append(talk("fix the parser", 2, "2026-12-07"))
    last = lint_requests(bodies).pairs[-1]
    assert last.predecessor == 1 and last.divergence is not None
    assert (last.divergence.cause, last.divergence.detail) == ("volatile-token", "date")
