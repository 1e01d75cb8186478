"""Rollups: per hour x provider x model x scenario x verdict sums, kept by the ledger itself.

Table ``call_rollups`` (schema v5) holds one row per (UTC hour, provider, model, scenario,
verdict) with the sums a month's report needs (:data:`SUMS`), so it is read from a few
thousand rows instead of millions, and call rows can be pruned (:meth:`Ledger.prune
<stableprompt.Ledger.prune>`) while the totals stay. It is maintained by a trigger on
``calls`` (``AFTER INSERT``, both backends): in the same statement as the row insert, so a
row and its counts commit together; an insert a stored ``record_id`` makes a no-op (SQLite
``INSERT OR IGNORE``, PostgreSQL ``ON CONFLICT DO NOTHING``: replays, journals, several
hosts) fires no trigger, so nothing is counted twice; the trigger adds with
``INSERT ... ON CONFLICT DO UPDATE SET x = x + excluded.x``, so concurrent writers on
PostgreSQL never lose a count. The v5 migration builds the rollups of an existing ledger from
its rows once (the same expressions, grouped). A ledger opened read-only below v5 is
aggregated from its rows by the same expressions (:func:`rollup_rows`), never migrated.

Key columns hold ``''`` for an unknown provider, model or scenario (a primary key cannot
hold ``NULL`` in both backends); ``hour`` is the first 13 characters of ``ts_utc``
(``"2026-06-01T12"``, UTC: ``_schema.ts_text``).

The sums follow the report's rules (``_accounting._calls``): the token sums count only the
calls the report includes in token sums and hit rates (not unanalysed, usage and cache reads
known, not ``usage_suspect``, not ``usage_inconsistent``); each exclusion has its count. No
cost is stored (rows hold none): the ``priced_*`` sums are the tokens of every call the
report prices (usage known and adding up, whatever its exclusion), and
``_accounting._rollups`` prices them at read time per (provider, model, date) with
``_economics._prices``. That is exact because genai-prices' prices are linear in token counts
within a tier, and a tier is chosen per call by its input total (its ``TieredPrices``: above
a threshold all of the call's tokens, output included, are priced at the tier's rate):
``priced_min_input_tokens`` and ``priced_max_input_tokens`` say whether every call of a bucket
falls in one tier of its model (``UnitPrices.same_tier``), priced at that tier's rates
(``tier_prices``); a bucket whose calls straddle a threshold is not priced from the sums (its
cost is reported unknown, never a wrong number). Anthropic web-search fees are
linear in the count (``web_search_requests``); a server-tool count without a known fee, or
an unreadable one, makes a call ``priced_partial_calls`` (a lower bound), as does an unknown
output count.

A row that does not decode as a record (hand-edited) is still counted here, while the
row-level report skips it and names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ._usage_record import OTEL_ATTRIBUTES

__all__ = ["KEYS", "PRUNED_BEFORE", "ROLLUP_TABLE", "SUMS", "RollupRow", "aggregate_select",
           "column", "pg_migration", "sqlite_migration"]

ROLLUP_TABLE = "call_rollups"
"""The rollup table's name."""

PRUNED_BEFORE = "pruned_before"
"""The ``meta`` key holding the latest prune cut-off (:func:`~._schema.ts_text` text): call
rows before it were deleted, their rollups kept."""

KEYS = ("hour", "provider", "model", "scenario", "verdict")
"""The rollup key columns, in primary-key order."""

SUMS = (
    "calls", "failed_calls", "unanalysed", "unknown_usage", "unknown_reads", "suspect",
    "inconsistent",
    "input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens",
    "cache_write_1h_tokens", "output_tokens", "predicted_cache_read_tokens",
    "priced_calls", "priced_input_tokens", "priced_cache_read_tokens",
    "priced_cache_write_tokens", "priced_cache_write_1h_tokens", "priced_output_tokens",
    "priced_partial_calls", "priced_min_input_tokens", "priced_max_input_tokens",
    "web_search_requests", "web_search_calls",
)
"""The summed columns, in table order (``priced_min_input_tokens`` / ``priced_max_input_tokens``
are the smallest / largest input total of a priced call: ``NULL`` / 0 without one). Token
columns are tokens; the others are calls (see :class:`RollupRow`)."""

_FIELDS = ("ts_utc", "provider", "model", "scenario", "verdict", "wire_format", "error_class",
           "input_tokens_total", "cache_read_tokens", "cache_write_tokens",
           "cache_write_5m_tokens", "cache_write_1h_tokens", "output_tokens",
           "predicted_cache_read_tokens", "usage_inconsistent", "usage_raw", "verdict_detail")
_MAX = frozenset({"priced_max_input_tokens"})
_MIN = frozenset({"priced_min_input_tokens"})
_FEE_KEYS = ("web_search_requests", "web_fetch_requests")
"""``usage.server_tool_use`` keys with a known fee (``_accounting._pricing.SERVER_TOOL_FEES``;
a test keeps them equal: this layer cannot import that one)."""


@dataclass(frozen=True, slots=True)
class RollupRow:
    """One rollup bucket.

    Attributes:
        hour: UTC hour, ``"YYYY-MM-DDTHH"``.
        provider: Provider name, ``""`` when unknown.
        model: Requested model, ``""`` when unknown.
        scenario: Scenario label, ``""`` when none.
        verdict: Attribution verdict.
        sums: Column of :data:`SUMS` -> value (calls or tokens).
    """

    hour: str
    provider: str
    model: str
    scenario: str
    verdict: str
    sums: Mapping[str, int]


def column(prefix: str, field: str) -> str:
    """A ``calls`` column of a record field (``_schema.COLUMNS``' rule: the OpenTelemetry name
    where one exists; ``_schema`` imports this module for its migrations)."""
    return prefix + '"' + OTEL_ATTRIBUTES.get(field, field) + '"'


def _per_row(dialect: str, prefix: str, json_fn: str) -> dict[str, str]:
    """Name -> SQL expression of what one row contributes, computed once per row (its JSON
    read once): the keys, its token columns, and the flags the sums depend on (``prefix``:
    ``"NEW."`` in the trigger, ``""`` over table ``calls``)."""
    c = {f: column(prefix, f) for f in _FIELDS}
    raw, detail = c["usage_raw"], c["verdict_detail"]
    known = ", ".join(f"'{k}'" for k in _FEE_KEYS)
    if dialect == "sqlite":
        suspect = (f"(CASE WHEN json_valid({detail}) THEN "
                   f"coalesce(json_type({detail}, '$.usage_suspect') = 'true', 0) ELSE 0 END)")
        web_path = "'$.server_tool_use.web_search_requests'"
        web = (f"(CASE WHEN json_valid({raw}) THEN (CASE WHEN json_type({raw}, {web_path}) = "
               f"'integer' AND json_extract({raw}, {web_path}) > 0 THEN "
               f"json_extract({raw}, {web_path}) ELSE 0 END) ELSE 0 END)")
        tools = f"json_type({raw}, '$.server_tool_use')"
        fee_gap = (f"(CASE WHEN json_valid({raw}) THEN (CASE WHEN {tools} IS NULL OR {tools} = "
                   f"'null' THEN 0 WHEN {tools} <> 'object' THEN 1 ELSE EXISTS (SELECT 1 FROM "
                   f"json_each({raw}, '$.server_tool_use') WHERE type <> 'integer' OR value < 0 "
                   f"OR (value > 0 AND key NOT IN ({known}))) END) ELSE 0 END)")
    else:
        j = json_fn.format(raw)
        suspect = f"coalesce({json_fn.format(detail)} -> 'usage_suspect' = 'true'::jsonb, false)"
        web_text = f"({j} #>> '{{server_tool_use,web_search_requests}}')"
        web = (f"(CASE WHEN jsonb_typeof({j} #> '{{server_tool_use,web_search_requests}}') = "
               f"'number' AND {web_text} ~ '^[0-9]+$' THEN {web_text}::bigint ELSE 0 END)")
        tools = f"jsonb_typeof({j} -> 'server_tool_use')"
        fee_gap = (f"(CASE WHEN {tools} IS NULL OR {tools} = 'null' THEN false WHEN {tools} <> "
                   f"'object' THEN true ELSE EXISTS (SELECT 1 FROM jsonb_each({j} -> "
                   f"'server_tool_use') AS e WHERE NOT (e.value::text ~ '^[0-9]+$') OR "
                   f"(e.value::text <> '0' AND e.key NOT IN ({known}))) END)")
    return {
        "hour": f"substr({c['ts_utc']}, 1, 13)",
        "provider": f"coalesce({c['provider']}, '')",
        "model": f"coalesce({c['model']}, '')",
        "scenario": f"coalesce({c['scenario']}, '')",
        "verdict": c["verdict"],
        "inp": c["input_tokens_total"], "rd": c["cache_read_tokens"],
        "wr": c["cache_write_tokens"], "w5": c["cache_write_5m_tokens"],
        "w1h": c["cache_write_1h_tokens"], "outp": c["output_tokens"],
        "pred": c["predicted_cache_read_tokens"],
        "failed": f"({c['error_class']} IS NOT NULL)",
        "unan": f"({c['wire_format']} = 'unknown')",
        "incons": f"(coalesce({c['usage_inconsistent']}, 0) <> 0)",
        "sus": suspect, "web": web, "gap": fee_gap,
    }


def _sums() -> dict[str, str]:
    """Column -> SQL expression of one row's contribution, over :func:`_per_row`'s names."""
    reads = "(NOT unan AND inp IS NOT NULL AND rd IS NOT NULL)"
    included = f"({reads} AND NOT sus AND NOT incons)"
    priced = (f"({reads} AND rd >= 0 AND coalesce(w1h, 0) >= 0 AND coalesce(w1h, 0) <= "
              "coalesce(wr, 0) AND rd + coalesce(wr, 0) <= inp AND coalesce(outp, 0) >= 0)")

    def count(cond: str) -> str:
        return f"(CASE WHEN {cond} THEN 1 ELSE 0 END)"

    def total(cond: str, name: str) -> str:
        return f"(CASE WHEN {cond} THEN coalesce({name}, 0) ELSE 0 END)"

    return {
        "calls": "1",
        "failed_calls": count("failed"),
        "unanalysed": count("unan"),
        "unknown_usage": count("(NOT unan AND inp IS NULL)"),
        "unknown_reads": count("(NOT unan AND inp IS NOT NULL AND rd IS NULL)"),
        "suspect": count(f"({reads} AND sus)"),
        "inconsistent": count(f"({reads} AND NOT sus AND incons)"),
        "input_tokens": total(included, "inp"),
        "cache_read_tokens": total(included, "rd"),
        "cache_write_tokens": total(included, "wr"),
        "cache_write_5m_tokens": total(included, "w5"),
        "cache_write_1h_tokens": total(included, "w1h"),
        "output_tokens": total(included, "outp"),
        "predicted_cache_read_tokens": total(included, "pred"),
        "priced_calls": count(priced),
        "priced_input_tokens": total(priced, "inp"),
        "priced_cache_read_tokens": total(priced, "rd"),
        "priced_cache_write_tokens": total(priced, "wr"),
        "priced_cache_write_1h_tokens": total(priced, "w1h"),
        "priced_output_tokens": total(priced, "outp"),
        "priced_partial_calls": count(f"({priced} AND (outp IS NULL OR gap))"),
        "priced_min_input_tokens": f"(CASE WHEN {priced} THEN inp ELSE NULL END)",
        "priced_max_input_tokens": total(priced, "inp"),
        "web_search_requests": total(priced, "web"),
        "web_search_calls": count(f"({priced} AND web > 0)"),
    }


def _rows(dialect: str, prefix: str, json_fn: str, source: str) -> str:
    """The per-row ``SELECT`` as a subquery the planner keeps apart (``OFFSET 0``: neither
    SQLite nor PostgreSQL flattens it), so each row's JSON is read once, not once per sum."""
    per_row = ", ".join(f"{expr} AS {name}" for name, expr in
                        _per_row(dialect, prefix, json_fn).items())
    fence = "LIMIT -1 OFFSET 0" if dialect == "sqlite" else "OFFSET 0"
    return f"(SELECT {per_row} {source} {fence}) AS one"


def _table(dialect: str) -> str:
    big = "INTEGER" if dialect == "sqlite" else "BIGINT"
    keys = ",\n    ".join(f'"{k}" TEXT NOT NULL' for k in KEYS)
    sums = ",\n    ".join(f'"{s}" {big}' + ("" if s in _MIN else " NOT NULL DEFAULT 0")
                           for s in SUMS)
    return (f"CREATE TABLE {ROLLUP_TABLE} (\n    {keys},\n    {sums},\n    "
            f"PRIMARY KEY ({', '.join(f'{chr(34)}{k}{chr(34)}' for k in KEYS)})\n)")


def _upsert(dialect: str, prefix: str, json_fn: str, *, grouped: bool) -> str:
    """``INSERT INTO call_rollups ... SELECT`` of one row (``grouped=False``: the trigger's)
    or of every row of ``calls`` grouped (the migration's backfill)."""
    names = ", ".join(f'"{n}"' for n in (*KEYS, *SUMS))
    if grouped:
        return f"INSERT INTO {ROLLUP_TABLE} ({names}) {aggregate_select(dialect, json_fn)}"
    values = ", ".join([*KEYS, *_sums().values()])
    biggest = "max" if dialect == "sqlite" else "GREATEST"
    sets = ", ".join(
        f'"{s}" = {biggest}({ROLLUP_TABLE}."{s}", excluded."{s}")' if s in _MAX else
        f'"{s}" = (CASE WHEN excluded."{s}" IS NULL THEN {ROLLUP_TABLE}."{s}" WHEN '
        f'{ROLLUP_TABLE}."{s}" IS NULL OR excluded."{s}" < {ROLLUP_TABLE}."{s}" THEN '
        f'excluded."{s}" ELSE {ROLLUP_TABLE}."{s}" END)' if s in _MIN else
        f'"{s}" = {ROLLUP_TABLE}."{s}" + excluded."{s}"' for s in SUMS)
    # SQLite: "WHERE true" keeps the upsert's ON from being read as a join's
    return (f"INSERT INTO {ROLLUP_TABLE} ({names}) SELECT {values} FROM "
            f"{_rows(dialect, prefix, json_fn, '')} WHERE true ON CONFLICT "
            f"({', '.join(chr(34) + k + chr(34) for k in KEYS)}) DO UPDATE SET {sets}")


def aggregate_select(dialect: str, json_fn: str, where: str = "") -> str:
    """``SELECT`` of the rollup rows computed from table ``calls`` (``where``: a ``WHERE``
    clause on its columns with ``?`` placeholders, or ``""``), in :data:`KEYS` then
    :data:`SUMS` order."""
    sums = ", ".join(f"max({expr})" if s in _MAX else f"min({expr})" if s in _MIN else
                     f"sum({expr})" for s, expr in _sums().items())
    return (f"SELECT {', '.join(KEYS)}, {sums} FROM "
            f"{_rows(dialect, '', json_fn, f'FROM calls {where}')} GROUP BY 1, 2, 3, 4, 5")


def sqlite_migration() -> tuple[str, ...]:
    """The v5 statements for SQLite: the table, its trigger, the backfill of existing rows."""
    trigger = (f"CREATE TRIGGER {ROLLUP_TABLE}_add AFTER INSERT ON calls BEGIN "
               f"{_upsert('sqlite', 'NEW.', '', grouped=False)}; END")
    return (_table("sqlite"), _upsert("sqlite", "", "", grouped=True), trigger)


_PG_JSON_FN = "stableprompt_jsonb"
_PG_JSON = _PG_JSON_FN + "({})"
"""PostgreSQL function: text -> jsonb, ``NULL`` when the text is not JSON (a hand-edited row
must not make an insert or the migration fail)."""


def pg_migration() -> tuple[str, ...]:
    """The v5 statements for PostgreSQL: a safe JSON cast, the table, the backfill, the
    trigger function and trigger."""
    cast = (f"CREATE OR REPLACE FUNCTION {_PG_JSON_FN}(t text) RETURNS jsonb LANGUAGE plpgsql "
            "IMMUTABLE AS $$ BEGIN RETURN t::jsonb; EXCEPTION WHEN others THEN RETURN NULL; "
            "END $$")
    function = (f"CREATE OR REPLACE FUNCTION {ROLLUP_TABLE}_add() RETURNS trigger LANGUAGE "
                f"plpgsql AS $$ BEGIN {_upsert('pg', 'NEW.', _PG_JSON, grouped=False)}; "
                "RETURN NULL; END $$")
    trigger = (f"CREATE TRIGGER {ROLLUP_TABLE}_add AFTER INSERT ON calls FOR EACH ROW "
               f"EXECUTE FUNCTION {ROLLUP_TABLE}_add()")
    return (cast, _table("pg"), _upsert("pg", "", _PG_JSON, grouped=True), function, trigger)
