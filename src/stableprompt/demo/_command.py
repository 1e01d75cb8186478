"""``stableprompt demo``: the scenarios on a real multi-turn tool workload, against the emulator.

Output: a header that says the backend is our loopback emulator, then the per-scenario table
(calls, input tokens, cache read, cache write, hit rate, ceiling, share of the ceiling,
agreement, cost) and the verdict table; ``--json`` prints the same as JSON instead (see
:meth:`DemoResult.to_json`). A progress bar goes to stderr when it is a terminal (never with
``--json``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .._cli import Subcommand
from .._exceptions import WorkloadUnavailableError
from .._policy import cache_policy
from .._report import html_report, json_text, make_console, print_tables, write_text
from ._run import BACKEND, DEFAULT_MODELS, DEFAULT_SESSIONS, DemoResult, run_demo
from ._scenarios import SCENARIOS, scenario_names
from ._workload import Workload, bfcl_workload, synthetic_workload

__all__ = ["SUBCOMMAND"]


def _sessions(text: str) -> int | None:
    if text == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'all', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 or 'all', got {value}")
    return value


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", choices=sorted(DEFAULT_MODELS), default="anthropic",
                        help="wire format and cache rules to emulate (default anthropic)")
    parser.add_argument("--sessions", type=_sessions, default=DEFAULT_SESSIONS, metavar="N|all",
                        help=f"sessions to run (default {DEFAULT_SESSIONS}; 'all' for every "
                        "session of the workload)")
    parser.add_argument("--model", metavar="M",
                        help="model id to send and price (default: "
                        + ", ".join(f"{k}: {v}" for k, v in sorted(DEFAULT_MODELS.items()))
                        + ")")
    parser.add_argument("--workload", choices=("bfcl", "synthetic"), default="bfcl",
                        help="bfcl: BFCL v4 multi-turn sessions, fetched once from PyPI "
                        "(default); synthetic: our small bundled offline workload")
    parser.add_argument("--json", action="store_true",
                        help="print the results as JSON (no progress bar)")
    parser.add_argument("--ledger", type=Path, metavar="PATH",
                        help="keep the ledger (SQLite) here for `stableprompt report`; the path "
                        "must not exist yet")
    parser.add_argument("--html", type=Path, metavar="PATH",
                        help="also write a self-contained HTML report")
    parser.add_argument("--capture", type=Path, metavar="DIR",
                        help="write each scenario's request bodies to DIR/<scenario>.jsonl "
                        "(input for `stableprompt lint`)")


def _workload(args: argparse.Namespace) -> Workload:
    if args.workload == "synthetic":
        return synthetic_workload().select(args.sessions)
    try:
        return bfcl_workload().select(args.sessions)
    except WorkloadUnavailableError as exc:
        raise WorkloadUnavailableError(
            f"{exc.message} Or run `stableprompt demo --workload synthetic` for our small "
            "bundled synthetic workload.") from exc


def header_lines(result: DemoResult) -> list[str]:
    """The lines printed above the tables: backend, provider, model, workload."""
    workload = result.workload
    policy = cache_policy(result.provider, result.model)
    kind = ("SYNTHETIC workload (ours, not real data)" if workload.synthetic
            else "real workload")
    repairs = ", ".join(f"{k} {v:,}" for k, v in sorted(workload.repairs.items())) or "none"
    minimum = (f"minimum cacheable prompt {policy.min_cacheable_tokens:,} tokens"
               + (f", reads reported in {policy.granularity_tokens}-token steps"
                  if policy.granularity_tokens > 1 else "")
               + (" (model not in the policy table: conservative default)"
                  if policy.conservative else ""))
    return [
        f"Backend: {BACKEND}: an emulator of the providers' documented prefix-cache rules, "
        "not a real provider (a real cache is best-effort and may miss more).",
        f"Provider: {result.provider} wire format; model {result.model} ({minimum}).",
        f"Workload: {workload.name}, {kind}: {len(workload.sessions)} of "
        f"{workload.total_sessions} sessions, {workload.model_calls:,} model calls per "
        f"scenario; source {workload.source}; tool-schema repairs: {repairs}.",
    ]


def note_lines(result: DemoResult) -> list[str]:
    """The lines printed under the tables: definitions, predictions, prices."""
    lines = [
        "hit rate = cache read / input tokens; ceiling = the best an append-only harness could "
        "read on the same calls (each call: the whole previous request of its session, floored "
        "to the cache granularity, 0 below the minimum); agreement = calls whose predicted "
        "cache reads equal the reported ones within the granularity.",
    ]
    predicts = {s.name: s.predicts for s in SCENARIOS}
    lines.extend(f"{name}: loses {predicts[name]}." for name in result.scenarios)
    lines.extend(f"{s.name}: not run for {result.provider} ({s.title}; applies to "
                 f"{', '.join(s.providers)} only)." for s in SCENARIOS
                 if result.provider not in s.providers)
    pricing = result.report.pricing
    if pricing.as_of():
        lines.append(f"cost: {result.model} priced with {pricing.source}, prices in effect on "
                     f"{pricing.as_of()} (the demo clock's date).")
    lines.extend(pricing.notes)
    return lines


def _run(args: argparse.Namespace) -> int:
    workload = _workload(args)
    names = scenario_names(args.provider)
    progress_cb: Any = None
    progress: Any = None
    from rich.console import Console

    stderr = Console(stderr=True)
    if not args.json and stderr.is_terminal:  # no bar in logs and pipes
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        progress = Progress(TextColumn("{task.description:<24}"), BarColumn(),
                            MofNCompleteColumn(), console=stderr, transient=True)
        tasks = {name: progress.add_task(name, total=workload.model_calls) for name in names}

        def progress_cb(name: str, done: int, total: int) -> None:
            progress.update(tasks[name], completed=done)

        progress.start()
    try:
        result = run_demo(workload, provider=args.provider, model=args.model,
                          ledger_path=args.ledger, capture_dir=args.capture, scenarios=names,
                          progress=progress_cb)
    finally:
        if progress is not None:
            progress.stop()
    header, notes = header_lines(result), note_lines(result)
    if args.ledger is not None:
        notes.append(f"ledger kept at {args.ledger} (stableprompt report {args.ledger})")
    if args.capture is not None:
        notes.append(f"request bodies written to {args.capture}/<scenario>.jsonl")
    if args.html is not None:
        write_text(args.html, html_report(result.report, title="stableprompt demo",
                                          intro=header, notes=notes))
        notes.append(f"HTML report written to {args.html}")
    if args.json:
        sys.stdout.write(json_text(result.to_json()))
        return 0
    console = make_console(sys.stdout)
    for line in header:
        console.print(line)
    console.print()
    print_tables(result.report, title=f"stableprompt demo: {result.provider}, {result.model}",
                 file=sys.stdout, notes=notes)
    console.print(f"({result.elapsed_s:.1f} s)")
    return 0


SUBCOMMAND = Subcommand(
    name="demo",
    help="run harness scenarios on the BFCL multi-turn workload against the loopback emulator",
    add_arguments=_add_arguments,
    run=_run,
)
