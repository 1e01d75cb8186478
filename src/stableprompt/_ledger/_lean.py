"""The report's own read of the ledger (issue 30): the rows :meth:`Ledger.iter_records` reads,
without what the report never needs.

:meth:`Ledger.iter_records` selects every column and decodes each row with ``from_row``:
~28 us a row on the benchmark's ledgers. :func:`iter_report_records` selects every column but
the request's segment outline (``segment_digests``, ~400 characters a row, checked against its
pattern) and decodes each row with the same checks (``_schema._Decoder`` over those fields:
one rule for what a trusted row is), without the pydantic fields-set ``from_row`` computes.
A row the checks refuse is fetched whole by its row id and decoded by ``from_row``, so a
corrupt row is skipped and named exactly as ``iter_records`` names it, and a row pydantic
repairs reads the same. The outline decides nothing the report reads: an unreadable one is
read as unknown, never corrupt (``_schema.validated_row``), and no report number uses it; the
records of this read hold ``segment_digests = None``.

The columns the report does not read (``request_fingerprint``, ``lcp_bytes``,
``latency_ms``, ``ttft_ms``, ``response_id``, ``diagnostics``, ``request_headers``) are still
fetched: each can make a row corrupt, and checking them in the query costs more than here
(measured on SQLite 3.40, 100,000 rows: the ``typeof()`` / range / ``json_valid()`` test of
every column as one SQL expression added 0.37-0.45 s to the query, the same checks in Python
0.18 s; and SQLite's ``json_valid`` accepts lone surrogates and numbers that overflow a
double, which the decoder refuses).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ._schema import _FIELD_ORDER, COLUMNS, _Decoder, _quote, decoded_or_reported
from ._usage_record import UsageRecord

if TYPE_CHECKING:
    from ._ledger import Ledger

__all__ = ["REPORT_FIELDS", "iter_report_records", "report_record", "report_select"]

REPORT_FIELDS = tuple(f for f in _FIELD_ORDER if f != "segment_digests")
"""The fields :func:`iter_report_records` fetches, in field order (module docstring)."""

report_record: Callable[[Sequence[Any]], UsageRecord | None] = _Decoder(REPORT_FIELDS,
                                                                        fields_set=False)
"""The record of a row of :data:`REPORT_FIELDS` (``segment_digests`` ``None``), ``None`` when
the row is not of the types and ranges ``from_row`` trusts (then ``from_row`` of the whole
row decides)."""


def report_select(missing: frozenset[str] = frozenset()) -> str:
    """The quoted columns of :data:`REPORT_FIELDS`, each of ``missing`` (columns an older
    ledger lacks) read as ``NULL``."""
    return ", ".join(f"NULL AS {_quote(COLUMNS[f])}" if COLUMNS[f] in missing
                     else _quote(COLUMNS[f]) for f in REPORT_FIELDS)


def iter_report_records(ledger: Ledger, where: str, params: Sequence[Any],
                        on_invalid: Callable[[str, Exception], None] | None = None,
                        ) -> Iterator[UsageRecord]:
    """:meth:`Ledger.iter_records`'s records for the report (module docstring): the same rows
    in the same order, corrupt ones skipped into ``on_invalid`` (or raised) the same way.

    Args:
        ledger: The ledger.
        where: ``""`` or a ``WHERE`` clause over ``params`` (``Ledger._where``).
        params: Its parameters.
        on_invalid: As :meth:`Ledger.iter_records`.

    Raises:
        LedgerError: As :meth:`Ledger.iter_records`.
    """
    backend = ledger._backend
    whole = f"SELECT {ledger._select} FROM calls WHERE {backend.rowid} = ?"
    decode = report_record
    n = len(REPORT_FIELDS)
    conn = ledger._reader()
    other = None
    try:
        for row in backend.read_in_order(conn, report_select(ledger._missing), where,
                                         tuple(params)):  # memory bounded, both backends
            record = decode(row[:n])
            if record is not None:
                yield record
                continue
            if other is None:
                other = ledger._reader()
            full = other.execute(whole, (row[n],)).fetchone()
            if full is None:  # deleted since the query began (a pruning writer)
                continue
            decoded = decoded_or_reported(full, row[n], on_invalid)
            if decoded is not None:
                yield decoded
    except backend.errors as exc:
        raise ledger._unreadable(exc) from exc
    finally:
        ledger._release(conn)
        if other is not None:
            ledger._release(other)
