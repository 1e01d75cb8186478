"""Tests for the demo against the real engine (``--provider llama-server``).

Offline: the naive Responses conversion, the scripted replies, the short call ids, the plan,
the timing sources and the CLI's argument errors. Marked ``real_engine``: every scenario on
all three endpoints of a real llama-server, through our clients and through the official
SDKs, predicted == reported call by call, each verdict checked against the engine's own
numbers; and Mistral-Nemo's template named for what it re-renders.

The real runs use two short BFCL sessions (``multi_turn_base_115``, TradingBot, and
``multi_turn_base_12``, GorillaFileSystem: 3 user turns each, 13 model calls per row): the
tiny model's prefill is attention-bound, so prompt length, not call count, is what costs
test time, and these two have the smallest tool sets among sessions with 3 user turns (every
scenario needs 3 turns to show its loss: a tool re-order at turns 1 and 2, a compaction at
turn 2).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import sdk_sender
from stableprompt import InputError, Ledger
from stableprompt._cli import main
from stableprompt._ledger._usage_record import UsageRecord
from stableprompt.demo import SCENARIOS, SYSTEM_PROMPT, Workload, run_demo, synthetic_workload
from stableprompt.demo._driver import client_sender
from stableprompt.demo._engine_report import PrefillStats, one_line_error
from stableprompt.demo._engine_run import (
    ENDPOINTS,
    EnginePlan,
    ServerLog,
    base_url_problem,
)
from stableprompt.demo._run import DemoResult
from stableprompt.demo._scenarios import Reply, responses_body, session_system_prompt
from stableprompt.emulator import Emulator

SESSIONS = ("multi_turn_base_115", "multi_turn_base_12")
NAIVE = ("clock-in-system", "tool-order-drift", "key-order-drift", "head-rewrite-compaction",
         "breakpoint-misplaced")


@pytest.fixture(scope="module")
def synthetic() -> Workload:
    return synthetic_workload()


@pytest.fixture(scope="module")
def short_bfcl(bfcl_demo_workload: Workload) -> Workload:
    """Two short BFCL sessions (see the module docstring)."""
    return dataclasses.replace(bfcl_demo_workload, sessions=tuple(
        bfcl_demo_workload.session(sid) for sid in SESSIONS))


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


# --------------------------------------------------------------------------- offline


def test_responses_body_converts_a_naive_chat_body_in_place() -> None:
    """System -> instructions, messages -> input items (tool calls -> function_call, tool
    messages -> function_call_output), tools flattened with their keys in order, max_tokens
    renamed; other keys keep their place; the input is not modified."""
    params = {"type": "object", "properties": {"b": {"type": "string"}, "a": {}}}
    chat: dict[str, Any] = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Now: 10:00. Be brief."},
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "ls", "arguments": '{"a":1}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"files":[]}'},
            {"role": "assistant", "content": "Nothing there."},
        ],
        "tools": [{"function": {"parameters": params, "name": "ls", "description": "List."},
                   "type": "function"}],
        "metadata": {"user_id": "s"},
        "max_tokens": 2,
    }
    before = json.dumps(chat)
    body = responses_body(chat)
    assert json.dumps(chat) == before
    assert list(body) == ["model", "instructions", "input", "tools", "metadata",
                          "max_output_tokens"]
    assert body["instructions"] == "Now: 10:00. Be brief."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": "list files"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": '{"a":1}'},
        {"type": "function_call_output", "call_id": "c1", "output": '{"files":[]}'},
        {"type": "message", "role": "assistant", "content": "Nothing there."},
    ]
    assert json.dumps(body["tools"]) == json.dumps(
        [{"parameters": params, "name": "ls", "description": "List.", "type": "function"}])
    assert body["max_output_tokens"] == 2 and body["metadata"] == {"user_id": "s"}
    with pytest.raises(ValueError, match="'function'"):
        responses_body({"messages": [{"role": "function", "content": "x"}]})


def _first_bodies(scenario: str, workload: Workload, wire: str, calls: int) -> list[Any]:
    """Request bodies of a scenario's first ``calls`` calls on session 1 (script replies)."""
    session = workload.sessions[1]
    spec = next(s for s in SCENARIOS if s.name == scenario)
    harness = spec.harness(session, wire=wire, model="m", max_tokens=1,
                           system_prompt=session_system_prompt(SYSTEM_PROMPT, session))
    responder = workload.responder()
    bodies: list[Any] = []
    now = 1_767_225_600.0
    for turn in session.turns:
        harness.begin_turn(turn.index)
        harness.user(turn.user)
        while len(bodies) < calls:
            now += 6
            body = json.loads(harness.request(now).to_bytes())
            bodies.append(body)
            reply = Reply.from_turn(wire, responder(body))
            harness.assistant(reply)
            if not reply.tool_calls:
                break
            for call_id, _, _ in reply.tool_calls:
                harness.tool_result(call_id, session.call(call_id).result)
        if len(bodies) >= calls:
            break
    return bodies


def test_naive_responses_bodies_keep_each_scenario_mistake(synthetic: Workload) -> None:
    """The Responses bodies of the naive harnesses are their Chat bodies converted: the clock
    stays in the instructions, the schema keys keep their shuffled order, the output limit is
    max_output_tokens; the SDK's own Responses body ends with its tail."""
    for scenario in ("clock-in-system", "key-order-drift", "tool-order-drift"):
        chat = _first_bodies(scenario, synthetic, "openai-chat", 3)
        responses = _first_bodies(scenario, synthetic, "openai-responses", 3)
        assert responses == [responses_body(body) for body in chat]
    clocks = [b["instructions"] for b in _first_bodies("clock-in-system", synthetic,
                                                       "openai-responses", 2)]
    assert all(c.startswith("Current time: ") for c in clocks) and clocks[0] != clocks[1]
    first, second = _first_bodies("key-order-drift", synthetic, "openai-responses", 2)
    assert first["tools"] == second["tools"]
    assert json.dumps(first["tools"]) != json.dumps(second["tools"])
    assert first["max_output_tokens"] == 1
    sdk = _first_bodies("stableprompt", synthetic, "openai-responses", 2)[1]
    assert sdk["input"][-1]["content"][0]["text"].startswith("<now>")
    assert sdk["max_output_tokens"] == 1


@pytest.mark.parametrize("wire", ["anthropic", "openai-chat"])
def test_scripted_replies_equal_the_emulator_answers(wire: str, synthetic: Workload) -> None:
    """Reply.from_turn builds exactly what Reply.from_response parses from the emulator's
    answer to the same scripted turn (text turns and tool-call turns)."""
    from stableprompt.demo._driver import Target

    session = synthetic.sessions[1]
    spec = next(s for s in SCENARIOS if s.name == "clock-in-system")
    with Emulator(responder=synthetic.responder()) as emulator:
        target: Target = emulator
        with client_sender(wire, target, _recorder()) as send:
            harness = spec.harness(session, wire=wire, model="claude-sonnet-5"
                                   if wire == "anthropic" else "gpt-5.2",
                                   system_prompt=SYSTEM_PROMPT)
            harness.user(session.turns[0].user)
            seen = 0
            for call in range(len(session.turns[0].calls) + 1):
                outgoing = harness.request(1_767_225_600.0 + call)
                body = json.loads(outgoing.to_bytes())
                answer = Reply.from_response(wire, send(outgoing.request))
                assert Reply.from_turn(wire, synthetic.responder()(body)) == answer
                harness.assistant(answer)
                seen += 1
                for call_id, _, _ in answer.tool_calls:
                    harness.tool_result(call_id, session.call(call_id).result)
            assert seen == session.turns[0].model_calls


def _recorder() -> Any:
    from stableprompt._recording._recorder import Recorder

    return Recorder(None)


def test_short_call_ids_are_nine_alphanumerics_and_keep_the_script(synthetic: Workload
                                                                   ) -> None:
    """with_short_call_ids renames every scripted id to 9 alphanumerics (Mistral's rule),
    keeps the results, and the responder follows the renamed script."""
    short = synthetic.with_short_call_ids()
    pairs = [(a, b) for s, t in zip(synthetic.sessions, short.sessions, strict=True)
             for u, v in zip(s.turns, t.turns, strict=True)
             for a, b in zip(u.calls, v.calls, strict=True)]
    assert pairs and all(len(b.id) == 9 and b.id.isalnum() for _, b in pairs)
    assert all((a.name, dict(a.arguments), a.result) == (b.name, dict(b.arguments), b.result)
               for a, b in pairs)
    assert short.sessions[2].turns[2].calls[0].id == "002t02c00"
    session = short.sessions[2]
    first = session.turns[2].calls[0]
    answer = short.responder()({"metadata": {"user_id": session.id}, "messages": [
        {"role": "tool", "tool_call_id": first.id, "content": "{}"}]})
    assert answer.text or answer.tool_calls


def test_plan_lays_out_rows_and_rejects_bad_options() -> None:
    """Rows are scenario-major, one per endpoint the harness builds (breakpoint-misplaced:
    messages only); unknown endpoints and templates, a template with a server URL and a bad
    URL are InputErrors with their codes. The engine runs the scenarios that say what they
    cost there (the multi-agent ones do not run on it, nor think-time: a slot has no TTL)."""
    engine = [s for s in SCENARIOS if s.engine_predicts]
    assert [s.name for s in SCENARIOS if not s.engine_predicts] == [
        "subagent-spec-copies", "subagent-fork", "system-message", "system-edit",
        "dynamic-tools", "dynamic-tools-rebuild", "think-time"]
    plan = EnginePlan.of(engine, endpoints=None, base_url=None, template=None)
    assert plan.template == "qwen2.5" and plan.endpoints == tuple(ENDPOINTS)
    assert plan.row_names[:3] == ("stableprompt/chat", "stableprompt/responses",
                                  "stableprompt/messages")
    assert plan.row_names[-1] == "breakpoint-misplaced/messages" and len(plan.rows) == 16
    assert [(s, e) for s, e, _ in plan.skipped] == [("breakpoint-misplaced", "chat"),
                                                    ("breakpoint-misplaced", "responses")]
    one = EnginePlan.of(SCENARIOS[:1], endpoints=["messages", "chat"],
                        base_url="http://127.0.0.1:8080/v1/", template=None)
    assert one.row_names == ("stableprompt/chat", "stableprompt/messages")
    assert (one.base_url, one.template) == ("http://127.0.0.1:8080", None)
    cases: list[tuple[dict[str, Any], str]] = [
                         ({"endpoints": ["completions"]}, "demo-endpoint"),
                         ({"endpoints": []}, "demo-endpoint"),
                         ({"template": "llama-9"}, "demo-template"),
                         ({"base_url": "http://127.0.0.1:1", "template": "qwen2.5"},
                          "demo-template"),
                         ({"base_url": "127.0.0.1:8080"}, "demo-base-url")]
    for kwargs, code in cases:
        options: dict[str, Any] = {"endpoints": None, "base_url": None, "template": None,
                                   **kwargs}
        with pytest.raises(InputError) as info:
            EnginePlan.of(SCENARIOS, **options)
        assert info.value.code == code, kwargs


def test_run_demo_refuses_engine_options_for_the_emulator(synthetic: Workload) -> None:
    """base_url, endpoints and template are llama-server options; with another provider
    run_demo says so before running anything."""
    cases: list[tuple[dict[str, Any], str]] = [
        ({"base_url": "http://127.0.0.1:1"}, "demo-base-url"),
        ({"endpoints": ["chat"]}, "demo-endpoint"), ({"template": "qwen2.5"}, "demo-template")]
    for kwargs, code in cases:
        with pytest.raises(InputError) as info:
            run_demo(synthetic, provider="openai", **kwargs)
        assert info.value.code == code and "llama-server" in info.value.message


@pytest.mark.parametrize("text", ["http://127.0.0.1:8080", "https://gpu.local:443/",
                                  "http://[::1]:8080/v1"])
def test_base_url_accepts_server_roots(text: str) -> None:
    """A server root, with or without /v1, is a base URL."""
    assert base_url_problem(text) is None


@pytest.mark.parametrize(("text", "words"), [
    ("127.0.0.1:8080", "not an http(s) URL"), ("ftp://host", "not an http(s) URL"),
    ("http://", "not an http(s) URL"), ("http://host:99999", "not a URL"),
    ("http://host/v1/chat/completions", "not a server root"),
    ("http://host?x=1", "not a server root")])
def test_base_url_rejects_what_is_not_a_server_root(text: str, words: str) -> None:
    """Anything but http(s)://host[:port][/v1] is refused with the reason."""
    problem = base_url_problem(text)
    assert problem is not None and words in problem


@pytest.mark.parametrize(("argv", "words"), [
    (["--provider", "llama-server", "--base-url", "localhost:8080"],
     "argument --base-url: 'localhost:8080' is not an http(s) URL"),
    (["--provider", "llama-server", "--endpoint", "completions"],
     "argument --endpoint: invalid choice: 'completions'"),
    (["--provider", "llama-server", "--template", "llama-3"],
     "argument --template: invalid choice: 'llama-3'"),
    (["--template", "mistral-nemo"],
     "argument --template: 'mistral-nemo' applies to --provider llama-server only, not "
     "anthropic"),
    (["--provider", "anthropic", "--endpoint", "chat"],
     "argument --endpoint: 'chat' applies to --provider llama-server only, not anthropic"),
    (["--provider", "openai", "--endpoint", "messages"],
     "argument --endpoint: 'messages' is not an OpenAI endpoint of the emulator demo"),
    (["--base-url", "http://127.0.0.1:8080"], "argument --base-url: 'http://127.0.0.1:8080' "
     "applies to --provider llama-server only"),
    (["--provider", "llama-server", "--base-url", "http://127.0.0.1:8080", "--template",
      "hermes-3"], "argument --template: the server at http://127.0.0.1:8080 uses its own"),
])
def test_cli_engine_argument_errors(argv: list[str], words: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Bad llama-server options are one-line usage errors (exit 2), raised before the
    workload is looked for or any engine starts (the BFCL data is made unavailable here)."""
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("STABLEPROMPT_BFCL_WHEEL", str(tmp_path / "missing.whl"))
    assert main(["demo", "--json", *argv]) == 2
    assert words in _one_line_error(capsys)
    assert not (tmp_path / "empty-cache").exists()


def test_server_log_takes_the_matching_timing_line(tmp_path: Path) -> None:
    """The log reader starts at the end of the log, skips lines until the timing line of the
    prefilled token count, waits for a line still being written, and gives up for good after
    one wait in vain."""
    log = tmp_path / "server.log"
    line = ("slot print_timing: id  0 | task {t} | prompt eval time =     {ms} ms / {n:5d} "
            "tokens (    0.03 ms per token, 33970.28 tokens per second)\n")
    log.write_text(line.format(t=0, ms="9.00", n=64))
    reader = ServerLog(log, wait_s=1.0)
    with log.open("a") as handle:
        handle.write("srv  update_slots: all slots are idle\n")
        handle.write(line.format(t=1, ms="12.50", n=10))
        handle.write(line.format(t=2, ms="1234.56", n=4096)[:30])  # a line half written
    assert reader.take(10) == (12.5, 10)

    def finish() -> None:
        time.sleep(0.1)
        with log.open("a") as handle:
            handle.write(line.format(t=2, ms="1234.56", n=4096)[30:])

    thread = threading.Thread(target=finish)
    thread.start()
    assert reader.take(4096) == (1234.56, 4096)
    thread.join()
    assert reader.take(7) is None and reader.gave_up
    assert reader.take(7) is None


def test_prefill_stats_split_cold_and_warm_calls() -> None:
    """Cold: >= 90% of the prompt prefilled; warm: >= 90% read from the cache; ms per 1,000
    prefilled tokens over all timed calls; untimed entries are skipped."""
    stats = PrefillStats.of([
        {"prompt_ms": 500.0, "prompt_n": 5000, "cache_n": 0},
        {"prompt_ms": 300.0, "prompt_n": 3000, "cache_n": 300},
        {"prompt_ms": 10.0, "prompt_n": 100, "cache_n": 5000},
        {"prompt_ms": 50.0, "prompt_n": 1000, "cache_n": 4000},
        {"prompt_ms": 1.0, "prompt_n": None, "cache_n": 3},
    ])
    assert (stats.timed_calls, stats.cold_calls, stats.warm_calls) == (4, 2, 1)
    assert stats.cold_median_ms == 400.0 and stats.warm_median_ms == 10.0
    assert stats.cold_over_warm == 40.0
    assert stats.ms_per_1k_prefilled == pytest.approx(1000 * 860 / 9100)
    assert PrefillStats.of([]).to_json()["cold_over_warm"] is None


def test_one_line_error_names_the_template_exception() -> None:
    """llama-server's multi-line parser report becomes the template's own message."""
    raised = ("Unable to generate parser for this template. Automatic parser generation "
              "failed: \n------------\nWhile executing CallExpression at line 18\n"
              "Error: Jinja Exception: After the optional system message, conversation roles "
              "must alternate user/assistant/user/assistant/...")
    assert one_line_error(raised) == (
        "the chat template raised: After the optional system message, conversation roles "
        "must alternate user/assistant/user/assistant/...")
    assert one_line_error("context\n  too long ") == "context too long"


# --------------------------------------------------------------------------- real engine


def _by_row(result: DemoResult) -> dict[str, list[UsageRecord]]:
    assert result.ledger_path is not None
    out: dict[str, list[UsageRecord]] = {}
    for record in Ledger(result.ledger_path, read_only=True).records():
        out.setdefault(record.scenario or "", []).append(record)
    return out


def _sessions(records: list[UsageRecord]) -> list[list[UsageRecord]]:
    out: dict[str, list[UsageRecord]] = {}
    for record in records:
        out.setdefault(record.session_id or "", []).append(record)
    return list(out.values())


def _timing(record: UsageRecord) -> dict[str, Any]:
    timing: Any = record.verdict_detail["engine_timings"]
    assert isinstance(timing, dict)
    return timing


def _agreement(result: DemoResult) -> tuple[int, int]:
    """``(calls whose prediction equals the report, calls with both)`` over all rows."""
    totals = [s.totals for s in result.report.scenarios.values()]
    return sum(t.agreement_matches for t in totals), sum(t.agreement_calls for t in totals)


def _check_verdicts(rows: dict[str, list[UsageRecord]]) -> None:
    """Each row's verdicts are its failure class, judged by the engine's own numbers: a call
    lost part of the previous prompt exactly when its reported reads are below the previous
    call's reported prompt size (the engine kept that whole prompt in its slot)."""
    for name, records in rows.items():
        scenario = name.split("/")[0]
        for session in _sessions(records):
            first, *later = session
            assert first.verdict == "cold", name
            for previous, record in zip(session, later, strict=False):
                assert record.input_tokens_total is not None
                assert previous.input_tokens_total is not None
                read = record.cache_read_tokens
                assert read is not None
                changed = read < previous.input_tokens_total
                lost = previous.input_tokens_total - read
                if scenario == "stableprompt":
                    # Only the tail goes: all of the previous prompt but its clock message.
                    assert record.verdict == "hit", (name, record.verdict_detail)
                    assert lost == record.verdict_detail["volatile_tail_tokens"] and lost < 150
                else:
                    assert record.verdict == ("client_mutation" if changed else "hit"), (
                        name, record.turn, record.verdict_detail)
            if scenario in ("clock-in-system", "key-order-drift", "breakpoint-misplaced"):
                assert all(r.verdict == "client_mutation" for r in later), name
            if scenario == "breakpoint-misplaced":  # harmless here: only the clock block
                assert all(p.input_tokens_total - (r.cache_read_tokens or 0) < 150  # type: ignore[operator]
                           for p, r in zip(session, later, strict=False))
        if scenario in ("tool-order-drift", "head-rewrite-compaction"):
            assert any(r.verdict == "client_mutation" for r in records), name
            assert any(r.verdict == "hit" for r in records), name


def _engine_run(workload: Workload, url: str, tmp_path: Path, name: str,
                sender: Callable[..., Any] | None = None, **kwargs: Any) -> DemoResult:
    started = time.perf_counter()
    result = run_demo(workload, provider="llama-server", base_url=url,
                      ledger_path=tmp_path / f"{name}.db", sender=sender, **kwargs)
    matches, calls = _agreement(result)
    print(f"\n{name}: predicted == reported on {matches}/{calls} calls "
          f"({matches / calls:.1%}), {time.perf_counter() - started:.1f} s")
    return result


@pytest.fixture(scope="module")
def client_run(llama_url: str, short_bfcl: Workload,
               tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    """Every row on the two short sessions through our clients (run once per module)."""
    return _engine_run(short_bfcl, llama_url, tmp_path_factory.mktemp("engine"), "clients")


@pytest.mark.real_engine
def test_engine_demo_is_exact_on_every_scenario_and_endpoint(client_run: DemoResult) -> None:
    """Every scenario on chat, responses and messages of the real engine, through our clients:
    predicted == reported on every call (measured: 208 of 208), every verdict matches its
    failure class by the engine's own numbers, chat calls carry the engine's timings, and
    the ledger keeps the agreement per row."""
    result = client_run
    rows = _by_row(result)
    assert sorted(rows) == sorted(result.scenarios) and len(rows) == 16
    assert all(len(records) == 13 for records in rows.values())
    assert _agreement(result) == (208, 208)
    assert all(r.error_class is None for records in rows.values() for r in records)
    _check_verdicts(rows)
    for name, records in rows.items():
        if name.endswith("/chat"):
            assert all(_timing(r)["source"] == "response" for r in records)
    assert result.engine is not None and result.engine.erase_refusal is None
    meta = Ledger(result.ledger_path or "", read_only=True).meta()
    agreement = json.loads(meta["agreement"])
    assert agreement["stableprompt/responses"] == {"calls": 13, "agreeing": 13,
                                                   "agreement": 1.0}
    assert meta["provider"] == "llama-server" and "llama-server" in meta["backend"]
    data = result.to_json()
    assert data["engine"]["endpoints"] == ["chat", "responses", "messages"]
    assert data["scenarios"]["key-order-drift/messages"]["endpoint"] == "messages"
    # Chat rows only: a server the demo did not start has no log to read.
    assert data["engine"]["prefill"]["timed_calls"] == 5 * 13


@pytest.mark.real_engine
def test_engine_demo_is_exact_through_the_official_sdks(
        llama_url: str, short_bfcl: Workload, client_run: DemoResult, tmp_path: Path) -> None:
    """The same rows sent by the official openai (Chat, Responses) and anthropic SDKs on
    httpx2 through RecordingTransport, on the first session: predicted == reported on every
    call (measured: 96 of 96), the same prompts and verdicts as through our clients."""
    sdk = _engine_run(short_bfcl.select(1), llama_url, tmp_path, "official-sdks",
                      sender=sdk_sender)
    assert _agreement(sdk) == (96, 96)
    rows = _by_row(sdk)
    _check_verdicts(rows)
    ours = _by_row(client_run)
    for name, records in rows.items():
        theirs = [r for r in ours[name] if r.session_id == SESSIONS[0]]
        assert [(r.input_tokens_total, r.verdict) for r in records] == [
            (r.input_tokens_total, r.verdict) for r in theirs], name
        for a, b in zip(records, theirs, strict=True):  # a sampled token may differ
            assert abs((a.cache_read_tokens or 0) - (b.cache_read_tokens or 0)) <= 2, name


@pytest.mark.real_engine
def test_mistral_nemo_template_is_named_not_blamed(llama_engine: Any, short_bfcl: Workload,
                                                   tmp_path: Path) -> None:
    """With Mistral-Nemo's template (started by the demo) the append-only SDK scenario gets
    provider_miss / template-not-append-stable with the engine's first divergent token, the
    calls the template refuses are recorded as unknown with its message, and the run ends
    normally with every reported call predicted exactly."""
    result = run_demo(short_bfcl.select(1), provider="llama-server", template="mistral-nemo",
                      scenarios=["stableprompt"], ledger_path=tmp_path / "mistral.db")
    matches, calls = _agreement(result)
    print(f"\nmistral-nemo: predicted == reported on {matches}/{calls} calls")
    assert (matches, calls) == (3, 3)
    rows = _by_row(result)
    messages = rows["stableprompt/messages"]
    unstable = [r for r in messages if r.verdict == "provider_miss"]
    assert len(unstable) == 2
    detail = unstable[0].verdict_detail
    assert detail["reason"] == "template-not-append-stable"
    divergence: dict[str, Any] = detail["engine_divergence"]  # type: ignore[assignment]
    assert divergence["token_index"] == 2
    assert divergence["previous"].startswith("AVAILABLE_TOOLS]")
    assert divergence["sent"].startswith("INST]")
    refused = [r for records in rows.values() for r in records if r.error_class is not None]
    assert len(refused) == 3 + 6 + 6 and all(r.verdict == "unknown" for r in refused)
    assert all("roles must alternate" in str(r.verdict_detail["error_message"])
               for r in refused)
    assert result.engine is not None and result.engine.started
    row = result.engine.row("stableprompt/messages")
    assert row is not None and row.not_append_stable == 2
    assert row.first_not_append_stable is not None
    assert row.first_not_append_stable["token_index"] == 2
    assert row.refused == 3 and (row.first_refusal or "").startswith(
        "the chat template raised: After the optional system message")
    timed = [_timing(r) for r in messages if r.error_class is None]
    assert timed and all(t["source"] == "server-log" for t in timed)


@pytest.mark.real_engine
def test_cli_engine_demo_json(llama_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`stableprompt demo --provider llama-server --base-url URL --endpoint chat --json`
    prints the engine's JSON: rows per scenario, agreement, prefill and template findings."""
    assert main(["demo", "--provider", "llama-server", "--base-url", llama_url,
                 "--workload", "synthetic", "--sessions", "1", "--endpoint", "chat",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["provider"] == "llama-server" and data["engine"]["base_url"] == llama_url
    assert list(data["scenarios"]) == [f"{s}/chat" for s in ("stableprompt", *NAIVE[:4])]
    for row in data["scenarios"].values():
        assert row["agreement"] == 1.0 and row["prefill"]["timed_calls"] == row["calls"]
    assert data["engine"]["template_findings"] == {}
    assert data["engine"]["prefill"]["cold_calls"] >= 1


def test_a_server_that_will_not_erase_gets_a_reset_request_seeding_the_slot() -> None:
    """erase_slot reports the server's refusal; reset_slot sends the reset request and returns
    a slot memory holding its engine tokens and its reply's."""
    import httpx

    from stableprompt.demo._engine_run import RESET_BODY, erase_slot, reset_slot

    sent: list[tuple[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append((request.url.path, json.loads(request.content or b"null")))
        if request.url.path == "/slots/0":
            return httpx.Response(501, json={"error": {
                "message": "This server does not support slots action."}})
        return httpx.Response(200, json={"choices": [{"message": {"content": "zz"}}]})

    class Tokens:
        def prompt_tokens(self, wire_format: str, body: Any) -> Any:
            assert (wire_format, body) == ("openai-chat", RESET_BODY)
            return type("P", (), {"text": "t", "tokens": (1, 2, 3)})()

        def generated_tokens(self, prompt: Any, text: str) -> tuple[int, ...]:
            return (9,) * len(text)

        def detokenize(self, tokens: Any) -> str:
            return ""

    with httpx.Client(transport=httpx.MockTransport(answer)) as http:
        assert erase_slot(http, "http://e") == (
            "HTTP 501: This server does not support slots action.")
        memory = reset_slot(http, "http://e", Tokens())
    assert sent[1] == ("/v1/chat/completions", RESET_BODY)
    # No completion_tokens reported: both reply tokens are kept; the prompt is 3 tokens.
    assert memory.best([1, 2, 3, 9, 9, 4]) == (5, "slot-reset", 3)


def _demo_process(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "stableprompt", "demo", "--provider",
                             "llama-server", "--workload", "synthetic", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.real_engine
def test_sigterm_to_the_demo_stops_the_engine_it_started(llama_engine: Any) -> None:
    """SIGTERM while the demo runs on the engine it started: the demo stops that llama-server
    (no orphan), exits 143; in a pipe it said each finished row on stderr."""
    process = _demo_process("--sessions", "all", "--endpoint", "all")
    assert process.stderr is not None
    pid = None
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        lines.append(line)
        found = re.search(r"llama-server started at \S+ \(pid (\d+)", line)
        if found:
            pid = int(found.group(1))
            break
        assert line, f"the demo ended before starting the engine: {lines}"
    assert pid is not None
    try:
        for line in process.stderr:  # wait until it is really running rows
            lines.append(line)
            if "calls done" in line:
                break
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=60)
        assert process.returncode == 143, err
        assert "terminated (SIGTERM)" in err
        assert any(re.match(r"stableprompt/\w+: \d+ calls done", x) for x in lines), lines
        end = time.monotonic() + 10
        while not _pid_gone(pid) and time.monotonic() < end:
            time.sleep(0.05)
        assert _pid_gone(pid), f"llama-server pid {pid} outlived the demo"
    finally:
        if process.poll() is None:
            process.kill()
        if not _pid_gone(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.real_engine
def test_a_row_the_engine_refuses_entirely_fails_the_demo(llama_engine: Any) -> None:
    """Mistral-Nemo's template refuses the SDK's Chat tail (a second user message): that row
    measured nothing, so the demo prints its tables and exits 1 naming the row."""
    process = _demo_process("--sessions", "1", "--endpoint", "chat",
                            "--template", "mistral-nemo")
    out, err = process.communicate(timeout=300)
    assert process.returncode == 1, err
    assert "stableprompt/chat" in out  # the tables are still printed
    failure = [line for line in err.splitlines() if "refused every call" in line]
    assert len(failure) == 1 and "stableprompt/chat (" in failure[0]
    assert "roles must alternate" in failure[0]
