"""Learn a cache policy on half the sessions, measure it on the other half (issue 29's
acceptance, on the emulator).

:func:`policy_trial`:

1. splits the workload's sessions in two halves that share no session: the first
   ``len // 2`` *learn*, the rest *test*;
2. runs the scenario (default ``think-time``: :mod:`._think_time`) on the learn half under the
   provider's default TTLs and lets :meth:`~stableprompt.CachePolicy.from_ledger` choose a
   policy from that ledger;
3. runs the test half twice, each on a fresh emulator (empty cache, same fake-clock start):
   under the default and under the chosen policy;
4. reads every number back from the three ledgers: the *measured* cost is
   :func:`~stableprompt.summarize` of the ledger (the emulator's reported usage priced with
   genai-prices), and :func:`~stableprompt.what_if` replays each ledger (``recorded_usd``,
   the replay of the policy used, the hindsight bound).

Candidates: by default the provider's TTL choices without keep-alive
(:func:`~stableprompt._accounting._what_if.candidate_policies`, keep-alive variants dropped),
because the demo sends no keep-alive requests: a policy with one could be replayed but not
measured. :attr:`PolicyTrial.unrestricted` is what ``from_ledger`` picks among every candidate,
keep-alive included (replayed only), so the two can be compared.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._accounting._what_if import WhatIf, candidate_policies, what_if
from .._economics._cache_policy import CachePolicy
from .._exceptions import InputError
from .._policy import cache_rules
from ._run import DEFAULT_MODELS, DemoResult, run_demo
from ._workload import Workload

__all__ = ["PolicyTrial", "policy_trial"]


@dataclass(frozen=True)
class PolicyTrial:
    """What :func:`policy_trial` measured (USD unless said otherwise).

    Attributes:
        provider: Emulated provider.
        model: Model id sent and priced.
        scenario: The scenario run.
        learn_sessions: Session ids of the learn half.
        test_sessions: Session ids of the test half.
        chosen: The policy ``from_ledger`` chose on the learn half among the candidates.
        unrestricted: What it chooses among every candidate (keep-alive included).
        learn: The learn ledger's what-if over the candidates.
        default_usd: Test half under the default, measured (``summarize``).
        chosen_usd: Test half under :attr:`chosen`, measured.
        default: The default test ledger's what-if over every candidate (its
            ``hindsight_usd`` is the bound with keep-alive allowed).
        default_ttl: The same ledger's what-if over the candidates only (its
            ``hindsight_usd``: the bound among TTL choices).
        chosen_replay: The chosen-policy test ledger's what-if over the candidates.
    """

    provider: str
    model: str
    scenario: str
    learn_sessions: tuple[str, ...]
    test_sessions: tuple[str, ...]
    chosen: CachePolicy
    unrestricted: CachePolicy
    learn: WhatIf
    default_usd: float
    chosen_usd: float
    default: WhatIf
    default_ttl: WhatIf
    chosen_replay: WhatIf

    @property
    def saving(self) -> float:
        """``1 - chosen_usd / default_usd``: the chosen policy's measured saving (fraction)."""
        return 1 - self.chosen_usd / self.default_usd

    @property
    def above_hindsight(self) -> float:
        """``chosen_usd / default.hindsight_usd - 1``: distance to the bound with keep-alive
        allowed (fraction)."""
        return self.chosen_usd / self.default.hindsight_usd - 1

    @property
    def above_ttl_hindsight(self) -> float:
        """``chosen_usd / default_ttl.hindsight_usd - 1``: distance to the bound among the
        candidates (fraction)."""
        return self.chosen_usd / self.default_ttl.hindsight_usd - 1

    @staticmethod
    def as_used_error(result: WhatIf) -> float:
        """``as_used.usd / recorded_usd - 1`` of one what-if (fraction)."""
        return result.as_used.usd / result.recorded_usd - 1

    def to_json(self) -> dict[str, Any]:
        """The numbers, rounded: USD to 6 digits, fractions to 4."""
        def whatif(result: WhatIf) -> dict[str, Any]:
            return {"recorded_usd": round(result.recorded_usd, 6),
                    "as_used": result.as_used.policy.label(),
                    "as_used_usd": round(result.as_used.usd, 6),
                    "as_used_error": round(self.as_used_error(result), 6),
                    "hindsight_usd": round(result.hindsight_usd, 6),
                    "outcomes": {o.policy.name or o.policy.label(): round(o.usd, 6)
                                 for o in result.outcomes}}

        return {"provider": self.provider, "model": self.model, "scenario": self.scenario,
                "learn_sessions": len(self.learn_sessions),
                "test_sessions": len(self.test_sessions),
                "chosen": self.chosen.label(),
                "chosen_settings": self.chosen.model_dump(mode="json", exclude_defaults=True,
                                                          exclude={"name"}),
                "unrestricted": self.unrestricted.label(),
                "learn": whatif(self.learn),
                "test_default_usd": round(self.default_usd, 6),
                "test_chosen_usd": round(self.chosen_usd, 6),
                "saving": round(self.saving, 4),
                "hindsight_usd": round(self.default.hindsight_usd, 6),
                "ttl_hindsight_usd": round(self.default_ttl.hindsight_usd, 6),
                "above_hindsight": round(self.above_hindsight, 4),
                "above_ttl_hindsight": round(self.above_ttl_hindsight, 4),
                "test_default": whatif(self.default),
                "test_chosen": whatif(self.chosen_replay)}


def ttl_candidates(provider: str, model: str) -> list[CachePolicy]:
    """The what-if's candidates for ``provider``/``model`` without keep-alive or an explicit
    cache: the policies the demo can send."""
    return [p for p in candidate_policies(cache_rules(provider, model))
            if p.keep_alive is None and not p.explicit_cache]


def policy_trial(workload: Workload, *, provider: str = "anthropic", model: str | None = None,
                 scenario: str = "think-time", directory: str | Path | None = None,
                 candidates: Sequence[CachePolicy] | None = None) -> PolicyTrial:
    """Learn a policy on the first half of ``workload``'s sessions, measure it against the
    default on the second half (module docstring).

    Args:
        workload: At least two sessions.
        provider: An emulated provider with TTL choices (``"anthropic"``, ``"bedrock"``).
        model: Model id (default: the demo's for ``provider``).
        scenario: An SDK scenario (:attr:`~stableprompt.demo.Scenario.takes_policy`).
        directory: Keep the three ledgers here (``learn.db``, ``test-default.db``,
            ``test-chosen.db``; none may exist yet); default: a temporary directory,
            deleted afterwards.
        candidates: Policies ``from_ledger`` chooses among (default: :func:`ttl_candidates`).

    Returns:
        The :class:`PolicyTrial`.

    Raises:
        InputError: Fewer than two sessions (code ``demo-sessions``), or a run the demo
            refuses (see :func:`~stableprompt.demo.run_demo`).
        PolicyError: No priced call to replay.
    """
    if len(workload.sessions) < 2:
        raise InputError(f"a policy trial needs at least 2 sessions, got "
                         f"{len(workload.sessions)}", code="demo-sessions")
    model = model or DEFAULT_MODELS.get(provider, "")
    pool = list(candidates) if candidates is not None else ttl_candidates(provider, model)
    half = len(workload.sessions) // 2
    learn_part, test_part = workload.select(half), workload.select(None, skip=half)
    tmp = None
    if directory is None:
        tmp = Path(tempfile.mkdtemp(prefix="stableprompt-trial-"))
    where = Path(directory) if directory is not None else tmp
    assert where is not None
    where.mkdir(parents=True, exist_ok=True)
    try:
        def run(part: Workload, name: str, policy: CachePolicy | None) -> DemoResult:
            return run_demo(part, provider=provider, model=model, scenarios=[scenario],
                            ledger_path=where / name, cache_policy=policy)

        run(learn_part, "learn.db", None)
        learn = what_if(where / "learn.db", provider=provider, policies=pool)
        chosen = CachePolicy.from_ledger(where / "learn.db", provider=provider, policies=pool)
        unrestricted = CachePolicy.from_ledger(where / "learn.db", provider=provider)
        default_run = run(test_part, "test-default.db", None)
        chosen_run = run(test_part, "test-chosen.db", chosen)
        return PolicyTrial(
            provider=provider, model=model, scenario=scenario,
            learn_sessions=tuple(s.id for s in learn_part.sessions),
            test_sessions=tuple(s.id for s in test_part.sessions),
            chosen=chosen, unrestricted=unrestricted, learn=learn,
            default_usd=_measured(default_run, scenario),
            chosen_usd=_measured(chosen_run, scenario),
            default=what_if(where / "test-default.db", provider=provider),
            default_ttl=what_if(where / "test-default.db", provider=provider, policies=pool),
            chosen_replay=what_if(where / "test-chosen.db", provider=provider, policies=pool))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _measured(result: DemoResult, scenario: str) -> float:
    """The scenario's summed cost from its ledger (``summarize``: reported usage priced with
    genai-prices)."""
    cost = result.report.scenarios[scenario].totals.cost_usd
    if cost is None:
        raise InputError(f"scenario {scenario!r} of model {result.model!r} has no price "
                         "(genai-prices): a policy trial compares costs", code="demo-model")
    return cost
