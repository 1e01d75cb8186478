"""Learn a cache policy on half the sessions, measure it on the other half (issue 29's
acceptance, on the emulator).

:func:`policy_trial`:

1. splits the workload's sessions in two halves that share no session: the first
   ``len // 2`` *learn*, the rest *test*;
2. runs the scenario (default ``think-time``: :mod:`._think_time`) on the learn half under the
   provider's default TTLs and lets :meth:`~stableprompt.CachePolicy.from_ledger` choose two
   policies from that ledger: :attr:`PolicyTrial.chosen` among every candidate the demo can
   send (:func:`runnable_candidates`: TTL choices, each with and without keep-alive) and
   :attr:`PolicyTrial.ttl_chosen` among the TTL choices only (:func:`ttl_candidates`); the
   TTL choices are the labels the demo's requests can set, by the what-if's rule
   (:func:`settable_labels`: for OpenAI only what its API takes for the wire format and
   model). A provider or model whose demo offers nothing to choose (Gemini's implicit
   caching; OpenAI before GPT-5.6) is refused before anything runs;
3. runs the test half on a fresh emulator each time (empty cache, same fake-clock start):
   under the default, under :attr:`~PolicyTrial.chosen` and under
   :attr:`~PolicyTrial.ttl_chosen`. A keep-alive policy's pings are sent
   (:class:`~stableprompt.KeepAliveScheduler`, ``run_demo``) with the learn half's idle gaps
   as the scheduler's gap prior (the chosen ``KeepAlive.prior_gaps_s``, which ``from_ledger``
   fills: what it learnt, never the test half's), and once more with the scheduler's default
   prior (:attr:`PolicyTrial.chosen_default_prior`), to show what the prior is worth;
4. reads every number back from the ledgers (:class:`TrialRun`): the *measured* cost is
   :func:`~stableprompt.summarize`'s ``cost_usd`` (the emulator's reported usage priced with
   genai-prices, keep-alive pings included), and :func:`~stableprompt.what_if` replays each
   ledger (``recorded_usd``, the replay of the policy used with its recorded pings, the
   hindsight bound).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._accounting._keepalive import is_keepalive
from .._accounting._summary import Summary
from .._accounting._what_if import WhatIf, candidate_policies, what_if
from .._economics._cache_policy import CachePolicy, gap_quantiles
from .._exceptions import InputError
from .._ledger._ledger import Ledger
from .._policy import cache_rules, openai_explicit_rule
from ._run import DEFAULT_MODELS, ENGINE_PROVIDER, check_cache_policy, run_demo
from ._scenarios import PROVIDER_WIRES, SCENARIOS
from ._workload import Workload

__all__ = ["PolicyTrial", "TrialRun", "policy_trial", "runnable_candidates",
           "settable_labels", "ttl_candidates"]


@dataclass(frozen=True)
class TrialRun:
    """One run of the test half, read back from its ledger.

    Attributes:
        policy: The policy the run followed, ``None`` for the provider's defaults.
        usd: Measured cost (USD): ``summarize(records).cost_usd``, keep-alive pings
            included.
        calls: Real calls (pings not counted).
        ttl_expired: Real calls whose verdict is ``ttl_expired``.
        pings: Keep-alive pings sent (rows marked ``keepalive``).
        pings_usd: What they cost (USD, inside :attr:`usd`).
        most_pings_in_a_gap: The most pings one idle gap had (their ``keepalive_ping``
            numbers); never more than the policy's ``max_pings``.
        replay: :func:`~stableprompt.what_if` of the ledger over the trial's candidates.
    """

    policy: CachePolicy | None
    usd: float
    calls: int
    ttl_expired: int
    pings: int
    pings_usd: float
    most_pings_in_a_gap: int
    replay: WhatIf

    @property
    def as_used_error(self) -> float:
        """``as_used.usd / recorded_usd - 1`` of :attr:`replay` (fraction): how well the
        replay of the policy used (its recorded pings included) reproduces the ledger."""
        return self.replay.as_used.usd / self.replay.recorded_usd - 1

    @property
    def cap_exceeded(self) -> bool:
        """Some idle gap had more pings than the policy's ``max_pings``."""
        keep = self.policy.keep_alive if self.policy is not None else None
        return self.most_pings_in_a_gap > (keep.max_pings if keep is not None else 0)

    def to_json(self) -> dict[str, Any]:
        """The numbers, rounded: USD to 6 digits, fractions to 6."""
        replay = self.replay
        return {"policy": None if self.policy is None else self.policy.label(),
                "usd": round(self.usd, 6), "calls": self.calls,
                "ttl_expired": self.ttl_expired, "pings": self.pings,
                "pings_usd": round(self.pings_usd, 6),
                "most_pings_in_a_gap": self.most_pings_in_a_gap,
                "cap_exceeded": self.cap_exceeded,
                "recorded_usd": round(replay.recorded_usd, 6),
                "as_used_usd": round(replay.as_used.usd, 6),
                "as_used_error": round(self.as_used_error, 6),
                "hindsight_usd": round(replay.hindsight_usd, 6),
                "outcomes": _outcomes(replay)}


@dataclass(frozen=True)
class PolicyTrial:
    """What :func:`policy_trial` measured (USD unless said otherwise).

    Attributes:
        provider: Emulated provider.
        model: Model id sent and priced.
        scenario: The scenario run.
        learn_sessions: Session ids of the learn half.
        test_sessions: Session ids of the test half.
        chosen: The policy ``from_ledger`` chose on the learn half among every candidate the
            demo can send (keep-alive included).
        ttl_chosen: What it chose among the TTL choices only.
        learn: The learn ledger's what-if over every candidate.
        prior_gaps_s: The learn half's idle gaps (seconds; quantiles, the chosen
            ``KeepAlive.prior_gaps_s``): the keep-alive scheduler's prior on the test half.
        default_run: Test half under the default, measured; its ``replay`` is over every
            candidate, so its ``hindsight_usd`` is the bound with keep-alive allowed.
        chosen_run: Test half under :attr:`chosen` (keep-alive: with the learnt prior).
        ttl_chosen_run: Test half under :attr:`ttl_chosen`.
        chosen_default_prior: Test half under :attr:`chosen` with the scheduler's default
            gap prior; ``None`` when :attr:`chosen` has no keep-alive.
        default_ttl: The default test ledger's what-if over the TTL choices only (its
            ``hindsight_usd``: the bound among them).
    """

    provider: str
    model: str
    scenario: str
    learn_sessions: tuple[str, ...]
    test_sessions: tuple[str, ...]
    chosen: CachePolicy
    ttl_chosen: CachePolicy
    learn: WhatIf
    prior_gaps_s: tuple[float, ...]
    default_run: TrialRun
    chosen_run: TrialRun
    ttl_chosen_run: TrialRun
    chosen_default_prior: TrialRun | None
    default_ttl: WhatIf

    @property
    def default(self) -> WhatIf:
        """The default test ledger's what-if over every candidate."""
        return self.default_run.replay

    @property
    def hindsight_usd(self) -> float:
        """The hindsight bound: ``default.hindsight_usd`` (keep-alive allowed)."""
        return self.default.hindsight_usd

    @property
    def default_usd(self) -> float:
        """Test half under the default, measured."""
        return self.default_run.usd

    @property
    def chosen_usd(self) -> float:
        """Test half under :attr:`chosen`, measured (pings included)."""
        return self.chosen_run.usd

    @property
    def ttl_chosen_usd(self) -> float:
        """Test half under :attr:`ttl_chosen`, measured."""
        return self.ttl_chosen_run.usd

    def runs(self) -> dict[str, TrialRun]:
        """Every measured run by name: ``default``, ``chosen``, ``ttl_chosen`` and, with
        keep-alive, ``chosen_default_prior``."""
        out = {"default": self.default_run, "chosen": self.chosen_run,
               "ttl_chosen": self.ttl_chosen_run}
        if self.chosen_default_prior is not None:
            out["chosen_default_prior"] = self.chosen_default_prior
        return out

    def saving(self, run: TrialRun | None = None) -> float:
        """``1 - usd / default_usd`` of ``run`` (default :attr:`chosen_run`): its measured
        saving against the default (fraction)."""
        return 1 - (run or self.chosen_run).usd / self.default_usd

    def above_hindsight(self, run: TrialRun | None = None) -> float:
        """``usd / hindsight_usd - 1`` of ``run`` (default :attr:`chosen_run`): its measured
        distance to the bound with keep-alive allowed (fraction)."""
        return (run or self.chosen_run).usd / self.hindsight_usd - 1

    def replayed_usd(self, policy: CachePolicy) -> float:
        """What ``policy`` (its TTLs and keep-alive) replays to on the default test ledger,
        the what-if's prediction of its measured cost (USD)."""
        for outcome in self.default.outcomes:
            if _same(outcome.policy, policy):
                return outcome.usd
        raise LookupError(f"{policy.label()!r} is not among the replayed candidates")

    def to_json(self) -> dict[str, Any]:
        """The numbers, rounded: USD to 6 digits, fractions to 4 (errors to 6)."""
        runs = {}
        for name, run in self.runs().items():
            entry = run.to_json()
            entry["saving"] = round(self.saving(run), 4)
            entry["above_hindsight"] = round(self.above_hindsight(run), 4)
            if run.policy is not None:
                entry["replayed_on_default_usd"] = round(self.replayed_usd(run.policy), 6)
            runs[name] = entry
        return {"provider": self.provider, "model": self.model, "scenario": self.scenario,
                "learn_sessions": len(self.learn_sessions),
                "test_sessions": len(self.test_sessions),
                "chosen": self.chosen.label(),
                "chosen_settings": _settings(self.chosen),
                "ttl_chosen": self.ttl_chosen.label(),
                "ttl_chosen_settings": _settings(self.ttl_chosen),
                "prior_gaps": len(self.prior_gaps_s),
                "learn": {"recorded_usd": round(self.learn.recorded_usd, 6),
                          "as_used_usd": round(self.learn.as_used.usd, 6),
                          "as_used_error": round(
                              self.learn.as_used.usd / self.learn.recorded_usd - 1, 6),
                          "hindsight_usd": round(self.learn.hindsight_usd, 6),
                          "outcomes": _outcomes(self.learn)},
                "hindsight_usd": round(self.hindsight_usd, 6),
                "ttl_hindsight_usd": round(self.default_ttl.hindsight_usd, 6),
                "test": runs}


def _settings(policy: CachePolicy) -> dict[str, Any]:
    """The policy's choices as JSON, without its name and its keep-alive's gap prior (the
    evidence it was chosen on, not a choice)."""
    return policy.model_dump(mode="json", exclude_defaults=True,
                             exclude={"name": True, "keep_alive": {"prior_gaps_s"}})


def _outcomes(result: WhatIf) -> dict[str, float]:
    return {o.policy.name or o.policy.label(): round(o.usd, 6) for o in result.outcomes}


def _same(a: CachePolicy, b: CachePolicy) -> bool:
    """Same choices (TTLs per kind, keep-alive, explicit cache), whatever the names."""
    return _settings(a) == _settings(b)


def settable_labels(provider: str, model: str, wire: str | None = None) -> list[str] | None:
    """TTL labels the demo's requests to ``provider``/``model`` can choose, by the rule the
    what-if follows (``_accounting._what_if._settable_labels``): OpenAI, what
    ``OPENAI_EXPLICIT_RULES`` accepts for the wire format (default the demo's,
    ``openai-chat``) and model (Chat ``30m``, Responses ``30m`` / ``12h``; none before
    GPT-5.6, whose retention the renders do not set); ``None`` elsewhere (the provider
    rules' TTLs)."""
    if provider != "openai":
        return None
    rule = openai_explicit_rule(wire or PROVIDER_WIRES[provider], model)
    return list(rule.ttls) if rule is not None else []


def _candidates(provider: str, model: str, wire: str | None,
                prior_gaps_s: tuple[float, ...] = ()) -> list[CachePolicy]:
    """The what-if's candidates over the labels the demo's requests can choose."""
    return candidate_policies(cache_rules(provider, model),
                              labels=settable_labels(provider, model, wire),
                              prior_gaps_s=prior_gaps_s)


def ttl_candidates(provider: str, model: str, wire: str | None = None) -> list[CachePolicy]:
    """The what-if's candidates for ``provider``/``model`` (:func:`settable_labels`) without
    keep-alive or an explicit cache: the TTL choices."""
    return [p for p in _candidates(provider, model, wire)
            if p.keep_alive is None and not p.explicit_cache]


def runnable_candidates(provider: str, model: str, scenario: str = "think-time",
                        wire: str | None = None,
                        prior_gaps_s: tuple[float, ...] = ()) -> list[CachePolicy]:
    """The what-if's candidates for ``provider``/``model`` (:func:`settable_labels`) that
    ``run_demo`` can follow in ``scenario``: the TTL choices, and their keep-alive variants
    where the demo sends pings (Anthropic; OpenAI GPT-5.6+; with the scheduler's gap prior
    ``prior_gaps_s``, and ``closes_conversations``: the demo ends each session's
    conversation on the scheduler), never an explicit cache."""
    return _runnable(provider, model, scenario, wire, prior_gaps_s)[0]


def _runnable(provider: str, model: str, scenario: str, wire: str | None,
              prior_gaps_s: tuple[float, ...] = ()
              ) -> tuple[list[CachePolicy], list[str]]:
    """:func:`runnable_candidates`, and why the others are not (``check_cache_policy``)."""
    chosen = [s for s in SCENARIOS if s.name == scenario]
    out, refused = [], []
    for policy in _candidates(provider, model, wire, prior_gaps_s):
        if policy.keep_alive is not None:
            policy = policy.model_copy(update={"keep_alive": policy.keep_alive.model_copy(
                update={"closes_conversations": True})})
        try:
            check_cache_policy(policy, chosen, provider, model, wire=wire)
        except InputError as exc:
            refused.append(exc.message)
            continue
        out.append(policy)
    return out, refused


def _trial_setup(workload: Workload, provider: str, model: str | None, scenario: str,
                 candidates: Sequence[CachePolicy] | None
                 ) -> tuple[str, list[CachePolicy], list[CachePolicy]]:
    """``(model, pool, ttl_pool)`` of a trial, every argument checked before anything runs.

    Raises:
        InputError: ``policy_trial``'s, before any demo runs.
    """
    if len(workload.sessions) < 2:
        raise InputError(f"a policy trial needs at least 2 sessions, got "
                         f"{len(workload.sessions)}", code="demo-sessions")
    if provider not in DEFAULT_MODELS or provider == ENGINE_PROVIDER:
        known = ", ".join(p for p in DEFAULT_MODELS if p != ENGINE_PROVIDER)
        raise InputError(f"a policy trial runs on the emulator: provider {provider!r} is not "
                         f"one of {known}", code="demo-provider")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise InputError(f"model must be a model id, got {model!r}; omit it for the "
                         f"default ({DEFAULT_MODELS[provider]})", code="demo-model")
    model = model or DEFAULT_MODELS[provider]
    match = next((s for s in SCENARIOS if s.name == scenario), None)
    if match is None or not match.takes_policy or provider not in match.providers:
        names = [s.name for s in SCENARIOS if s.takes_policy and provider in s.providers]
        raise InputError(f"a policy trial runs an SDK scenario that takes a cache policy; "
                         f"{scenario!r} is not one for {provider} (choose from "
                         f"{', '.join(names) or 'none'})", code="demo-scenario")
    if candidates is not None:
        pool = list(candidates)
        for policy in pool:  # refused now, not after the learn half ran
            check_cache_policy(policy, [match], provider, model)
    else:
        pool, refused = _runnable(provider, model, scenario, None)
        if len(pool) < 2:
            follows = f"only {pool[0].label()!r}" if pool else "no policy"
            why = f": {refused[0]}" if refused else ""
            raise InputError(
                f"a policy trial needs at least two cache policies to choose among, but the "
                f"{provider} demo can follow {follows} for {model!r} "
                f"({PROVIDER_WIRES[provider]}){why}; try provider 'anthropic', 'bedrock' with "
                "a model offering 1h, or 'openai' with GPT-5.6 or later",
                code="demo-cache-policy")
    ttl_pool = [p for p in pool if p.keep_alive is None and not p.explicit_cache]
    if not ttl_pool:
        raise InputError("the candidates hold no TTL-only policy (no keep-alive, no explicit "
                         "cache) to choose as the second row", code="demo-cache-policy")
    return model, pool, ttl_pool


def policy_trial(workload: Workload, *, provider: str = "anthropic", model: str | None = None,
                 scenario: str = "think-time", directory: str | Path | None = None,
                 candidates: Sequence[CachePolicy] | None = None) -> PolicyTrial:
    """Learn policies on the first half of ``workload``'s sessions, measure them against the
    default on the second half (module docstring).

    Args:
        workload: At least two sessions.
        provider: An emulated provider whose demo offers a choice (``"anthropic"``;
            ``"openai"`` with GPT-5.6 or later: keep-alive; ``"bedrock"`` with a model
            offering 1h).
        model: Model id (default: the demo's for ``provider``).
        scenario: An SDK scenario (:attr:`~stableprompt.demo.Scenario.takes_policy`).
        directory: Keep the ledgers here (``learn.db``, ``test-default.db``,
            ``test-chosen.db``, ``test-ttl-chosen.db`` and, for a keep-alive choice,
            ``test-chosen-default-prior.db``; none may exist yet); default: a temporary
            directory, deleted afterwards.
        candidates: Policies :attr:`PolicyTrial.chosen` is chosen among (default:
            :func:`runnable_candidates`); :attr:`PolicyTrial.ttl_chosen` is chosen among
            those without keep-alive or an explicit cache.

    Returns:
        The :class:`PolicyTrial`.

    Raises:
        InputError: before anything runs: fewer than two sessions (code
            ``demo-sessions``), a provider that is not emulated (``demo-provider``), an
            empty model id (``demo-model``), a scenario that takes no policy
            (``demo-scenario``), a candidate the demo cannot follow, or a provider/model
            whose demo offers fewer than two candidates (``demo-cache-policy``: Gemini's
            implicit caching, OpenAI before GPT-5.6, Bedrock models with one TTL).
        PolicyError: No priced call to replay.
    """
    model, pool, ttl_pool = _trial_setup(workload, provider, model, scenario, candidates)
    half = len(workload.sessions) // 2
    learn_part, test_part = workload.select(half), workload.select(None, skip=half)
    tmp = None
    if directory is None:
        tmp = Path(tempfile.mkdtemp(prefix="stableprompt-trial-"))
    where = Path(directory) if directory is not None else tmp
    assert where is not None
    where.mkdir(parents=True, exist_ok=True)
    try:
        def run(part: Workload, name: str, policy: CachePolicy | None) -> TrialRun:
            result = run_demo(part, provider=provider, model=model, scenarios=[scenario],
                              ledger_path=where / name, cache_policy=policy)
            return _measure(where / name, policy, result.report, provider, pool)

        learn_db = where / "learn.db"
        run_demo(learn_part, provider=provider, model=model, scenarios=[scenario],
                 ledger_path=learn_db)
        if candidates is None:  # the keep-alives' prior: the learn half's gaps
            gaps = what_if(learn_db, provider=provider, policies=ttl_pool).gaps_s
            pool = runnable_candidates(provider, model, scenario,
                                       prior_gaps_s=gap_quantiles(gaps))
        learn = what_if(learn_db, provider=provider, policies=pool)
        chosen = CachePolicy.from_ledger(learn_db, provider=provider, policies=pool)
        ttl_chosen = CachePolicy.from_ledger(learn_db, provider=provider, policies=ttl_pool)
        prior = chosen.keep_alive.prior_gaps_s if chosen.keep_alive is not None else ()
        default_run = run(test_part, "test-default.db", None)
        chosen_run = run(test_part, "test-chosen.db", chosen)
        ttl_chosen_run = run(test_part, "test-ttl-chosen.db", ttl_chosen)
        no_prior = None
        if chosen.keep_alive is not None:
            without = chosen.keep_alive.model_copy(update={"prior_gaps_s": ()})
            no_prior = run(test_part, "test-chosen-default-prior.db",
                           chosen.model_copy(update={"keep_alive": without}))
        return PolicyTrial(
            provider=provider, model=model, scenario=scenario,
            learn_sessions=tuple(s.id for s in learn_part.sessions),
            test_sessions=tuple(s.id for s in test_part.sessions),
            chosen=chosen, ttl_chosen=ttl_chosen, learn=learn, prior_gaps_s=prior,
            default_run=default_run, chosen_run=chosen_run, ttl_chosen_run=ttl_chosen_run,
            chosen_default_prior=no_prior,
            default_ttl=what_if(where / "test-default.db", provider=provider,
                                policies=ttl_pool))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _measure(path: Path, policy: CachePolicy | None, report: Summary, provider: str,
             pool: Sequence[CachePolicy]) -> TrialRun:
    """A test run's :class:`TrialRun`, from its ledger and its summary ``report``.

    Raises:
        InputError: The model or a ping has no price (code ``demo-model``).
    """
    cost, pings_usd = report.cost_usd, report.keepalive.usd
    if cost is None or report.keepalive.unpriced or (report.keepalive.calls
                                                     and pings_usd is None):
        raise InputError(f"the ledger {path} has no price (genai-prices): a policy trial "
                         "compares costs", code="demo-model")
    with Ledger(path, read_only=True) as ledger:
        records = list(ledger.records())
    pings = [r for r in records if is_keepalive(r)]
    real = [r for r in records if not is_keepalive(r)]
    replay = what_if(records, provider=provider, policies=pool)
    numbers = [r.verdict_detail.get("keepalive_ping") for r in pings]
    return TrialRun(
        policy=policy, usd=cost, calls=len(real),
        ttl_expired=sum(r.verdict == "ttl_expired" for r in real),
        pings=len(pings), pings_usd=pings_usd or 0.0,
        most_pings_in_a_gap=max((n for n in numbers if isinstance(n, int)), default=0),
        replay=replay)
