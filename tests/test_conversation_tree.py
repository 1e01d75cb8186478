"""Conversations as a tree and session identity, on real harness traffic (issue 26, items 2-3).

The fixtures are the requests (body and the harness's identity headers, nothing else) that
the pinned Claude Code (2.1.332) and Codex CLI (0.171.0) sent through a header-logging
forwarder to the emulator, driven like ``tests/test_harness_cli.py``:

- ``claude-code-2.1.332.jsonl.gz``: ``claude -p`` running Bash and a subagent (the Agent tool,
  whose two requests carry ``x-claude-code-agent-id``), then ``claude -p --continue``, then a
  fresh ``claude -p`` session in another directory (another session id);
- ``codex-0.171.0.jsonl.gz``: ``codex exec`` running a command and a subagent
  (``spawn_agent``: its requests carry ``x-openai-subagent`` and their own ``thread-id``),
  ``codex exec resume --last``, then a fresh ``codex exec`` session.

Each test replays them, as sent, through ``RecordingTransport`` to a fresh emulator and reads
the ledger rows: what the emulator reported is the ground truth of the cache reads.
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import io
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from stableprompt import Ledger, Recorder, RecordingTransport, UsageRecord, what_if
from stableprompt._recording._identity import Agent, agent_from_headers, session_from_headers
from stableprompt._recording._predecessor import session_from_request
from stableprompt._wire.anthropic import session_hint
from stableprompt.emulator import Emulator

FIXTURES = Path(__file__).parent / "fixtures" / "harness"
CLAUDE = FIXTURES / "claude-code-2.1.332.jsonl.gz"
CODEX = FIXTURES / "codex-0.171.0.jsonl.gz"


def _entries(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def replay(entries: list[dict[str, Any]], ledger: Path) -> list[UsageRecord]:
    """Send each entry's body with its headers through a recording transport to a fresh
    emulator; the ledger's rows, in order."""
    with Emulator() as emu, Ledger(ledger) as led:
        recorder = Recorder(ledger=led)
        with httpx.Client(transport=RecordingTransport(recorder=recorder)) as http:
            for entry in entries:
                base = emu.base_url.rstrip("/")
                response = http.post(base + entry["path"], json=entry["body"],
                                     headers={**entry["headers"], "x-api-key": "sk-test",
                                              "authorization": "Bearer sk-test"})
                assert response.status_code == 200, response.text[:500]
                response.read()
        recorder.close()
        return led.records()


def agreement(records: list[UsageRecord]) -> float:
    """The report's agreement (``_accounting._calls.agreement_of``): predicted == reported
    reads within the granularity, or within the allowance of an estimated span."""
    from stableprompt._accounting._summary import summarize

    value = summarize(records, price=False).overall.agreement
    assert value is not None
    return value


def _d(record: UsageRecord) -> Any:
    """A row's ``verdict_detail`` (JSON values, read as the test knows them)."""
    return record.verdict_detail


# -- session identity (item 3) ---------------------------------------------------------------


def test_claude_code_session_id_from_metadata_user_id_and_header() -> None:
    entries = _entries(CLAUDE)
    first = entries[0]
    packed = first["body"]["metadata"]["user_id"]
    assert packed.startswith("{") and len(packed) > 100  # the ~150-character JSON
    session = json.loads(packed)["session_id"]
    assert session_hint(first["body"]) == session
    assert session_from_headers(first["headers"]) == session
    assert session_from_request(first["body"]) == session
    assert session_from_request(first["body"], first["headers"]) == session
    # the legacy form (Claude Code before 2.1) names the session at its end
    legacy = {"metadata": {"user_id": f"user_{'ab' * 32}_account_x_session_{session}"}}
    assert session_hint(legacy) == session
    assert session_hint({"metadata": {"user_id": "alice"}}) == "alice"
    assert session_hint({"metadata": {"user_id": "{not json"}}) == "{not json"


def test_agents_named_by_the_harness_headers() -> None:
    claude = _entries(CLAUDE)
    agents = [agent_from_headers(e["headers"]) for e in claude]
    named = [a for a in agents if a is not None]
    assert len(named) == 2 and {a.id for a in named} == {named[0].id}
    assert named[0].source == "x-claude-code-agent-id"
    codex = _entries(CODEX)
    agents = [agent_from_headers(e["headers"]) for e in codex]
    named = [a for a in agents if a is not None]
    assert len(named) == 2 and named[0].source == "thread-id"
    assert named[0].parent == codex[0]["headers"]["thread-id"]  # spawned by the main thread
    assert named[0].id == codex[agents.index(named[0])]["headers"]["thread-id"]
    assert all(session_from_headers(e["headers"]) == e["headers"]["session-id"] for e in codex)


# -- conversations as a tree (item 2) --------------------------------------------------------


def test_claude_code_subagent_is_a_branch_not_a_param_change(tmp_path: Path) -> None:
    records = replay(_entries(CLAUDE), tmp_path / "ledger.db")
    sessions = [r.session_id for r in records]
    assert all(s is not None and len(s) == 36 for s in sessions)  # the uuid, not the JSON
    assert len(set(sessions)) == 2
    sub = [r for r in records if "agent" in r.verdict_detail]
    assert len(sub) == 2
    assert _d(sub[0])["agent"]["kind"] == "subagent"
    assert sub[0].verdict == "cold"  # its own conversation, not a mutation of the parent's
    assert _d(sub[0])["predecessor_rule"] == "shared-prefix"
    assert "differs at /tools/3" in _d(sub[0])["shared_prefix_note"]
    assert _d(sub[1])["predecessor_rule"] == "same-conversation"
    assert sub[1].predecessor_id == sub[0].record_id
    assert not any(r.verdict_detail.get("cause") in ("param-change", "tool-removed",
                                                     "tool-added") for r in records)
    # the main agent's calls after the subagent continue their own lineage
    after = records[records.index(sub[1]) + 1]
    assert after.verdict == "hit" and after.predecessor_id == records[2].record_id
    # the what-if tells the subagent apart by the same rule
    assert set(what_if(records).as_used.by_kind) >= {"main", "subagent"}


def test_claude_code_new_session_says_what_it_could_have_read(tmp_path: Path) -> None:
    records = replay(_entries(CLAUDE), tmp_path / "ledger.db")
    fresh = next(r for r in records if r.session_id != records[0].session_id)
    assert fresh.verdict == "cold"
    shared = _d(fresh)["shared_prefix"]
    assert shared["session"] == records[0].session_id
    assert shared["differs_at"] == "/system/0/text"  # the per-session billing header block
    assert shared["tokens"] > 5000 and shared["readable_tokens"] == 0
    assert _d(fresh)["shared_prefix_note"].startswith(
        f"could have read {shared['tokens']:,} tokens that session {records[0].session_id}")


def test_partial_head_is_predicted_to_the_last_shared_breakpoint(tmp_path: Path) -> None:
    """The fresh session's first request, with the first session's opening system block (a
    harness whose first block is static): it shares tools and ``system[0..1]`` (a breakpoint
    on ``system[1]``), not ``system[2]`` (per-directory). The emulator reads the entry at
    ``system[1]``; the prediction reads up to it, and the row says so."""
    entries = _entries(CLAUDE)
    first_call = entries[0]["body"]
    fresh = next(e for e in entries if e["headers"]["x-claude-code-session-id"]
             != entries[0]["headers"]["x-claude-code-session-id"])
    edited = copy.deepcopy(fresh)
    edited["body"]["system"][0] = first_call["system"][0]
    edited["body"]["system"][2]["text"] += "\n(per-directory environment: other)"
    records = replay([entries[0], edited], tmp_path / "ledger.db")
    row = records[1]
    assert row.cache_read_tokens and row.cache_read_tokens > 1024
    assert row.verdict == "hit", row.verdict_detail
    assert _d(row)["predecessor_rule"] == "shared-prefix"
    shared = _d(row)["shared_prefix"]
    assert shared["differs_at"].startswith("/system/2")
    tolerance = _d(row)["tolerance_tokens"]
    assert abs((row.predicted_cache_read_tokens or 0) - row.cache_read_tokens) <= tolerance
    assert _d(row)["shared_prefix_note"].startswith(
        f"shares {shared['tokens']:,} tokens with session {records[0].session_id}")


def test_codex_subagent_is_a_branch(tmp_path: Path) -> None:
    records = replay(_entries(CODEX), tmp_path / "ledger.db")
    sub = [r for r in records if "agent" in r.verdict_detail]
    assert len(sub) == 2 and sub[0].verdict == "cold"
    assert _d(sub[0])["agent"]["source"] == "header thread-id"
    assert all(r.verdict != "client_mutation" for r in records)
    assert agreement(records) == 1.0


def test_agreement_on_the_real_harness_captures(tmp_path: Path) -> None:
    """Measured, not tuned: Claude Code's only inexact predictions are first reads of an
    entry in the middle of an earlier request (its system-block breakpoint), whose size we
    estimate (the provider reports one write for all of a request's breakpoints): each is
    marked as resting on an estimated span, and agrees within its allowance; every later
    read of an entry is exact."""
    claude = replay(_entries(CLAUDE), tmp_path / "claude.db")
    off = [r for r in claude if r.predicted_cache_read_tokens != r.cache_read_tokens]
    assert off and all(_d(r).get("estimated_span_tokens") for r in off)
    assert all(abs((r.predicted_cache_read_tokens or 0) - (r.cache_read_tokens or 0))
               <= 0.05 * _d(r)["estimated_span_tokens"] for r in off)
    assert agreement(claude) == 1.0
    codex = replay(_entries(CODEX), tmp_path / "codex.db")
    assert agreement(codex) == 1.0


@pytest.mark.parametrize("width", [80, 100, 160])
def test_report_calls_keeps_claude_code_session_ids_readable(tmp_path: Path, width: int,
                                                             monkeypatch: Any) -> None:
    """``report --calls`` on Claude Code's rows at 80, 100 and 160 columns: no line wider,
    every row's session id short (never the ``metadata.user_id`` JSON) and whole, every cell
    whole (cells wrap, never cut: each row's verdict word, token counts, read share, lost
    tokens and time are all there; at 80 columns, where the compact columns do not fit, the
    time goes under the session id; it used to be cut to ``15:06:5`` and 2,363 lost tokens
    to ``2,36``)."""
    import stableprompt._report._command as report_command
    import stableprompt._report._text as text_report
    from stableprompt._cli import main
    from stableprompt._report._ids import short_ids
    from stableprompt._subcommand import rich_console

    records = replay(_entries(CLAUDE), tmp_path / "ledger.db")
    def console(file: Any) -> Any:
        return rich_console(file=file, highlight=False, width=width)

    monkeypatch.setattr(text_report, "make_console", console)
    monkeypatch.setattr(report_command, "make_console", console)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", str(tmp_path / "ledger.db"), "--calls"]) in (0, None)
    text = out.getvalue()
    calls = text[text.index(": calls"):]
    lines = calls.splitlines()
    body = lines[next(i for i, line in enumerate(lines) if "╇" in line) + 1:]
    body = body[:next(i for i, line in enumerate(body) if "│" not in line)]
    assert [line for line in text.splitlines() if len(line) > width] == []
    assert "device_id" not in text
    shown = short_ids(r.session_id for r in records)
    assert len(set(shown.values())) == 2 and all(len(v) <= 10 for v in shown.values())

    def cells(line: str) -> list[str]:
        parts = line.split("│")
        return [c.strip() for c in (parts[1:-1] if line.startswith("│") else parts)]

    rule = next(i for i, line in enumerate(lines) if "╇" in line)
    # a subagent's calls are named: an agent column (narrow: "sub" under the session id)
    agent = any(cells(line.replace("┃", "│"))[1:2] == ["agent"] for line in lines[1:rule])
    assert agent == (width >= 130)
    def clock(cell: str) -> bool:
        return bool(re.fullmatch(r"\d\d:\d\d:\d\d", cell))

    starts = [i for i, line in enumerate(body)
              if cells(line)[0] not in ("", "sub") and not clock(cells(line)[0])]
    assert len(starts) == len(records)  # one row each, its session id on its first line
    for n, (i, record) in enumerate(zip(starts, records, strict=True)):
        end = starts[n + 1] if n + 1 < len(starts) else len(body)
        columns = list(zip(*(cells(line) for line in body[i:end]), strict=True))
        joined = [" ".join(part for part in column if part) for column in columns]
        sub = bool(record.verdict_detail.get("agent"))
        if agent:
            assert joined.pop(1).split()[0] == ("sub" if sub else "main")
        time = record.ts_utc.strftime("%H:%M:%S")
        if width < 100:  # the time under the session id
            assert joined[0].split()[-1] == time
            joined[0] = joined[0].rsplit(" ", 1)[0]
            joined.insert(2, time)
        elif width < 130:
            assert joined[2] == time
        assert joined[0] == shown[record.session_id or ""] + (" sub" if sub and not agent
                                                              else "")
        assert joined[4].split()[0] == record.verdict.replace("_", "-")  # whole, not cut
        read, total = record.cache_read_tokens or 0, record.input_tokens_total or 1
        assert joined[5].replace(" ", "") == f"{read / total:.1%}"
        estimated = "~" if record.verdict_detail.get("estimated_span_tokens") else ""
        assert joined[6].replace(" ", "") == (f"{record.cache_read_tokens:,}/{estimated}"
                                              f"{record.predicted_cache_read_tokens:,}/"
                                              f"{record.input_tokens_total:,}")
        lost = record.verdict_detail.get("lost_tokens")
        if lost and record.verdict != "hit":
            assert joined[7].replace(" ", "") == f"{lost:,}"
    assert any(r.verdict_detail.get("estimated_span_tokens") for r in records)
    assert "~ before a predicted read: it rests partly on our token estimate" in " ".join(
        text.split())


@pytest.mark.parametrize("fixture", [CLAUDE, CODEX])
def test_subagent_without_headers_is_a_branch_by_the_shared_rule(tmp_path: Path,
                                                                  fixture: Path) -> None:
    """The same traffic with no identity header (a gateway that drops them, another
    harness): the subagent's first call replaced tools and system and opened with another
    first message, so the branch rule (``_economics._request_kind.is_branch``) names it, and
    the report groups its later call with it."""
    from stableprompt._accounting._summary import summarize

    entries = _entries(fixture)
    for entry in entries:
        entry["headers"] = {}
    records = replay(entries, tmp_path / "ledger.db")
    branched = [r for r in records if "agent" in r.verdict_detail]
    assert len(branched) == 2
    first, second = branched
    assert first.verdict == "cold" and _d(first)["agent"]["kind"] == "subagent"
    assert "changed: tool, system" in _d(first)["agent"]["source"]
    assert _d(first)["agent"]["id"] == _d(second)["agent"]["id"]  # one agent, its head's
    assert _d(second)["predecessor_rule"] == "same-conversation"
    assert second.predecessor_id == first.record_id
    assert not any(r.verdict_detail.get("predecessor_rule") == "session-head-change"
                   for r in records)
    groups = summarize(records, price=False).group_by("agent")
    label = f"subagent {_d(first)['agent']['id']}"
    assert groups[label].calls == 2 and groups["main"].calls == len(records) - 2
    assert set(what_if(records).as_used.by_kind) >= {"main", "subagent"}


def test_report_groups_by_agent_and_a_subagent_is_no_cliff(tmp_path: Path) -> None:
    from stableprompt._accounting._summary import summarize

    records = replay(_entries(CLAUDE), tmp_path / "ledger.db")
    report = summarize(records, price=False)
    groups = report.group_by("agent")
    agent = records[[r.verdict_detail.get("agent") is not None for r in records].index(True)]
    label = f"subagent {_d(agent)['agent']['id']}"
    assert list(groups) == ["main", label] and groups[label].calls == 2
    assert all(c.call.agent == "main" for c in report.cliffs())
    sub = [row for row in report.calls if row.agent == label]
    assert sub[0].ceiling_tokens == 0  # not its parent's previous request


@pytest.mark.parametrize("width", [80, 100, 160])
def test_report_by_agent_keeps_every_number_whole(tmp_path: Path, width: int,
                                                  monkeypatch: Any) -> None:
    """``report --by agent`` and ``--by session`` on Claude Code's rows: no line wider than
    the terminal, each group named short (``sub <id>`` as in ``--calls``: three subagents
    with long ids used to be three identical ``subagent agent-…``) with its input tokens,
    cache reads and cost whole and its verdicts shown (at 80 columns the cost was cut to
    ``$0.…`` and the verdicts column squeezed to nothing; at 100 the cost was cut)."""
    import stableprompt._report._command as report_command
    import stableprompt._report._text as text_report
    from stableprompt._accounting._summary import summarize
    from stableprompt._cli import main
    from stableprompt._report._text import format_usd
    from stableprompt._subcommand import rich_console

    records = replay(_entries(CLAUDE), tmp_path / "ledger.db")
    def console(file: Any) -> Any:
        return rich_console(file=file, highlight=False, width=width)

    monkeypatch.setattr(text_report, "make_console", console)
    monkeypatch.setattr(report_command, "make_console", console)
    report = summarize(records)
    for by in ("agent", "session"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["report", str(tmp_path / "ledger.db"), "--by", by]) == 0
        text = out.getvalue()
        part = text[text.index(f"by {by}"):text.index("turn boundary")]
        assert [line for line in part.splitlines() if len(line) > width] == []
        flat = " ".join(part.split())
        for key, t in report.group_by(by).items():
            for number in (f"{t.input_tokens:,}", f"{t.cache_read_tokens:,}",
                           format_usd(t.cost_usd, complete=t.cost_complete)):
                assert f" {number} " in f"{flat} ", (by, key, number)
            assert f"cold {t.verdicts['cold']}" in flat
        if by == "agent":
            assert "subagent" not in part and " sub " in flat


def test_previous_response_id_chain_names_the_conversation(tmp_path: Path) -> None:
    """Responses requests chained by ``previous_response_id`` (no session id sent) belong to
    one conversation, named by the chain's first response: turns count on along it."""
    from stableprompt._recording._observer import Observation

    recorder = Recorder()
    rows = []
    previous = None
    for step in range(3):
        body: dict[str, Any] = {"model": "gpt-5.6", "instructions": "Be brief. " * 300,
                                "input": [{"role": "user", "content": f"question {step}"}]}
        if previous is not None:
            body["previous_response_id"] = previous
        pending = recorder.start("/v1/responses", {}, json.dumps(body).encode(),
                                 host="api.openai.com")
        assert pending is not None
        previous = f"resp_{step}"
        answer = {"id": previous, "object": "response", "status": "completed", "output": [],
                  "usage": {"input_tokens": 900, "output_tokens": 3,
                            "input_tokens_details": {"cached_tokens": 0}}}
        record = recorder.finish(pending, Observation(status_code=200,
                                                      body=json.dumps(answer).encode()))
        assert record is not None
        rows.append(record)
    assert [r.session_id for r in rows] == [None, "resp_0", "resp_0"]
    assert [r.turn for r in rows[1:]] == [1, 2]


def test_prefix_index_grows_with_what_is_new_only() -> None:
    """200 turns of one conversation add no entry-ending digest per turn beyond their own
    breakpoints (here none in the history): the index holds the head parts and the head
    breakpoint, and maps digests to lineages, never to requests."""
    from conftest import record_anthropic_call

    recorder = Recorder()
    for step in range(200):
        record_anthropic_call(recorder, step, read=0 if step == 0 else 2000,
                              write=2000 if step == 0 else 0)
    prefixes = recorder._memory.index._prefixes
    assert len(prefixes._heads) <= 4
    assert all(isinstance(v, str) for v in prefixes._heads.values())


def test_short_ids_cut_the_shared_prefix_and_stay_distinct() -> None:
    from stableprompt._report._ids import short_ids

    codex = ["01a25058-a6eb-70c1-b408-e01edf7ead6b", "01a25058-aba6-7460-ac21-60c18d0ef409"]
    shown = short_ids([*codex, None, codex[0]])
    assert shown == {codex[0]: "…6eb-70c1…", codex[1]: "…ba6-7460…"}
    claude = ["02acfdb3-0a87-429c-9578-f7f05c4c584e", "f081f658-e201-4f95-9aaf-f7e87612c2d7"]
    assert short_ids(claude) == {claude[0]: "02acfdb3…", claude[1]: "f081f658…"}
    # ids alike beyond the first 8 characters after their prefix get more of them
    alike = ["run-abcdefgh-1", "run-abcdefgh-2"]
    assert short_ids(alike) == {alike[0]: "…1", alike[1]: "…2"}
    near = ["sess-aaaaaaaaaa1", "sess-aaaaaaaaaa2", "sess-b"]
    got = short_ids(near)
    assert len(set(got.values())) == 3 and got["sess-b"] == "sess-b"
    assert short_ids(["short", "shirt"]) == {"short": "short", "shirt": "shirt"}
    assert short_ids([]) == {}


def test_agent_headers_main_and_subagent() -> None:
    assert agent_from_headers({"session-id": "s", "thread-id": "s"}) is None
    assert agent_from_headers({"session-id": "s", "thread-id": "t"}) == Agent("t", "thread-id")
    assert agent_from_headers({"x-claude-code-agent-id": "a2",
                               "x-claude-code-parent-agent-id": "a1"}) == Agent(
        "a2", "x-claude-code-agent-id", "a1")
    assert agent_from_headers({"x-openai-subagent": "collab_spawn"}) == Agent(
        "collab_spawn", "x-openai-subagent")
    assert agent_from_headers({"X-Claude-Code-Agent-Id": "a1"}) == Agent(
        "a1", "x-claude-code-agent-id")
    assert agent_from_headers(None) is None
    assert session_from_headers({"x-stableprompt-session": "mine",
                                 "x-claude-code-session-id": "cc"}) == "mine"


def test_main_head_change_after_an_unnamed_subagent_is_still_the_mains(tmp_path: Path) -> None:
    """No headers; after the subagent ran, the main agent's next request changes a tool's
    description: compared with the main agent's own previous call (a head change of its
    conversation, a mutation naming the tool), not with the subagent's."""
    entries = _entries(CLAUDE)
    for entry in entries:
        entry["headers"] = {}
    main_after = next(i for i, e in enumerate(entries) if i > 4
                      and len(e["body"]["tools"]) == len(entries[0]["body"]["tools"]))
    edited = copy.deepcopy(entries[main_after])
    edited["body"]["tools"][1]["description"] += " (1M context)"
    records = replay([*entries[:main_after], edited], tmp_path / "ledger.db")
    row = records[-1]
    assert _d(row)["predecessor_rule"] == "session-head-change"
    assert row.predecessor_id == records[2].record_id  # the main agent's last call
    assert row.verdict == "client_mutation" and _d(row)["segment"].startswith("tools[1]")
    assert "agent" not in row.verdict_detail
