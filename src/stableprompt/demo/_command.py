"""``stableprompt demo``: the scenarios on a real multi-turn tool workload, against the emulator.

Output: a header that says the backend is our loopback emulator, then the per-scenario table
(calls, input tokens, cache read, cache write, hit rate, ceiling, share of the ceiling,
agreement, cost) and the verdict table; ``--json`` prints the same as JSON instead (see
:meth:`DemoResult.to_json`). A progress bar goes to stderr when it is a terminal (never with
``--json``).

Output paths (``--ledger``, ``--html``, ``--capture``) and ``--model`` are checked while the
arguments are parsed, so a bad one fails at once with a one-line usage error naming the option
and the path, before the workload is fetched or any scenario runs.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._exceptions import WorkloadUnavailableError
from .._policy import cache_policy
from .._report._html import html_report
from .._report._text import ceiling_notes, make_console, print_tables
from .._subcommand import (
    Subcommand,
    UsageError,
    json_text,
    output_dir_arg,
    output_file_arg,
    output_file_problem,
    same_file,
    write_text,
)
from ._run import (
    BACKEND_NOTE,
    DEFAULT_MODELS,
    DEFAULT_SESSIONS,
    DEMO_START_S,
    DemoResult,
    describe_workload,
    new_ledger_problem,
    run_demo,
)
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


def _model(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("the model id is empty; omit --model for the default")
    return text


def _new_ledger(text: str) -> Path:
    problem = new_ledger_problem(text)
    if problem is None:
        problem = output_file_problem(Path(text))
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", choices=sorted(DEFAULT_MODELS), default="anthropic",
                        help="wire format and cache rules to emulate (default anthropic)")
    parser.add_argument("--sessions", type=_sessions, default=DEFAULT_SESSIONS, metavar="N|all",
                        help=f"sessions to run (default {DEFAULT_SESSIONS}; 'all' for every "
                        "session of the workload)")
    parser.add_argument("--model", metavar="M", type=_model,
                        help="model id to send and price (default: "
                        + ", ".join(f"{k}: {v}" for k, v in sorted(DEFAULT_MODELS.items()))
                        + ")")
    parser.add_argument("--workload", choices=("bfcl", "synthetic"), default="bfcl",
                        help="bfcl: BFCL v4 multi-turn sessions, fetched once from PyPI "
                        "(default); synthetic: our small bundled offline workload")
    parser.add_argument("--json", action="store_true",
                        help="print the results as JSON (no progress bar)")
    parser.add_argument("--ledger", type=_new_ledger, metavar="PATH",
                        help="keep the ledger (SQLite) here for `stableprompt report`; the path "
                        "must not exist yet (not even as an empty file)")
    parser.add_argument("--html", type=output_file_arg, metavar="PATH",
                        help="also write a self-contained HTML report")
    parser.add_argument("--capture", type=output_dir_arg, metavar="DIR",
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
            "bundled synthetic workload.", code=exc.code) from exc


def header_lines(result: DemoResult) -> list[str]:
    """The lines printed above the tables: backend, provider, model, workload."""
    policy = cache_policy(result.provider, result.model)
    minimum = (f"minimum cacheable prompt {policy.min_cacheable_tokens:,} tokens"
               + (f", reads reported in {policy.granularity_tokens}-token steps"
                  if policy.granularity_tokens > 1 else "")
               + (" (model not in the policy table: conservative default)"
                  if policy.conservative else ""))
    return [
        f"Backend: {BACKEND_NOTE}",
        f"Provider: {result.provider} wire format; model {result.model} ({minimum}).",
        f"Workload: {describe_workload(result.workload)}",
    ]


def note_lines(result: DemoResult) -> list[str]:
    """The lines printed under the tables: definitions and predictions (the table printers
    add the cost source and pricing notes themselves)."""
    start = datetime.fromtimestamp(DEMO_START_S, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        "hit rate = cache read / input tokens; ceiling = the best an append-only harness could "
        "read on the same calls (each call: the whole previous request of its session, floored "
        "to the cache granularity, 0 below the minimum); agreement = calls whose predicted "
        "cache reads equal the reported ones within the granularity; calls are dated by the "
        f"demo clock (from {start}).",
        *ceiling_notes(result.report),
    ]
    predicts = {s.name: s.predicts for s in SCENARIOS}
    lines.extend(f"{name}: loses {predicts[name]}." for name in result.scenarios)
    lines.extend(f"{s.name}: not run for {result.provider} ({s.title}; applies to "
                 f"{', '.join(s.providers)} only)." for s in SCENARIOS
                 if result.provider not in s.providers)
    return lines


def _run(args: argparse.Namespace) -> int:
    if args.html is not None and args.ledger is not None and same_file(args.html, args.ledger):
        raise UsageError(f"stableprompt demo: error: argument --html: {str(args.html)!r} is "
                         "also the --ledger path; choose another path")
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
