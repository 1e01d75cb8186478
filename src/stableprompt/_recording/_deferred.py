"""DeferredRecorder: a call's recording work on a :class:`RecordingWorker` thread, in order.

Inline, a call's recording work (the request's analysis before it is sent; usage parsing,
attribution, the ledger write when its response ends) runs in the caller's thread: on the
proxy's event loop it holds back every other request; in a client it adds to every call.
With ``record_in_thread=True`` (``ProxyConfig``, the ``stableprompt proxy`` default; the
clients and :class:`~stableprompt.RecordingTransport`, opt-in) the transport is handed a
:class:`DeferredRecorder`: :meth:`Recorder.start <stableprompt.Recorder.start>` only
registers the call in the caller's thread (record id, send time, what the response observer
needs: :meth:`Recorder.register <stableprompt.Recorder.register>`; with ``decode=False`` not
even the body is decoded there) and the
request is sent at once. Its analysis (:meth:`Recorder.analyse
<stableprompt.Recorder.analyse>`: decoding, segments, token counts, turn, predecessor), which
thus overlaps the request's flight, and, when the response ends, :meth:`Recorder.finish
<stableprompt.Recorder.finish>` run as jobs on one :class:`RecordingWorker` thread.

Guarantees:

* **Exactly once**: each finishing job is submitted once, by the observer's close (itself
  idempotent) or by the transport's error path, never both; a call's analysis runs once
  (:meth:`Recorder.analyse` is idempotent, and ``finish`` runs it first if it has not run).
* **In order**: one thread runs the jobs first in, first out, so records reach the ledger in
  the order the responses ended (and the proxy's log line of a call follows its record).
* **Predecessors seen**: a request's analysis is queued when it is sent, after the finishing
  job of every call whose response had ended by then, so the next call of a conversation is
  compared with the previous one, as inline, and no request waits for the queue.
* **The record is there when asked**: the finishing job's handle is ``pending.finishing``;
  :meth:`Pending.wait <stableprompt._recording._call.Pending.wait>` (what a client's
  ``last_record`` and ``EventStream.record`` use) waits for it, bounded;
  :meth:`Recorder.flush <stableprompt.Recorder.flush>` waits for every queued job.
* **Shutdown**: :meth:`RecordingWorker.close` runs every queued job before returning (the
  proxy's lifespan end; :meth:`Recorder.close <stableprompt.Recorder.close>` and an
  ``atexit`` hook for the recorder's own worker).
* **The response observed off the caller's thread** when there is no journal: the caller's
  thread only keeps each raw chunk with its arrival time (:class:`Tape`); the observing
  itself (content decoding, the stream accumulator, diagnostics) is replayed from them on the
  recorder's thread, in the finishing job, with the same times, so TTFT and latency are the
  call's. (A stream is then held in memory until its end, at most :data:`MAX_TAPE_BYTES`.)
  With a journal the observer runs live, as inline, because it must know the call complete
  before the caller gets that chunk (next point).
* **SIGKILL loses nothing that completed**: with a journal (the worker's, when the recorder
  has a ledger: :meth:`Ledger.pending_journal <stableprompt.Ledger.pending_journal>`), each
  job that makes a row is submitted with the row's provisional record
  (:meth:`Recorder.provisional <stableprompt.Recorder.provisional>`, handed over as its
  JSON object, which the journal writes without building the record; its request part is
  made by the analysis job, during the flight; or the record itself
  for an unanalysed request), appended to the journal before the job is queued and settled
  once the job ran. A call's line is written when its observer closes, which is then eager
  (:attr:`ResponseObserver.eager`): before the caller gets the chunk that completes the call
  (a stream's terminal event, the body's last byte). If the process is killed with jobs
  still queued, the next :meth:`Ledger.replay_spill <stableprompt.Ledger.replay_spill>` (the
  proxy's startup; a script's, when it calls it) stores their provisional rows, verdict
  ``unknown``; the ledger stays intact, as ever.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from array import array
from collections.abc import Callable, Mapping
from typing import Any

from .._ledger._usage_record import UsageRecord
from ._call import Pending, elapsed_ms
from ._observer import BodyObserver, Observation
from ._recorder import Recorder
from ._unanalysed import provisional_fields, provisional_identity
from ._worker import RecordingWorker

__all__ = ["MAX_TAPE_BYTES", "DeferredRecorder", "Tape"]

MAX_TAPE_BYTES = 64 * 1024 * 1024
"""Most bytes of a response a :class:`Tape` keeps (as ``ResponseObserver`` copies at most of a
JSON body); beyond, the call is recorded with ``verdict_detail["observer_error"]``."""


class DeferredRecorder:
    """A :class:`~stableprompt._recording._transport.CallRecorder` over ``recorder`` whose
    analysis and finishing run on ``worker`` (module docstring); ``recordable`` and the
    registering part of ``start`` run in the caller's thread.

    Args:
        recorder: The recorder that makes the records.
        worker: The thread its jobs run on (default: the recorder's own,
            :attr:`Recorder.worker <stableprompt.Recorder.worker>`).
        decode: Decode the request body in the caller's thread (the proxy: a body that is
            not a request of its endpoint is then forwarded unanalysed). ``False`` (the
            clients and transports): the caller's thread does not read the body at all; the
            worker decodes it, and a recordable path with a body that is not a JSON object
            is recorded as ``unknown`` (``verdict_detail["analysis_error"]``) instead of
            passing unrecorded.
    """

    def __init__(self, recorder: Recorder, worker: RecordingWorker | None = None, *,
                 decode: bool = True) -> None:
        self.recorder = recorder
        self._worker = worker
        self.decode = decode

    @property
    def worker(self) -> RecordingWorker:
        """The worker given, else the recorder's (:attr:`Recorder.worker
        <stableprompt.Recorder.worker>`, asked each time: a forked child gets its own)."""
        return self._worker if self._worker is not None else self.recorder.worker

    def __repr__(self) -> str:
        return f"DeferredRecorder({self.recorder!r})"

    @property
    def policies(self) -> Any:
        """The recorder's policy table (for the stabilizer's model minimums)."""
        return self.recorder.policies

    @property
    def provider(self) -> str | None:
        """The recorder's provider family for every call, if it has one."""
        return self.recorder.provider

    @property
    def diagnostics(self) -> bool:
        """The recorder's ``diagnostics`` (ask providers for cache diagnostics)."""
        return self.recorder.diagnostics

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait for the jobs queued on :attr:`worker` so far (at most ``timeout_s`` seconds);
        False when the time ran out first."""
        return self.worker.wait(timeout_s)

    def previous_response_id(self, wire_format: str, body: Mapping[str, Any],
                             headers: Any = None, *, provider: str | None = None,
                             host: str | None = None) -> str | None:
        """As :meth:`Recorder.previous_response_id` (after :meth:`flush`, the recorder's
        memory holds the calls that ended)."""
        return self.recorder.previous_response_id(wire_format, body, headers,
                                                  provider=provider, host=host)

    def segment_tokens(self, segmented: Any) -> list[int]:
        """As :meth:`Recorder.segment_tokens` (for the stabilizer)."""
        return self.recorder.segment_tokens(segmented)

    def recordable(self, path: str, method: str = "POST") -> bool:
        """As :meth:`Recorder.recordable`."""
        return self.recorder.recordable(path, method)

    def start(self, path: str, headers: Any = None,
              body: bytes | bytearray | memoryview | None = None, *, host: str | None = None,
              method: str = "POST", provider: str | None = None,
              decoded: Mapping[str, Any] | None = None,
              resegmented: Any = None, rendered: bool = False) -> Pending | None:
        """As :meth:`Recorder.start`, registering the call in the caller's thread and
        queueing its analysis (module docstring)."""
        pending = self.recorder.register(path, headers, body, host=host, method=method,
                                         provider=provider, decoded=decoded,
                                         resegmented=resegmented, rendered=rendered,
                                         decode=self.decode)
        if pending is not None:
            self.worker.submit(DeferredRecorder._analyse, self, pending)
        return pending

    def _analyse(self, pending: Pending) -> None:
        """The analysis job: :meth:`Recorder.analyse`, then, when the worker journals, the
        request's part of the call's provisional row (``pending.journal_identity``), so the
        caller's thread only adds the response's (:meth:`_provisional`)."""
        recorder = self.recorder
        recorder.analyse(pending)
        if self.worker.journal is not None:
            with contextlib.suppress(Exception):  # else the caller's thread makes it (or logs)
                pending.journal_identity = provisional_identity(pending, recorder.scenario)

    def observe(self, pending: Pending, *, status_code: int, headers: Any,
                content_encoding: str | None = None) -> BodyObserver:
        """As :meth:`Recorder.observe`, but the close queues the finishing (it returns
        ``None``; the record is ``pending.record`` once the job ran: :meth:`Pending.wait`).
        Without a journal the caller's thread gets a :class:`Tape` (module docstring); with
        one, a live observer that is ``eager``: the call is journaled before the caller gets
        the chunk that completes it."""
        if self.worker.journal is None:
            return Tape(self, pending, status_code=status_code, headers=headers,
                        content_encoding=content_encoding)
        observer = self.recorder.observe(pending, status_code=status_code, headers=headers,
                                         content_encoding=content_encoding)
        observer.eager = True  # journaled before the caller gets the last chunk
        observer.sink = functools.partial(self._journaled, pending, observer.sink)
        return observer

    def _journaled(self, pending: Pending, sink: Callable[[Observation], Any],
                   observation: Observation) -> UsageRecord | None:
        """The sink of a journaled call's observer: its provisional row journaled, then
        ``sink(observation)`` (the recorder's finishing) queued."""
        pending.finishing = self.worker.submit(
            sink, observation, record=self._provisional(pending, observation))
        return None

    def finish(self, pending: Pending, observation: Observation) -> UsageRecord | None:
        """As :meth:`Recorder.finish`, queued (returns ``None``; :meth:`Pending.wait`), the
        latency measured now when ``observation`` has none."""
        if observation.latency_ms is None:
            observation = dataclasses.replace(
                observation, latency_ms=elapsed_ms(pending.started, self.recorder.monotonic()))
        pending.finishing = self.worker.submit(
            functools.partial(self.recorder.finish, pending, observation),
            record=self._provisional(pending, observation))
        return None

    def store(self, record: UsageRecord) -> None:
        """As :meth:`Recorder.store`, queued (``record`` journaled as it is)."""
        self.worker.submit(self.recorder.store, record, record=record)

    def _provisional(self, pending: Pending, observation: Observation
                     ) -> dict[str, Any] | None:
        """The call's provisional record when the worker journals, as its fields (the
        journal writes them without building the record), else ``None``."""
        if self.worker.journal is None:
            return None
        recorder = self.recorder
        return provisional_fields(pending, observation, scenario=recorder.scenario,
                                  now=recorder.monotonic())


class Tape:
    """A :class:`~stableprompt._recording._observer.BodyObserver` that keeps each raw chunk
    with its arrival time (the recorder's monotonic clock, seconds) and, at :meth:`close`,
    queues their replay through a real observer, and so the finishing, on the recorder's
    thread (module docstring). Never raises; close is idempotent.

    Few objects for the garbage collector to count on the caller's thread: slotted, the
    arrival times in one ``array`` (no tuple per chunk), the replay a method queued with the
    tape as its argument (no closure): per response the tape, its two containers and the
    job's handle, all freed by reference counting once the job ran."""

    __slots__ = ("_chunks", "_clock", "_complete", "_deferred", "_encoding", "_ended",
                 "_error", "_headers", "_pending", "_size", "_status", "_times", "closed")

    def __init__(self, deferred: DeferredRecorder, pending: Pending, *, status_code: int,
                 headers: Any, content_encoding: str | None) -> None:
        self._deferred, self._pending = deferred, pending
        self._status, self._headers, self._encoding = status_code, headers, content_encoding
        self._clock = deferred.recorder.monotonic
        self._chunks: list[bytes] = []
        self._times = array("d")
        self._size = 0
        self._ended = 0.0
        self._complete = True
        self._error: BaseException | None = None
        self.closed = False

    def feed(self, chunk: bytes) -> None:
        """Keep ``chunk`` and when it arrived."""
        if self.closed or self._size > MAX_TAPE_BYTES:
            return
        self._size += len(chunk)
        if self._size <= MAX_TAPE_BYTES:
            self._times.append(self._clock())
            self._chunks.append(bytes(chunk))

    def close(self, *, complete: bool = True, error: BaseException | None = None
              ) -> UsageRecord | None:
        """Queue the replay and the finishing (returns ``None``: :meth:`Pending.wait`)."""
        if self.closed:
            return None
        self.closed = True
        self._ended, self._complete, self._error = self._clock(), complete, error
        pending, worker = self._pending, self._deferred.worker
        if self._size > MAX_TAPE_BYTES:
            self._chunks.clear()
            detail = {"observer_error": f"response body larger than {MAX_TAPE_BYTES} bytes: "
                      "not observed"}
            pending.finishing = worker.submit(functools.partial(
                self._deferred.recorder.finish, pending, Observation(
                    status_code=self._status, detail=detail,
                    latency_ms=elapsed_ms(pending.started, self._ended))))
            return None
        pending.finishing = worker.submit(Tape._replay, self)
        return None

    def _replay(self) -> None:
        """The finishing job: the kept chunks through the recorder's observer, its clock
        reading each chunk's arrival time, then its close at the tape's."""
        pending, chunks, times = self._pending, self._chunks, self._times
        self._chunks, self._times = [], array("d")
        arrival = [pending.started]  # what the observer's clock reads: when it came
        observer = self._deferred.recorder.observe(
            pending, status_code=self._status, headers=self._headers,
            content_encoding=self._encoding, clock=lambda: arrival[0])
        for at, chunk in zip(times, chunks, strict=True):
            arrival[0] = at
            observer.feed(chunk)
        arrival[0] = self._ended
        observer.close(complete=self._complete, error=self._error)
