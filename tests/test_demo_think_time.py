"""The think-time demo scenario (``demo._think_time``), the demo under a cache policy, the
what-if replay measured against the emulator, keep-alive pings sent by the demo, ``stableprompt
demo --cache-policy FILE``, and issue 29's acceptance (``demo._policy_trial``).

Most tests use our synthetic workload (offline); the acceptance test runs 50 BFCL sessions
(skips without PyPI), about 12 s on 2 cores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stableprompt import (
    CachePolicy,
    InputError,
    KeepAlive,
    Ledger,
    UsageRecord,
    summarize,
    what_if,
)
from stableprompt._cli import main
from stableprompt.demo import Workload, policy_trial, run_demo, synthetic_workload
from stableprompt.demo._driver import CALL_STEP_S, TURN_GAP_S, client_sender
from stableprompt.demo._policy_trial import runnable_candidates, ttl_candidates
from stableprompt.demo._scenarios import SCENARIOS
from stableprompt.demo._think_time import THINK_TIME_S, think_times

README = Path(__file__).resolve().parent.parent / "README.md"
RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "RESULTS.md"
ONE_HOUR = CachePolicy(name="1h", head="1h", history="1h")
HEAD_1H = CachePolicy(name="1h head + 5m history", head="1h", history="5m")
KEEP = CachePolicy(name="default + keep-alive",
                   keep_alive=KeepAlive(interval_s=270, max_pings=14))
#: Think times a harness saw before (seconds): the scheduler's gap prior in these tests.
PRIOR = [60.0 * k for k in range(1, 16)]


@pytest.fixture(scope="module")
def synthetic() -> Workload:
    return synthetic_workload()


@pytest.fixture(scope="module")
def ledgers(synthetic: Workload, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Path]:
    """The synthetic think-time sessions under the default, 1h, and 1h-head policies."""
    out = {}
    for name, policy in (("default", None), ("1h", ONE_HOUR), ("head", HEAD_1H)):
        path = tmp_path_factory.mktemp(name) / "demo.db"
        run_demo(synthetic, scenarios=["think-time"], ledger_path=path, cache_policy=policy)
        out[name] = path
    return out


def _records(path: Path) -> list[UsageRecord]:
    with Ledger(path, read_only=True) as ledger:
        return list(ledger.records())


def _gaps(records: list[UsageRecord]) -> Iterator[tuple[UsageRecord, float]]:
    """Each call after the first of its session with the gap since the previous one (s)."""
    last: dict[str | None, UsageRecord] = {}
    for record in records:
        previous = last.get(record.session_id)
        if previous is not None:
            yield record, (record.ts_utc - previous.ts_utc).total_seconds()
        last[record.session_id] = record


def test_think_times_are_seeded_minutes() -> None:
    """One gap per user turn after the first, 1 to 15 minutes, the same on every call and
    different between sessions."""
    gaps = think_times("multi_turn_base_7", 5)
    assert gaps == think_times("multi_turn_base_7", 5) and len(gaps) == 4
    assert all(THINK_TIME_S[0] <= g <= THINK_TIME_S[1] for g in gaps)
    assert gaps != think_times("multi_turn_base_8", 5)
    assert think_times("one", 1) == () == think_times("none", 0)


def test_think_time_is_listed_with_an_explanation() -> None:
    """The scenario runs on every emulated provider, takes a cache policy (an SDK harness),
    and says what it loses; naive scenarios take no policy."""
    scenario = next(s for s in SCENARIOS if s.name == "think-time")
    assert scenario.takes_policy and "TTL" in scenario.predicts
    assert set(scenario.providers) == {"anthropic", "openai", "gemini", "bedrock"}
    assert not next(s for s in SCENARIOS if s.name == "clock-in-system").takes_policy


def test_misses_come_from_ttl_expiry_only(ledgers: dict[str, Path]) -> None:
    """Under the default 5-minute TTL every call after a user's think time beyond 5 minutes
    reads nothing and is ttl_expired; every other call is a hit (or its session's cold
    first call); calls within a turn are seconds apart."""
    records = _records(ledgers["default"])
    assert {r.verdict for r in records} == {"cold", "hit", "ttl_expired"}
    long_gaps = 0
    for record, gap in _gaps(records):
        assert gap == pytest.approx(CALL_STEP_S, abs=1e-3) or gap > TURN_GAP_S + CALL_STEP_S
        if gap > 300:
            long_gaps += 1
            assert record.verdict == "ttl_expired" and record.cache_read_tokens == 0
        else:
            assert record.verdict == "hit" and (record.cache_read_tokens or 0) > 0
    assert long_gaps == 5  # of the synthetic workload's 7 think-time gaps


def test_a_policy_reruns_the_same_sessions(ledgers: dict[str, Path]) -> None:
    """The same calls at the same times under a 1-hour TTL: nothing expires and every write
    is a 1-hour write; with a 1-hour head only, a call after a long gap reads the head."""
    default, hour, head = (_records(ledgers[k]) for k in ("default", "1h", "head"))
    assert [r.ts_utc for r in hour] == [r.ts_utc for r in default] == [r.ts_utc for r in head]
    assert {r.verdict for r in hour} == {"cold", "hit"}
    assert all(r.cache_write_1h_tokens == r.cache_write_tokens for r in hour)
    for record, gap in _gaps(head):
        if gap > 300:
            head_tokens = record.verdict_detail["head_tokens"]
            assert isinstance(head_tokens, int)
            read = record.cache_read_tokens or 0
            assert 0 < read < (record.input_tokens_total or 0)
            assert abs(read - head_tokens) <= 0.05 * head_tokens
    with Ledger(ledgers["1h"], read_only=True) as ledger:
        assert '"head":"1h"' in ledger.meta()["cache_policy"]


def test_the_demo_json_names_the_policy(synthetic: Workload) -> None:
    """A run under a policy says so in its JSON (label and settings, after the cost); a run
    without one has no such key."""
    data = run_demo(synthetic.select(1), scenarios=["think-time"],
                    cache_policy=HEAD_1H).to_json()
    assert list(data)[-2:] == ["cache_policy", "elapsed_s"]
    assert data["cache_policy"] == {"label": "1h head + 5m history", "settings": {
        "name": "1h head + 5m history", "head": "1h", "history": "5m"}}
    assert "cache_policy" not in run_demo(synthetic.select(1),
                                          scenarios=["think-time"]).to_json()


@pytest.mark.parametrize("name", ["default", "1h", "head"])
def test_what_if_reproduces_what_the_emulator_charged(ledgers: dict[str, Path],
                                                      name: str) -> None:
    """Replaying a ledger under the policy it used gives its recorded cost (to the
    micro-dollar), and every ledger of the same sessions replays each TTL policy to the
    cost that policy was measured at (a read of the head alone after a few per cent of
    history expired counts as an expiry; the head's size is the reported one)."""
    measured = {key: what_if(path).recorded_usd for key, path in ledgers.items()}
    result = what_if(ledgers[name])
    assert result.as_used.usd == pytest.approx(result.recorded_usd, abs=1e-6)
    replayed = result.outcomes_by_label()
    assert replayed["default"].usd == pytest.approx(measured["default"], abs=1e-6)
    assert replayed["1h"].usd == pytest.approx(measured["1h"], abs=1e-6)
    if name == "head":  # the other ledgers know the head only by the recorder's estimate
        assert replayed["1h head + 5m history"].usd == pytest.approx(measured["head"],
                                                                     abs=1e-6)
    assert all(o.usd >= result.hindsight_usd - 1e-12 for o in result.outcomes)


def test_from_ledger_chooses_among_the_given_candidates(ledgers: dict[str, Path]) -> None:
    """With TTL candidates only, from_ledger picks the cheapest of them (no keep-alive);
    without, keep-alive variants compete too."""
    pool = ttl_candidates("anthropic", "claude-sonnet-5")
    assert [p.name for p in pool] == ["default", "1h", "1h head + 5m history"]
    chosen = CachePolicy.from_ledger(ledgers["default"], policies=pool)
    cheapest = what_if(ledgers["default"], policies=pool).cheapest.policy
    assert chosen.keep_alive is None
    assert (chosen.head, chosen.history) == (cheapest.head, cheapest.history)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"scenarios": ["stableprompt", "clock-in-system"]}, "clock-in-system"),
    ({"scenarios": ["think-time"], "provider": "gemini"}, "implicit caching"),
    ({"scenarios": ["think-time"], "cache_policy": CachePolicy(explicit_cache=True)},
     "explicit head cache is Gemini's"),
    ({"scenarios": ["think-time"], "provider": "bedrock", "cache_policy": KEEP},
     "no keep-alive for 'bedrock-converse'"),
    ({"scenarios": ["think-time"], "provider": "openai", "cache_policy": KEEP},
     "GPT-5.6"),
    ({"scenarios": ["think-time"], "cache_policy": KEEP,
      "sender": lambda *a: client_sender(*a)}, "custom sender"),
    ({"scenarios": ["think-time"], "cache_policy": CachePolicy(
        keep_alive=KeepAlive(interval_s=300, max_pings=3))}, "not shorter than"),
    ({"scenarios": ["think-time"], "cache_policy": "1h"}, "CachePolicy"),
    ({"scenarios": ["think-time"], "cache_policy": CachePolicy(history="1h")},
     "a 1h history breakpoint after a 5m head"),
    ({"scenarios": ["think-time"], "provider": "openai", "cache_policy": CachePolicy(
        history="30m")}, "'gpt-5.2' has no explicit prompt caching"),
])
def test_a_policy_the_demo_cannot_follow_is_refused(synthetic: Workload,
                                                    kwargs: dict[str, Any],
                                                    fragment: str) -> None:
    """A cache policy with a naive scenario, on Gemini, with an explicit cache, keep-alive
    where no ping can be sent (Bedrock's Converse, an OpenAI model before GPT-5.6, a custom
    sender) or with an interval not shorter than the TTL, TTLs the renders would refuse (a
    history longer than the default head, OpenAI TTLs before GPT-5.6), or not a
    CachePolicy: InputError demo-cache-policy saying why, before anything runs."""
    kwargs.setdefault("cache_policy", ONE_HOUR)
    with pytest.raises(InputError) as info:
        run_demo(synthetic, **kwargs)
    assert info.value.code == "demo-cache-policy" and fragment in str(info.value)


@pytest.fixture(scope="module")
def kept(synthetic: Workload, tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, Path]:
    """The synthetic think-time sessions under ``default + keep-alive``: with the
    scheduler's default gap prior, with :data:`PRIOR`, and capped at one ping a gap."""
    out = {}
    capped = CachePolicy(name="capped", keep_alive=KeepAlive(interval_s=270, max_pings=1,
                                                             prior_gaps_s=tuple(PRIOR)))
    assert KEEP.keep_alive is not None
    prior = KEEP.model_copy(update={"keep_alive": KEEP.keep_alive.model_copy(
        update={"prior_gaps_s": tuple(PRIOR)})})
    for name, policy in (("default-prior", KEEP), ("prior", prior), ("capped", capped)):
        path = tmp_path_factory.mktemp(name) / "demo.db"
        run_demo(synthetic, scenarios=["think-time"], ledger_path=path, cache_policy=policy)
        out[name] = path
    return out


def _pings_by_gap(records: list[UsageRecord]) -> dict[tuple[str | None, int], list[UsageRecord]]:
    """Pings grouped by (session, index of the real call they follow)."""
    out: dict[tuple[str | None, int], list[UsageRecord]] = {}
    real: dict[str | None, int] = {}
    for record in records:
        if record.verdict_detail.get("keepalive") is True:
            out.setdefault((record.session_id, real[record.session_id]), []).append(record)
        else:
            real[record.session_id] = real.get(record.session_id, -1) + 1
    return out


@pytest.mark.parametrize("name", ["default-prior", "prior", "capped"])
def test_keepalive_pings_go_out_during_think_time(ledgers: dict[str, Path],
                                                  kept: dict[str, Path], name: str) -> None:
    """Under a keep-alive policy the real calls keep their times (the clock stops at each due
    ping on the way), every ping is a row marked keepalive sent 270 s after the last refresh
    that reads the whole cached prefix and writes nothing, no gap has more pings than the cap
    and none follows a session's last call; a call whose last refresh is within 5 minutes
    reads its prefix, every other call after a gap is ttl_expired."""
    default, records = _records(ledgers["default"]), _records(kept[name])
    real = [r for r in records if r.verdict_detail.get("keepalive") is not True]
    assert [r.ts_utc for r in real] == [r.ts_utc for r in default]
    pings = _pings_by_gap(records)
    cap = 1 if name == "capped" else 14
    assert pings and all(len(gap) <= cap for gap in pings.values())
    calls = {sid: sum(r.session_id == sid for r in real) for sid in {r.session_id for r in real}}
    assert all(index < calls[sid] - 1 for sid, index in pings)
    refreshed: dict[str | None, UsageRecord] = {}
    for record in records:
        last = refreshed.get(record.session_id)
        gap = None if last is None else (record.ts_utc - last.ts_utc).total_seconds()
        if record.verdict_detail.get("keepalive") is True:
            assert last is not None and gap == pytest.approx(270, abs=1e-3)
            extent = (last.cache_read_tokens or 0) + (last.cache_write_tokens or 0)
            assert record.cache_read_tokens == record.input_tokens_total == extent
            assert (record.cache_write_tokens, record.output_tokens) == (0, 1)
        elif gap is not None:
            assert record.verdict == ("ttl_expired" if gap > 300 else "hit"), (name, gap)
        refreshed[record.session_id] = record
    verdicts = [r.verdict for r in real]
    if name == "prior":  # the prior knows users come back within 15 minutes: nothing expires
        assert "ttl_expired" not in verdicts
    else:  # the log-uniform prior (or the cap) gives up on some long pauses
        assert "ttl_expired" in verdicts


def test_keepalive_costs_are_measured_and_replayed(ledgers: dict[str, Path],
                                                   kept: dict[str, Path]) -> None:
    """The pings are in the measured cost (``summarize(...).cost_usd``: the calls plus the
    pings), the what-if's replay of the policy used (its recorded pings included)
    reproduces each ledger's cost, no candidate is below the hindsight bound, and with a
    prior that keeps every pause the measured cost is what ``default + keep-alive``
    replays to on the default ledger (whose replay pings up to the cap)."""
    for path in kept.values():
        records = _records(path)
        report = summarize(records)
        assert report.keepalive.calls > 0 and report.keepalive.usd
        assert report.cost_usd == pytest.approx(
            (report.overall.cost_usd or 0) + report.keepalive.usd, rel=1e-12)
        result = what_if(records)
        assert result.as_used.keepalive_pings == report.keepalive.calls
        assert result.as_used.usd == pytest.approx(result.recorded_usd, abs=1e-6)
        assert result.recorded_usd == pytest.approx(report.cost_usd, rel=1e-6)
        assert all(o.usd >= result.hindsight_usd - 1e-12 for o in result.outcomes)
    # The replay of a keep-alive is the scheduler's own rule: the policy measured (the
    # PRIOR gaps; the demo ends each conversation on the scheduler) replays on the default
    # ledger to exactly what it cost on the emulator.
    assert KEEP.keep_alive is not None
    measured_policy = KEEP.model_copy(update={"keep_alive": KEEP.keep_alive.model_copy(
        update={"prior_gaps_s": tuple(PRIOR), "closes_conversations": True})})
    replayed = what_if(ledgers["default"], policies=[measured_policy]).outcomes[0]
    measured = summarize(_records(kept["prior"]))
    assert measured.cost_usd == pytest.approx(replayed.usd, rel=1e-6)
    assert replayed.keepalive_pings == measured.keepalive.calls
    assert measured.keepalive.calls == replayed.keepalive_pings


def test_keepalive_leaves_other_scenarios_alone(synthetic: Workload) -> None:
    """The SDK scenarios whose users answer within seconds send no ping under a keep-alive
    policy, and their numbers are those of the run without it."""
    names = ["stableprompt", "system-message"]
    plain = run_demo(synthetic, scenarios=names).to_json()
    kept = run_demo(synthetic, scenarios=names, cache_policy=KEEP).to_json()
    assert kept["keepalive"]["calls"] == 0
    assert kept["scenarios"] == plain["scenarios"] and kept["cost"] == plain["cost"]
    assert list(kept)[-3:] == ["cache_policy", "keepalive", "elapsed_s"]


def test_the_gaps_skip_pings(kept: dict[str, Path], ledgers: dict[str, Path]) -> None:
    """The what-if's gaps (what a chosen keep-alive carries as its scheduler's prior): the
    gaps between consecutive real calls of each chain, pings skipped: the same with and
    without keep-alive."""
    gaps = what_if(ledgers["default"]).gaps_s
    assert gaps == what_if(kept["prior"]).gaps_s
    assert len(gaps) == 24 - 3 and sum(g > 60 for g in gaps) == 7


def test_select_skip_splits_without_overlap(synthetic: Workload) -> None:
    """select(count, skip=) takes sessions after the first skip; the halves share none."""
    first, rest = synthetic.select(1), synthetic.select(None, skip=1)
    assert [s.id for s in first.sessions] + [s.id for s in rest.sessions] == [
        s.id for s in synthetic.sessions]
    assert [s.id for s in synthetic.select(1, skip=1).sessions] == [synthetic.sessions[1].id]
    with pytest.raises(InputError):
        synthetic.select(None, skip=len(synthetic.sessions))


def test_cli_demo_follows_a_cache_policy_file(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``stableprompt demo --cache-policy FILE``: the SDK scenarios run under the policy (the
    naive ones place their own breakpoints and are not run), the JSON names the policy and
    counts the keep-alive pings, and the text output says so in its header and notes."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"name": "keep", "keep_alive": {"interval_s": 270,
                                                               "max_pings": 14}}))
    argv = ["demo", "--workload", "synthetic", "--sessions", "1", "--cache-policy", str(path)]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["scenarios"]) == [s.name for s in SCENARIOS
                                       if s.takes_policy and "anthropic" in s.providers]
    assert data["cache_policy"]["label"] == "keep" and data["keepalive"]["calls"] > 0
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Cache policy: keep, followed by the SDK scenarios" in out
    assert "keep-alive: " in out and " pings in 1 session" in out


@pytest.mark.parametrize(("content", "provider", "code", "needle"), [
    (None, "anthropic", "cache-policy", "cannot read cache policy"),
    ("{not json", "anthropic", "cache-policy", "invalid cache policy"),
    ('{"head": "5m", "history": "1h"}', "anthropic", "cache-policy-ttl-order",
     "longer TTLs"),
    ('{"ttl": "1h"}', "anthropic", "cache-policy", "/ttl"),
    ('{"keep_alive": {"interval_s": 270, "max_pings": 3}}', "bedrock", "demo-cache-policy",
     "no keep-alive for 'bedrock-converse'"),
    ('{"head": "1h"}', "gemini", "demo-cache-policy", "implicit caching"),
    pytest.param('{"head": "1h"}'.encode("utf-16"),
                 "anthropic", "cache-policy", "UTF-16", id="utf-16"),
    pytest.param('{"name": "caf\u00e9"}'.encode("latin-1"),
                 "anthropic", "cache-policy", "not UTF-8", id="latin-1"),
])
def test_cli_demo_refuses_a_bad_cache_policy_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        content: str | bytes | None, provider: str, code: str, needle: str) -> None:
    """A missing, malformed or invalid policy file, or one the provider's demo cannot
    follow: exit 2 (bad input, as every CLI usage error), one line naming the file, the
    error object under ``--json``; before the workload is looked for (the BFCL data is made
    unavailable, so a late check would report that instead) and no ledger is created."""
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("STABLEPROMPT_BFCL_WHEEL", str(tmp_path / "missing.whl"))
    path = tmp_path / "policy.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    ledger = tmp_path / "l.db"
    status = main(["demo", "--json", "--provider", provider, "--cache-policy", str(path),
                   "--ledger", str(ledger)])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert str(path) in captured.err and needle in captured.err
    error = json.loads(captured.out)["error"]
    assert (error["code"], error["exit_status"]) == (code, 2)
    assert not ledger.exists() and not (tmp_path / "empty-cache").exists()


def test_runnable_candidates_are_the_ones_the_demo_sends() -> None:
    """The trial chooses among the what-if's candidates the demo can follow: on Anthropic
    every TTL choice with and without keep-alive; on Bedrock (Converse, not pinged) and
    OpenAI before GPT-5.6 (no TTL a read refreshes) the TTL choices only."""
    assert [p.name for p in runnable_candidates("anthropic", "claude-sonnet-5")] == [
        "default", "1h", "1h head + 5m history", "default + keep-alive", "1h + keep-alive",
        "1h head + 5m history + keep-alive"]
    assert all(p.keep_alive is None for p in runnable_candidates(
        "bedrock", "anthropic.claude-sonnet-4-6"))
    assert all(p.keep_alive is None for p in runnable_candidates("openai", "gpt-5.2"))


def test_trial_candidates_are_the_labels_the_what_if_settles_on() -> None:
    """OpenAI candidates are what its API takes for the wire format and model, as in the
    what-if (``_settable_labels``): before GPT-5.6 the default only (never ``24h`` from the
    rules' TTLs), Chat on GPT-5.6 ``30m`` (default) with keep-alive, Responses ``12h`` too."""
    assert [p.name for p in ttl_candidates("openai", "gpt-5.2")] == ["default"]
    assert [p.name for p in runnable_candidates("openai", "gpt-5.6")] == [
        "default", "default + keep-alive"]
    assert [p.name for p in ttl_candidates("openai", "gpt-5.6", wire="openai-responses")] == [
        "default", "12h", "12h head + 30m history"]


@pytest.mark.parametrize(("kwargs", "code", "fragment"), [
    ({"provider": "openai"}, "demo-cache-policy", "can follow only 'default' for 'gpt-5.2'"),
    ({"provider": "gemini"}, "demo-cache-policy", "implicit caching"),
    ({"provider": "bedrock"}, "demo-cache-policy", "a model offering 1h"),
    ({"provider": "llama-server"}, "demo-provider", "runs on the emulator"),
    ({"provider": "acme"}, "demo-provider", "'acme'"),
    ({"model": " "}, "demo-model", "model id"),
    ({"scenario": "clock-in-system"}, "demo-scenario", "takes a cache policy"),
    ({"candidates": [CachePolicy(), CachePolicy(head="12h")]}, "demo-cache-policy",
     "does not offer '12h'"),
])
def test_a_trial_that_cannot_run_is_refused_before_anything_runs(
        synthetic: Workload, monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any],
        code: str, fragment: str) -> None:
    """OpenAI before GPT-5.6, Gemini, Bedrock's one-TTL default model (nothing to choose),
    a provider that is not emulated, an empty model, a naive scenario, a candidate the
    renders would refuse: a typed error before the learn half runs (``run_demo`` is never
    called), not after it."""
    def never(*args: Any, **kw: Any) -> Any:
        raise AssertionError("the trial ran before checking its arguments")

    monkeypatch.setattr("stableprompt.demo._policy_trial.run_demo", never)
    with pytest.raises(InputError) as info:
        policy_trial(synthetic, **kwargs)
    assert info.value.code == code and fragment in str(info.value)


def test_a_trial_on_openai_gpt_5_6_runs(synthetic: Workload) -> None:
    """On GPT-5.6 (Chat: the 30m default, with or without keep-alive) the trial runs to the
    end, on the same calls in every run."""
    trial = policy_trial(synthetic, provider="openai", model="gpt-5.6")
    assert (trial.chosen.head, trial.chosen.history) == (None, None)  # 30m: the default
    assert trial.ttl_chosen.keep_alive is None
    assert trial.chosen_run.calls == trial.default_run.calls > 0


def test_issue_29_acceptance_on_the_emulator(bfcl_demo_workload: Workload,
                                             tmp_path: Path) -> None:
    """Issue 29: on 50 BFCL think-time sessions, the policy chosen from the first half's
    ledger among every candidate (keep-alive included: ``default + keep-alive``) costs at
    least 10% less than the 5-minute default on the second half, measured on the emulator
    with its pings sent and priced; so does the choice among TTLs only (``1h``), measured
    too. On every ledger the what-if's replay of the policy used (recorded pings included)
    reproduces what it cost within 1%, and no candidate replays below the hindsight bound;
    no idle gap had more pings than the cap; each chosen policy measures what it replayed
    to on the default ledger. With the scheduler's default gap prior instead of the learn
    half's gaps, pings stop early and it saves less. README and RESULTS.md state the
    measured distance to the bound (more than 5%: the pings' own cost)."""
    trial = policy_trial(bfcl_demo_workload.select(50), directory=tmp_path)
    assert len(trial.learn_sessions) == len(trial.test_sessions) == 25
    assert not set(trial.learn_sessions) & set(trial.test_sessions)
    assert trial.chosen.keep_alive is not None and trial.ttl_chosen.keep_alive is None
    assert trial.saving() >= 0.10 and trial.saving(trial.ttl_chosen_run) >= 0.10
    assert trial.chosen_usd < trial.ttl_chosen_usd < trial.default_usd
    assert abs(trial.learn.as_used.usd / trial.learn.recorded_usd - 1) < 0.01
    for run in trial.runs().values():
        assert abs(run.as_used_error) < 0.01
        assert run.replay.recorded_usd == pytest.approx(run.usd, rel=1e-6)
        assert all(o.usd >= run.replay.hindsight_usd for o in run.replay.outcomes)
        assert not run.cap_exceeded
        assert run.usd >= trial.hindsight_usd
    assert trial.chosen_run.pings > 0 and trial.chosen_run.ttl_expired == 0
    assert trial.chosen_run.pings_usd > 0
    for run in (trial.chosen_run, trial.ttl_chosen_run):
        assert run.policy is not None
        assert trial.replayed_usd(run.policy) == pytest.approx(run.usd, rel=0.01)
    no_prior = trial.chosen_default_prior
    assert no_prior is not None and no_prior.usd > trial.chosen_usd
    assert no_prior.ttl_expired > 0
    distance = trial.above_hindsight()
    for text in (README.read_text(encoding="utf-8"), RESULTS.read_text(encoding="utf-8")):
        if distance <= 0.05:
            assert "within 5% of the hindsight bound" in text
        else:
            assert f"{distance:.1%} above the hindsight bound" in text
        assert f"{trial.saving():.1%} cheaper" in text
