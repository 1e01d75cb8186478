"""Tests for the prefix-stability lint: pairs, causes, predecessors, findings, summary, CLI."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from stableprompt import PromptBuilder, Tool
from stableprompt._canonical import loads
from stableprompt._cli import main
from stableprompt._lint._command import render_report
from stableprompt._lint._linter import (
    CAUSE_FIXES,
    FINDING_FIXES,
    LintReport,
    lint_capture,
    lint_requests,
)
from stableprompt._wire._formats import segment_request

FIXTURES = Path(__file__).parent / "fixtures" / "lint"
CAUSES = FIXTURES / "causes"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- one capture per cause, smallest form ---------------------------------------------------

CAUSE_CASES = [
    # file, cause, detail, segment, path, offset, predecessor bytes at offset, later bytes
    ("volatile-timestamp", "volatile-token", "timestamp", "system[0]", "/system/0/text", 288,
     b"0:00Z", b"5:00Z"),
    ("volatile-date", "volatile-token", "date", "system[0]", "/system/0/text", 283,
     b"1-30", b"2-01"),
    ("volatile-uuid", "volatile-token", "uuid", "system[0]", "/system/0/text", 272,
     b"123e4567", b"9b2f0c1e"),
    ("volatile-nonce", "volatile-token", "nonce", "system[0]", "/system/0/text", 279,
     b"abc123x9", b"q7z991k2"),
    ("volatile-counter", "volatile-token", "counter", "system[0]", "/system/0/text", 274,
     b"3]", b"4]"),
    ("tool-reorder", "tool-reorder", "alpha -> beta at tools[0]", "tools[0]", "/tools/0", 28,
     b"alpha", b"beta"),
    ("tool-added", "tool-added", "gamma", "tools[2]", "/tools/2", 245,
     b'{"type":"text"', b'{"name":"gamma"'),
    ("tool-removed", "tool-removed", "beta", "tools[1]", "/tools/1", 133,
     b'{"name":"beta"', b'{"type":"text"'),
    ("key-order", "key-order", "same keys and values in a different order", "tools[0]",
     "/tools/0/input_schema", 80, b"properties", b"type"),
    ("whitespace", "whitespace", "only whitespace differs", "system[0]", "/system/0/text", 278,
     b"Answer", b" Answer"),
    ("history-trailing-newline", "history-rewrite",
     "already-sent messages[2].content[0] changed in whitespace only", "messages[2].content[0]",
     "/messages/2/content/0/content", 539, b'\\n"', b'"}'),
    ("history-string-content", "history-rewrite", "messages[0].content[0] became messages[0]",
     "messages[0].content[0]", "/messages/0/content/0", 295, b"block", b"content"),
    ("history-reasoning-dropped", "history-rewrite",
     "thinking block dropped from already-sent messages[1].content[0]",
     "messages[1].content[0]", "/messages/1/content/0/type", 383, b"hinking", b"ool_use"),
    ("model-change", "model-change", "model", "param:model", "/model", 8, b"sonnet", b"opus"),
    ("param-thinking", "param-change", "thinking.budget_tokens", "param:thinking",
     "/thinking/budget_tokens", 53,
     b"1024", b"2048"),
    ("param-tool-choice", "param-change", "tool_choice", "tools[0]", "/tool_choice", 19,
     b'{"name":"alpha"', b'{"type":"any"}'),
    ("param-reasoning-effort", "param-change", "reasoning_effort", "param:reasoning_effort",
     "/reasoning_effort", 10, b"low", b"high"),
    ("param-response-schema", "param-change", "response_format schema changed",
     "param:response_format", "/response_format/json_schema/schema/required/0", 101, b'a"',
     b'b"'),
    ("content-edit", "content-edit", "system content changed (value)", "system[0]",
     "/system/0/text", 272, b"rief", b"old"),
]


def test_responses_reasoning_item_dropped() -> None:
    """A Responses reasoning item dropped from re-sent input is a history-delete naming it."""
    sent = [{"role": "user", "content": "hi"}, {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    later = [sent[0], *sent[2:], {"role": "assistant", "content": "done"}]
    report = lint_requests([{"model": "gpt-5.6", "input": sent},
                            {"model": "gpt-5.6", "input": later}])
    d = report.pair(1).divergence
    assert d is not None
    assert (d.cause, d.segment, d.path, d.offset) == (
        "history-delete", "input[1].rest", "/input/1", len('"gpt-5.6"{"role":"user",'
                                                          '"content":"hi"}{"type":"'))
    assert d.detail == "already-sent reasoning input[1] left out (input[1] is in its place)"


@pytest.mark.parametrize(
    ("name", "cause", "detail", "segment", "path", "offset", "before", "after"), CAUSE_CASES,
    ids=[case[0] for case in CAUSE_CASES])
def test_cause_capture(name: str, cause: str, detail: str, segment: str, path: str,
                       offset: int, before: bytes, after: bytes) -> None:
    """Each two-request capture is one break with the expected cause, segment, path and
    offset, and the bytes at that offset are where the two requests first differ."""
    report = lint_capture(CAUSES / f"{name}.jsonl")
    assert report.summary.breaks == 1
    pair = report.pair(1)
    assert pair.predecessor == 0 and pair.is_break
    d = pair.divergence
    assert d is not None
    assert (d.cause, d.detail, d.segment, d.path, d.offset) == (
        cause, detail, segment, path, offset)
    a_body, b_body = _lines(CAUSES / f"{name}.jsonl")
    fmt = "anthropic" if "system" in a_body else "openai-chat"
    a, b = segment_request(fmt, a_body).data, segment_request(fmt, b_body).data
    assert a[:offset] == b[:offset]
    assert a[offset:].startswith(before) and b[offset:].startswith(after)
    assert pair.lcp_bytes == offset
    assert report.summary.causes == {cause: 1}


def test_every_cause_has_a_fix() -> None:
    """Every diff cause has a one-line fix and every finding code a severity and fix."""
    from stableprompt._diff import CAUSES as DIFF_CAUSES

    assert set(CAUSE_FIXES) == set(DIFF_CAUSES)
    assert all(sev in ("error", "warning", "info") for sev, _ in FINDING_FIXES.values())


# -- clean captures, predecessors and sessions ----------------------------------------------


def test_clean_interleaved_capture_has_no_breaks() -> None:
    """A main agent and a subagent interleaved (no session ids) pair with their own previous
    requests; the moving breakpoint and the volatile tail are not breaks."""
    report = lint_capture(FIXTURES / "clean.jsonl")
    s = report.summary
    assert (s.requests, s.sessions, s.pairs, s.breaks, s.expected_divergences) == (7, 2, 5, 0, 5)
    assert [p.predecessor for p in report.pairs] == [None, 0, None, 1, 2, 4, 3]
    for p in report.pairs[1:]:
        if p.predecessor is not None:
            assert p.expected and p.divergence is not None
            assert p.divergence.segment_kind == "message"
    assert report.findings == ()
    assert s.prefix_ratio_mean is not None and s.prefix_ratio_mean > 0.95
    assert report.passes(0.95) and not report.passes(0.99)


def test_session_ids_restrict_predecessors() -> None:
    """Wrapper records with a session key pair only within their session."""
    report = lint_capture(FIXTURES / "sessions.jsonl")
    assert [(p.session, p.predecessor) for p in report.pairs] == [
        ("main", None), ("sub", None), ("main", 0), ("sub", 1), ("main", 2)]
    assert report.summary.breaks == 0 and report.summary.sessions == 2


HEAD: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 32,
        "system": [{"type": "text", "text": "You are an agent.",
                    "cache_control": {"type": "ephemeral"}}]}


def _conversation(task: str, turns: int, tag: str) -> list[dict[str, Any]]:
    """Append-only bodies with a breakpoint on the newest block, moving forward each turn."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": task}]}]
    bodies = []
    for t in range(turns):
        body: dict[str, Any] = copy.deepcopy({**HEAD, "messages": messages})
        body["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        bodies.append(body)
        messages = [*messages,
                    {"role": "assistant", "content": [{"type": "text",
                                                       "text": f"{tag} answer number {t}"}]},
                    {"role": "user", "content": [{"type": "text",
                                                  "text": f"{tag} follow-up question {t}"}]}]
    return bodies


def test_breakpoint_moving_forward_is_not_a_break() -> None:
    """Markers are not content: a breakpoint that moves to the newest block each turn leaves
    every predecessor a byte prefix of its successor."""
    report = lint_requests(_conversation("Plan the release.", 4, "a"))
    assert [p.predecessor for p in report.pairs] == [None, 0, 1, 2]
    assert all(p.divergence is None for p in report.pairs)
    assert all(p.lcp_bytes == p.predecessor_size_bytes for p in report.pairs[1:])


def test_interleaved_conversations_sharing_a_head() -> None:
    """Two conversations with the same head and different tasks, interleaved without session
    ids, are two sessions with no breaks."""
    a, b = _conversation("Task A: fix the bug.", 3, "a"), _conversation("Task B: docs.", 3, "b")
    report = lint_requests([a[0], b[0], a[1], b[1], a[2], b[2]])
    assert [p.predecessor for p in report.pairs] == [None, None, 0, 1, 2, 3]
    assert report.summary.breaks == 0 and report.summary.sessions == 2


def test_rewind_to_an_earlier_turn_is_not_a_break() -> None:
    """A request extending an earlier (not the latest) request pairs with that one."""
    bodies = _conversation("Plan.", 3, "a")
    fork = copy.deepcopy(bodies[1])
    fork["messages"] += [{"role": "assistant", "content": [{"type": "text", "text": "Other."}]},
                         {"role": "user", "content": [{"type": "text", "text": "Go on."}]}]
    report = lint_requests([*bodies, fork])
    assert report.pair(3).predecessor == 1 and report.pair(3).divergence is None


def test_resumed_conversation_without_session_starts_a_session() -> None:
    """A request continuing history the capture never saw (unknown session) starts a session
    instead of looking like a rewrite of another conversation."""
    a = _conversation("Task A.", 3, "a")
    b = _conversation("Task B.", 3, "b")
    report = lint_requests([a[0], a[1], b[2]])
    assert report.pair(2).predecessor is None
    same = lint_requests([a[0], a[1], b[2]], sessions=["s", "s", "s"])
    assert same.pair(2).predecessor == 1 and same.pair(2).is_break


def test_compaction_in_a_known_session_is_a_break() -> None:
    """In a known session, an opening request with the same model and tools (history
    restarted under a rewritten head) pairs with the session's last request; a subagent with
    other tools in the same session starts its own conversation."""
    bodies = _conversation("Plan.", 2, "a")
    compacted = copy.deepcopy(bodies[0])
    compacted["system"][0]["text"] = "You are an agent.\nSummary: planned."
    compacted["messages"][0]["content"][0]["text"] = "Continue."
    tool = {"name": "grep", "description": "Search.", "input_schema": {"type": "object"}}
    subagent = {**copy.deepcopy(bodies[0]), "tools": [tool]}
    report = lint_requests([*bodies, subagent, compacted], sessions=["s"] * 4)
    assert report.pair(2).predecessor is None
    pair = report.pair(3)
    assert pair.predecessor == 1 and pair.divergence is not None
    assert (pair.divergence.cause, pair.divergence.path) == ("content-edit", "/system/0/text")
    finding = report.finding("head-changed-mid-session")
    assert finding is not None and finding.requests == (3,)
    # Without session ids the rewritten head still most plausibly changes the earlier head
    # (it keeps most of its bytes), so the break is named too (issue 14 item 5).
    unknown = lint_requests([*bodies, compacted]).pair(2)
    assert unknown.predecessor == 1 and unknown.divergence is not None
    assert unknown.divergence.path == "/system/0/text" and unknown.is_break


def test_history_rewrite_found_across_interleaving() -> None:
    """A rewritten message in one conversation is a break against that conversation's own
    previous request, not against the interleaved other one."""
    a, b = _conversation("Task A.", 3, "a"), _conversation("Task B.", 3, "b")
    edited = copy.deepcopy(a[2])
    edited["messages"][1]["content"][0]["text"] = "a answer number 0 (edited)"
    report = lint_requests([a[0], b[0], a[1], b[1], edited])
    pair = report.pair(4)
    assert pair.predecessor == 2 and pair.divergence is not None
    assert (pair.divergence.cause, pair.divergence.path) == (
        "history-rewrite", "/messages/1/content/0/text")


def test_ratio_and_ceiling_definitions() -> None:
    """prefix_ratio = lcp/size and ceiling = min(1, pred/size); means are over pairs only and
    weighted values are byte sums."""
    bodies = _conversation("Plan.", 3, "a")
    bad = copy.deepcopy(bodies[2])
    bad["system"][0]["text"] = "You are an agent!"
    report = lint_requests([bodies[0], bodies[1], bad])
    sizes = [len(segment_request("anthropic", b).data) for b in (bodies[0], bodies[1], bad)]
    p1, p2 = report.pair(1), report.pair(2)
    assert p1.prefix_ratio == sizes[0] / sizes[1] and p1.ceiling == sizes[0] / sizes[1]
    assert p2.prefix_ratio == p2.lcp_bytes / sizes[2] and p2.ceiling == sizes[1] / sizes[2]
    assert p2.divergence is not None and p2.divergence.cause == "content-edit"
    s = report.summary
    assert s.prefix_ratio_mean == pytest.approx((p1.prefix_ratio + p2.prefix_ratio) / 2)
    assert s.prefix_ratio_weighted == pytest.approx(
        (p1.lcp_bytes + p2.lcp_bytes) / (sizes[1] + sizes[2]))
    assert s.ceiling_weighted == pytest.approx((sizes[0] + sizes[1]) / (sizes[1] + sizes[2]))
    assert report.pairs[0].prefix_ratio is None and report.pairs[0].ceiling is None


# -- stableprompt's own renders ---------------------------------------------------------------

WEATHER = Tool("get_weather", "Weather for a city.",
               {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]})


def _rendered(fmt: str, turns: int = 4) -> list[Any]:
    head = (PromptBuilder(tokenizer=None).system("Be brief. " * 500).tools([WEATHER])
            .tail_slot("now").freeze())
    conv = head.conversation()
    conv.user("Weather in Paris?")
    out = []
    for t in range(turns):
        render = conv.render(tail={"now": f"2026-11-30T10:0{t}:00Z"})
        if fmt == "anthropic":
            out.append(render.to_anthropic(model="claude-sonnet-4-5", max_tokens=64))
        elif fmt == "openai-chat":
            out.append(render.to_openai_chat(model="gpt-5.6"))
        else:
            out.append(render.to_openai_responses(model="gpt-5.6"))
        conv.assistant("Checking.", tool_calls=[{"id": f"t{t}", "name": "get_weather",
                                                 "arguments": {"city": "Paris"}}])
        conv.tool_result(f"t{t}", "18C")
    return out


@pytest.mark.parametrize("fmt", ["anthropic", "openai-chat", "openai-responses"])
def test_stableprompt_renders_are_clean(fmt: str) -> None:
    """stableprompt's own requests (tail after the last breakpoint, or a final user message)
    lint with no breaks and no findings."""
    report = lint_requests(_rendered(fmt))
    assert report.summary.breaks == 0 and report.summary.expected_divergences == 3
    assert report.findings == ()


# -- findings ---------------------------------------------------------------------------------


def _codes(report: LintReport) -> set[str]:
    return {f.code for f in report.findings}


def test_finding_volatile_in_cached_region() -> None:
    """A timestamp in a cached system block is reported with its path and kind."""
    body = copy.deepcopy(HEAD)
    body["system"][0]["text"] = "Current time: 2026-11-30T10:00:00Z. Be brief."
    body["messages"] = [{"role": "user", "content": "hi"}]
    report = lint_requests([body])
    finding = report.finding("volatile-in-cached-region")
    assert finding is not None and finding.requests == (0,)
    assert "/system/0/text" in finding.message and "timestamp" in finding.message
    assert finding.fix == FINDING_FIXES["volatile-in-cached-region"][1]


def test_finding_volatile_after_last_breakpoint_is_ignored() -> None:
    """A system block after the last breakpoint is not cached, so its clock is not flagged."""
    body = copy.deepcopy(HEAD)
    body["system"].append({"type": "text", "text": "Now: 2026-11-30T10:00:00Z"})
    body["messages"] = [{"role": "user", "content": "hi"}]
    assert lint_requests([body]).finding("volatile-in-cached-region") is None


def test_finding_unstable_tool_order() -> None:
    """The same tools in conflicting orders across requests are an unstable-tool-order."""
    tools = [{"name": n, "description": n, "input_schema": {"properties": {}, "type": "object"}}
             for n in ("a", "b", "c")]
    first = {**HEAD, "tools": tools, "messages": [{"role": "user", "content": "one"}]}
    second = {**HEAD, "tools": [tools[2], tools[0]], "messages": [{"role": "user",
                                                                   "content": "two"}]}
    report = lint_requests([first, second])
    finding = report.finding("unstable-tool-order")
    assert finding is not None and finding.requests == (0, 1) and finding.severity == "error"


def test_finding_non_canonical_schema_keys() -> None:
    """A schema whose keys are not sorted is reported with the tool and pointer."""
    tool = {"name": "f", "description": "F.",
            "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}
    report = lint_requests([{**HEAD, "tools": [tool], "messages": [{"role": "user",
                                                                    "content": "hi"}]}])
    finding = report.finding("non-canonical-schema-keys")
    assert finding is not None and finding.severity == "info"
    assert "tool f" in finding.message and "/input_schema" in finding.message


def _marked(text: str, ttl: str | None = None) -> dict[str, Any]:
    marker = {"type": "ephemeral"} if ttl is None else {"type": "ephemeral", "ttl": ttl}
    return {"type": "text", "text": text, "cache_control": marker}


def test_finding_too_many_breakpoints() -> None:
    """Five breakpoints exceed Anthropic's budget of four."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8,
            "system": [_marked("S" * 9000)],
            "messages": [{"role": "user", "content": [_marked(f"m{i}") for i in range(4)]}]}
    finding = lint_requests([body]).finding("too-many-breakpoints")
    assert finding is not None and "5 breakpoints (budget 4)" in finding.message


def test_finding_ttl_order() -> None:
    """A 1h breakpoint after a 5m one is a TTL-order error naming both segments."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "system": [_marked("S" * 9000)],
            "messages": [{"role": "user", "content": [_marked("hi", "1h")]}]}
    finding = lint_requests([body]).finding("breakpoint-ttl-order")
    assert finding is not None
    assert "1h breakpoint on messages[0].content[0] follows a 5m breakpoint on system[0]" in (
        finding.message)


def test_finding_breakpoint_below_minimum() -> None:
    """A breakpoint ending a prefix shorter than the model's minimum is flagged; a long enough
    prefix is not."""
    short = {"model": "claude-sonnet-4-5", "max_tokens": 8, "system": [_marked("Be brief.")],
             "messages": [{"role": "user", "content": "hi"}]}
    finding = lint_requests([short]).finding("breakpoint-below-minimum")
    assert finding is not None and "1024-token minimum of claude-sonnet-4-5" in finding.message
    long = {**short, "system": [_marked("All work and no play. " * 400)]}
    assert lint_requests([long]).finding("breakpoint-below-minimum") is None


def test_finding_breakpoint_on_per_turn_block() -> None:
    """A breakpoint on a block that the next turn rewrites is flagged (and is a break)."""
    first = {**HEAD, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Task."}, _marked("Clock: turn one")]}]}
    second = {**HEAD, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Task."},
                                     {"type": "text", "text": "Clock: turn two"}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [_marked("next")]}]}
    report = lint_requests([first, second])
    assert report.pair(1).is_break
    finding = report.finding("breakpoint-on-per-turn-block")
    assert finding is not None and finding.requests == (1,)
    assert "messages[0].content[1]" in finding.message


def test_finding_head_changed_mid_session() -> None:
    """The same conversation continued with another system prompt is a head change."""
    bodies = _conversation("Plan.", 2, "a")
    changed = copy.deepcopy(bodies[1])
    changed["system"][0]["text"] = "You are a different agent."
    report = lint_requests([bodies[0], changed])
    finding = report.finding("head-changed-mid-session")
    assert finding is not None and finding.requests == (1,)
    assert "content-edit at /system/0/text" in finding.message


def test_finding_no_breakpoints_on_anthropic() -> None:
    """Anthropic requests without any cache_control cache nothing: flagged once per request."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "system": "S",
            "messages": [{"role": "user", "content": "hi"}]}
    finding = lint_requests([body, body]).finding("no-breakpoints")
    assert finding is not None and finding.requests == (0, 1)
    clock = {**body, "system": "Now: 2026-11-30T10:00:00Z"}
    volatile = lint_requests([clock]).finding("volatile-in-cached-region")
    assert volatile is not None and "/system" in volatile.message  # the head, once cached


# -- API, JSON and CLI ------------------------------------------------------------------------


def test_json_shape() -> None:
    """The JSON document has the summary, pair, divergence and finding fields of the issue."""
    doc = lint_capture(CAUSES / "tool-reorder.jsonl").as_dict()
    assert set(doc) >= {"summary", "pairs", "findings", "problems"}
    assert set(doc["summary"]) >= {"requests", "sessions", "prefix_ratio_mean",
                                   "prefix_ratio_weighted", "ceiling"}
    pair = doc["pairs"][1]
    assert set(pair) >= {"index", "predecessor", "lcp_bytes", "prefix_ratio", "divergence"}
    assert set(pair["divergence"]) >= {"segment", "path", "offset", "cause", "detail",
                                       "expected"}
    assert doc["pairs"][0]["divergence"] is None
    assert all(set(f) >= {"code", "message", "requests"} for f in doc["findings"])


def test_cli_json_and_threshold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints the document; by default a break or an error finding exits 1 (issue 14:
    fail by default), ``--exit-zero`` reports without failing, and --min-prefix-ratio sets
    its own gate."""
    path = CAUSES / "model-change.jsonl"
    assert main(["lint", str(path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["pairs"][1]["divergence"]["cause"] == "model-change"
    assert doc["summary"]["passed"] is False
    assert doc["summary"]["failures"] == ["1 break(s) exceed the maximum of 0",
                                          "error finding(s): head-changed-mid-session"]
    assert main(["lint", str(path), "--json", "--exit-zero"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["passed"] is False
    assert main(["lint", str(FIXTURES / "clean.jsonl")]) == 0
    capsys.readouterr()
    assert main(["lint", str(path), "--min-prefix-ratio", "0.5"]) == 1
    out = capsys.readouterr().out
    assert "model-change" in out and "FAIL" in out
    assert main(["lint", str(FIXTURES / "clean.jsonl"), "--min-prefix-ratio", "0.9"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "bogus"], "invalid choice: 'bogus'"),
    (["--min-prefix-ratio", "2"], "must be between 0 and 1"),
])
def test_cli_usage_errors(args: list[str], message: str,
                          capsys: pytest.CaptureFixture[str]) -> None:
    """Bad options exit 2 with one line on stderr."""
    assert main(["lint", str(FIXTURES / "clean.jsonl"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Missing, empty and non-JSON captures exit 2 with a one-line error and no traceback."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    text = tmp_path / "notes.txt"
    text.write_text("hello\nworld\n")
    cases = [(tmp_path / "missing.jsonl", "capture-unreadable"), (empty, "capture-empty"),
             (text, "capture-format")]
    for path, code in cases:
        assert main(["lint", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("stableprompt lint: error: ") and f"({code})" in err
        assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_malformed_lines_reported_rest_linted(capsys: pytest.CaptureFixture[str]) -> None:
    """Malformed lines are listed with their line numbers and the other lines are linted."""
    assert main(["lint", str(FIXTURES / "malformed.jsonl"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["line"] for p in doc["problems"]] == [2, 4, 6]
    assert [p["index"] for p in doc["pairs"]] == [0, 4, 6]
    assert doc["pairs"][1]["predecessor"] == 0 and doc["pairs"][2]["predecessor"] == 4
    assert main(["lint", str(FIXTURES / "malformed.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "malformed.jsonl:2: line 2 is not valid JSON" in out


def test_lint_requests_errors() -> None:
    """An unknown wire format, a non-body item and an empty list raise CaptureError."""
    from stableprompt import CaptureError

    with pytest.raises(CaptureError, match="unknown wire format") as info:
        lint_requests([HEAD], wire_format="cohere")
    assert info.value.code == "capture-format"
    # a body passed where the wire format goes: the error never echoes it (its keys, text)
    from stableprompt import segment_request
    key = "sk-ant-api03-" + "K3y" * 20
    body = {"model": "m", "system": f"use {key}", "messages": []}
    with pytest.raises(CaptureError, match="unknown wire format a dict") as info:
        segment_request(body, "anthropic")  # type: ignore[arg-type]
    assert key[10:30] not in str(info.value) and "use" not in str(info.value)
    with pytest.raises(CaptureError) as info:
        segment_request(f"x-api-key={key}", body)
    assert key[10:30] not in str(info.value)
    with pytest.raises(CaptureError) as info:
        lint_requests([42])
    assert info.value.code == "capture-record"
    with pytest.raises(CaptureError) as info:
        lint_requests([])
    assert info.value.code == "capture-empty"


def test_lint_requests_on_a_non_iterable_is_a_capture_error() -> None:
    """``lint_requests(None)`` raises CaptureError ``capture-record``, not a bare TypeError."""
    from stableprompt import CaptureError

    with pytest.raises(CaptureError) as info:
        lint_requests(None)  # type: ignore[arg-type]
    assert info.value.code == "capture-record" and "NoneType" in info.value.message


def test_lint_capture_on_a_path_with_a_nul_byte_is_a_capture_error() -> None:
    """A capture path holding a NUL byte is ``capture-unreadable``, not a bare ValueError."""
    from stableprompt import CaptureError

    with pytest.raises(CaptureError) as info:
        lint_capture("a\x00b")
    assert info.value.code == "capture-unreadable" and "null byte" in info.value.message


def _nest(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_past_255_levels_in_a_capture_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    """A capture line nested deeper than orjson writes (255; it reads 1,024) is a per-request
    problem with its pointer, as lint_requests reports it, not ``TypeError: Recursion limit
    reached``; an ignored deep field is linted as lint_requests lints it."""
    bodies = [r.get("request", r) for r in _lines(FIXTURES / "clean.jsonl")]
    bodies[1] = {**bodies[1], "system": _nest(300)}
    bodies[2] = {**bodies[2], "metadata": {"x": _nest(300)}}
    # a line continuing the first one's conversation (segmented from its new items) with a
    # new message holding a deep ignored field, then one continuing that
    first = bodies[0]
    deep_turn = {**first, "messages": [*first["messages"], {
        "role": "assistant", "content": "ok", "x": _nest(300)}, {"role": "user", "content": "go"}]}
    bodies += [deep_turn, {**deep_turn, "messages": [*deep_turn["messages"], {
        "role": "assistant", "content": "done"}]}]
    capture = tmp_path / "deep.jsonl"
    capture.write_text("".join(json.dumps(b, separators=(",", ":"), ensure_ascii=False) + "\n"
                               for b in bodies))
    report = lint_capture(capture)
    expected = lint_requests(bodies)
    assert [(p.index, p.code, p.message) for p in report.problems] == [
        (p.index, p.code, p.message) for p in expected.problems]
    assert [(p.index, p.code) for p in report.problems] == [(1, "capture-json")]
    assert "/system" in report.problems[0].message
    assert [p.index for p in report.pairs] == [p.index for p in expected.pairs]
    assert {len(bodies) - 2, len(bodies) - 1} <= {p.index for p in report.pairs}


def test_shape_error_is_a_problem_not_a_crash() -> None:
    """A body the wire format rejects becomes a problem; the rest is linted."""
    report = lint_requests([{"model": "m", "messages": "nope", "max_tokens": 1}, HEAD | {
        "messages": [{"role": "user", "content": "hi"}]}], wire_format="anthropic")
    assert [p.index for p in report.pairs] == [1]
    assert report.problems[0].code == "capture-shape" and "/messages" in report.problems[0].message


def test_render_report_lists_breaks_and_fixes() -> None:
    """The terminal report shows the break table, the cause fix and the findings."""
    from rich.console import Console

    console = Console(record=True, width=200)
    render_report(lint_capture(CAUSES / "tool-reorder.jsonl"), console=console)
    text = console.export_text()
    assert "tool-reorder" in text and CAUSE_FIXES["tool-reorder"] in text
    assert "breaks" in text and "/tools/0" in text
    console = Console(record=True, width=200)
    render_report(lint_capture(FIXTURES / "clean.jsonl"), console=console, show_all=True,
                  min_prefix_ratio=0.5)
    text = console.export_text()
    assert "pairs" in text and "history-rewrite (expected)" in text and "PASS" in text


# -- review of issue 5: tail scope, session hints, offsets, gates -----------------------------


def _system_marked(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """An Anthropic body whose only breakpoint is on the system prompt."""
    return {"model": "claude-sonnet-4-5", "max_tokens": 8,
            "system": [{"type": "text", "text": "Be brief. " * 200,
                        "cache_control": {"type": "ephemeral"}}],
            "messages": copy.deepcopy(messages)}


PLAN: list[dict[str, Any]] = [{"role": "user", "content": "Plan the release."},
                              {"role": "assistant", "content": "Step 1 done."},
                              {"role": "user", "content": "Next."}]


def test_rewrite_behind_the_last_breakpoint_is_a_break() -> None:
    """An already-sent assistant message rewritten after the last (system) breakpoint is a
    history-rewrite break, not the expected volatile tail."""
    later = [*copy.deepcopy(PLAN), {"role": "assistant", "content": "Step 2"},
             {"role": "user", "content": "Next 2."}]
    later[1]["content"] = "Step 1 was REWRITTEN entirely."
    report = lint_requests([_system_marked(PLAN), _system_marked(later)])
    pair = report.pair(1)
    assert pair.is_break and not pair.expected and pair.divergence is not None
    assert (pair.divergence.cause, pair.divergence.path) == (
        "history-rewrite", "/messages/1/content")
    assert report.summary.breaks == 1 and report.summary.expected_divergences == 0


def test_last_message_edited_in_place_behind_a_head_breakpoint_is_a_break() -> None:
    """The predecessor's last user message re-sent edited at the same position (breakpoint
    only on the head) is a break; the same message left intact is not."""
    later = [*copy.deepcopy(PLAN), {"role": "assistant", "content": "Step 2"},
             {"role": "user", "content": "Next 2."}]
    assert lint_requests([_system_marked(PLAN), _system_marked(later)]).pair(1).divergence is None
    later[2]["content"] = "Next!"
    pair = lint_requests([_system_marked(PLAN), _system_marked(later)]).pair(1)
    assert pair.is_break and pair.divergence is not None
    assert pair.divergence.path == "/messages/2/content"


def test_tail_message_after_a_history_breakpoint_is_expected() -> None:
    """A per-turn user message right after the breakpoint that closes the stable history is the
    volatile tail: the next turn replacing it is expected, not a break."""
    def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {**copy.deepcopy(HEAD), "messages": messages}

    def text(value: str, marked: bool = False) -> dict[str, Any]:
        return _marked(value) if marked else {"type": "text", "text": value}

    first = body([{"role": "user", "content": [text("Plan the release.")]},
                  {"role": "assistant", "content": [text("Step 1 done.", marked=True)]},
                  {"role": "user", "content": [text("Now: 2026-11-30T10:00:00Z")]}])
    second = body([{"role": "user", "content": [text("Plan the release.")]},
                   {"role": "assistant", "content": [text("Step 1 done.")]},
                   {"role": "user", "content": [text("Go on.", marked=True),
                                                text("Now: 2026-11-30T10:05:00Z")]}])
    pair = lint_requests([first, second]).pair(1)
    assert pair.divergence is not None and pair.expected and not pair.is_break
    assert pair.divergence.path == "/messages/2/content/0/text"


def _chat_turns(name: str, turns: int, key: str | bool) -> list[Any]:
    """OpenAI chat requests of one conversation on a shared head, one per turn."""
    head = (PromptBuilder(tokenizer=None).system("You are a helpful assistant. " * 50)
            .tools([WEATHER]).freeze())
    conv = head.conversation()
    out = []
    for t in range(turns):
        conv.user(f"{name} question {t}: " + name * 20)
        out.append(conv.render().to_openai_chat(model="gpt-5.2", prompt_cache_key=key).body)
        conv.assistant(f"{name} answer {t}")
    return out


def _interleave(a: list[Any], b: list[Any]) -> list[Any]:
    return [x for pair in zip(a, b, strict=True) for x in pair]


def test_sdk_prompt_cache_key_is_not_a_session() -> None:
    """prompt_cache_key=True (one sp- key per head) does not make two interleaved conversations
    on that head one session: two sessions, no breaks, and no session id reported."""
    bodies = _interleave(_chat_turns("alice", 4, True), _chat_turns("bob", 4, True))
    assert str(bodies[0]["prompt_cache_key"]).startswith("sp-")
    report = lint_requests(bodies)
    assert [p.predecessor for p in report.pairs] == [None, None, 0, 1, 2, 3, 4, 5]
    assert (report.summary.sessions, report.summary.breaks) == (2, 0)
    assert {p.session for p in report.pairs} == {None}


def test_hinted_session_id_shared_by_interleaved_conversations() -> None:
    """A user-chosen prompt_cache_key shared by interleaved conversations is only a routing
    key (two sessions, no breaks); a key used by one conversation stays a session, so a
    compaction under it is still paired and reported."""
    shared = _interleave(_chat_turns("alice", 3, "user-42"), _chat_turns("bob", 3, "user-42"))
    report = lint_requests(shared)
    assert [p.predecessor for p in report.pairs] == [None, None, 0, 1, 2, 3]
    assert (report.summary.sessions, report.summary.breaks) == (2, 0)
    alone = _chat_turns("alice", 3, "conv-7")
    compacted = copy.deepcopy(alone[0])
    compacted["messages"][1]["content"] = "Summary so far: three questions answered."
    report = lint_requests([*alone, compacted])
    pair = report.pair(3)
    assert pair.predecessor == 2 and pair.session == "conv-7" and pair.is_break


def _at(doc: Any, pointer: str) -> Any:
    """The value at a JSON pointer, or ``None`` when the body has none there."""
    for token in pointer.split("/")[1:]:
        if isinstance(doc, list) and token.isdigit() and int(token) < len(doc):
            doc = doc[int(token)]
        elif isinstance(doc, dict) and token in doc:
            doc = doc[token]
        else:
            return None
    return doc


VALUE_CASES = [
    # file, value_offset, snippet_a, snippet_b
    ("volatile-timestamp", 20, "Now: 2026-11-30T10:00:00Z. Be brief.",
     "Now: 2026-11-30T10:05:00Z. Be brief."),
    ("history-trailing-newline", 3, "18C\n", "18C"),
    ("model-change", 7, "claude-sonnet-4-5", "claude-opus-4-5"),
    ("history-string-content", 0, '{"type":"text","text":"Weather in Paris?"}',
     "Weather in Paris?"),
    ("tool-removed", 0, '{"name":"beta","description":"Beta tool.","input_schema":{"prope',
     ""),
]


@pytest.mark.parametrize(("name", "value_offset", "snippet_a", "snippet_b"), VALUE_CASES,
                         ids=[case[0] for case in VALUE_CASES])
def test_divergence_value_offset_and_snippets(name: str, value_offset: int, snippet_a: str,
                                              snippet_b: str) -> None:
    """Snippets come from the JSON value at the divergent path (no segment wrapper) and
    value_offset is the character offset of the first difference inside that value."""
    doc = lint_capture(CAUSES / f"{name}.jsonl").as_dict()
    d = doc["pairs"][1]["divergence"]
    assert (d["value_offset"], d["snippet_a"], d["snippet_b"]) == (
        value_offset, snippet_a, snippet_b)
    assert d["offset"] == doc["pairs"][1]["lcp_bytes"]  # segment-data bytes, documented
    assert '"block"' not in d["snippet_a"] + d["snippet_b"]
    a_body, b_body = _lines(CAUSES / f"{name}.jsonl")
    va, vb = _at(a_body, d["path"]), _at(b_body, d["path"])
    if isinstance(va, str) and isinstance(vb, str):  # offset into the value as sent
        k = d["value_offset"]
        assert va[:k] == vb[:k] and va[k:k + 1] != vb[k:k + 1]


def test_forced_format_that_disagrees_is_reported() -> None:
    """An Anthropic capture linted as openai-chat gets a format-mismatch error naming the
    ignored 'system' field; auto-detection raises nothing."""
    path = CAUSES / "volatile-timestamp.jsonl"
    report = lint_capture(path, wire_format="openai-chat")
    finding = report.finding("format-mismatch")
    assert finding is not None and finding.severity == "error" and finding.requests == (0, 1)
    assert "looks like anthropic" in finding.message and "'system' ignored" in finding.message
    assert lint_capture(path).finding("format-mismatch") is None
    chat = {"model": "gpt-5.2", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    assert lint_requests([chat], wire_format="openai-chat").finding("format-mismatch") is None


def test_unknown_model_minimum_says_it_is_conservative() -> None:
    """A breakpoint-below-minimum finding for an unknown model says the minimum is a
    conservative default for an unknown model."""
    body = {"model": "acme-7b", "max_tokens": 8, "system": [_marked("Be brief.")],
            "messages": [{"role": "user", "content": "hi"}]}
    finding = lint_requests([body]).finding("breakpoint-below-minimum")
    assert finding is not None
    assert "conservative 4096-token minimum assumed for the unknown model acme-7b" in (
        finding.message)
    many = {**body, "system": [_marked("S" * 20000)],
            "messages": [{"role": "user", "content": [_marked(f"m{i}") for i in range(4)]}]}
    finding = lint_requests([many]).finding("too-many-breakpoints")
    assert finding is not None
    assert "(budget 4, the conservative default for the unknown model acme-7b)" in (
        finding.message)


def test_summary_counts_agree_with_the_lists() -> None:
    """summary.requests counts every pairs[] entry (conversation starts included) and equals
    sessions + pairs; summary.problems counts problems[]."""
    for path in (FIXTURES / "clean.jsonl", FIXTURES / "malformed.jsonl",
                 FIXTURES / "capture.har"):
        doc = lint_capture(path).as_dict()
        s = doc["summary"]
        assert s["requests"] == len(doc["pairs"]) == s["sessions"] + s["pairs"]
        assert s["pairs"] == sum(1 for p in doc["pairs"] if p["predecessor"] is not None)
        assert s["problems"] == len(doc["problems"])


def test_cli_gate_without_pairs_fails(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """--min-prefix-ratio on a capture with no pairs exits 1 with a 'no pairs' failure."""
    single = tmp_path / "one.jsonl"
    single.write_text(json.dumps({**HEAD, "messages": [{"role": "user", "content": "hi"}]})
                      + "\n")
    assert main(["lint", str(single)]) == 0
    capsys.readouterr()
    assert main(["lint", str(single), "--min-prefix-ratio", "0.5"]) == 1
    assert "FAIL no pairs" in capsys.readouterr().out
    assert main(["lint", str(single), "--min-prefix-ratio", "0.5", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["passed"] is False and summary["failures"][0].startswith("no pairs")


def test_cli_fail_line_tells_close_ratios_apart(capsys: pytest.CaptureFixture[str]) -> None:
    """A mean just below the threshold prints two different numbers (4+ decimals)."""
    path = CAUSES / "model-change.jsonl"
    mean = lint_capture(path).summary.prefix_ratio_mean
    assert mean is not None
    assert main(["lint", str(path), "--min-prefix-ratio", repr(mean + 1e-6)]) == 1
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("FAIL"))
    shown, minimum = line.split("mean prefix ratio ")[1].split(" is below the minimum ")
    assert shown != minimum and float(shown) < float(minimum)
    assert len(shown.split(".")[1]) >= 4


def test_cli_output_is_not_wrapped_when_piped(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Piped (non-TTY) output keeps long paths and break details on one greppable line."""
    folder = tmp_path / ("a-very-long-directory-name-" * 6)
    folder.mkdir()
    path = folder / "tool-reorder.jsonl"
    path.write_bytes((CAUSES / "tool-reorder.jsonl").read_bytes())
    assert main(["lint", str(path), "--exit-zero"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(str(path) in line for line in lines)
    assert any("tool-reorder" in line and "/tools/0" in line and "alpha -> beta" in line
               for line in lines)


def test_cli_json_errors_are_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --json a bad capture prints {"error": {...}} on stdout and exits 2."""
    assert main(["lint", str(tmp_path / "missing.jsonl"), "--json"]) == 2
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["code"] == "capture-unreadable" and "missing.jsonl" in error["message"]
    assert captured.err == ""


def test_cli_max_breaks(capsys: pytest.CaptureFixture[str]) -> None:
    """--max-breaks N fails the gate when there are more than N breaks, whatever the ratio."""
    path = str(CAUSES / "model-change.jsonl")
    assert main(["lint", path, "--max-breaks", "1"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["lint", path, "--max-breaks", "0", "--min-prefix-ratio", "0"]) == 1
    assert "FAIL 1 break(s) exceed the maximum of 0" in capsys.readouterr().out
    assert main(["lint", path, "--max-breaks", "0", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert (summary["max_breaks"], summary["passed"]) == (0, False)
    assert main(["lint", path, "--max-breaks", "-1"]) == 2
    assert "must be 0 or more" in capsys.readouterr().err


@pytest.mark.parametrize(("first", "second", "flagged"), [
    ("30m", "12h", True), ("12h", "30m", False), ("24h", "12h", False), ("5m", "24h", True),
    ("1h", "30m", False)])
def test_ttl_order_reads_every_label_of_the_policy_table(first: str, second: str,
                                                          flagged: bool) -> None:
    """Lint reads the 30m/12h/24h labels with the same table as the provider policies: a longer
    TTL after a shorter one is flagged, the other order is not."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "system": [_marked("S" * 9000, first)],
            "messages": [{"role": "user", "content": [_marked("hi", second)]}]}
    found = lint_requests([body]).finding("breakpoint-ttl-order")
    assert (found is not None) == flagged
    if flagged:
        assert found is not None and f"a {second} breakpoint" in found.message


def test_every_policy_ttl_has_a_label() -> None:
    """Each TTL a shipped policy accepts has a label in the one table lint and attribution
    read, so no accepted label is ignored."""
    from stableprompt._policy import TTL_LABELS_S, default_policies

    seconds = set(TTL_LABELS_S.values())
    assert {ttl for policy in default_policies() for ttl in policy.ttls_s} <= seconds
    assert {"30m", "12h", "24h"} <= set(TTL_LABELS_S)


def test_a_request_without_model_is_a_problem_and_the_rest_is_linted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One request without ``model`` no longer aborts the run (exit 2, empty ``--json``): it is
    reported as a per-request problem with its line, and the other requests are linted
    (issue 9 #15)."""
    records = _lines(FIXTURES / "clean.jsonl")
    body = records[1].get("request", records[1])
    body.pop("model")
    capture = tmp_path / "nomodel.jsonl"
    capture.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["lint", "--json", str(capture)]) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    assert [(p["line"], p["code"]) for p in out["problems"]] == [(2, "capture-shape")]
    assert "model" in out["problems"][0]["message"]
    assert out["summary"]["requests"] == len(records) - 1
    report = lint_requests([r.get("request", r) for r in records])
    assert [p.index for p in report.problems] == [1]


def _lint_into_a_closed_pipe(*flags: str) -> tuple[int, bytes]:
    """Run ``stableprompt lint --all *flags CAUSES`` into a real pipe whose reader reads 10
    bytes and closes it; the pipe is shrunk to 4 KiB so the ~14 KB report cannot fit in it
    first. Returns the exit status and stderr."""
    import fcntl
    import os
    import subprocess
    import sys

    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, 1031, 4096)  # F_SETPIPE_SZ (Linux)
    argv = [sys.executable, "-m", "stableprompt", "lint", "--all", *flags, str(CAUSES)]
    proc = subprocess.Popen(argv, stdout=write_fd, stderr=subprocess.PIPE)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as reader:
        assert len(reader.read(10)) == 10
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stderr.close()
    return proc.wait(timeout=60), err


@pytest.mark.parametrize("json_mode", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(("gate", "status"), [((), 1), (("--exit-zero",), 0),
                                              (("--max-breaks", "1000"), 0)],
                         ids=["default-gate-fails", "exit-zero", "gate-passes"])
def test_a_closed_pipe_is_no_error_and_the_gate_decides(json_mode: bool, gate: tuple[str, ...],
                                                        status: int) -> None:
    """``stableprompt lint ... | head -c 10``: the reader closing the pipe is not an error
    (nothing on stderr, no traceback) and never the reason for exit 1; the exit status is the
    gate's, in text and JSON modes alike (issue 14 review)."""
    code, err = _lint_into_a_closed_pipe(*gate, *(["--json"] if json_mode else []))
    assert (code, err) == (status, b"")


def test_a_closed_pipe_keeps_the_status_the_command_declared() -> None:
    """A pipe that closes mid-write exits with the status the command declared before
    writing (a capture error's 2); the status it returned wins; none declared is 0."""
    from stableprompt._cli import _closed_pipe_status

    assert _closed_pipe_status(None, None) == 0
    assert _closed_pipe_status(argparse.Namespace(exit_status=2), None) == 2
    assert _closed_pipe_status(argparse.Namespace(exit_status=2), 1) == 1


def test_gzip_captures_are_read_by_the_name_before_gz(tmp_path: Path) -> None:
    """A ``.jsonl.gz`` capture (and one inside a directory) lints as its ``.jsonl`` does; a
    damaged one is a typed capture-unreadable error, not a traceback."""
    import gzip

    from stableprompt import CaptureError, lint_capture

    plain = FIXTURES / "clean.jsonl"
    packed = tmp_path / "clean.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    expected = json.loads(json.dumps(lint_capture(plain).as_dict()))
    got = json.loads(json.dumps(lint_capture(packed).as_dict()).replace("clean.jsonl.gz",
                                                                           "clean.jsonl"))
    assert got.pop("capture") == str(tmp_path / "clean.jsonl")
    assert got == {k: v for k, v in expected.items() if k != "capture"}
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "run.jsonl.gz").write_bytes(packed.read_bytes())
    in_folder = lint_capture(folder).as_dict()
    assert [(p["lcp_bytes"], p["prefix_ratio"]) for p in in_folder["pairs"]] == [
        (p["lcp_bytes"], p["prefix_ratio"]) for p in expected["pairs"]]
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(packed.read_bytes()[:-20])
    with pytest.raises(CaptureError) as caught:
        lint_capture(broken)
    assert caught.value.code == "capture-unreadable"


def test_the_text_verdict_agrees_with_the_exit_status(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """An error finding fails the default gate (exit 1) and the text says FAIL naming it, not
    PASS (it printed ``PASS breaks 0 vs maximum 0`` with exit 1)."""
    from stableprompt._cli import main

    blocks = [{"type": "text", "text": f"part {i} " * 300, "cache_control": {"type": "ephemeral"}}
              for i in range(7)]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "system": blocks,
            "messages": [{"role": "user", "content": "hi"}]}
    capture = tmp_path / "many.jsonl"
    capture.write_text(json.dumps(body) + "\n")
    assert main(["lint", str(capture)]) == 1
    out = capsys.readouterr().out
    assert "too-many-breakpoints" in out and "FAIL" in out and "PASS" not in out
