"""Tests for every divergence of a pair (``divergences``, ``_diff._history``) on a real Claude
Code turn (``tests/fixtures/harness/claude_code_turn.json``), in ``diff()``, lint, the
ledger's ``verdict_detail`` and ``report --call``; each case checked against the
independent plain JSON diff of ``ground_truth``."""

from __future__ import annotations

import copy
import io
import json
import random
from pathlib import Path
from typing import Any

import httpx2

from ground_truth import first_difference
from stableprompt import diff, divergences, lint_requests, segment_request, summarize
from stableprompt._diff import (
    CAUSE_FIXES,
    CAUSES,
    DIVERGENCE_LIMIT,
    bounded_divergences,
    history_ops,
    value_snippet,
)
from stableprompt._recording._recorder import Recorder
from stableprompt._recording._transport import RecordingTransport
from stableprompt._report._text import print_call_divergences, print_explanations
from test_transport import FakeProvider

TURN = json.loads((Path(__file__).parent / "fixtures" / "harness" /
                   "claude_code_turn.json").read_text())
FILES_SENT = "plan.md\nnotes.txt\nREADME.md"
FILES_AGAIN = "README.md\nnotes.txt\nplan.md"  # the same set, iterated in another order
REMINDER = {"role": "user", "content": [{"type": "text", "text": "<system-reminder>\nThe "
                                         "user opened notes.txt.\n</system-reminder>"}]}


def pair() -> tuple[dict[str, Any], dict[str, Any]]:
    """The real turn, both calls' tool result of messages[3] holding a file list."""
    before, after = copy.deepcopy(TURN["before"]), copy.deepcopy(TURN["after"])
    for body in (before, after):
        body["messages"][3]["content"][0]["content"] = FILES_SENT
    return before, after


def harness_turn() -> tuple[dict[str, Any], dict[str, Any]]:
    """The next call as the issue's harness sends it: a reminder inserted before the
    already-sent assistant turn messages[2], that turn's tool_use input re-serialized (keys
    in another order) and the file list re-ordered by set iteration."""
    before, after = pair()
    call = after["messages"][2]["content"][2]
    call["input"] = dict(reversed(list(call["input"].items())))
    after["messages"][3]["content"][0]["content"] = FILES_AGAIN
    after["messages"].insert(2, REMINDER)
    return before, after


def seg(body: dict[str, Any]) -> Any:
    return segment_request("anthropic", body)


def test_the_real_turn_is_append_only() -> None:
    """The captured pair as sent: the first call is a prefix of the second, no divergence."""
    before, after = pair()
    assert diff(seg(before), seg(after)) is None
    assert divergences(seg(before), seg(after)) == ()


def test_an_insertion_a_reserialization_and_a_reordered_list_are_all_named() -> None:
    """All three changes, in cache order: the insertion first (history-insert at the
    already-sent message it was put before, its fix not "re-send the exact bytes"), then the
    re-serialized tool_use input (key-order, at its new index too), then the file list
    (history-rewrite); each costs less than the one before; the first is diff()'s and is
    where the independent JSON diff puts the first difference."""
    before, after = harness_turn()
    a, b = seg(before), seg(after)
    found = divergences(a, b)
    assert [(d.cause, d.path, d.path_b) for d in found] == [
        ("history-insert", "/messages/2", ""),
        ("key-order", "/messages/2/content/2/input", "/messages/3/content/2/input"),
        ("history-rewrite", "/messages/3/content/0/content", "/messages/4/content/0/content"),
    ]
    assert found[0] == diff(a, b)
    assert found[0].detail == "an item (user) inserted at messages[2], before already-sent " \
        "messages[2]"
    assert "re-send" not in CAUSE_FIXES["history-insert"]
    costs = [d.lost_bytes or 0 for d in found]
    assert costs == sorted(costs, reverse=True) and costs[-1] > 0
    shown = value_snippet(a, b, found[2])
    assert (shown.snippet_a, shown.snippet_b) == (FILES_SENT, FILES_AGAIN)
    truth = first_difference("anthropic", before, after)
    assert truth is not None and truth.kind == "history-insert"
    assert truth.same_place(found[0].path) and truth.admits(found[0].cause)


def test_a_resume_that_edits_a_tool_text_and_a_system_text_shows_both() -> None:
    """A resume that changes a tool description (drops a phrase) and a system text: two
    divergences, tool first (cache order), each a content-edit at its own pointer."""
    before, after = pair()
    tool = after["tools"][0]
    tool["description"] = tool["description"].replace("complex, multi-step ", "")
    after["system"][2]["text"] = after["system"][2]["text"].replace("own judgment", "judgment")
    found = divergences(seg(before), seg(after))
    assert [(d.cause, d.path) for d in found] == [
        ("content-edit", "/tools/0/description"), ("content-edit", "/system/2/text")]
    truth = first_difference("anthropic", before, after)
    assert truth is not None and truth.same_place(found[0].path)


def test_moves_and_deletions_are_named() -> None:
    """An already-sent item re-sent later is a history-move; one left out a
    history-delete, both at the predecessor's first out-of-place item."""
    before, after = pair()
    moved = copy.deepcopy(after)
    moved["messages"][2], moved["messages"][4] = moved["messages"][4], moved["messages"][2]
    kinds = [(d.cause, d.path) for d in divergences(seg(before), seg(moved))]
    assert kinds[0] == ("history-move", "/messages/2")
    dropped = copy.deepcopy(after)
    del dropped["messages"][1]
    first = divergences(seg(before), seg(dropped))[0]
    assert (first.cause, first.path) == ("history-delete", "/messages/1")
    truth = first_difference("anthropic", before, dropped)
    assert truth is not None and truth.kind == "history-delete"


def test_history_ops_pair_an_edit_beside_an_insertion() -> None:
    """An item inserted before an edited one: the alignment pairs the edited item with its
    new place (change) and names the other inserted, not the other way round."""
    before, after = harness_turn()
    a, b = seg(before), seg(after)
    ops = history_ops(a.segments, b.segments, 0)
    assert [op.kind for op in ops] == ["insert", "change", "change"]
    assert b.segments[ops[0].b_index].path == "/messages/2/content/0"


def test_lint_lists_every_divergence_of_a_break() -> None:
    """lint: the break's first divergence, then the later ones (JSON and text)."""
    before, after = harness_turn()
    report = lint_requests([before, after])
    p = report.pair(1)
    assert p.is_break and p.divergence is not None
    assert p.divergence.cause == "history-insert" and p.divergences_total == 3
    assert [d.cause for d, _ in p.later] == ["key-order", "history-rewrite"]
    listed = p.as_dict()["later_divergences"]
    assert [d["path_b"] for d in listed] == ["/messages/3/content/2/input",
                                            "/messages/4/content/0/content"]
    assert "then 3. at /messages/3/content/0/content (now /messages/4/content/0/content)" \
        in p.describe()


def test_the_ledger_row_lists_every_divergence_and_report_shows_them() -> None:
    """Recorded through a RecordingTransport: the second call is a client_mutation whose
    verdict_detail keeps the first divergence's fields and adds all three, the first
    costing the row's lost_tokens and later ones less; report --calls says "+2 more" and
    report --call lists them."""
    recorder = Recorder(tokenizer="bytes/4")
    client = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(FakeProvider()),
                                                        recorder=recorder))
    before, after = harness_turn()
    for body in (before, after):
        # a short session id: the --calls table's width with Claude Code's 150-character
        # metadata.user_id is issue 26 item 3's
        sent = {k: v for k, v in body.items() if k != "stream"} | {
            "metadata": {"user_id": "s1"}}
        client.post(f"http://provider.test{TURN['path']}", content=json.dumps(sent),
                    headers={"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"})
    first, second = recorder.records
    assert first.verdict == "cold" and second.verdict == "client_mutation"
    detail: dict[str, Any] = dict(second.verdict_detail)
    assert (detail["cause"], detail["path"]) == ("history-insert", "/messages/2")
    listed = detail["divergences"]
    assert [d["cause"] for d in listed] == ["history-insert", "key-order", "history-rewrite"]
    assert detail["divergences_total"] == 3 and "divergences_truncated" not in detail
    assert listed[0]["lost_tokens"] == detail["lost_tokens"] > listed[1]["lost_tokens"] \
        > listed[2]["lost_tokens"] > 0
    assert listed[2]["path_b"] == "/messages/4/content/0/content"
    report = summarize(recorder.records)
    row = next(r for r in report.calls if r.id == second.record_id)
    assert row.more_divergences == 2 and row.to_json()["divergences_total"] == 3
    out = io.StringIO()
    assert print_call_divergences(report, second.record_id[:12], file=out)
    text = out.getvalue()
    assert "3 divergence(s)" in text and "3. history-rewrite" in text
    assert "now /messages/4/content/0/content" in text
    assert not print_call_divergences(report, "no-such-call", file=io.StringIO())
    table = io.StringIO()
    print_explanations(report, calls=True, file=table)
    assert "/messages/2 +2" in table.getvalue()  # the cause cell ends "+2 more" (wrapped)


def test_the_list_is_bounded() -> None:
    """A resume that rewrites every tool, system block and already-sent item (one
    divergence each) keeps DIVERGENCE_LIMIT of them and says how many there were."""
    before, after = pair()
    for tool in after["tools"]:
        tool["description"] += " "
    for block in after["system"]:
        block["text"] += " "
    for message in after["messages"][:6]:
        content = message["content"]
        if isinstance(content, str):
            message["content"] = content + " "
        else:
            for block in content:
                for key in ("text", "thinking"):
                    if key in block:
                        block[key] += " "
                if block.get("type") == "tool_result":
                    block["content"] = str(block["content"]) + " "
                if block.get("type") == "tool_use":
                    block["input"] = {**block["input"], "again": True}
    kept, total = bounded_divergences(seg(before), seg(after), DIVERGENCE_LIMIT)
    assert len(kept) == DIVERGENCE_LIMIT < total == 12
    assert len(divergences(seg(before), seg(after))) == total


def _mutated(rng: random.Random, changes: int) -> dict[str, Any]:
    """The real turn's later call with ``changes`` random changes a harness makes: an item
    inserted before an already-sent one, one left out, two swapped, a text edited, a
    tool_use input re-serialized, a tool description or system text edited."""
    _, after = pair()
    messages = after["messages"]
    for _ in range(changes):
        kind = rng.choice(["insert", "delete", "swap", "edit", "keys", "tool", "system"])
        sent = len(TURN["before"]["messages"])  # items already sent
        if kind == "insert":
            messages.insert(rng.randrange(1, sent), copy.deepcopy(REMINDER))
        elif kind == "delete" and len(messages) > 2:
            del messages[rng.randrange(1, min(sent, len(messages)))]
        elif kind == "swap":
            i = rng.randrange(1, min(sent, len(messages)) - 1)
            messages[i], messages[i + 1] = messages[i + 1], messages[i]
        elif kind == "edit":
            message = messages[rng.randrange(0, min(sent, len(messages)))]
            if isinstance(message["content"], str):
                message["content"] += " (edited)"
            else:
                block = message["content"][-1]
                key = next((k for k in ("text", "thinking", "content") if k in block), None)
                if key is not None and isinstance(block[key], str):
                    block[key] += " (edited)"
        elif kind == "keys":
            for message in messages:
                for block in message["content"] if isinstance(message["content"], list) else []:
                    if block.get("type") == "tool_use" and len(block["input"]) > 1:
                        block["input"] = dict(reversed(list(block["input"].items())))
                        break
        elif kind == "tool":
            after["tools"][rng.randrange(len(after["tools"]))]["description"] += " Also."
        else:
            after["system"][-1]["text"] += " Also."
    return after


_MOVES = ("history-insert", "history-delete", "history-move")


def test_random_harness_changes_agree_with_the_ground_truth() -> None:
    """Seeded random harness changes on the real turn: the first of ``divergences`` is
    ``diff``'s, each cause a known slug, costs never grow, and the first is always where the
    independent JSON diff puts the first difference. With one change per call its cause is
    always of the ground truth's class (every kind is drawn: insert, delete, move, edit,
    re-serialization, tool, system). With two or three, the one ambiguity allowed is among
    history changes at the same item: an item both displaced and edited, which the plain
    diff (exact items only) calls a change where the alignment names the insertion or
    deletion, or a deletion next to a swap, which one calls a deletion and the other a move;
    it stays rare (measured: 11 of 1,953 cases over five other seeds)."""
    before, _ = pair()
    a = seg(before)
    rng = random.Random(26)
    single: dict[str, int] = {}
    ambiguous = compared = 0
    for case in range(600):
        after = _mutated(rng, 1 if case < 300 else rng.randint(2, 3))
        b = seg(after)
        found = divergences(a, b)
        truth = first_difference("anthropic", before, after)
        if not found:
            assert truth is None
            continue
        compared += 1
        assert found[0] == diff(a, b)
        assert all(d.cause in CAUSES for d in found)
        costs = [d.lost_bytes or 0 for d in found]
        assert costs == sorted(costs, reverse=True)
        assert truth is not None and truth.same_place(found[0].path), (found[0], truth)
        if case < 300:
            assert truth.admits(found[0].cause), (found[0], truth)
            single[found[0].cause] = single.get(found[0].cause, 0) + 1
        elif not truth.admits(found[0].cause):
            assert truth.kind in ("history", *_MOVES), (found[0], truth)
            assert found[0].cause in (*_MOVES, "history-rewrite"), (found[0], truth)
            ambiguous += 1
    assert set(single) >= {*_MOVES, "history-rewrite", "content-edit", "key-order"}
    assert compared >= 500 and ambiguous <= 0.02 * compared
