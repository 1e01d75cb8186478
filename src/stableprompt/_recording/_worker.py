"""RecordingWorker: one thread running recording jobs in submission order, journaled first.

The thread behind ``record_in_thread`` (``stableprompt proxy``, the clients, the recording
transports): :class:`~stableprompt._recording._deferred.DeferredRecorder` submits each call's
analysis and finishing here, and its module docstring states the guarantees (exactly once,
in order, predecessors seen, shutdown, SIGKILL). This module knows jobs and their journal
only, never a recorder.

A job that raises is logged (its line scrubbed of key-shaped strings), never raised into the
caller; its journal line is left unsettled, so the next :meth:`Ledger.replay_spill
<stableprompt.Ledger.replay_spill>` stores the provisional row: a failed job loses no call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .._ledger._journal import PendingJournal
from .._ledger._usage_record import UsageRecord
from .._redact import redact

__all__ = ["RecordingWorker"]

_log = logging.getLogger("stableprompt.recorder")


class RecordingWorker:
    """One thread running submitted jobs in order; a job that raises is logged, not lost.

    Args:
        journal: Where the records of queued jobs are made durable first
            (:meth:`Ledger.pending_journal <stableprompt.Ledger.pending_journal>`), or
            ``None``.
        log: Where a failing job is logged (default the ``stableprompt.recorder`` logger;
            the proxy passes ``stableprompt.proxy``).

    Attributes:
        journal: The journal, or ``None``.
    """

    def __init__(self, journal: PendingJournal | None = None, *,
                 log: logging.Logger | None = None) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1,
                                            thread_name_prefix="stableprompt-record")
        self._lock = threading.Lock()
        self._last: Future[Any] | None = None
        self._closed = False
        self._log = log if log is not None else _log
        self.journal = journal

    def submit(self, job: Callable[[], Any], record: UsageRecord | None = None
               ) -> Future[Any] | None:
        """Queue ``job`` after every job submitted before it; never raises.

        Args:
            job: What to run (its exceptions are logged).
            record: What the job will store, or its provisional form: journaled before the
                job is queued and settled once it ran without raising (a job that raised
                leaves it for the next replay).

        Returns:
            The job's future (its result is ``None``; it never raises), or ``None`` when the
            job ran inline in this call (after :meth:`close`).
        """
        journal = self.journal
        ticket = None if journal is None or record is None else journal.append(record)

        def run() -> None:
            try:
                job()
            except Exception as exc:  # recording must never break the caller
                self._log.warning("recording job failed: %s",
                                  redact(f"{type(exc).__name__}: {exc}"))
                return
            if ticket is not None and journal is not None:
                journal.settle(ticket)

        with self._lock:
            if not self._closed:
                try:
                    self._last = future = self._executor.submit(run)
                    return future
                except RuntimeError:  # the interpreter is shutting down: inline
                    self._closed = True
        run()  # after shutdown (a call that outlived it): inline
        return None

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until every job submitted so far has run, at most ``timeout_s`` seconds
        (``None``: no limit). Returns False when the time ran out first."""
        last = self._last
        if last is None:
            return True
        try:
            last.result(timeout_s)
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        """Run every queued job, then stop the thread and close the journal (idempotent);
        jobs submitted later run inline."""
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=True)
        if self.journal is not None:
            self.journal.close()
