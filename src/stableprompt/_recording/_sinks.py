"""Record sinks: where a :class:`~stableprompt.Recorder` hands each record after storing it.

A sink is any callable taking one :class:`~stableprompt.UsageRecord` (``Recorder(sinks=[...])``),
the one-method seam of stamina's ``RetryHook``: the recorder knows nothing of what a sink does
(:class:`~stableprompt.OTelSink` turns a record into an OpenTelemetry span and metric points).
:func:`deliver` calls each sink after the record was appended to ``Recorder.records`` and
written to the ledger, so a sink that raises or hangs on a closed exporter never loses the
ledger row, and never reaches the caller's provider call: its error is logged on the
``stableprompt.recorder`` logger (redacted) and the next sink still runs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from .._ledger._usage_record import UsageRecord
from .._redact import redact

__all__ = ["RecordSink", "deliver"]


class RecordSink(Protocol):
    """Receives each finished record (``Recorder(sinks=[...])``); may raise: the recorder
    logs it and goes on."""

    def __call__(self, record: UsageRecord, /) -> None:
        """Take one record (already stored in the ledger)."""
        ...


def deliver(sinks: Iterable[RecordSink], record: UsageRecord, log: logging.Logger,
            secrets: tuple[str, ...] = ()) -> int:
    """Hand ``record`` to every sink in order; a sink's exception is logged (scrubbed of
    ``secrets``) and does not stop the others.

    Returns:
        How many sinks took the record without raising.
    """
    delivered = 0
    for sink in sinks:
        try:
            sink(record)
        except Exception as exc:
            log.warning("record sink %s failed: %s: %s", type(sink).__name__,
                        type(exc).__name__, redact(str(exc), secrets=secrets))
        else:
            delivered += 1
    return delivered
