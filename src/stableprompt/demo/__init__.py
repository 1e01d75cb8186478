"""The main-job demo: harness scenarios on a real multi-turn tool workload, measured.

``stableprompt demo`` runs each scenario (:data:`SCENARIOS`: ``stableprompt``, six ways
harnesses break the prefix cache, subagents forked from one pinned head, mid-session
changes, and users who think for minutes between turns) over BFCL v4
multi-turn sessions (:func:`bfcl_workload`; our labelled :func:`synthetic_workload` offline),
each against a fresh loopback :class:`~stableprompt.emulator.Emulator` (an emulator, not a
provider), or, with ``provider="llama-server"``, against llama.cpp's real engine through its
Chat Completions, Responses and Messages endpoints (``_engine_run``), records every call in a
ledger and summarizes it (:func:`run_demo` -> :class:`DemoResult`). :func:`policy_trial`
learns a :class:`~stableprompt.CachePolicy` on half the sessions of a scenario (default
``think-time``) and measures it against the default on the other half (:class:`TrialRun`
per run, keep-alive pings sent and priced).

Example::

    from stableprompt.demo import bfcl_workload, run_demo

    result = run_demo(bfcl_workload().select(5), provider="anthropic")
    print(result.to_json()["scenarios"]["stableprompt"]["hit_rate"])
"""

from ._policy_trial import PolicyTrial, TrialRun, policy_trial
from ._run import BACKEND, DEFAULT_MODELS, DEFAULT_SESSIONS, DemoResult, run_demo
from ._scenarios import SCENARIOS, Scenario, scenario_names
from ._system import SYSTEM_PROMPT
from ._workload import (
    BFCL_WORKLOAD,
    SYNTHETIC_WORKLOAD,
    ScriptedCall,
    ScriptedTurn,
    Workload,
    WorkloadSession,
    bfcl_workload,
    synthetic_workload,
)

__all__ = [
    "BACKEND",
    "BFCL_WORKLOAD",
    "DEFAULT_MODELS",
    "DEFAULT_SESSIONS",
    "SCENARIOS",
    "SYNTHETIC_WORKLOAD",
    "SYSTEM_PROMPT",
    "DemoResult",
    "PolicyTrial",
    "Scenario",
    "ScriptedCall",
    "ScriptedTurn",
    "TrialRun",
    "Workload",
    "WorkloadSession",
    "bfcl_workload",
    "policy_trial",
    "run_demo",
    "scenario_names",
    "synthetic_workload",
]
