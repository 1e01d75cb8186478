"""Issue 29's acceptance on the emulator: a cache policy learnt from one half of the
``think-time`` sessions, measured against the 5-minute default on the other half.

``stableprompt.demo.policy_trial`` does the work (its docstring has the protocol): the first
half of the BFCL sessions runs under the default and ``CachePolicy.from_ledger`` chooses
twice: among every candidate the demo can send (TTL choices, each with and without
keep-alive) and among the TTL choices only; the second half runs on fresh emulators under the
default, under each choice and, when the choice has keep-alive, once more with the
keep-alive scheduler's default gap prior instead of the learn half's gaps. A keep-alive
policy's pings are sent by ``KeepAliveScheduler`` at the fake clock's due times and recorded
as ledger rows. Costs are read back from the ledgers (``summarize(...).cost_usd``: the
emulator's reported usage priced with genai-prices, pings included) and each ledger is
replayed by ``what_if`` (the policy used with its recorded pings).

Besides the trial, this script runs the second half twice more with a *turn-end oracle*: a
harness that knows from the script which call ends a user turn and how long the user will
then think, and marks that call's history breakpoint with the 1-hour TTL when the pause
outlives 5 minutes (5 minutes everywhere else). It is not a policy anyone can send (the
harness cannot know before the answer that a call ends the turn), but it measures on the
emulator, not in the replay model, what the what-if's hindsight bound stands for:

- ``oracle_sdk``: the head frozen at 1 hour (the SDK's rule: the head's TTL is fixed when it
  is frozen, and longer TTLs must come first), so every session's first call writes its head
  at the 1-hour price;
- ``oracle_per_call``: the head breakpoint at 5 minutes, both breakpoints switched to 1 hour
  on the turn-end calls only (the body edited after rendering: ``cache_control`` is not part
  of the cached content, so the head's bytes stay the same to the cache), which is the
  sequence of choices the hindsight bound assumes.

Run: ``PYTHONPATH=src python benchmarks/bench_think_time.py [--sessions 50] [--time-demo]``
(about 15 s; ``--time-demo`` adds two full ``stableprompt demo`` runs, with and without the
think-time scenario, and two runs of the think-time scenario alone, with and without
keep-alive, about a minute). Prints one JSON object; the numbers go to
``benchmarks/RESULTS.md`` by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from stableprompt import CachePolicy, KeepAlive, Ledger, what_if
from stableprompt._accounting._pricing import genai_prices_version
from stableprompt.demo import bfcl_workload, policy_trial, run_demo, scenario_names
from stableprompt.demo._driver import CALL_STEP_S, client_sender
from stableprompt.demo._run import _run_scenario
from stableprompt.demo._scenarios import HarnessSpec, Outgoing, Scenario, ThinkTime
from stableprompt.demo._workload import Workload, WorkloadSession

_HOUR_AT_TURN_END = CachePolicy(name="turn-end oracle", head="1h", history="1h")
_FIVE_MINUTES = CachePolicy(name="turn-end oracle", head="1h", history="5m")


class TurnEndOracle(ThinkTime):
    """The think-time harness with the script's knowledge: a 1-hour history breakpoint on
    the call that ends a turn followed by a pause beyond 5 minutes, 5 minutes elsewhere; the
    head frozen at 1 hour (``oracle_sdk``)."""

    def __init__(self, session: WorkloadSession, spec: HarnessSpec) -> None:
        super().__init__(session, replace(spec, cache_policy=self._base_policy()))
        self._turn, self._call = 0, 0

    @staticmethod
    def _base_policy() -> CachePolicy | None:
        return _FIVE_MINUTES

    def begin_turn(self, index: int) -> None:
        self._turn, self._call = index, 0

    def _before_long_pause(self) -> bool:
        """This call ends its turn and the user then thinks more than 5 minutes."""
        self._call += 1
        turns = self._session.turns
        ends_turn = self._call == turns[self._turn].model_calls
        pause = self.turn_gap_s(self._turn + 1) if self._turn + 1 < len(turns) else None
        return ends_turn and pause is not None and pause + CALL_STEP_S > 300

    def _policy_params(self) -> dict[str, Any]:
        policy = _HOUR_AT_TURN_END if self._before_long_pause() else _FIVE_MINUTES
        return {"cache_policy": policy, "request_kind": self.request_kind}


class PerCallOracle(TurnEndOracle):
    """The same choices with the head at 5 minutes, both breakpoints at 1 hour on the
    turn-end calls (``oracle_per_call``)."""

    @staticmethod
    def _base_policy() -> CachePolicy | None:
        return None

    def _policy_params(self) -> dict[str, Any]:
        return {}

    def request(self, now: float) -> Outgoing:
        outgoing = super().request(now)
        if not self._before_long_pause():
            return outgoing
        body = json.loads(outgoing.to_bytes())
        for marker in _markers(body):
            marker["ttl"] = "1h"
        return Outgoing(body)


def _markers(value: Any) -> Iterator[dict[str, Any]]:
    """Every ``cache_control`` object in a request body."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "cache_control" and isinstance(item, dict):
                yield item
            else:
                yield from _markers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _markers(item)


def _oracle_usd(test_half: Workload, directory: Path, factory: type[TurnEndOracle]
                ) -> tuple[float, float]:
    """The test half under an oracle: (measured USD, what-if recorded USD)."""
    scenario = Scenario("think-time", "turn-end oracle", "", ("anthropic",), factory)
    path = directory / f"test-{factory.__name__}.db"
    with Ledger(path) as ledger:
        _run_scenario(scenario, test_half, "anthropic", "claude-sonnet-5", ledger, None, None,
                      client_sender, "anthropic")
    from stableprompt import summarize

    with Ledger(path, read_only=True) as ledger:
        records = list(ledger.records())
    cost = summarize(records).cost_usd
    assert cost is not None
    return cost, what_if(records).recorded_usd


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": sys.version.split()[0],
            "platform": platform.platform(), "genai_prices": genai_prices_version(),
            "load_1min": round(os.getloadavg()[0], 2)}


def _demo_seconds(workload: Workload, names: tuple[str, ...],
                  policy: CachePolicy | None = None) -> float:
    started = time.perf_counter()
    run_demo(workload, scenarios=names, cache_policy=policy)
    return round(time.perf_counter() - started, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50,
                        help="BFCL sessions (default 50: 25 learn, 25 test)")
    parser.add_argument("--time-demo", action="store_true",
                        help="also time the default demo with and without think-time")
    args = parser.parse_args()
    workload = bfcl_workload().select(args.sessions)
    out: dict[str, Any] = {"machine": _machine(), "sessions": len(workload.sessions)}
    with tempfile.TemporaryDirectory(prefix="bench-think-time-") as tmp:
        started = time.perf_counter()
        trial = policy_trial(workload, directory=tmp)
        out["trial_seconds"] = round(time.perf_counter() - started, 2)
        out["trial"] = trial.to_json()
        half = len(workload.sessions) // 2
        for name, factory in (("oracle_sdk", TurnEndOracle),
                              ("oracle_per_call", PerCallOracle)):
            usd, recorded = _oracle_usd(workload.select(None, skip=half), Path(tmp), factory)
            out[name] = {"measured_usd": round(usd, 6), "recorded_usd": round(recorded, 6),
                         "above_hindsight": round(usd / trial.default.hindsight_usd - 1, 4)}
    if args.time_demo:
        names = scenario_names("anthropic")
        without = tuple(n for n in names if n != "think-time")
        keep = CachePolicy(keep_alive=KeepAlive(interval_s=270, max_pings=14))
        out["demo_seconds"] = {
            "with_think_time": _demo_seconds(workload, names),
            "without_think_time": _demo_seconds(workload, without),
            "think_time_only": _demo_seconds(workload, ("think-time",)),
            "think_time_only_keep_alive": _demo_seconds(workload, ("think-time",), keep)}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
