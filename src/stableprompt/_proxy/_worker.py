"""Finishing recorded calls off the event loop: one worker thread, in submission order.

Inline, a call's recording work (the request's analysis before it is sent; usage parsing,
attribution, the ledger write and the log line when its response ends) runs on the proxy's
event loop, and holds back every other request and stream meanwhile. With
``ProxyConfig(record_in_thread=True)`` (the ``stableprompt proxy`` default) the proxy hands
the transport a :class:`DeferredRecorder`: :meth:`Recorder.start
<stableprompt.Recorder.start>` only registers the call on the loop (record id, send time,
what the response observer needs: ``defer=True``) and the request is forwarded at once; its
analysis (:meth:`Recorder.analyse`: segments, token counts, turn, predecessor) and, when the
response ends, :meth:`Recorder.finish`, the observer's sink and the proxy's per-call log and
capture run as jobs on one :class:`RecordingWorker` thread.

Guarantees:

* **Exactly once**: each finishing job is submitted once, by the observer's close (itself
  idempotent) or by the transport's error path, never both; a call's analysis runs once
  (:meth:`Recorder.analyse` is idempotent, and ``finish`` runs it first if it has not run).
* **In order**: one thread runs the jobs first in, first out, so records reach the ledger in
  the order the responses ended, and a call's log line follows its record.
* **Predecessors seen**: a request's analysis is queued when it is sent, after the finishing
  job of every call whose response had ended by then, so the next call of a conversation is
  compared with the previous one, as inline, and no request waits for the queue.
* **Shutdown**: :meth:`RecordingWorker.close` runs every queued job before returning (the
  proxy's lifespan end, after uvicorn finished the calls in flight).
* **SIGKILL loses nothing that completed**: with a journal (the proxy's, when it has a
  ledger: :meth:`Ledger.pending_journal <stableprompt.Ledger.pending_journal>`), each job
  that makes a row is submitted with the row's provisional record
  (:meth:`Recorder.provisional <stableprompt.Recorder.provisional>`, or the record itself
  for an unanalysed request), appended to the journal before the job is queued and settled
  once the job ran. A call's line is written when its observer closes, which is then
  eager (:attr:`ResponseObserver.eager`): before the client gets the chunk that completes
  the call (a stream's terminal event, the body's last byte). If the process is killed
  with jobs still queued, the next :meth:`Ledger.replay_spill
  <stableprompt.Ledger.replay_spill>` (the proxy's startup) stores their provisional rows,
  verdict ``unknown``; the ledger stays intact, as ever.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .._ledger._journal import PendingJournal
from .._ledger._usage_record import UsageRecord
from .._recording._call import Pending
from .._recording._observer import Observation, ResponseObserver
from .._recording._recorder import Recorder
from .._redact import redact

__all__ = ["DeferredRecorder", "RecordingWorker"]

_log = logging.getLogger("stableprompt.proxy")


class RecordingWorker:
    """One thread running submitted jobs in order; a job that raises is logged, not lost.

    Args:
        journal: Where the records of queued jobs are made durable first (module
            docstring), or ``None``.
    """

    def __init__(self, journal: PendingJournal | None = None) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1,
                                            thread_name_prefix="stableprompt-record")
        self._lock = threading.Lock()
        self._last: Future[Any] | None = None
        self._closed = False
        self.journal = journal

    def submit(self, job: Callable[[], Any], record: UsageRecord | None = None) -> None:
        """Queue ``job`` after every job submitted before it; ``record`` (what the job will
        store, or its provisional form) is journaled first and settled once the job ran
        without raising (a job that raised leaves it for the next replay)."""
        journal = self.journal
        ticket = None if journal is None or record is None else journal.append(record)

        def run() -> None:
            try:
                job()
            except Exception as exc:  # recording must never break the proxy
                _log.warning("proxy recording job failed: %s",
                             redact(f"{type(exc).__name__}: {exc}"))
                return
            if ticket is not None and journal is not None:
                journal.settle(ticket)

        with self._lock:
            if self._closed:  # after shutdown (a call that outlived it): inline
                run()
                return
            self._last = self._executor.submit(run)

    def wait(self) -> None:
        """Block until every job submitted so far has run."""
        last = self._last
        if last is not None:
            last.result()

    def close(self) -> None:
        """Run every queued job, then stop the thread (idempotent); jobs submitted later
        run inline."""
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=True)
        if self.journal is not None:
            self.journal.close()


class DeferredRecorder:
    """A :class:`~stableprompt._recording._transport.CallRecorder` over ``recorder`` whose
    finishing runs on ``worker`` (module docstring); ``recordable`` and ``start`` run in the
    caller's thread."""

    def __init__(self, recorder: Recorder, worker: RecordingWorker) -> None:
        self.recorder = recorder
        self.worker = worker

    @property
    def policies(self) -> Any:
        """The recorder's policy table (for the stabilizer's model minimums)."""
        return self.recorder.policies

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
              resegmented: Any = None) -> Pending | None:
        """As :meth:`Recorder.start`, registering the call in the caller's thread and
        queueing its analysis (module docstring)."""
        pending = self.recorder.start(path, headers, body, host=host, method=method,
                                      provider=provider, decoded=decoded,
                                      resegmented=resegmented, defer=True)
        if pending is not None:
            self.worker.submit(lambda: self.recorder.analyse(pending))
        return pending

    def observe(self, pending: Pending, *, status_code: int, headers: Any,
                content_encoding: str | None = None) -> ResponseObserver:
        """As :meth:`Recorder.observe`, but the observer's close queues the finishing (it
        returns ``None``; the record is ``pending.record`` once the job ran); with a
        journal, the observer is ``eager``: the call is journaled before the client gets
        the chunk that completes it."""
        observer = self.recorder.observe(pending, status_code=status_code, headers=headers,
                                         content_encoding=content_encoding)
        observer.eager = self.worker.journal is not None  # journaled before the last chunk
        sink = observer.sink

        def deferred(observation: Observation) -> UsageRecord | None:
            self.worker.submit(lambda: sink(observation), self._provisional(
                pending, observation))
            return None

        observer.sink = deferred
        return observer

    def finish(self, pending: Pending, *, error: BaseException | str | None = None,
               status_code: int | None = None, detail: Mapping[str, Any] | None = None
               ) -> UsageRecord | None:
        """As :meth:`Recorder.finish`, queued (returns ``None``)."""
        self.worker.submit(lambda: self.recorder.finish(
            pending, error=error, status_code=status_code, detail=detail),
            self._provisional(pending, error=error, status_code=status_code))
        return None

    def store(self, record: UsageRecord) -> None:
        """As :meth:`Recorder.store`, queued (``record`` journaled as it is)."""
        self.worker.submit(lambda: self.recorder.store(record), record)

    def _provisional(self, pending: Pending, observation: Observation | None = None, *,
                     error: BaseException | str | None = None,
                     status_code: int | None = None) -> UsageRecord | None:
        """The call's provisional record when the worker journals, else ``None``."""
        if self.worker.journal is None:
            return None
        return self.recorder.provisional(pending, observation, error=error,
                                         status_code=status_code)
