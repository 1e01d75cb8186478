"""Run the demo: each scenario over the workload, against its own loopback emulator (or the
real engine: :mod:`._engine_run`, ``provider="llama-server"``).

For each scenario: a fresh :class:`~stableprompt.emulator.Emulator` (empty cache) with a
:class:`~stableprompt.emulator.FakeClock` starting at :data:`DEMO_START_S` and the workload's
responder; a :class:`~stableprompt.Recorder` on the same clock writing to the ledger;
and our :class:`~stableprompt.AnthropicClient` / :class:`~stableprompt.OpenAIClient` (real HTTP
on loopback through a RecordingTransport). Sessions run one after the other; the clock moves
:data:`CALL_STEP_S` before every call and :data:`TURN_GAP_S` more before every user turn after
the first, so no gap comes near a cache TTL (5 minutes), except in the ``think-time``
scenario, whose users think 1 to 15 minutes (:mod:`._think_time`). Every number in the
summary is read back from the ledger, which also keeps where the calls went
(:func:`ledger_meta`: backend, workload, provider, model) for ``stableprompt report``.

The run is deterministic: fixed clock, scripted ids and answers, seeded drift. Only timings
(``elapsed_s``, ``latency_ms``) differ between runs. What the backends share (the clock
constants, the senders, the session loop, the capture) is in :mod:`._driver`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._accounting._summary import Summary, summarize
from .._economics._cache_policy import REQUEST_KINDS, CachePolicy, ttl_seconds
from .._exceptions import InputError, LedgerError, PolicyError
from .._ledger._ledger import Ledger
from .._policy import cache_rules, keepalive_unsupported
from .._prompt._policy_ttls import check_policy
from .._recording._recorder import Recorder
from ..emulator import Emulator, FakeClock
from ._driver import (
    API_KEY,
    CALL_STEP_S,
    DEMO_START_S,
    TURN_GAP_S,
    Capture,
    KeepAliveSender,
    ProgressCallback,
    SenderFactory,
    client_sender,
    keepalive_sender,
    run_session,
    write_records,
)
from ._scenarios import (
    EMULATOR_WIRES,
    PATH_WIRES,
    PROVIDER_WIRES,
    SCENARIOS,
    Outgoing,
    Reply,
    Scenario,
    scenario_names,
    session_system_prompt,
)
from ._workload import Workload

if TYPE_CHECKING:
    from ._engine_report import EngineReport

__all__ = [
    "API_KEY",
    "BACKEND",
    "BACKEND_NOTE",
    "CALL_STEP_S",
    "DEFAULT_MODELS",
    "DEFAULT_SESSIONS",
    "DEMO_START_S",
    "ENGINE_PROVIDER",
    "TURN_GAP_S",
    "DemoResult",
    "check_cache_policy",
    "client_sender",
    "describe_workload",
    "ledger_meta",
    "new_ledger_problem",
    "prepare_ledger",
    "run_demo",
]

BACKEND = "stableprompt emulator (loopback)"
"""Where the demo's calls go: our emulator on 127.0.0.1, never a real provider."""

BACKEND_NOTE = (f"{BACKEND}: an emulator of the providers' documented prefix-cache rules, not "
                "a real provider (a real cache is best-effort and may miss more).")
"""The backend line of every demo output and of the kept ledger's metadata."""

DEFAULT_SESSIONS = 50
"""Sessions in the default run: the first 50 of BFCL's 200 (435 model calls per scenario;
about 12 s for the six single-agent scenarios on 2 cores, the two multi-agent ones run 10
sessions, about 6% more; all 200 sessions take about 45 s)."""

ENGINE_PROVIDER = "llama-server"
"""The ``provider`` of :func:`run_demo` that runs the real engine (:mod:`._engine_run`)."""

DEFAULT_MODELS = {"anthropic": "claude-sonnet-5", "openai": "gpt-5.2",
                  "gemini": "gemini-2.5-pro", "bedrock": "anthropic.claude-sonnet-4-6",
                  ENGINE_PROVIDER: "tiny-random-llama"}
"""Default model per provider. claude-sonnet-5: minimum cacheable prompt 1,024 tokens, 5 m / 1 h
TTLs (``anthropics/skills`` prompt-caching.md; platform.claude.com prompt-caching docs), so a
session's head (about 2,500-5,000 tokens here) is cacheable, as in real agent deployments.
gpt-5.2 (before GPT-5.6): automatic caching, 2,048-token minimum, reads reported in 128-token
steps (developers.openai.com prompt-caching guide). Both have genai-prices entries.
gemini-2.5-pro: implicit caching, 2,048-token minimum (ai.google.dev caching docs, 2026-06).
anthropic.claude-sonnet-4-6 on Bedrock: cachePoint breakpoints, 1,024-token minimum, 5 m TTL
only (Bedrock prompt-caching user guide). llama-server: the id sent (a single-model server
ignores it); self-hosted, so no price."""

@dataclass(frozen=True)
class DemoResult:
    """What a demo run produced.

    Attributes:
        provider: ``"anthropic"``, ``"openai"`` or ``"llama-server"``.
        model: Model id sent.
        workload: The workload run.
        scenarios: Scenario names (llama-server: rows ``<scenario>/<endpoint>``), in run
            order.
        report: Summary read back from the ledger.
        ledger_path: The kept ledger, or ``None`` when it was temporary.
        capture_dir: Where request bodies were written, or ``None``.
        elapsed_s: Wall time of the run (seconds).
        engine: llama-server runs: the engine, its prefill timings and template findings
            (:class:`~stableprompt.demo._engine_report.EngineReport`); else ``None``.
        wire: Emulator runs: the wire shape sent (``run_demo(wire=...)``); else ``None``.
        cache_policy: The policy the SDK harnesses followed (``run_demo(cache_policy=...)``),
            ``None`` for the defaults.
    """

    provider: str
    model: str
    workload: Workload
    scenarios: tuple[str, ...]
    report: Summary
    ledger_path: Path | None
    capture_dir: Path | None
    elapsed_s: float
    engine: EngineReport | None = None
    wire: str | None = None
    cache_policy: CachePolicy | None = None

    def to_json(self) -> dict[str, Any]:
        """The demo's JSON: ``backend``, ``provider``, ``model``, ``workload``, ``scenarios``
        (``<name>.{calls, input_tokens, cache_read_tokens, cache_write_tokens, hit_rate,
        ceiling, verdicts, agreement}``; the emulator's own miss reasons against our verdicts
        are in the notes and in ``stableprompt report --json`` on the ledger), ``cost`` (USD
        per scenario, with the price source and date) and ``elapsed_s`` (with ``latency_ms``
        and the engine's timings, the only fields that differ between runs). llama-server
        runs add ``engine`` (see
        :meth:`~stableprompt.demo._engine_report.EngineReport.to_json`) and, per row,
        ``scenario``, ``endpoint`` and ``prefill``; a run under a cache policy adds
        ``cache_policy`` (its label and settings) after ``cost``, and with keep-alive
        ``keepalive`` (the pings: ``Summary.keepalive``; ``cost.usd`` per scenario leaves
        them out, as the report's calls do)."""
        scenarios = {name: self.report.scenarios[name].totals.to_json()
                     for name in self.scenarios if name in self.report.scenarios}
        if self.engine is not None:
            for name, row in scenarios.items():
                row.update(self.engine.row_json(name))
        pricing = self.report.pricing
        cost = {
            "model": self.model,
            **pricing.to_json(),
            "usd": {name: _round(self.report.scenarios[name].totals.cost_usd)
                    for name in scenarios},
        }
        out: dict[str, Any] = {
            "backend": BACKEND if self.engine is None else self.engine.backend,
            "provider": self.provider,
            "model": self.model,
            "workload": self.workload.describe(),
            "scenarios": scenarios,
            "cost": cost,
        }
        if self.cache_policy is not None:
            out["cache_policy"] = {
                "label": self.cache_policy.label(),
                "settings": self.cache_policy.model_dump(mode="json", exclude_defaults=True)}
            if self.cache_policy.keep_alive is not None:
                out["keepalive"] = self.report.keepalive.to_json()
        if self.engine is not None:
            out["engine"] = self.engine.to_json()
        out["elapsed_s"] = round(self.elapsed_s, 3)
        return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def describe_workload(workload: Workload) -> str:
    """One line: name, real or synthetic, sessions run, calls per scenario, source, repairs."""
    kind = "SYNTHETIC workload (ours, not real data)" if workload.synthetic else "real workload"
    repairs = ", ".join(f"{k} {v:,}" for k, v in sorted(workload.repairs.items())) or "none"
    return (f"{workload.name}, {kind}: {len(workload.sessions)} of {workload.total_sessions} "
            f"sessions, {workload.model_calls:,} model calls per scenario; source "
            f"{workload.source}; tool-schema repairs: {repairs}.")


def ledger_meta(workload: Workload, provider: str, model: str, *,
                backend: str = BACKEND_NOTE,
                cache_policy: CachePolicy | None = None) -> dict[str, str]:
    """The metadata a demo ledger keeps (``Ledger.set_meta``): ``backend`` (default
    :data:`BACKEND_NOTE`), ``workload`` (:func:`describe_workload`), ``provider``, ``model``,
    and under a policy ``cache_policy`` (the policy as JSON)."""
    meta = {"backend": backend, "workload": describe_workload(workload),
            "provider": provider, "model": model}
    if cache_policy is not None:
        meta["cache_policy"] = cache_policy.model_dump_json(exclude_defaults=True)
    return meta


def prepare_ledger(given: str | os.PathLike[str] | None
                    ) -> tuple[Ledger, Path | None, Path | None]:
    """Open the ledger: a new file at ``given``, or a temporary one (returned for cleanup).

    Raises:
        LedgerError: ``given`` exists (even as an empty file: the demo writes a new ledger at a
            path that does not exist yet; code ``ledger-exists``), or it cannot be created
            (code ``ledger-unavailable``).
    """
    if given is None:
        tmp = Path(tempfile.mkdtemp(prefix="stableprompt-demo-"))
        return Ledger(tmp / "demo.db"), None, tmp
    problem = new_ledger_problem(given)
    if problem is not None:
        raise LedgerError(problem, code="ledger-exists")
    path = Path(given)
    ledger = Ledger(path)
    if ledger.open_error is not None:
        raise LedgerError(f"cannot create the ledger at {str(path)!r}: "
                          f"{ledger.open_error}", code="ledger-unavailable")
    return ledger, path, None


def new_ledger_problem(given: str | os.PathLike[str]) -> str | None:
    """Why ``given`` cannot take a new demo ledger (empty, or something is already there), or
    ``None``. Whether it can be created is :class:`~stableprompt.Ledger`'s to say."""
    if not os.fspath(given).strip():
        return "the ledger path is empty; give a file name that does not exist yet"
    path = Path(given)
    if os.path.lexists(path):
        what = ("a directory" if path.is_dir() else "an empty file"
                if path.is_file() and path.stat().st_size == 0 else "a file")
        return (f"{str(path)!r} already exists ({what}); the demo writes a new ledger at a path "
                "that does not exist yet: delete it or choose another path")
    return None


def run_demo(
    workload: Workload,
    *,
    provider: str = "anthropic",
    model: str | None = None,
    ledger_path: str | os.PathLike[str] | None = None,
    capture_dir: str | os.PathLike[str] | None = None,
    scenarios: Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
    sender: SenderFactory | None = None,
    base_url: str | None = None,
    endpoints: Sequence[str] | None = None,
    template: str | None = None,
    notice: Callable[[str], None] | None = None,
    wire: str | None = None,
    cache_policy: CachePolicy | None = None,
) -> DemoResult:
    """Run the scenarios over ``workload`` and summarize the ledger.

    Args:
        workload: Sessions to run (e.g. ``bfcl_workload().select(20)``).
        provider: ``"anthropic"`` (Messages) or ``"openai"`` (Chat Completions) against the
            emulator, or ``"llama-server"``: the real engine (:mod:`._engine_run`).
        model: Model id (default :data:`DEFAULT_MODELS`).
        ledger_path: Keep the ledger here (the path must not exist yet); default: a
            temporary ledger, deleted after the summary is read. Either way the ledger keeps
            :func:`ledger_meta` (``Ledger.meta()``); llama-server runs add ``engine``,
            ``agreement`` and ``prefill`` (JSON).
        capture_dir: Write each scenario's request bodies to ``<dir>/<scenario>.jsonl``
            (llama-server: ``<scenario>.<endpoint>.jsonl``).
        scenarios: Scenario names to run (default: all that apply to ``provider``).
        progress: Called after every model call with ``(row, done, total)``.
        sender: How requests are sent (default :func:`client_sender`: our clients). Tests pass
            one built on the official ``anthropic``/``openai`` SDKs.
        base_url: llama-server only: the server to use (``http://127.0.0.1:8080``); default:
            start one (see :func:`~stableprompt.demo._engine_run.engine_target`).
        endpoints: llama-server only: any of ``"chat"``, ``"responses"``, ``"messages"``
            (default all three, in that order).
        template: llama-server only, without ``base_url``: the tiny model's chat template
            (``"qwen2.5"``, the default, ``"mistral-nemo"``, ``"hermes-3"``).
        notice: Where progress notices go (the engine build, its start), e.g. stderr.
        wire: Emulator only: the wire shape to send (:data:`EMULATOR_WIRES`: ``"openai"``
            can also send ``"openai-responses"``, the emulator's ``/v1/responses``); default
            :data:`PROVIDER_WIRES` (Messages, Chat Completions).
        cache_policy: Emulator only: the :class:`~stableprompt.CachePolicy` the scenarios'
            SDK harnesses follow (head TTL at freeze, history TTL at render; e.g.
            ``scenarios=["think-time"]`` under ``CachePolicy.from_ledger(...)``). Every
            chosen scenario must take one (:attr:`Scenario.takes_policy`); Gemini's harness
            takes none, nor does the engine. With ``keep_alive``, requests go through a
            :class:`~stableprompt.KeepAliveScheduler` on our client (one conversation per
            session, closed when the session ends) and the fake clock stops at each due
            ping (``_driver.KeepAliveSender``): the pings are ledger rows marked
            ``keepalive``, in ``report.keepalive`` and ``report.cost_usd``. Refused: an
            explicit cache (Gemini's), keep-alive on Bedrock (Converse is not pinged), on
            an OpenAI model before GPT-5.6 (no TTL a read refreshes), with a custom
            ``sender``, or with an interval not shorter than the TTL it keeps.

    Returns:
        The :class:`DemoResult`.

    Raises:
        InputError: Unknown provider, scenario, endpoint or template, an empty model id, or
            a llama-server option with another provider (codes ``demo-provider``,
            ``demo-scenario``, ``demo-endpoint``, ``demo-template``, ``demo-model``,
            ``demo-base-url``, ``demo-wire``, ``demo-cache-policy``; gaps without a
            keep-alive policy: ``demo-cache-policy``).
        LedgerError: The ledger cannot be created (see :func:`prepare_ledger`).
        ProviderError: A call to the emulator failed, or the engine did not answer.
        EngineError: The engine could not be built or started.
        OSError: The capture directory cannot be written.
    """
    if provider not in DEFAULT_MODELS:
        raise InputError(f"unknown provider {provider!r}; choose one of "
                         f"{', '.join(DEFAULT_MODELS)}", code="demo-provider")
    if model is None:
        model = DEFAULT_MODELS[provider]
    elif not model.strip():
        raise InputError(f"empty model id {model!r}; omit it for the default "
                         f"({DEFAULT_MODELS[provider]})", code="demo-model")
    engine = provider == ENGINE_PROVIDER
    if not engine:
        for name, value in (("base_url", base_url), ("endpoints", endpoints),
                            ("template", template)):
            if value is not None:
                raise InputError(f"{name} applies to provider {ENGINE_PROVIDER!r} only, not "
                                 f"{provider!r}", code=f"demo-{name.rstrip('s')}".replace(
                                     "_", "-"))
    if wire is not None and (engine or wire not in EMULATOR_WIRES.get(provider, ())):
        raise InputError(f"wire {wire!r} is not one the emulator demo sends for {provider!r}; "
                         f"choose one of {', '.join(EMULATOR_WIRES.get(provider, ())) or 'none'}",
                         code="demo-wire")
    names = tuple(scenarios) if scenarios is not None else (
        tuple(s.name for s in SCENARIOS if s.engine_predicts) if engine
        else scenario_names(provider))
    chosen = []
    for name in names:
        match = next((s for s in SCENARIOS if s.name == name), None)
        if match is None or not (match.engine_predicts if engine
                                 else provider in match.providers
                                 and (wire is None or wire in match.wires)):
            known = ([s.name for s in SCENARIOS if s.engine_predicts] if engine
                     else scenario_names(provider))
            raise InputError(f"unknown scenario {name!r} for {provider}; choose from "
                             f"{', '.join(known)}", code="demo-scenario")
        chosen.append(match)
    check_cache_policy(cache_policy, chosen, provider, model, wire=wire, sender=sender)
    plan = None
    if engine:
        from ._engine_run import EnginePlan

        plan = EnginePlan.of(chosen, endpoints=endpoints, base_url=base_url,
                             template=template)
    started = time.perf_counter()
    capture = Path(capture_dir) if capture_dir is not None else None
    ledger, kept, tmp = prepare_ledger(ledger_path)
    engine_report = None
    try:
        if plan is not None:
            from ._engine_run import run_engine

            engine_report = run_engine(plan, workload, model=model, ledger=ledger,
                                       capture_dir=capture, progress=progress,
                                       sender=sender or client_sender, notice=notice)
            rows = plan.row_names
            report = summarize(ledger.records())
            for key, value in engine_report.ledger_meta(
                    report, describe_workload(workload), model).items():
                ledger.set_meta(key, value)
        else:
            for key, value in ledger_meta(workload, provider, model,
                                          cache_policy=cache_policy).items():
                ledger.set_meta(key, value)
            for scenario in chosen:
                _run_scenario(scenario, workload, provider, model, ledger, capture, progress,
                              sender or client_sender, wire or PROVIDER_WIRES[provider],
                              cache_policy)
            rows = tuple(s.name for s in chosen)
            report = summarize(ledger.records())
    finally:
        ledger.close()  # the last connection checkpoints the WAL into the file
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return DemoResult(provider, model, workload, rows, report, kept, capture,
                      time.perf_counter() - started, engine_report,
                      None if engine else wire or PROVIDER_WIRES[provider], cache_policy)


def check_cache_policy(policy: CachePolicy | None, chosen: Sequence[Scenario],
                       provider: str, model: str, *, wire: str | None = None,
                       sender: SenderFactory | None = None) -> None:
    """Refuse a cache policy the run cannot follow (``run_demo``'s ``cache_policy``) in the
    ``chosen`` scenarios, before anything runs (``run_demo``, ``stableprompt demo
    --cache-policy``, ``policy_trial``'s candidates).

    Raises:
        InputError: code ``demo-cache-policy``, saying why.
    """
    if policy is None:
        return
    if not isinstance(policy, CachePolicy):
        raise InputError(f"cache_policy must be a CachePolicy, got {type(policy).__name__}",
                         code="demo-cache-policy")
    problem = None
    naive = [s.name for s in chosen if not s.takes_policy]
    if provider == ENGINE_PROVIDER:
        problem = (f"the {provider} demo takes no cache policy (llama-server ignores TTLs and "
                   "breakpoints)")
    elif provider == "gemini":
        problem = ("the gemini demo takes no cache policy: its harness relies on implicit "
                   "caching, which has no TTL to choose and no keep-alive")
    elif naive:
        problem = (f"scenario(s) {', '.join(naive)} place their own breakpoints and take no "
                   "cache policy; choose SDK scenarios, e.g. scenarios=['think-time']")
    elif policy.explicit_cache:
        problem = ("an explicit head cache is Gemini's (GeminiCache), and the gemini demo "
                   "takes no cache policy; drop explicit_cache")
    else:
        problem = _ttl_problem(policy, provider, model, wire)
    if problem is None and policy.keep_alive is not None:
        problem = _keep_alive_problem(policy, provider, model, wire, sender)
    if problem is not None:
        raise InputError(f"cache policy {policy.label()!r}: {problem}",
                         code="demo-cache-policy")


def _ttl_problem(policy: CachePolicy, provider: str, model: str, wire: str | None
                 ) -> str | None:
    """Why the SDK harness's renders would refuse ``policy``'s TTLs for some request kind
    (``_prompt._policy_ttls.check_policy``: a TTL the model or API does not offer, a history
    TTL longer than the head's), or ``None``: said now, not at the first render."""
    for kind in REQUEST_KINDS:
        try:
            check_policy(wire or PROVIDER_WIRES[provider], model, policy, kind,
                         what=f"the {provider} demo")
        except PolicyError as exc:
            return exc.message
    return None


def _keep_alive_problem(policy: CachePolicy, provider: str, model: str, wire: str | None,
                        sender: SenderFactory | None) -> str | None:
    """Why the run cannot send ``policy``'s keep-alive pings, or ``None``."""
    keep = policy.keep_alive
    assert keep is not None
    wire = wire or PROVIDER_WIRES[provider]
    if sender not in (None, client_sender):
        return ("keep-alive pings go through stableprompt's own client (KeepAliveScheduler); "
                "a custom sender cannot send them")
    rules = cache_rules(provider, model)
    unsupported = keepalive_unsupported(wire, rules)
    if unsupported is not None:
        return (f"no keep-alive ping can keep {wire} requests to {model!r}: "
                f"{unsupported[1]}; drop keep_alive")
    for kind in REQUEST_KINDS:
        kept = ttl_seconds(policy.for_kind(kind).history, rules.default_ttl_s)
        if kept is not None and keep.interval_s >= kept:
            return (f"keep_alive.interval_s {keep.interval_s:g} is not shorter than the {kind} "
                    f"history TTL it keeps ({kept} s, {provider} {model})")
    return None


def _run_scenario(scenario: Scenario, workload: Workload, provider: str, model: str,
                  ledger: Ledger, capture_dir: Path | None,
                  progress: ProgressCallback | None, sender: SenderFactory,
                  wire: str, cache_policy: CachePolicy | None = None) -> None:
    clock = FakeClock(DEMO_START_S)
    sessions = scenario.sessions(workload.sessions)
    total, done = sum(s.model_calls for s in sessions), 0
    capture = Capture(capture_dir, scenario.name, wire) if capture_dir else None
    keep_alive = cache_policy.keep_alive if cache_policy is not None else None
    try:
        with Emulator(responder=workload.responder(), clock=clock) as emulator, \
                ExitStack() as senders:
            # Records go to the ledger when the scenario ends: while it runs, the recorder must
            # not take another scenario's request (same head, other emulator) as predecessor.
            recorder = Recorder(None, scenario=scenario.name, clock=clock, provider=provider,
                                keep_records=None)
            keep: KeepAliveSender | None = None
            if keep_alive is not None:  # our client behind a scheduler; the clock steps
                keep = senders.enter_context(
                    keepalive_sender(wire, emulator, recorder, keep_alive, clock))
            else:
                send_request = senders.enter_context(sender(wire, emulator, recorder))
            for session in sessions:
                harness = scenario.harness(
                    session, wire=wire, model=model,
                    system_prompt=session_system_prompt(workload.system_prompt, session),
                    cache_policy=cache_policy)

                def exchange(outgoing: Outgoing, sid: str = session.id) -> Reply:
                    in_path = wire in PATH_WIRES  # the request needs its path, headers
                    if capture is not None:
                        capture.write(sid, outgoing.to_bytes(),
                                      outgoing.url_path() if in_path else None)
                    body: Any = outgoing if in_path else outgoing.request
                    response = (send_request(body) if keep is None
                                else keep.send(body, conversation=sid))
                    return Reply.from_response(wire, response)

                for _ in run_session(session, harness, clock, exchange,
                                     advance=None if keep is None else keep.advance):
                    done += 1
                    if progress is not None:
                        progress(scenario.name, done, total)
                if keep is not None:
                    keep.end(session.id)
            write_records(ledger, recorder.records)
    finally:
        if capture is not None:
            capture.close()


