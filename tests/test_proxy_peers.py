"""Pydantic AI, LangChain and LiteLLM agents through ``stableprompt proxy`` (issue 13): each in
its own virtualenv (``peer_envs``), running a real tool-calling loop on its own API
(``peer_agents``) over a BFCL v4 session, against the emulator: with its own prompt caching and
a stable tool order (the baseline), with the tools in another order every user turn, that way
through ``--stabilize``, and that way through ``--stabilize`` with its caching off.

The emulator answers from the BFCL script (``Workload.responder``: the tool calls of the
ground truth, then each turn's closing text), keyed on the newest tool result or user text of
the request, so every peer is driven through the same calls whatever it sends. The peers'
virtualenvs are made once per machine under the stableprompt cache; a registry that cannot be
reached skips with pip's error, any other pip failure fails.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import peer_envs
from conftest import proxy_process
from harness_truth import check_misses
from stableprompt import Ledger
from stableprompt._cli import main
from stableprompt.demo import Workload, WorkloadSession
from stableprompt.emulator import AssistantTurn, Emulator, Responder

pytestmark = pytest.mark.peers

AGENTS = Path(__file__).with_name("peer_agents.py")
MODEL = "claude-sonnet-4-5"
SESSION = "multi_turn_base_0"  # 2 APIs, 32 tools, 4 user turns, 10 tool calls
ORDER_SEED = "stableprompt-peers"
AGENT_TIMEOUT_S = 300.0


@pytest.fixture(scope="module", params=sorted(peer_envs.PEERS))
def peer(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """A peer and the interpreter of its virtualenv (created on first use). A registry that
    cannot be reached skips with pip's error; pip failing on a reachable registry (a pin that
    does not resolve, a build that breaks) is a real failure, so it fails."""
    name: str = request.param
    try:
        return name, peer_envs.peer_python(name)
    except peer_envs.PeerEnvError as exc:
        if exc.unreachable:
            pytest.skip(f"package registry unreachable: {exc}")
        pytest.fail(f"cannot create the virtualenv of {exc}")


def tool_orders(session: WorkloadSession, *, shuffled: bool) -> list[list[str]]:
    """One tool order per user turn: the source's (BFCL's) order on every turn, or a
    deterministic permutation per turn (seeded by name; no two turns alike)."""
    names = list(session.tool_order)
    if not shuffled:
        return [names for _ in session.turns]
    orders = [random.Random(f"{ORDER_SEED}-{i}").sample(names, len(names))
              for i in range(len(session.turns))]
    assert len({tuple(order) for order in orders}) == len(orders)
    return orders


def agent_workload(workload: Workload, session: WorkloadSession, *, shuffled: bool,
                   cache: bool) -> dict[str, Any]:
    """The file ``peer_agents.py`` reads (its module docstring): tools as Anthropic dicts
    with the repaired BFCL schemas, the order per turn, user texts and scripted results, and
    whether the agent switches its prompt caching on."""
    return {"model": MODEL, "system": workload.system_prompt, "cache": cache,
            "tools": {name: session.tools[name].to_anthropic() for name in session.tool_order},
            "orders": tool_orders(session, shuffled=shuffled),
            "turns": [{"user": turn.user, "results": {c.id: c.result for c in turn.calls}}
                      for turn in session.turns]}


def session_responder(workload: Workload, session: WorkloadSession) -> Responder:
    """The workload's responder for ``session``, whose id the peers do not send (it reads
    ``metadata.user_id``)."""
    scripted = workload.responder()

    def respond(body: Mapping[str, Any]) -> AssistantTurn:
        return scripted({**body, "metadata": {"user_id": session.id}})

    return respond


def agent_env() -> dict[str, str]:
    """A small environment for the agent: no API keys, base URLs, proxies or tracing
    switches of the machine's; LiteLLM's bundled model-cost map instead of a download."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    return {**keep, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_PROXY": "127.0.0.1,localhost",
            "PYTHONHASHSEED": "0"}


@dataclass
class Run:
    """One agent run through the proxy: the agent's output and the report (``--json``)."""

    agent: dict[str, Any]
    report: dict[str, Any]

    @property
    def hit_rate(self) -> float:
        rate = self.report["overall"]["hit_rate"]
        assert isinstance(rate, float)
        return rate

    @property
    def causes(self) -> list[str]:
        return [cause["cause"] for cause in self.report["causes"]]


def run_agent(peer: tuple[str, Path], workload: Workload, session: WorkloadSession,
              tmp: Path, *, shuffled: bool, stabilize: bool, cache: bool = True) -> Run:
    """Run the peer's agent through a ``stableprompt proxy`` process to a fresh emulator;
    stop the proxy with SIGTERM (it finishes every queued row), read ``report --json`` and
    check that the agent finished every turn with the scripted calls and answer, and that
    each call it made reached the upstream and got exactly one ledger row."""
    name, python = peer
    label = (f"{name}-{'shuffled' if shuffled else 'stable'}{'-stabilize' if stabilize else ''}"
             f"{'' if cache else '-nocache'}")
    work = tmp / f"{label}.json"
    work.write_text(json.dumps(agent_workload(workload, session, shuffled=shuffled,
                                              cache=cache)))
    ledger, captures = tmp / f"{label}.db", tmp / f"{label}-captures"
    options = ["--quiet", "--capture", str(captures), *(["--stabilize"] if stabilize else [])]
    with Emulator(responder=session_responder(workload, session)) as emu, \
            proxy_process(emu.base_url, ledger, *options) as (proc, url):
        done = subprocess.run([str(python), str(AGENTS), name, str(work), url],
                              capture_output=True, text=True, env=agent_env(),
                              timeout=AGENT_TIMEOUT_S, check=False)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        upstream = emu.stats().requests
    assert done.returncode == 0, f"{label}: the agent failed:\n{done.stderr[-4000:]}"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", str(ledger), "--json", "--what-if"]) == 0
    run = Run(json.loads(done.stdout), json.loads(out.getvalue()))
    scripted = [(t.final_text, [c.id for c in t.calls]) for t in session.turns]
    assert [(t["answer"], t["tool_calls"]) for t in run.agent["turns"]] == scripted, label
    assert run.agent["requests"] == session.model_calls == upstream, label
    assert run.report["overall"]["calls"] == run.agent["requests"], label
    assert run.report["overall"]["unknown_usage"] == 0, label
    # Every miss explained where an independent JSON diff of the two bodies puts the first
    # difference (issue 26): the capture holds the bodies as forwarded.
    with Ledger(ledger) as led:
        records = led.records()
    captured = [json.loads(line) for f in sorted(captures.glob("*.jsonl"))
                for line in f.read_text().splitlines()]
    print(label, check_misses(records, captured))
    # The what-if (issue 29) on the peer's traffic: the replay of the policy it used
    # reproduces what it paid within 1%; the hindsight bound is beaten by no candidate.
    for provider, replayed in run.report["what_if"].items():
        paid, used = replayed["recorded_usd"], replayed["as_used"]["usd"]
        assert used == pytest.approx(paid, rel=0.01), (label, provider)
        assert replayed["hindsight_usd"] <= min(p["usd"] for p in replayed["policies"])
    assert run.report["what_if"], label
    return run


@pytest.fixture(scope="module")
def stable(peer: tuple[str, Path], bfcl_demo_workload: Workload,
           tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The baseline: the peer's agent with its own prompt caching and its tools in one order
    on every turn, through the proxy without ``--stabilize``."""
    run = run_agent(peer, bfcl_demo_workload, bfcl_demo_workload.session(SESSION),
                    tmp_path_factory.mktemp("stable"), shuffled=False, stabilize=False)
    assert run.causes == [] and run.report["overall"]["verdicts"]["client_mutation"] == 0
    return run


def test_stabilize_gives_a_reordering_peer_its_stable_hit_rate(
        peer: tuple[str, Path], stable: Run, bfcl_demo_workload: Workload,
        tmp_path: Path) -> None:
    """With its tools in another order every user turn, a peer's agent through
    ``--stabilize`` reaches >= 99% of the hit rate it gets with a stable order; without it
    the report names ``tool-reorder`` as the cause of every loss."""
    session = bfcl_demo_workload.session(SESSION)
    shuffled = run_agent(peer, bfcl_demo_workload, session, tmp_path, shuffled=True,
                         stabilize=False)
    stabilized = run_agent(peer, bfcl_demo_workload, session, tmp_path, shuffled=True,
                           stabilize=True)
    # Tool order is the only thing the workload changes between turns: it must be the top
    # cause, and the only one (another cause would be a misattribution).
    assert shuffled.causes and set(shuffled.causes) == {"tool-reorder"}, shuffled.causes
    assert shuffled.hit_rate < stable.hit_rate
    assert stabilized.hit_rate >= 0.99 * stable.hit_rate, (stable.hit_rate, stabilized.hit_rate)
    assert stabilized.causes == []
    assert stabilized.report["stabilized"]["kinds"]["tool-order"]["calls"] == \
        session.model_calls


def test_stabilize_gives_a_peer_without_prompt_caching_its_cached_hit_rate(
        peer: tuple[str, Path], stable: Run, bfcl_demo_workload: Workload,
        tmp_path: Path) -> None:
    """The same agent with its prompt caching off (no breakpoint anywhere) and its tools
    reordered every turn, through ``--stabilize``: the head and end-of-history breakpoints
    the proxy places reach >= 99% of what the peer's own caching reaches with a stable
    order."""
    session = bfcl_demo_workload.session(SESSION)
    run = run_agent(peer, bfcl_demo_workload, session, tmp_path, shuffled=True, stabilize=True,
                    cache=False)
    assert run.hit_rate >= 0.99 * stable.hit_rate, (stable.hit_rate, run.hit_rate)
    assert run.causes == []
    kinds = run.report["stabilized"]["kinds"]
    assert {kind: kinds[kind]["calls"] for kind in kinds} == dict.fromkeys(
        ("head-breakpoint", "history-breakpoint", "tool-order"), session.model_calls)
