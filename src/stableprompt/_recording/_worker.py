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

import atexit
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from .._ledger._journal import PendingJournal, Segment
from .._ledger._usage_record import UsageRecord
from .._redact import redact

__all__ = ["JobHandle", "RecordingWorker", "in_recording_job"]

_log = logging.getLogger("stableprompt.recorder")

_JOB = threading.local()  # .active: this thread is running a recording job now


def in_recording_job() -> bool:
    """Whether the calling thread is running a recording job (a record sink, a log handler
    called from one): such a caller cannot wait for the jobs queued behind its own."""
    return bool(getattr(_JOB, "active", False))


_FORKS = [0]
"""How many times this process is a forked child of the process that imported this module
(``os.fork`` runs the hook in the child): a worker made before the last fork belongs to an
ancestor. Read on every submit, instead of asking the kernel for the process id."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))

_LIVE: weakref.WeakSet[RecordingWorker] = weakref.WeakSet()


def _close_live() -> None:
    """At interpreter exit, run what every live worker still has queued (a script that never
    called ``close()`` loses no call). Weak: a dropped recorder's worker is not kept alive
    (nor its thread) until the process ends."""
    for worker in list(_LIVE):
        worker.close()


# When the interpreter's threads are shut down (the main thread ended, the other non-daemon
# threads joined), before ``atexit`` hooks, as ``concurrent.futures`` drains its pools: an
# exit hook of the program finds the calls stored; calls recorded later run inline.
_at_thread_shutdown = getattr(threading, "_register_atexit", atexit.register)
_at_thread_shutdown(_close_live)


class JobHandle:
    """One queued job, and what its submitter holds of it (:attr:`Pending.finishing
    <stableprompt._recording._call.Pending.finishing>`): :meth:`result` waits until it ran.

    The one object a job allocates besides its arguments (no closure, no future): the queue
    holds it, the worker's thread calls its function with its arguments, then drops them
    (they may hold the handle's holder: a pending call whose ``finishing`` this is), and
    counts the jobs it ran, in order, instead of completing each."""

    __slots__ = ("_args", "_func", "_jobs", "_number", "_ticket")

    def __init__(self, jobs: _Jobs, number: int, func: Callable[..., Any],
                 args: tuple[Any, ...], ticket: Segment | None) -> None:
        self._jobs, self._number = jobs, number
        self._func: Callable[..., Any] | None = func
        self._args: tuple[Any, ...] = args
        self._ticket = ticket

    def result(self, timeout: float | None = None) -> None:
        """Return once the job ran (it never raises: its exceptions are logged).

        Raises:
            TimeoutError: ``timeout`` seconds passed first (``None``: no limit).
        """
        if not self._jobs.wait_for(self._number, timeout):
            raise TimeoutError(f"recording job {self._number} did not run in {timeout} s")

    def run(self) -> None:
        """Run the job once, as a recording job (:func:`in_recording_job`), then settle its
        journal line; what it raises is logged (scrubbed of key-shaped strings), never
        raised, and leaves the line for the next replay. Its function and arguments are
        dropped first."""
        func, args, self._func, self._args = self._func, self._args, None, ()
        if func is None:
            return
        jobs = self._jobs
        outer = in_recording_job()
        _JOB.active = True
        try:
            func(*args)
        except Exception as exc:  # recording must never break the caller
            jobs.log.warning("recording job failed: %s",
                             redact(f"{type(exc).__name__}: {exc}"))
            return
        finally:
            _JOB.active = outer
            del func, args  # not held while the thread waits: the job may hold its worker
        ticket, self._ticket = self._ticket, None
        if ticket is not None and jobs.journal is not None:
            jobs.journal.settle(ticket)


class _Jobs:
    """The queue of one worker, what its thread ran and what a job needs of the worker (its
    journal and log), shared by the worker and its thread (which holds no reference to the
    worker, so a dropped worker ends it)."""

    __slots__ = ("changed", "journal", "log", "queue", "ran", "submitted", "waiters")

    def __init__(self, journal: PendingJournal | None, log: logging.Logger) -> None:
        self.queue: queue.SimpleQueue[JobHandle | None] = queue.SimpleQueue()
        self.journal, self.log = journal, log
        self.submitted = 0  # jobs queued, numbered from 1 (under the worker's lock)
        self.ran = 0  # jobs run: the thread runs them in order, so the last one's number
        self.waiters = 0
        self.changed = threading.Condition(threading.Lock())

    def wait_for(self, number: int, timeout: float | None) -> bool:
        """Whether job ``number`` ran within ``timeout`` seconds."""
        if self.ran >= number:
            return True
        with self.changed:
            self.waiters += 1  # before the test: the thread notifies when it sees waiters
            try:
                return self.changed.wait_for(lambda: self.ran >= number, timeout)
            finally:
                self.waiters -= 1

    def serve(self) -> None:
        """The thread: run queued jobs in order until the stop mark (``None``)."""
        while True:
            job = self.queue.get()
            if job is None:
                return
            number = job._number
            try:
                job.run()  # logs what its job raises
            except BaseException:  # the thread outlives any job (a KeyboardInterrupt too)
                self.log.exception("recording job %d aborted", number)
            del job  # not held while waiting
            self.ran = number
            if self.waiters:
                with self.changed:
                    self.changed.notify_all()


class RecordingWorker:
    """One thread running submitted jobs in order; a job that raises is logged, not lost.

    Args:
        journal: Where the records of queued jobs are made durable first
            (:meth:`Ledger.pending_journal <stableprompt.Ledger.pending_journal>`), or
            ``None``.
        log: Where a failing job is logged (default the ``stableprompt.recorder`` logger;
            the proxy passes ``stableprompt.proxy``).

    The thread (``stableprompt-record``, a daemon: an exit hook runs what is queued at
    interpreter exit, when its threads are shut down) starts with the first job and ends at
    :meth:`close`, or when the worker is dropped. Per job the caller's thread allocates its
    :class:`JobHandle` and the tuple of its arguments (a call's recording submits two jobs).
    """

    def __init__(self, journal: PendingJournal | None = None, *,
                 log: logging.Logger | None = None) -> None:
        self._jobs = _Jobs(journal, log if log is not None else _log)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._forks = _FORKS[0]
        _LIVE.add(self)
        # a dropped worker's thread ends (it holds the queue, not the worker)
        weakref.finalize(self, self._jobs.queue.put, None).atexit = False

    @property
    def journal(self) -> PendingJournal | None:
        """The journal, or ``None``."""
        return self._jobs.journal

    @property
    def forked(self) -> bool:
        """True in a child process forked after this worker was made: its thread and queue
        are the parent's (they do not exist here) and so is its journal; the child makes its
        own worker (:attr:`Recorder.worker <stableprompt.Recorder.worker>`), and this one
        runs what it is still given inline, unjournaled."""
        return self._forks != _FORKS[0]

    def submit(self, job: Callable[..., Any], *args: Any,
               record: UsageRecord | Mapping[str, Any] | None = None) -> JobHandle | None:
        """Queue ``job(*args)`` after every job submitted before it; never raises.

        Args:
            job: What to run (its exceptions are logged).
            args: Its arguments (a function and its arguments rather than a closure over
                them: the caller's thread then allocates only the handle per job).
            record: What the job will store, or its provisional form (a record or its
                JSON object, :meth:`PendingJournal.append
                <stableprompt._ledger._journal.PendingJournal.append>`): journaled before the
                job is queued and settled once it ran without raising (a job that raised
                leaves it for the next replay).

        Returns:
            The job's handle (:meth:`JobHandle.result` waits for it), or ``None`` when the
            job ran inline in this call (after :meth:`close`, or in a forked child).
        """
        forked = self.forked
        jobs = self._jobs
        journal = None if forked else jobs.journal
        ticket = None if journal is None or record is None else journal.append(record)
        with self._lock:
            if not self._closed and not forked:
                try:
                    if self._thread is None:
                        thread = threading.Thread(target=jobs.serve, name="stableprompt-record",
                                                  daemon=True)
                        thread.start()
                        self._thread = thread
                    jobs.submitted = number = jobs.submitted + 1
                    handle = JobHandle(jobs, number, job, args, ticket)
                    jobs.queue.put(handle)
                    return handle
                except RuntimeError:  # the interpreter is shutting down: inline
                    self._closed = True
        # after shutdown (a call that outlived it): inline; in a forked child, unjournaled
        JobHandle(jobs, 0, job, args, ticket).run()
        return None

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until every job submitted so far has run, at most ``timeout_s`` seconds
        (``None``: no limit). Returns False when the time ran out first, and at once when
        called from a recording job (:func:`in_recording_job`: it would wait for itself); True
        at once in a forked child (nothing of its own was queued here)."""
        jobs = self._jobs
        if jobs.ran >= jobs.submitted or self.forked:
            return True
        if in_recording_job():
            return False
        return jobs.wait_for(jobs.submitted, timeout_s)

    def close(self) -> None:
        """Run every queued job, then stop the thread and close the journal (idempotent);
        jobs submitted later run inline. From a recording job it cannot wait for the jobs
        behind it: they still run, the journal stays open for them. Nothing in a forked
        child (the thread and journal are the parent's)."""
        if self.forked:
            return
        with self._lock:
            stopping, self._closed = not self._closed, True
            thread = self._thread
            if stopping and thread is not None:
                self._jobs.queue.put(None)  # after every queued job
        if in_recording_job():
            return
        if thread is not None:
            thread.join()
        if self.journal is not None:
            self.journal.close()
