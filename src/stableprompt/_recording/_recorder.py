"""The recording core shared by the clients and the recording transports: the stateful shell.

A :class:`Recorder` turns one provider call into one :class:`~stableprompt.UsageRecord`:

1. :meth:`Recorder.start` (before sending; :meth:`Recorder.register` then
   :meth:`Recorder.analyse` on the deferred path): recognizes the endpoint and wire format
   from the URL path (:meth:`Recorder.recordable`, before any body is read) and body, then
   has its :class:`~stableprompt._recording._memory.CallMemory` segment the body, count its
   tokens, number its turn and choose what to compare it with (the rule that chose is
   ``verdict_detail["predecessor_rule"]``, ``_predecessor.PREDECESSOR_RULES``).
2. A :class:`~stableprompt._recording._observer.ResponseObserver` (:meth:`Recorder.observe`)
   sees the response bytes as the caller receives them, never holding them back, and at the
   end hands an :class:`~stableprompt._recording._observer.Observation` to
   :meth:`Recorder.finish`.
3. :meth:`Recorder.finish`: the record is ``_outcome.record_of`` the call's
   ``_outcome.outcome_of`` and its attribution (the one place a verdict is decided,
   :func:`~stableprompt._recording._attribution.attribute`); it is appended to
   :attr:`Recorder.records`, written to the ledger and handed to the sinks; a complete
   successful call is remembered as a future predecessor.

A call that failed or whose stream was interrupted gets verdict ``unknown`` with
``verdict_detail["unknown_reason"]`` (and ``verdict_if_complete``); its partial usage fields
are kept, and it is never a predecessor.

Nothing here raises into the user's call: every step is guarded; a failure is logged on the
``stableprompt.recorder`` logger and the call is still recorded (verdict ``unknown``,
``verdict_detail["recorder_error"]``). No HTTP header is stored, and every text the record
holds is scrubbed of the request's credential header values (and their fragments of 8+
characters) and of key-shaped strings (:func:`~stableprompt._redact.redact`),
so an API key a server echoes in an error has nowhere to go.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._ledger._ledger import Ledger
from .._ledger._usage_record import UsageRecord, scrubbed
from .._policy import CacheRules, PolicyTable
from .._public import public
from .._redact import redact
from .._tokens import EstimatingTokenCounter, Tokenizer
from .._wire._formats import (
    UsageDialects,
    known_provider,
    provider_for,
    request_format,
    usage_dialects,
)
from .._wire._resegment import Resegmented
from .._wire._segmenter import SegmentedRequest
from . import _intake
from ._attribution import Attribution
from ._call import Call, Pending
from ._diagnose import diagnostics_flag
from ._engine_view import EngineTokens, SlotMemory, engine_of
from ._gemini_caches import CACHE_DETAIL
from ._identity import agent_from_headers
from ._memory import CallMemory
from ._observer import Observation, ResponseObserver
from ._outcome import attribution_of, failed_record, outcome_of, record_of
from ._sinks import RecordSink, deliver
from ._unanalysed import unanalysed_record
from ._worker import RecordingWorker

if TYPE_CHECKING:
    from .._accounting._summary import Summary

__all__ = ["Recorder"]

_log = logging.getLogger("stableprompt.recorder")


class Recorder:
    """Records provider calls: prediction, attribution and one ledger row per call.

    Thread-safe; one recorder may serve several clients/transports (its memory of recent
    calls is what links a request to its predecessor).

    Args:
        ledger: Where records go (``None``: only :attr:`records`).
        session_id: Session/conversation id for every call (else taken from each request, see
            :func:`session_from_request`; a call with none belongs to the conversation of a
            recent call with the same wire format, model and first message, if any).
        scenario: Free label stored on each record.
        tokenizer: Encoding name for :func:`~stableprompt._tokens.get_tokenizer` or a
            Tokenizer. Counts are estimates of the provider's (see ``_attribution``). If the
            encoding cannot be loaded, ``bytes/4`` is used and a warning is logged.
        policies: Cache policy table (or its entries) overriding the shipped one.
        clock: Wall clock in epoch seconds (``time.time``); drives TTL gaps and ``ts_utc``.
        store_content: Keep the request body text on the record (the ledger also needs
            ``store_content=True`` to keep it). Lets a later process diff against it.
        store_snippets: Keep, on a ``client_mutation`` record's ``verdict_detail``, the short
            before/after text of the first change (``snippet_a`` / ``snippet_b``: up to 32
            characters either side, key-shaped strings redacted; what ``stableprompt lint``
            prints) so ``stableprompt report`` can show why a call missed without the bodies.
            ``False`` keeps no prompt text at all on records.
        provider: Provider family for every call (``"vllm"``, ``"llama-cpp"``, ...), else
            inferred by :func:`provider_for`.
        session_window_s: How long a conversation's previous request counts for turns and
            head-change detection (seconds).
        keep_records: How many records :attr:`records` keeps (oldest dropped), ``None``: all.
        monotonic: Monotonic clock in seconds (``time.monotonic``) for latency and TTFT.
        usage_dialect: The usage parser for endpoints whose usage does not follow their
            wire format (an Anthropic-compatible server that reports an inclusive
            ``input_tokens``: ``"openai-compatible"``): a name from
            :data:`stableprompt.providers.WIRE_FORMATS` for every call, or a mapping from a
            URL host or a provider family (as inferred or given by ``provider=``, here or on
            the transport) to such a name; default: chosen per provider and wire format
            (:func:`~stableprompt._wire._formats.usage_format`). The record's
            ``wire_format`` is the dialect used; ``verdict_detail["request_format"]`` keeps
            the request's when they differ.

        engine: A self-hosted engine to ask for its own token view of every call whose
            provider is ``"llama-cpp"``: its base URL (``"http://127.0.0.1:8080"``, asked via
            ``/apply-template`` and ``/tokenize``) or an :class:`EngineTokens`. Predictions are
            then exact engine tokens (see ``_attribution``); if the engine cannot answer, the
            call is estimated as usual and ``verdict_detail["engine_view_error"]`` says why.
        engine_slots: The engine's slot count (``llama-server -np``); with one slot the
            previous request of any lineage is what the cache holds. The recorder knows what
            a slot holds from the calls it recorded: several recorders on one engine share a
            :class:`~stableprompt._recording._engine_view.SlotMemory` passed here instead.
        diagnostics: Ask providers why a request missed its cache, on the calls of the
            recording transports (stableprompt's clients take their own ``diagnostics=``):
            Anthropic ``diagnostics.previous_message_id`` (and its beta header), OpenAI
            Responses ``prompt_cache_options.comparison_response_id``, compared with the
            request our attribution compares with (``_diagnose``). Changes the bytes sent
            (the members are appended; the prompt and the cache key are unchanged). The
            answer is stored on the record and joined to our verdict
            (``verdict_detail["server_diagnosis"]``).
        sinks: Callables given each record after it was stored (``Recorder.records`` and the
            ledger), e.g. :class:`~stableprompt.OTelSink` (a span and token-usage metric
            points per call). A sink that raises is logged and skipped
            (:func:`~stableprompt._recording._sinks.deliver`): it never breaks the call nor
            loses the ledger row.

    Raises:
        ConfigurationError: ``usage_dialect`` names an unknown dialect (code
            ``usage-dialect``); ``engine`` is neither an http(s) URL nor an engine client
            (``engine-url``); ``engine_slots`` is not an int >= 1 or a SlotMemory
            (``engine-slots``); ``diagnostics`` is not a bool (``diagnostics``).

    Attributes:
        records: Records of finished calls, oldest first.
        ledger: The ledger, or ``None``.
    """

    def __init__(
        self,
        ledger: Ledger | None = None,
        *,
        session_id: str | None = None,
        scenario: str | None = None,
        tokenizer: str | Tokenizer = "cl100k_base",
        policies: PolicyTable | Iterable[CacheRules] | None = None,
        clock: Callable[[], float] = time.time,
        store_content: bool = False,
        store_snippets: bool = True,
        provider: str | None = None,
        session_window_s: float = 3600.0,
        keep_records: int | None = 10_000,
        monotonic: Callable[[], float] = time.monotonic,
        usage_dialect: UsageDialects = None,
        engine: EngineTokens | str | None = None,
        engine_slots: int | SlotMemory = 1,
        sinks: Iterable[RecordSink] = (),
        diagnostics: bool = False,
    ) -> None:
        self.usage_dialect = usage_dialects(usage_dialect)
        self.diagnostics = diagnostics_flag(diagnostics)
        self.ledger = ledger
        self.session_id = session_id
        self.scenario = scenario
        self.store_content = store_content
        self.store_snippets = store_snippets
        self.provider = provider
        self.session_window_s = session_window_s
        self.keep_records = keep_records
        self.clock = clock
        self.monotonic = monotonic
        if policies is None or isinstance(policies, PolicyTable):
            self.policies = policies or PolicyTable()
        else:
            self.policies = PolicyTable(policies)
        self._counter = EstimatingTokenCounter(
            tokenizer, max_entries=65_536, on_fallback=lambda exc: _log.warning(
                "tokenizer unavailable (%s); estimating tokens as bytes/4", exc.code))
        self.records: list[UsageRecord] = []
        self.engine: EngineTokens | None = engine_of(engine)
        self._owns_engine = isinstance(engine, str)
        self._memory = CallMemory(self._counter, window_s=session_window_s,
                                  slots=SlotMemory.of(engine_slots), policies=self.policies)
        self._records_lock = threading.Lock()
        # Gemini explicit caches this recorder saw created or updated: name -> tokens
        self._explicit_caches: dict[str, int] = {}
        self.sinks: tuple[RecordSink, ...] = tuple(sinks)
        self._worker: RecordingWorker | None = None

    def __repr__(self) -> str:
        return (
            f"Recorder(ledger={self.ledger!r}, session_id={self.session_id!r}, "
            f"records={len(self.records)})"
        )

    def close(self) -> None:
        """Finish the recording queued on :attr:`worker` (blocking; the thread stops and
        later deferred calls record inline) and close the engine client the recorder made
        from an ``engine`` URL (an :class:`EngineTokens` you passed stays yours). The ledger
        is not closed. Idempotent; calls recorded afterwards are estimated
        (``verdict_detail["engine_view_error"]``)."""
        with self._records_lock:
            worker = self._worker
        if worker is not None:
            worker.close()
        close = getattr(self.engine, "close", None)
        if self._owns_engine and callable(close):
            close()

    @property
    def worker(self) -> RecordingWorker:
        """The thread that records the calls of ``record_in_thread`` clients and transports
        (``_deferred``), made on first use: its jobs are journaled
        (:meth:`Ledger.pending_journal`) when the recorder has a ledger, and an ``atexit``
        hook runs what is still queued when the interpreter exits (:meth:`close` does it
        earlier; the hook holds no reference, so a dropped recorder's thread ends). One per
        recorder and process (a forked child makes its own, with its own journal), so calls
        recorded through several clients keep their order."""
        worker = self._worker
        if worker is not None and not worker.forked:  # every call asks: no lock then
            return worker
        with self._records_lock:
            if self._worker is None or self._worker.forked:  # a forked child: its own
                journal = None
                if self.ledger is not None:
                    try:
                        journal = self.ledger.pending_journal()
                    except Exception as exc:  # recording goes on, unjournaled
                        _log.warning("no pending journal for ledger %s: %s",
                                     getattr(self.ledger, "path", "?"),
                                     redact(f"{type(exc).__name__}: {exc}"))
                self._worker = RecordingWorker(journal, log=_log)
            return self._worker

    def flush(self, timeout_s: float | None = None) -> bool:
        """Block until every call recorded on :attr:`worker` so far is finished and stored
        (``record_in_thread``): :attr:`records`, :meth:`summary` and the ledger are then
        complete. Waits at most ``timeout_s`` seconds (``None``: no limit); returns False
        when the time ran out first, and at once when called from a recording job (a record
        sink, which would wait for itself). Nothing to wait for inline (returns True at
        once)."""
        worker = self._worker
        return True if worker is None else worker.wait(timeout_s)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def tokenizer_name(self) -> str:
        """Name of the tokenizer estimates are made with."""
        return self._counter.tokenizer.name

    # ------------------------------------------------------------------ start

    @staticmethod
    def recordable(path: str, method: str = "POST") -> bool:
        """True when a call to ``path`` would be recorded: a ``POST`` to ``.../messages``
        (Anthropic, directly under ``/v1``), ``.../chat/completions``, ``.../responses``, a
        Gemini ``...:generateContent`` or a Bedrock ``.../converse``. Decided from the path
        alone, so other calls pass through without their body being read."""
        return _intake.recordable(path, method)

    def start(
        self,
        path: str,
        headers: Any = None,
        body: bytes | bytearray | memoryview | None = None,
        *,
        host: str | None = None,
        method: str = "POST",
        provider: str | None = None,
        decoded: Mapping[str, Any] | None = None,
        resegmented: Resegmented | None = None,
        rendered: bool = False,
    ) -> Pending | None:
        """Register a call about to be sent and analyse its request at once (segments, our
        token counts, its conversation, turn and predecessor). Never raises.

        Args:
            path: URL path, e.g. ``/v1/messages``.
            headers: Request headers: read for the session header and for the credential
                values to scrub from the record
                (:func:`~stableprompt._redact.secrets_in_headers`); never stored.
            body: Exact request body bytes.
            host: URL host, for :func:`provider_for`.
            method: HTTP method; only ``POST`` is recorded.
            provider: Provider family of this call; default :attr:`provider`, else
                inferred (:func:`provider_for`).
            decoded: ``body`` already decoded (stableprompt's client hands over the
                :attr:`ProviderRequest.body` it decoded): it is not parsed again. Must be
                what :func:`~stableprompt._canonical.loads` gives for ``body`` (or, with
                ``resegmented``, its ``segmented._body_view``: the history then a read-only
                sequence of the same items).
            resegmented: ``body`` already segmented by :meth:`segment_rendered` (the
                client's own requests); its body (or body view) is ``decoded``.
            rendered: ``body`` is stableprompt's own rendering (implied by ``decoded``), so
                its bytes are its compact dump. Any body that continues its conversation's
                previous request (same bytes around the history, the same first items) is
                segmented from its new items (:meth:`segment_rendered`) instead of decoded
                whole; one not rendered here (an official SDK's, compact) only once the earlier
                body's bytes were found to be exactly its compact dump.

        Returns:
            A :class:`Pending` to pass to :meth:`finish`, or ``None`` when the call is not a
            Messages / Chat Completions / Responses request with a JSON object body: such calls
            (model lists, token counting, files, Assistants messages, non-JSON bodies) pass
            through unrecorded.
        """
        pending = self.register(path, headers, body, host=host, method=method,
                                provider=provider, decoded=decoded, resegmented=resegmented,
                                rendered=rendered)
        if pending is not None:
            self.analyse(pending)
        return pending

    def register(
        self,
        path: str,
        headers: Any = None,
        body: bytes | bytearray | memoryview | None = None,
        *,
        host: str | None = None,
        method: str = "POST",
        provider: str | None = None,
        decoded: Mapping[str, Any] | None = None,
        resegmented: Resegmented | None = None,
        rendered: bool = False,
        decode: bool = True,
    ) -> Pending | None:
        """The deferred entry: register a call (record id, send time, what the response
        observer needs) and leave its analysis to :meth:`analyse`, which must run before
        :meth:`finish` and after the calls sent before it were finished (``_deferred``: the
        recording thread runs both, in order, so the request is sent without waiting for
        them). Arguments as :meth:`start`. Never raises.

        Args:
            decode: ``False`` leaves the decoding of ``body`` to :meth:`analyse` too: the
                wire format is the path's, and ``model``, ``session_id`` and
                ``diagnostics_requested`` are set by the analysis (``pending.lazy_body``); a
                body that is not a JSON object is then recorded as ``unknown``
                (``verdict_detail["analysis_error"]``), not passed through.

        Returns:
            As :meth:`start`.
        """
        return _intake.register(self, self._memory, path, headers, body, host=host,
                                method=method, provider=provider, decoded=decoded,
                                resegmented=resegmented, rendered=rendered, decode=decode)

    def analyse(self, pending: Pending) -> None:
        """Analyse a call registered with :meth:`register` (the body decoded when
        ``register`` did not, segments, our token counts, its conversation, turn and
        predecessor); nothing for a call already analysed. :meth:`finish` runs it first when
        it has not run. Never raises."""
        _intake.analyse(self, self._memory, pending)

    def segment_rendered(self, wire_format: str, content: bytes) -> Resegmented | None:
        """Segment a body stableprompt rendered without decoding what its conversation's
        previous request held (:meth:`LineageSegments.segment_rendered
        <stableprompt._wire._resegment.LineageSegments.segment_rendered>`); ``None``
        when it continues no recorded request (decode it then). Never raises."""
        return self._memory.segment_rendered(wire_format, content)

    def segment_tokens(self, segmented: SegmentedRequest) -> list[int]:
        """Estimated tokens of each of ``segmented``'s segments, with the recorder's tokenizer
        (memoized by segment digest, so recording the same request later counts nothing
        again). Used by the stabilizer for the model minimum of its breakpoints."""
        return self._memory.count(segmented)

    def previous_response_id(
        self, wire_format: str, body: Mapping[str, Any], headers: Any = None, *,
        provider: str | None = None, host: str | None = None,
        segmented: SegmentedRequest | None = None,
    ) -> str | None:
        """The provider response id of the request this body will be compared with.

        The same-lineage predecessor's (in memory, else from the ledger), else the previous
        request of the same conversation when the head changed (see :meth:`start`). Used for
        provider cache diagnostics (Anthropic ``diagnostics.previous_message_id``, OpenAI
        ``prompt_cache_options.comparison_response_id``). ``segmented``: the body's segmenting
        when the caller has it (a rendered turn read through its body view, whose history is a
        read-only sequence the segmenters do not take). Never raises.
        """
        try:
            model = body.get("model")
            agent = agent_from_headers(headers)
            call = Call(ts=self.clock(), session_id=_intake.session_of(self, body, headers),
                        provider=provider_for(host, wire_format, provider or self.provider),
                        wire_format=wire_format, model=model if isinstance(model, str) else None,
                        opening=None, agent=None if agent is None else agent.id)
            return self._memory.compared_response_id(call, body, self.ledger, segmented)
        except Exception:
            return None

    # ------------------------------------------------------------------ finish

    def finish(self, pending: Pending, observation: Observation | None = None
               ) -> UsageRecord | None:
        """Complete a call: attribute it, store the record, remember it. Never raises.

        The record is :func:`~stableprompt._recording._outcome.record_of` the call's
        :func:`~stableprompt._recording._outcome.outcome_of` and its
        :func:`~stableprompt._recording._attribution.attribute`; a complete successful call
        is remembered as a future predecessor; if even that fails, a minimal row with
        ``verdict_detail["recorder_error"]`` is stored instead.

        Args:
            pending: From :meth:`start`. Finishing twice returns the first record.
            observation: Its answer (:class:`~stableprompt._recording._observer.Observation`:
                status, whole decoded body of a non-stream answer, a stream's usage, id and
                diagnostics, TTFT and latency in ms, the exception or the provider's error
                event, why it is incomplete, extra ``verdict_detail`` evidence). ``None`` or
                no ``status_code``: no answer arrived; ``latency_ms`` ``None``: measured now.

        Returns:
            The record (also appended to :attr:`records` and written to the ledger), or
            ``None`` only if even a minimal record could not be built.
        """
        if pending.finished:
            return pending.record
        pending.finished = True
        self.analyse(pending)  # a deferred analysis not run yet (never raises)
        observed = observation if observation is not None else Observation()
        try:
            record = self._record(pending, observed)
        except Exception as exc:
            problem = redact(f"{type(exc).__name__}: {exc}", secrets=pending.secrets)
            _log.warning("stableprompt could not attribute a call: %s", problem)
            try:
                record = failed_record(pending, observed.status_code, problem,
                                       scenario=self.scenario)
            except Exception:
                return None
        pending.record = scrubbed(record, pending.secrets)
        self.store(pending.record, pending.secrets)
        return pending.record

    def _record(self, pending: Pending, observation: Observation) -> UsageRecord:
        """The call's record (outcome, engine view, attribution), remembering a complete
        successful call as a future predecessor."""
        outcome = outcome_of(pending, observation, policies=self.policies,
                             tokenizer=self.tokenizer_name, now=self.monotonic())
        evidence: dict[str, Any] = {}
        engine = self._memory.engine_view(self.engine, pending, outcome.response,
                                          outcome.success, outcome.usage, evidence)
        attribution = attribution_of(pending, outcome, None if engine is None else engine[0],
                                     self._memory.sizes)
        attribution = self._explicit_read(pending, attribution)
        if outcome.unknown_reason is None and outcome.success:
            # When its answer ended (send time + latency), not when this finishing runs: on
            # a recording thread that can be after the next request was sent, which would
            # hide the conversation from the next call's same-head-recent rule.
            ended = min(self.clock(), pending.ts + outcome.latency_ms / 1000)
            self._memory.remember(
                pending, outcome.usage, outcome.response_id,
                None if attribution is None else attribution.read_entry_digest, engine,
                ended=ended,
                read_entry_index=None if attribution is None else attribution.read_entry_index,
                sizes=() if attribution is None else attribution.reported_sizes)
        return record_of(pending, outcome, attribution, scenario=self.scenario,
                         store_snippets=self.store_snippets, evidence=evidence,
                         extra=observation.detail)

    def _explicit_read(self, pending: Pending, attribution: Attribution | None
                       ) -> Attribution | None:
        """A Gemini request naming an explicit cache this recorder saw created reads all of
        it while it lives ("the number of tokens in the cached content that was used",
        ``cachedContentTokenCount``): its tokens are the least it predicts
        (``detail["explicit_cache_tokens"]``)."""
        name = pending.detail.get("cached_content")
        if attribution is None or not isinstance(name, str):
            return attribution
        tokens = self._explicit_caches.get(name)
        predicted = attribution.predicted_cache_read_tokens
        if tokens is None or predicted is None or predicted >= tokens:
            return attribution
        return dataclasses.replace(attribution, predicted_cache_read_tokens=tokens,
                                   detail={**attribution.detail, "explicit_cache_tokens": tokens})

    def _note_cache(self, record: UsageRecord) -> None:
        """Keep the tokens of a Gemini explicit cache a stored cache-call row names."""
        facts = record.verdict_detail.get(CACHE_DETAIL)
        if not isinstance(facts, dict) or record.status_code is None \
                or not 200 <= record.status_code < 300:
            return
        name, tokens = facts.get("name"), facts.get("tokens")
        if not isinstance(name, str):
            return
        if facts.get("op") == "delete":
            self._explicit_caches.pop(name, None)
        elif isinstance(tokens, int) and not isinstance(tokens, bool):
            self._explicit_caches[name] = tokens

    def store(self, record: UsageRecord, secrets: tuple[str, ...] = ()) -> None:
        """Keep a finished record as every recorded call is kept: appended to
        :attr:`records`, written to the ledger (which spills on a storage failure) and handed
        to the :attr:`sinks`. Never raises for a storage or sink failure; ``secrets`` are
        scrubbed from the log lines of such failures (the record is already scrubbed)."""
        with self._records_lock:
            self._note_cache(record)
            self.records.append(record)
            keep = self.keep_records
            if keep is not None and len(self.records) > keep + max(keep // 10, 1):
                del self.records[: len(self.records) - keep]
        if self.ledger is not None:
            try:
                self.ledger.write(record)
            except Exception as exc:  # Ledger.write does not raise for storage failures
                _log.warning("ledger write failed: %s: %s", type(exc).__name__,
                             redact(str(exc), secrets=secrets))
        if self.sinks:
            deliver(self.sinks, record, _log, secrets)

    def unanalysed(self, *, method: str, path: str, reason: str, headers: Any = None,
                   host: str | None = None, provider: str | None = None,
                   status_code: int | None = None, error: BaseException | None = None,
                   latency_ms: float | None = None, request_bytes: int | None = None,
                   response_bytes: int | None = None) -> UsageRecord | None:
        """The record of a request forwarded without analysis (``stableprompt proxy``: a path
        that is not an LLM endpoint, a body that is not a request of its endpoint):
        :func:`~stableprompt._recording._unanalysed.unanalysed_record` (wire format and
        verdict ``unknown``; no body, header or query string kept). Not stored: pass it to
        :meth:`store`. ``None`` (logged) if it cannot be built."""
        return unanalysed_record(
            method=method, path=path, reason=reason, headers=headers,
            ts=self.clock(), session_id=self.session_id, scenario=self.scenario,
            provider=known_provider(host, provider or self.provider),
            status_code=status_code, error=error, latency_ms=latency_ms,
            request_bytes=request_bytes, response_bytes=response_bytes)

    def summary(self, *, price: bool = True) -> Summary:
        """The report's numbers for the calls this recorder recorded (:attr:`records`, in
        time order): :func:`~stableprompt.summarize` on them, the same numbers as
        ``stableprompt report --json`` on a ledger holding just these calls, so a harness can
        assert ``recorder.summary().hit_rate`` without the CLI. Only the records
        :attr:`records` still keeps count (``keep_records``).

        Args:
            price: Price the calls with genai-prices (``False``: costs are ``None``).
        """
        # Imported when called: recording a call never loads the accounting (genai-prices).
        from .._accounting._summary import summarize

        with self._records_lock:
            records = sorted(self.records, key=lambda r: r.ts_utc)
        return summarize(records, policies=self.policies, price=price)

    def observe(
        self,
        pending: Pending,
        *,
        status_code: int,
        headers: Any,
        content_encoding: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> ResponseObserver:
        """A :class:`ResponseObserver` for the response of ``pending``; its close finishes the
        call (:meth:`finish`) with what it observed.

        ``content_encoding`` overrides the header (``""`` for a body already decoded);
        ``clock`` is the monotonic clock it reads for TTFT and latency (default
        :attr:`monotonic`; a replay of kept chunks passes their arrival times, ``_deferred``).
        """
        return ResponseObserver(
            functools.partial(self.finish, pending),
            usage_format=pending.usage_format, status_code=status_code, headers=headers,
            content_encoding=content_encoding, clock=clock or self.monotonic,
            started=pending.started,
            # a body not decoded yet: known once the analysis read it
            watch_diagnostics=(lambda: None if pending.lazy_body else
                               pending.diagnostics_requested is not None)
            if pending.lazy_body else pending.diagnostics_requested is not None,
            request_format=None if request_format(pending.usage_format) == pending.wire_format
            else pending.wire_format)


public(Recorder)
