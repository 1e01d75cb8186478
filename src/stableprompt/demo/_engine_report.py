"""What the llama-server demo reports beside the shared tables: the engine's prefill timings
(the price of a miss on this machine), agreement per row, and template findings.

Everything is read from the run's records: ``verdict_detail["engine_timings"]`` (set by
:mod:`._engine_run`), the verdicts and their details (``reason``, ``engine_divergence``,
``error_message``) and the usage the engine reported.

Prefill classes (:class:`PrefillStats`): a call is *cold* when it prefilled at least
:data:`COLD_SHARE` of its prompt (``prompt_n / (prompt_n + cache_n)``) and *warm* when it read
at least :data:`WARM_SHARE` of it from the cache; the others are neither. Medians are over the
calls of a class; ``ms_per_1k_prefilled`` is total prefill milliseconds over total prefilled
tokens, times 1,000 (all calls). The timings are the engine's own (``timings.prompt_ms``,
or its log's ``prompt eval time``): wall time of the prefill on the machine that ran it.
"""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._accounting._summary import Summary
from .._canonical import canonical_json
from .._ledger._usage_record import UsageRecord

__all__ = [
    "COLD_SHARE",
    "TIMINGS_KEY",
    "WARM_SHARE",
    "EngineReport",
    "EngineRowReport",
    "PrefillStats",
    "engine_lines",
    "finding_lines",
    "machine_description",
    "one_line_error",
    "print_engine_tables",
    "timings_of",
]

TIMINGS_KEY = "engine_timings"
"""``verdict_detail`` key of a call's prefill timing."""
COLD_SHARE = 0.9
"""A call prefilled at least this share of its prompt: cold."""
WARM_SHARE = 0.9
"""A call read at least this share of its prompt from the cache: warm."""
ENGINE_BACKEND = "llama.cpp llama-server (a real engine)"
"""The backend line's start for llama-server runs."""


def machine_description() -> str:
    """``"<cpu model>, <n> CPUs, <os> <arch>"`` (``/proc/cpuinfo`` when readable)."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu or 'unknown CPU'}, {os.cpu_count()} CPUs, {platform.system()} " \
        f"{platform.machine()}"


def timings_of(records: Iterable[UsageRecord]) -> list[Mapping[str, Any]]:
    """The prefill timings the records carry."""
    out = []
    for record in records:
        timing: Any = record.verdict_detail.get(TIMINGS_KEY)
        if isinstance(timing, Mapping):
            out.append(timing)
    return out


def one_line_error(message: str) -> str:
    """A server's error message on one line: a chat template's exception as ``"the chat
    template raised: <its text>"`` (llama-server wraps it in a multi-line parser report),
    anything else with its whitespace collapsed (first 300 characters)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    raised = next((line for line in reversed(lines) if "Exception:" in line), None)
    if raised is not None:
        return "the chat template raised: " + raised.split("Exception:", 1)[1].strip()
    return " ".join(lines)[:300]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass(frozen=True, slots=True)
class PrefillStats:
    """The engine's prefill timings over a group of calls (see the module docstring).

    Attributes:
        timed_calls: Calls with a timing.
        prefill_ms: Their summed prefill time (milliseconds).
        prefilled_tokens: Their summed prefilled (uncached) tokens.
        cold_calls: Calls that prefilled >= :data:`COLD_SHARE` of their prompt.
        cold_median_ms: Median prefill time of those (ms), ``None`` without any.
        cold_median_prompt_tokens: Median prompt size of those (tokens).
        warm_calls: Calls that read >= :data:`WARM_SHARE` of their prompt from the cache.
        warm_median_ms: Median prefill time of those (ms).
        warm_median_prompt_tokens: Median prompt size of those (tokens).
    """

    timed_calls: int = 0
    prefill_ms: float = 0.0
    prefilled_tokens: int = 0
    cold_calls: int = 0
    cold_median_ms: float | None = None
    cold_median_prompt_tokens: float | None = None
    warm_calls: int = 0
    warm_median_ms: float | None = None
    warm_median_prompt_tokens: float | None = None

    @classmethod
    def of(cls, timings: Iterable[Mapping[str, Any]]) -> PrefillStats:
        """Statistics of ``{"prompt_ms", "prompt_n", "cache_n"}`` timings."""
        cold: list[tuple[float, int]] = []
        warm: list[tuple[float, int]] = []
        total_ms, total_n, count = 0.0, 0, 0
        for timing in timings:
            ms, prefilled, cached = timing["prompt_ms"], timing["prompt_n"], timing["cache_n"]
            if not isinstance(prefilled, int) or not isinstance(cached, int):
                continue
            count += 1
            total_ms += ms
            total_n += prefilled
            prompt = prefilled + cached
            if prompt and prefilled >= COLD_SHARE * prompt:
                cold.append((ms, prompt))
            elif prompt and cached >= WARM_SHARE * prompt:
                warm.append((ms, prompt))
        return cls(count, total_ms, total_n,
                   len(cold), _median([m for m, _ in cold]), _median([p for _, p in cold]),
                   len(warm), _median([m for m, _ in warm]), _median([p for _, p in warm]))

    @property
    def ms_per_1k_prefilled(self) -> float | None:
        """Prefill milliseconds per 1,000 prefilled tokens (``None`` without any)."""
        return 1000.0 * self.prefill_ms / self.prefilled_tokens if self.prefilled_tokens \
            else None

    @property
    def cold_over_warm(self) -> float | None:
        """Median cold prefill over median warm prefill."""
        if self.cold_median_ms is None or not self.warm_median_ms:
            return None
        return self.cold_median_ms / self.warm_median_ms

    def to_json(self) -> dict[str, Any]:
        """All fields plus ``ms_per_1k_prefilled`` and ``cold_over_warm`` (ms rounded to
        0.001)."""
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        return {"timed_calls": self.timed_calls, "prefill_ms": r(self.prefill_ms),
                "prefilled_tokens": self.prefilled_tokens,
                "cold_calls": self.cold_calls, "cold_median_ms": r(self.cold_median_ms),
                "cold_median_prompt_tokens": self.cold_median_prompt_tokens,
                "warm_calls": self.warm_calls, "warm_median_ms": r(self.warm_median_ms),
                "warm_median_prompt_tokens": self.warm_median_prompt_tokens,
                "ms_per_1k_prefilled": r(self.ms_per_1k_prefilled),
                "cold_over_warm": r(self.cold_over_warm)}


@dataclass(frozen=True)
class EngineRowReport:
    """One row's engine side.

    Attributes:
        name: ``<scenario>/<endpoint>``.
        scenario: Scenario name.
        endpoint: ``chat``, ``responses`` or ``messages``.
        prefill: Its calls' prefill timings.
        not_append_stable: Calls whose tokens the template lost without a JSON change
            (``provider_miss``, reason ``template-not-append-stable``).
        first_not_append_stable: The first of those: ``session``, ``turn``,
            ``lost_tokens`` and the engine's first divergent token (``token_index``,
            ``before``, ``previous``, ``sent``), or ``None``.
        refused: Calls the engine refused (an HTTP error answer; the record's verdict is
            ``unknown``).
        first_refusal: The server's message of the first of those, on one line
            (:func:`one_line_error`), or ``None``.
        calls: The row's calls (refused ones included).
    """

    name: str
    scenario: str
    endpoint: str
    prefill: PrefillStats
    not_append_stable: int = 0
    first_not_append_stable: dict[str, Any] | None = None
    refused: int = 0
    first_refusal: str | None = None
    calls: int = 0

    @property
    def all_refused(self) -> bool:
        """The engine refused every call of the row (it measured nothing)."""
        return self.calls > 0 and self.refused == self.calls

    @classmethod
    def of(cls, name: str, scenario: str, endpoint: str, records: Sequence[UsageRecord]
           ) -> EngineRowReport:
        """The engine side of ``records`` (one row's calls, in order)."""
        unstable = [r for r in records if r.verdict == "provider_miss"
                    and r.verdict_detail.get("reason") == "template-not-append-stable"]
        first = None
        if unstable:
            detail = unstable[0].verdict_detail
            divergence: Any = detail.get("engine_divergence")
            first = {"session": unstable[0].session_id, "turn": unstable[0].turn,
                     "lost_tokens": detail.get("lost_tokens"),
                     **(divergence if isinstance(divergence, Mapping) else {})}
        refused = [r for r in records if r.error_class is not None]
        message = None
        if refused:
            detail = refused[0].verdict_detail
            message = one_line_error(str(detail.get("error_message") or detail.get(
                "error_type") or refused[0].error_class))
        return cls(name, scenario, endpoint, PrefillStats.of(timings_of(records)), len(unstable),
                   first, len(refused), message, len(records))

    def to_json(self) -> dict[str, Any]:
        """``{"scenario", "endpoint", "prefill", "template_findings"}``."""
        return {"scenario": self.scenario, "endpoint": self.endpoint,
                "prefill": self.prefill.to_json(),
                "template_findings": {
                    "not_append_stable_calls": self.not_append_stable,
                    "first_not_append_stable": self.first_not_append_stable,
                    "refused_calls": self.refused, "first_refusal": self.first_refusal}}


@dataclass(frozen=True)
class EngineReport:
    """The engine side of a llama-server run.

    Attributes:
        base_url: The server's root URL.
        started: The demo started (and stopped) it.
        template: The started engine's chat template, ``None`` for a given server.
        endpoints: Endpoints run, in order.
        slots: The server's slot count (``GET /props`` ``total_slots``), if it said.
        model_path: The GGUF it served (``GET /props``), if it said.
        machine: :func:`machine_description` of the machine that ran it.
        max_tokens: Output limit of every call (tokens).
        erase_refusal: Why the server refused to erase its slot between rows (then a reset
            request refilled it; see :mod:`._engine_run`), ``None`` when every erase worked.
        log_timings: Timings the responses lack were read from the server's log.
        rows: Per row, in run order.
        skipped: ``(scenario, endpoint, why)`` pairs not run.
        prefill: Prefill timings over all rows.
    """

    base_url: str
    started: bool
    template: str | None
    endpoints: tuple[str, ...]
    slots: int | None
    model_path: str | None
    machine: str
    max_tokens: int
    erase_refusal: str | None
    log_timings: bool
    rows: tuple[EngineRowReport, ...]
    skipped: tuple[tuple[str, str, str], ...] = ()
    prefill: PrefillStats = field(default_factory=PrefillStats)

    @property
    def backend(self) -> str:
        """``"llama.cpp llama-server (a real engine) at <url>"``."""
        return f"{ENGINE_BACKEND} at {self.base_url}"

    @property
    def backend_note(self) -> str:
        """The backend line of the output and of the ledger's metadata."""
        what = (f"started by the demo: tiny random-weight llama model, chat template "
                f"{self.template}, -np 1 --cache-ram 0" if self.started
                else "given by --base-url")
        return (f"{self.backend} ({what}); cache reads are the engine's own, predictions "
                "use its /apply-template and /tokenize")

    def row(self, name: str) -> EngineRowReport | None:
        """The row named ``name``, or ``None``."""
        return next((r for r in self.rows if r.name == name), None)

    def row_json(self, name: str) -> dict[str, Any]:
        """The engine fields of row ``name`` (``{}`` for an unknown row)."""
        found = self.row(name)
        return {} if found is None else found.to_json()

    def to_json(self) -> dict[str, Any]:
        """``base_url``, ``started``, ``template``, ``endpoints``, ``slots``, ``model_path``,
        ``machine``, ``max_tokens``, ``slot_isolation``, ``timing_sources``, ``prefill``
        (all rows, :meth:`PrefillStats.to_json`), ``template_findings`` (rows with any) and
        ``skipped``."""
        return {
            "base_url": self.base_url, "started": self.started, "template": self.template,
            "endpoints": list(self.endpoints), "slots": self.slots,
            "model_path": self.model_path, "machine": self.machine,
            "max_tokens": self.max_tokens, "slot_isolation": self.slot_isolation,
            "timing_sources": self.timing_sources, "prefill": self.prefill.to_json(),
            "template_findings": {r.name: r.to_json()["template_findings"] for r in self.rows
                                  if r.not_append_stable or r.refused},
            "skipped": [{"scenario": s, "endpoint": e, "why": w} for s, e, w in self.skipped],
        }

    @property
    def slot_isolation(self) -> str:
        """How rows were kept apart, in words."""
        if self.erase_refusal is None:
            return "slot erased before each row (POST /slots/0?action=erase)"
        return ("the server refused to erase its slot (" + self.erase_refusal + "), so a "
                "short reset request refilled it before each row with a known prompt (start "
                "the server with --slot-save-path DIR to let the demo erase it)")

    @property
    def timing_sources(self) -> str:
        """Where the prefill timings come from, in words."""
        rest = ("the server's log ('prompt eval time') for Responses and Messages, whose "
                "answers carry no timings" if self.log_timings else
                "none for Responses and Messages (their answers carry no timings and the "
                "log of a server the demo did not start is not readable)")
        return f"Chat Completions answers' timings (prompt_ms, prompt_n, cache_n); {rest}"

    def ledger_meta(self, report: Summary, workload: str, model: str) -> dict[str, str]:
        """The ledger metadata of the run: ``backend``, ``workload``, ``provider``, ``model``,
        ``engine`` (:meth:`to_json` without ``prefill``), ``agreement`` (per row:
        ``{"calls", "agreeing", "agreement"}``: calls with both a prediction and a report,
        those where they are equal, the fraction) and ``prefill`` (per row and ``"all"``);
        JSON values are canonical JSON."""
        agreement = {}
        for name in (r.name for r in self.rows):
            scenario = report.scenarios.get(name)
            if scenario is None:
                continue
            t = scenario.totals
            agreement[name] = {"calls": t.agreement_calls, "agreeing": t.agreement_matches,
                               "agreement": None if t.agreement is None
                               else round(t.agreement, 6)}
        prefill = {"all": self.prefill.to_json(),
                   **{r.name: r.prefill.to_json() for r in self.rows}}
        engine = {k: v for k, v in self.to_json().items() if k != "prefill"}
        return {"backend": self.backend_note, "workload": workload,
                "provider": "llama-server", "model": model,
                "engine": canonical_json(engine).decode(),
                "agreement": canonical_json(agreement).decode(),
                "prefill": canonical_json(prefill).decode()}


# --------------------------------------------------------------------------- text


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def engine_lines(engine: EngineReport) -> list[str]:
    """Lines under the engine tables: the price of a miss, timing sources, isolation."""
    p = engine.prefill
    lines = []
    if p.timed_calls:
        ratio = "" if p.cold_over_warm is None else f" ({p.cold_over_warm:,.1f}x)"
        lines.append(
            f"The price of a miss on this machine ({engine.machine}): median prefill "
            f"{_ms(p.cold_median_ms)} ms for the {p.cold_calls:,} cold calls (>= "
            f"{COLD_SHARE:.0%} of the prompt prefilled; median prompt "
            f"{_ms(p.cold_median_prompt_tokens)} tokens) vs {_ms(p.warm_median_ms)} ms for the "
            f"{p.warm_calls:,} warm ones (>= {WARM_SHARE:.0%} read from the cache; median "
            f"prompt {_ms(p.warm_median_prompt_tokens)} tokens){ratio}; "
            f"{_ms(p.ms_per_1k_prefilled)} ms per 1,000 prefilled tokens over "
            f"{p.timed_calls:,} timed calls.")
    lines.append(f"Prefill timings: {engine.timing_sources}.")
    lines.append(f"Isolation: {engine.slot_isolation}; every call decodes at most "
                 f"{engine.max_tokens} token{'' if engine.max_tokens == 1 else 's'}, the "
                 "transcript follows the script.")
    return lines


def finding_lines(engine: EngineReport) -> list[str]:
    """The template findings as text: per row, the calls that lost tokens the client did not
    change (with the first one's divergent token and the text around it) and the calls the
    engine refused (with the first one's message)."""
    findings = [r for r in engine.rows if r.not_append_stable or r.refused]
    if not findings:
        return ["template findings: none (every call the template rendered was "
                "append-stable; no call was refused)"]
    lines = ["template findings"]
    for row in findings:
        first = row.first_not_append_stable
        if row.not_append_stable and first is not None:
            lines.append(
                f"  {row.name}: {row.not_append_stable:,} calls lost tokens the client did not "
                f"change (template-not-append-stable); first: {first['session']} call "
                f"{first['turn']}, {first.get('lost_tokens')} tokens lost from engine token "
                f"{first.get('token_index')}")
            lines.extend(f"    {key + ':':<10}{first.get(key)!r}"
                         for key in ("before", "previous", "sent"))
        if row.refused:
            lines.append(f"  {row.name}: {row.refused:,} calls refused by the engine (verdict "
                         f"unknown); first: {row.first_refusal}")
    return lines


def print_engine_tables(engine: EngineReport, console: Any) -> None:
    """Print the prefill table and the template findings (rich)."""
    from rich.table import Table

    table = Table(title="engine prefill (the engine's own timings)", title_justify="left",
                  header_style="bold")
    for column in ("row", "timed", "prefill s", "prefilled", "cold", "cold ms", "warm",
                   "warm ms", "ms/1k prefilled"):
        table.add_column(column, justify="left" if column == "row" else "right", no_wrap=True)
    for row in (*engine.rows, None):
        p = engine.prefill if row is None else row.prefill
        table.add_row("all" if row is None else row.name, f"{p.timed_calls:,}",
                      f"{p.prefill_ms / 1000:,.2f}", f"{p.prefilled_tokens:,}",
                      f"{p.cold_calls:,}", _ms(p.cold_median_ms), f"{p.warm_calls:,}",
                      _ms(p.warm_median_ms), _ms(p.ms_per_1k_prefilled))
    console.print(table)
    console.print(f"timed = calls with a timing; prefilled = tokens prefilled (not read from "
                  f"the cache); cold = calls that prefilled >= {COLD_SHARE:.0%} of their "
                  f"prompt, warm = calls that read >= {WARM_SHARE:.0%} of it from the cache; "
                  "cold ms / warm ms = their median prefill milliseconds.", markup=False)
    for line in finding_lines(engine):
        console.print(line, markup=False)
