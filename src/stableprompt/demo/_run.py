"""Run the demo: each scenario over the workload, against its own loopback emulator.

For each scenario: a fresh :class:`~stableprompt.emulator.Emulator` (empty cache) with a
:class:`~stableprompt.emulator.FakeClock` starting at :data:`DEMO_START_S` and the workload's
responder; a :class:`~stableprompt.Recorder` on the same clock writing to the ledger;
and our :class:`~stableprompt.AnthropicClient` / :class:`~stableprompt.OpenAIClient` (real HTTP
on loopback through a RecordingTransport). Sessions run one after the other; the clock moves
:data:`CALL_STEP_S` before every call and :data:`TURN_GAP_S` more before every user turn after
the first, so no gap comes near a cache TTL (5 minutes). Every number in the summary is read
back from the ledger, which also keeps where the calls went (:func:`ledger_meta`: backend,
workload, provider, model) for ``stableprompt report``.

The run is deterministic: fixed clock, scripted ids and answers, seeded drift. Only timings
(``elapsed_s``, ``latency_ms``) differ between runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .._canonical import wire_json
from .._client import AnthropicClient, OpenAIClient
from .._exceptions import InputError, LedgerError
from .._ledger._ledger import Ledger
from .._prompt._rendered import ProviderRequest
from .._recording._recorder import Recorder
from .._report._summary import Report, summarize
from ..emulator import Emulator, FakeClock
from ._scenarios import (
    SCENARIOS,
    Harness,
    Outgoing,
    Reply,
    Scenario,
    scenario_names,
    session_system_prompt,
)
from ._workload import Workload, WorkloadSession

__all__ = [
    "BACKEND",
    "BACKEND_NOTE",
    "CALL_STEP_S",
    "DEFAULT_MODELS",
    "DEFAULT_SESSIONS",
    "DEMO_START_S",
    "TURN_GAP_S",
    "DemoResult",
    "Sender",
    "SenderFactory",
    "client_sender",
    "describe_workload",
    "ledger_meta",
    "new_ledger_problem",
    "run_demo",
]

BACKEND = "stableprompt emulator (loopback)"
"""Where the demo's calls go: our emulator on 127.0.0.1, never a real provider."""

BACKEND_NOTE = (f"{BACKEND}: an emulator of the providers' documented prefix-cache rules, not "
                "a real provider (a real cache is best-effort and may miss more).")
"""The backend line of every demo output and of the kept ledger's metadata."""

DEFAULT_SESSIONS = 50
"""Sessions in the default run: the first 50 of BFCL's 200 (435 model calls per scenario;
about 12 s for all six scenarios on 2 cores; all 200 sessions take about 45 s)."""

DEFAULT_MODELS = {"anthropic": "claude-sonnet-5", "openai": "gpt-5.2"}
"""Default model per provider. claude-sonnet-5: minimum cacheable prompt 1,024 tokens, 5 m / 1 h
TTLs (``anthropics/skills`` prompt-caching.md; platform.claude.com prompt-caching docs), so a
session's head (about 2,500-5,000 tokens here) is cacheable, as in real agent deployments.
gpt-5.2 (before GPT-5.6): automatic caching, 2,048-token minimum, reads reported in 128-token
steps (developers.openai.com prompt-caching guide). Both have genai-prices entries."""

DEMO_START_S = 1_796_000_400.0
"""The demo clock's start: 2026-11-30T01:00:00Z. Costs use the prices in effect that day."""

CALL_STEP_S = 6.0
"""Clock advance before each model call (seconds): a plausible model latency."""

TURN_GAP_S = 20.0
"""Extra clock advance before each user turn after the first (seconds): user think time."""

API_KEY = "stableprompt-demo"
"""The key sent to the emulator (the emulator scopes caches by key; it checks nothing)."""

ProgressCallback = Callable[[str, int, int], None]
"""``(scenario, calls done in this scenario, calls in this scenario)``."""


@dataclass(frozen=True)
class DemoResult:
    """What a demo run produced.

    Attributes:
        provider: ``"anthropic"`` or ``"openai"``.
        model: Model id sent.
        workload: The workload run.
        scenarios: Scenario names, in run order.
        report: Summary read back from the ledger.
        ledger_path: The kept ledger, or ``None`` when it was temporary.
        capture_dir: Where request bodies were written, or ``None``.
        elapsed_s: Wall time of the run (seconds).
    """

    provider: str
    model: str
    workload: Workload
    scenarios: tuple[str, ...]
    report: Report
    ledger_path: Path | None
    capture_dir: Path | None
    elapsed_s: float

    def to_json(self) -> dict[str, Any]:
        """The demo's JSON: ``backend``, ``provider``, ``model``, ``workload``, ``scenarios``
        (``<name>.{calls, input_tokens, cache_read_tokens, cache_write_tokens, hit_rate,
        ceiling, verdicts, agreement}``), ``cost`` (USD per scenario, with the price source and
        date) and ``elapsed_s`` (the only field that differs between runs)."""
        scenarios = {name: self.report.scenarios[name].totals.to_json()
                     for name in self.scenarios if name in self.report.scenarios}
        pricing = self.report.pricing
        cost = {
            "model": self.model,
            **pricing.to_json(),
            "usd": {name: _round(self.report.scenarios[name].totals.cost_usd)
                    for name in scenarios},
        }
        return {
            "backend": BACKEND,
            "provider": self.provider,
            "model": self.model,
            "workload": self.workload.describe(),
            "scenarios": scenarios,
            "cost": cost,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def describe_workload(workload: Workload) -> str:
    """One line: name, real or synthetic, sessions run, calls per scenario, source, repairs."""
    kind = "SYNTHETIC workload (ours, not real data)" if workload.synthetic else "real workload"
    repairs = ", ".join(f"{k} {v:,}" for k, v in sorted(workload.repairs.items())) or "none"
    return (f"{workload.name}, {kind}: {len(workload.sessions)} of {workload.total_sessions} "
            f"sessions, {workload.model_calls:,} model calls per scenario; source "
            f"{workload.source}; tool-schema repairs: {repairs}.")


def ledger_meta(workload: Workload, provider: str, model: str) -> dict[str, str]:
    """The metadata a demo ledger keeps (``Ledger.set_meta``): ``backend``
    (:data:`BACKEND_NOTE`), ``workload`` (:func:`describe_workload`), ``provider``, ``model``."""
    return {"backend": BACKEND_NOTE, "workload": describe_workload(workload),
            "provider": provider, "model": model}


class _Capture:
    """Writes each scenario's request bodies as JSONL: ``{"session", "wire_format", "url",
    "request"}`` per line, ``request`` being the exact body bytes sent."""

    def __init__(self, directory: Path, scenario: str, wire_format: str, path: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = (directory / f"{scenario}.jsonl").open("wb")
        self._prefix = (b',"wire_format":' + wire_json(wire_format) + b',"url":'
                        + wire_json(path) + b',"request":')

    def write(self, session: str, body: bytes) -> None:
        self._file.write(b'{"session":' + wire_json(session) + self._prefix + body + b"}\n")

    def close(self) -> None:
        self._file.close()


def _prepare_ledger(given: str | os.PathLike[str] | None
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
) -> DemoResult:
    """Run the scenarios over ``workload`` and summarize the ledger.

    Args:
        workload: Sessions to run (e.g. ``bfcl_workload().select(20)``).
        provider: ``"anthropic"`` (Messages) or ``"openai"`` (Chat Completions).
        model: Model id (default :data:`DEFAULT_MODELS`).
        ledger_path: Keep the ledger here (the path must not exist yet); default: a
            temporary ledger, deleted after the summary is read. Either way the ledger keeps
            :func:`ledger_meta` (``Ledger.meta()``).
        capture_dir: Write each scenario's request bodies to ``<dir>/<scenario>.jsonl``.
        scenarios: Scenario names to run (default: all that apply to ``provider``).
        progress: Called after every model call.
        sender: How requests are sent (default :func:`client_sender`: our clients). Tests pass
            one built on the official ``anthropic``/``openai`` SDKs.

    Returns:
        The :class:`DemoResult`.

    Raises:
        InputError: Unknown provider or scenario, or an empty model id (code
            ``demo-provider`` / ``demo-scenario`` / ``demo-model``).
        LedgerError: The ledger cannot be created (see :func:`_prepare_ledger`).
        ProviderError: A call to the emulator failed.
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
    names = tuple(scenarios) if scenarios is not None else scenario_names(provider)
    chosen = []
    for name in names:
        match = next((s for s in SCENARIOS if s.name == name), None)
        if match is None or provider not in match.providers:
            raise InputError(f"unknown scenario {name!r} for {provider}; choose from "
                             f"{', '.join(scenario_names(provider))}", code="demo-scenario")
        chosen.append(match)
    started = time.perf_counter()
    capture = Path(capture_dir) if capture_dir is not None else None
    ledger, kept, tmp = _prepare_ledger(ledger_path)
    try:
        for key, value in ledger_meta(workload, provider, model).items():
            ledger.set_meta(key, value)
        for scenario in chosen:
            _run_scenario(scenario, workload, provider, model, ledger, capture, progress,
                          sender or client_sender)
        report = summarize(ledger.records())
    finally:
        ledger.close()  # the last connection checkpoints the WAL into the file
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return DemoResult(provider, model, workload, tuple(s.name for s in chosen), report, kept,
                      capture, time.perf_counter() - started)


Sender = Callable[[ProviderRequest | dict[str, Any]], dict[str, Any]]
"""Sends one request body and returns the response JSON."""

SenderFactory = Callable[[str, Emulator, Recorder], AbstractContextManager[Sender]]
"""``(provider, emulator, recorder) -> context manager yielding a Sender``; every call must go
through a RecordingTransport on ``recorder``."""


@contextmanager
def client_sender(provider: str, emulator: Emulator, recorder: Recorder) -> Iterator[Sender]:
    """The demo's sender: our :class:`~stableprompt.AnthropicClient` / ``OpenAIClient``
    (exact bytes for ProviderRequests, dicts as JSON in insertion order), no retries."""
    client: AnthropicClient | OpenAIClient
    if provider == "anthropic":
        client = AnthropicClient(API_KEY, base_url=emulator.base_url, recorder=recorder,
                                 max_retries=0, timeout_s=120.0)
    else:
        client = OpenAIClient(API_KEY, base_url=emulator.openai_base_url, recorder=recorder,
                              max_retries=0, timeout_s=120.0)
    with client:
        def send(request: ProviderRequest | dict[str, Any]) -> dict[str, Any]:
            response: dict[str, Any] = client.send(request)
            return response

        yield send


def _run_scenario(scenario: Scenario, workload: Workload, provider: str, model: str,
                  ledger: Ledger, capture_dir: Path | None,
                  progress: ProgressCallback | None, sender: SenderFactory) -> None:
    clock = FakeClock(DEMO_START_S)
    total, done = workload.model_calls, 0
    path = "/v1/messages" if provider == "anthropic" else "/v1/chat/completions"
    wire = "anthropic" if provider == "anthropic" else "openai-chat"
    capture = _Capture(capture_dir, scenario.name, wire, path) if capture_dir else None
    try:
        with Emulator(responder=workload.responder(), clock=clock) as emulator:
            # Records go to the ledger when the scenario ends: while it runs, the recorder must
            # not take another scenario's request (same head, other emulator) as predecessor.
            recorder = Recorder(None, scenario=scenario.name, clock=clock, provider=provider,
                                keep_records=None)
            with sender(provider, emulator, recorder) as send_request:
                for session in workload.sessions:
                    harness = scenario.harness(
                        session, provider=provider, model=model,
                        system_prompt=session_system_prompt(workload.system_prompt, session))

                    def send(outgoing: Outgoing, sid: str = session.id) -> dict[str, Any]:
                        if capture is not None:
                            capture.write(sid, outgoing.to_bytes())
                        return send_request(outgoing.request)

                    for _ in _run_session(session, harness, provider, clock, send):
                        done += 1
                        if progress is not None:
                            progress(scenario.name, done, total)
            for record in recorder.records:
                if ledger.write(record) != "committed":
                    raise LedgerError(f"could not write to the ledger {ledger.path}: "
                                      f"{ledger.open_error}", code="ledger-unavailable")
    finally:
        if capture is not None:
            capture.close()


def _run_session(session: WorkloadSession, harness: Harness, provider: str, clock: FakeClock,
                 send: Callable[[Outgoing], dict[str, Any]]) -> Any:
    """Drive one session through ``harness`` like an agent loop; yield after each call.

    Raises:
        RuntimeError: The replies do not follow the script (an emulator or responder bug).
    """
    for turn in session.turns:
        if turn.index:
            clock.advance(TURN_GAP_S)
        harness.begin_turn(turn.index)
        harness.user(turn.user)
        for _ in range(turn.model_calls):
            clock.advance(CALL_STEP_S)
            reply = Reply.from_response(provider, send(harness.request(clock())))
            harness.assistant(reply)
            yield reply
            if not reply.tool_calls:
                break
            for call_id, _name, _arguments in reply.tool_calls:
                harness.tool_result(call_id, session.call(call_id).result)
        else:
            raise RuntimeError(f"{session.id} turn {turn.index}: the replies did not end the "
                               f"turn after {turn.model_calls} calls")
