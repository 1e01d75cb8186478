"""A provisional row's usage, parsed when the row is read rather than when it was written.

A call's provisional row (``_recording._unanalysed.provisional_fields``, the pending journal)
is made on the caller's thread before the caller gets the end of the response. When its
usage comes from a 2xx JSON body, that thread keeps the body's usage members as received
(:data:`USAGE_AS_RECEIVED` in ``verdict_detail``, scrubbed) instead of parsing them: the
parse runs only if the row is ever read (a replay of the journal after the process died,
:meth:`Recorder.provisional <stableprompt.Recorder.provisional>`), through the same
:func:`~stableprompt.providers.parse_response` the final row uses.
"""

from __future__ import annotations

from typing import Any

from .._usage import USAGE_FIELDS, CacheUsage
from ..providers import parse_response
from ._usage_record import UsageRecord

__all__ = ["USAGE_AS_RECEIVED", "USAGE_MEMBERS", "usage_fields", "with_parsed_usage"]

USAGE_AS_RECEIVED = "usage_as_received"
"""The ``verdict_detail`` key of a provisional row's usage members as received."""

USAGE_MEMBERS = ("usage", "usageMetadata", "timings")
"""The members of a response body that :func:`~stableprompt.providers.parse_response` reads,
in every wire format (Gemini ``usageMetadata``, llama.cpp ``usage`` and ``timings``, the
others ``usage``)."""


def usage_fields(usage: CacheUsage | None) -> dict[str, Any]:
    """The record's token fields from normalized usage (all ``None`` without it)."""
    fields: dict[str, Any] = {n: None if usage is None else getattr(usage, n)
                              for n in USAGE_FIELDS}
    fields["usage_inconsistent"] = False if usage is None else usage.inconsistent
    return fields


def with_parsed_usage(record: UsageRecord) -> UsageRecord:
    """``record`` with its token fields parsed from ``verdict_detail[USAGE_AS_RECEIVED]``
    (that key then removed), as the final row's would be; ``record`` itself without one. A
    usage that does not parse leaves the counts unknown with ``verdict_detail["usage_error"]``
    (as on a final row). Never raises."""
    detail = record.verdict_detail
    received = detail.get(USAGE_AS_RECEIVED)
    if received is None:
        return record
    rest = {key: value for key, value in detail.items() if key != USAGE_AS_RECEIVED}
    update: dict[str, Any] = {"verdict_detail": rest}
    try:
        update.update(usage_fields(parse_response(record.wire_format, received)))
    except Exception as exc:
        rest["usage_error"] = f"{getattr(exc, 'code', type(exc).__name__)}: {exc}"
    return record.model_copy(update=update)
