"""What the demo's backends share: the clock, the senders, the session loop, the capture and
the ledger writes.

A run drives each session like an agent loop (:func:`run_session`): user turn, request, reply,
tool results, request, ... on a :class:`~stableprompt.emulator.FakeClock` that moves
:data:`CALL_STEP_S` before every call and :data:`TURN_GAP_S` more before every user turn after
the first (or the harness's own think time: ``Harness.turn_gap_s``). Requests go out
through a *sender* (:data:`SenderFactory`; default :func:`client_sender`: our clients),
always through a RecordingTransport on the run's recorder; :class:`Capture` keeps the exact
bodies for ``stableprompt lint``.

Under a :class:`~stableprompt.CachePolicy` with ``keep_alive``, the requests go through a
:class:`~stableprompt.KeepAliveScheduler` on our client instead (:func:`keepalive_sender`:
one conversation per session), and the clock moves through :meth:`KeepAliveSender.advance`:
to each ping's due time in turn, where ``run_pending`` sends it (a ledger row marked
``keepalive``), then to the end of the step. Every real call keeps its time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any, Protocol

from .._canonical import wire_json
from .._client import AnthropicClient, OpenAIClient
from .._client._keepalive import KeepAliveScheduler
from .._economics._cache_policy import KeepAlive
from .._exceptions import LedgerError
from .._ledger._ledger import Ledger
from .._recording._recorder import Recorder
from .._wire._formats import endpoint_path
from .._wire._request import ProviderRequest
from ..emulator import Emulator, FakeClock
from ._scenarios import Harness, Outgoing, Reply
from ._workload import WorkloadSession

__all__ = [
    "API_KEY",
    "CALL_STEP_S",
    "DEMO_START_S",
    "TURN_GAP_S",
    "Capture",
    "KeepAliveSender",
    "ProgressCallback",
    "Sender",
    "SenderFactory",
    "Target",
    "client_sender",
    "keepalive_sender",
    "run_session",
    "write_records",
]

DEMO_START_S = 1_796_000_400.0
"""The demo clock's start: 2026-11-30T01:00:00Z. Costs use the prices in effect that day."""

CALL_STEP_S = 6.0
"""Clock advance before each model call (seconds): a plausible model latency."""

TURN_GAP_S = 20.0
"""Extra clock advance before each user turn after the first (seconds): user think time
(unless the harness has its own: ``Harness.turn_gap_s``, the ``think-time`` scenario)."""

API_KEY = "stableprompt-demo"
"""The key sent to the emulator (the emulator scopes caches by key; it checks nothing)."""

ProgressCallback = Callable[[str, int, int], None]
"""``(scenario or llama-server row, calls done in it, calls in it)``."""


class Capture:
    """Writes one scenario's request bodies to ``<directory>/<name>.jsonl``:
    ``{"session", "wire_format", "url", "request"}`` per line, ``request`` being the exact
    body bytes sent (``url``: the endpoint path of ``wire_format``)."""

    def __init__(self, directory: Path, name: str, wire_format: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = (directory / f"{name}.jsonl").open("wb")
        self._prefix = (b',"wire_format":' + wire_json(wire_format) + b',"url":'
                        + wire_json(endpoint_path(wire_format)) + b',"request":')

    def write(self, session: str, body: bytes, path: str | None = None) -> None:
        """One line; ``path`` replaces the format's endpoint path (Gemini and Converse keep
        the model in it)."""
        prefix = self._prefix
        if path is not None:
            head = prefix[:prefix.index(b',"url":')]
            prefix = head + b',"url":' + wire_json(path) + b',"request":'
        self._file.write(b'{"session":' + wire_json(session) + prefix + body + b"}\n")

    def close(self) -> None:
        self._file.close()


class Target(Protocol):
    """Where a sender sends: the server root and its OpenAI ``/v1`` root."""

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (Anthropic's ``/v1/messages`` is under it)."""
        ...

    @property
    def openai_base_url(self) -> str:
        """``base_url + "/v1"``."""
        ...


Sender = Callable[[ProviderRequest | dict[str, Any]], dict[str, Any]]
"""Sends one request body and returns the response JSON; raises when the answer is not 2xx."""

SenderFactory = Callable[[str, Target, Recorder], AbstractContextManager[Sender]]
"""``(wire, target, recorder) -> context manager yielding a Sender`` for ``wire`` bodies
(``"anthropic"``, ``"openai-chat"``, ``"openai-responses"``) sent to ``target`` (an
:class:`~stableprompt.emulator.Emulator` or a llama-server); every call must go through a
RecordingTransport on ``recorder``."""


@contextmanager
def client_sender(wire: str, target: Target, recorder: Recorder) -> Iterator[Sender]:
    """The demo's sender: our :class:`~stableprompt.AnthropicClient` / ``OpenAIClient``
    (exact bytes for ProviderRequests, dicts as JSON in insertion order), no retries; on the
    emulator it asks for cache diagnostics (``diagnostics=True``: the emulator's own miss
    reasons, joined to our verdicts on each row; a real engine has none). Gemini and Converse
    bodies go to their model-in-path endpoints (``_path_sender``)."""
    if wire in ("gemini", "bedrock-converse"):
        with _path_sender(target, recorder) as send:
            yield send
        return
    with _client(wire, target, recorder) as client:
        def send(request: ProviderRequest | dict[str, Any]) -> dict[str, Any]:
            response: dict[str, Any] = client.send(request)
            return response

        yield send


def _client(wire: str, target: Target, recorder: Recorder) -> AnthropicClient | OpenAIClient:
    """Our client for ``wire`` (Anthropic Messages, else OpenAI) on ``target``, recording on
    ``recorder``; no retries; cache diagnostics asked of the emulator."""
    diagnose = isinstance(target, Emulator)
    if wire == "anthropic":
        return AnthropicClient(API_KEY, base_url=target.base_url, recorder=recorder,
                               max_retries=0, timeout_s=120.0, diagnostics=diagnose)
    return OpenAIClient(API_KEY, base_url=target.openai_base_url, recorder=recorder,
                        max_retries=0, timeout_s=120.0, diagnostics=diagnose)


class KeepAliveSender:
    """Sends a run's requests through a :class:`~stableprompt.KeepAliveScheduler` and moves
    its fake clock so that due pings go out (module docstring).

    Attributes:
        scheduler: The scheduler (on our client, the run's recorder and ``clock``).
        clock: The run's fake clock.
        pings: Pings sent so far (failed ones included).
    """

    def __init__(self, scheduler: KeepAliveScheduler, clock: FakeClock) -> None:
        self.scheduler = scheduler
        self.clock = clock
        self.pings = 0

    def send(self, request: ProviderRequest | dict[str, Any], *,
             conversation: str) -> dict[str, Any]:
        """Send a real request of ``conversation`` (ending its idle gap); the response JSON."""
        response: dict[str, Any] = self.scheduler.send(request, conversation=conversation)
        return response

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward, stopping at each ping's due time on the way
        to send it (``run_pending``); the clock ends exactly where one ``advance`` would
        have put it."""
        end = self.clock() + seconds
        while True:
            due = self.scheduler.next_due()
            if due is None or due > end:
                break
            if due > self.clock():
                self.clock.advance(due - self.clock())
            sent = self.scheduler.run_pending()
            self.pings += len(sent)
            if not sent and self.scheduler.next_due() == due:
                break  # nothing decided at this time: never loop on it
        rest = end - self.clock()
        if rest > 0:
            self.clock.advance(rest)

    def end(self, conversation: str) -> None:
        """The session is over (the user left): no more pings for ``conversation``."""
        self.scheduler.close_conversation(conversation)


@contextmanager
def keepalive_sender(wire: str, target: Target, recorder: Recorder, keep_alive: KeepAlive,
                     clock: FakeClock) -> Iterator[KeepAliveSender]:
    """Our client for ``wire`` (Anthropic Messages, OpenAI Chat Completions or Responses)
    on ``target`` and ``recorder``, behind a :class:`~stableprompt.KeepAliveScheduler` with
    ``keep_alive`` on ``clock`` (genai-prices; its gap prior: ``keep_alive.prior_gaps_s``,
    else the scheduler's log-uniform one); closes both."""
    with _client(wire, target, recorder) as client, \
            KeepAliveScheduler(client, keep_alive, clock=clock) as scheduler:
        yield KeepAliveSender(scheduler, clock)


@contextmanager
def _path_sender(target: Target, recorder: Recorder) -> Iterator[Sender]:
    """Gemini / Converse: an httpx client through a RecordingTransport; requests are
    :class:`Outgoing` values (a dict body needs its URL path; Gemini its session header)."""
    import httpx

    from .._recording._transport import RecordingTransport

    with httpx.Client(base_url=target.base_url, timeout=120.0,
                      transport=RecordingTransport(recorder=recorder)) as http:
        def send(request: Any) -> dict[str, Any]:
            path, headers = request.url_path(), dict(request.headers or {})
            headers["content-type"] = "application/json"
            headers["x-goog-api-key"] = API_KEY
            response = http.post(path, content=request.to_bytes(), headers=headers)
            response.raise_for_status()
            value: dict[str, Any] = response.json()
            return value

        yield send


def write_records(ledger: Ledger, records: Sequence[Any]) -> None:
    """Write a scenario's records to the ledger, in order.

    Raises:
        LedgerError: A write did not commit (code ``ledger-unavailable``).
    """
    for record in records:
        if ledger.write(record) != "committed":
            raise LedgerError(f"could not write to the ledger {ledger.path}: "
                              f"{ledger.open_error}", code="ledger-unavailable")


def run_session(session: WorkloadSession, harness: Harness, clock: FakeClock,
                exchange: Callable[[Outgoing], Reply], *,
                advance: Callable[[float], object] | None = None) -> Iterator[Reply]:
    """Drive one session through ``harness`` like an agent loop; yield after each call.

    ``exchange`` sends one request and returns the assistant's reply (the backend's answer,
    or the script's when the backend's own text is noise). ``advance`` moves the clock
    (seconds; default ``clock.advance``; :meth:`KeepAliveSender.advance` sends the pings due
    on the way).

    Raises:
        RuntimeError: The replies do not follow the script (an emulator or responder bug).
    """
    move = clock.advance if advance is None else advance
    for turn in session.turns:
        if turn.index:
            gap = harness.turn_gap_s(turn.index)
            move(TURN_GAP_S if gap is None else gap)
        harness.begin_turn(turn.index)
        harness.user(turn.user)
        for _ in range(turn.model_calls):
            move(CALL_STEP_S)
            reply = exchange(harness.request(clock()))
            harness.assistant(reply)
            yield reply
            if not reply.tool_calls:
                break
            for call_id, _name, _arguments in reply.tool_calls:
                harness.tool_result(call_id, session.call(call_id).result)
        else:
            raise RuntimeError(f"{session.id} turn {turn.index}: the replies did not end the "
                               f"turn after {turn.model_calls} calls")
