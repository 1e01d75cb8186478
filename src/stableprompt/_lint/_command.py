"""``stableprompt lint``: command-line arguments, exit codes and the terminal report.

Two inputs: a capture of request bodies (``stableprompt lint CAPTURE``), or harness source
(``stableprompt lint --source PATH...``: :func:`~stableprompt._lint._source.lint_source`;
text, ``--json`` or ``--format sarif``; exit 0 no finding, 1 findings, 2 bad input, with
``--exit-zero`` as for captures).

Exit codes: 0 = pass, 1 = the capture fails (by default: any break or an error finding; a
``--max-breaks N`` or ``--min-prefix-ratio R`` gate replaces that default; ``--exit-zero``
reports without failing, as ruff's flag does), 2 = bad input (unreadable, empty or
unknown-format capture).
With ``--json`` everything goes to stdout as one JSON document, errors included
(``{"error": {"code", "message"}}``, exit 2). A closed pipe changes none of these (text and
JSON alike): the status is set before the report is written (see ``stableprompt._cli``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._canonical import wire_json
from .._exceptions import CaptureError, SourceError
from .._subcommand import Subcommand, int_arg, rich_console, shown
from .._wire._formats import WIRE_FORMATS_WITH_REQUESTS
from ._linter import CAUSE_FIXES, lint_capture
from ._results import LintReport, format_pair

__all__ = ["SUBCOMMAND", "add_lint_arguments", "render_report", "run_lint", "run_source_lint"]


# -- CLI -------------------------------------------------------------------------------------


def _ratio_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


_count_arg = int_arg("an integer", 0, None, "must be 0 or more")
_SOURCE_FORMATS = ("text", "sarif")


def add_lint_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``CAPTURE [--format F] [--min-prefix-ratio R] [--max-breaks N] [--exit-zero]
    [--join] [--json] [--all]`` and ``--source PATH... [--format text|sarif]``."""
    parser.add_argument("capture", metavar="CAPTURE", nargs="?",
                        help="JSONL of request bodies or {request, response} objects, a HAR "
                        "file, or a directory of JSON files")
    parser.add_argument("--source", nargs="+", metavar="PATH", default=None,
                        help="lint Python harness source (files or directories) instead of a "
                        "capture: per-call values, unordered tools and unsorted JSON that "
                        "reach cached prompt slots")
    parser.add_argument("--format", default="auto",
                        choices=("auto", *WIRE_FORMATS_WITH_REQUESTS, "openai-compatible",
                                 *_SOURCE_FORMATS),
                        help="wire format of the requests (default: detect per request); with "
                        "--source: text or sarif (SARIF 2.1.0)")
    parser.add_argument("--min-prefix-ratio", type=_ratio_arg, default=None, metavar="R",
                        help="exit 1 when the mean prefix ratio is below R (0..1), or when "
                        "no request has a predecessor to compare with")
    parser.add_argument("--max-breaks", type=_count_arg, default=None, metavar="N",
                        help="exit 1 when there are more than N breaks (default 0: any break "
                        "fails)")
    parser.add_argument("--exit-zero", action="store_true",
                        help="exit 0 even when breaks or error findings are found (bad input "
                        "still exits 2)")
    parser.add_argument("--join", action="store_true",
                        help="in a directory, pair requests across files (default: each "
                        "file's conversations stay apart)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--all", action="store_true",
                        help="list every pair, not only breaks")


def run_lint(args: argparse.Namespace) -> int:
    """Run ``stableprompt lint``: 0 = pass, 1 = a gate failed, 2 = bad input (one line on
    stderr, or ``{"error": {...}}`` on stdout with ``--json``; no traceback)."""
    exit_zero = getattr(args, "exit_zero", False)
    if getattr(args, "source", None) is not None or args.capture is None:
        return run_source_lint(args)
    if args.format in _SOURCE_FORMATS:
        return _bad_input(args, CaptureError(f"--format {args.format} needs --source (a "
                                             "capture's --format is its wire format)",
                                             code="capture-format"), args.capture)
    max_breaks = getattr(args, "max_breaks", None)
    # The default gate (no gate flag given): any break or error finding fails.
    default_gate = max_breaks is None and args.min_prefix_ratio is None
    if default_gate:
        max_breaks = 0
    try:
        report = lint_capture(args.capture, wire_format=args.format,
                              join=getattr(args, "join", False))
    except CaptureError as exc:
        return _bad_input(args, exc, args.capture)
    failures = report.gate(args.min_prefix_ratio, max_breaks=max_breaks)
    errors = sorted({f.code for f in report.findings if f.severity == "error"})
    if errors and default_gate:
        failures.append(f"error finding(s): {', '.join(errors)}")
    status = 1 if failures and not exit_zero else 0
    args.exit_status = status  # the gate decides, even if the reader closes stdout (see _cli)
    if args.json:
        document = report.as_dict()
        document["summary"]["min_prefix_ratio"] = args.min_prefix_ratio
        document["summary"]["max_breaks"] = max_breaks
        document["summary"]["passed"] = not failures
        document["summary"]["failures"] = failures
        sys.stdout.write(wire_json(document).decode() + "\n")
    else:
        render_report(report, min_prefix_ratio=args.min_prefix_ratio, max_breaks=max_breaks,
                      show_all=args.all, failures=failures)
    return status


def _bad_input(args: argparse.Namespace, exc: CaptureError | SourceError,
               what: str | list[str] | None) -> int:
    """Exit 2 for bad input: one line on stderr, or ``{"error": {...}}`` with ``--json``."""
    args.exit_status = 2  # the status, should the reader close stdout (see _cli)
    if args.json:
        error: dict[str, Any] = {"code": exc.code, "message": " ".join(exc.message.split()),
                                 "pointer": exc.pointer}
        if isinstance(exc, CaptureError):
            error["capture"] = str(what)
        else:
            error["source"] = what
        sys.stdout.write(wire_json({"error": error}).decode() + "\n")
    else:
        print(f"stableprompt lint: error: {' '.join(str(exc).split())}", file=sys.stderr)
    return 2


def run_source_lint(args: argparse.Namespace) -> int:
    """Run ``stableprompt lint --source PATH...``: 0 = no finding, 1 = findings (0 with
    ``--exit-zero``), 2 = bad input (a missing path, a named file that is not valid Python, a
    malformed ``[tool.stableprompt.lint]`` table; no traceback)."""
    from ._sarif import to_sarif
    from ._source import lint_source
    from ._source_report import render_source_report

    paths: list[str] = [*(args.source or []), *([args.capture] if args.capture else [])]
    if args.format not in ("auto", *_SOURCE_FORMATS):
        return _bad_input(args, SourceError(f"--format {args.format} is a capture's wire "
                                            "format; --source takes text or sarif",
                                            code="source-format"), paths)
    if not paths:
        return _bad_input(args, SourceError("give a CAPTURE or --source PATH...",
                                            code="source-path-missing"), paths)
    try:
        report = lint_source(paths)
    except SourceError as exc:
        return _bad_input(args, exc, paths)
    status = 0 if report.passed or getattr(args, "exit_zero", False) else 1
    args.exit_status = status  # the findings decide, even if the reader closes stdout
    if args.format == "sarif":
        sys.stdout.write(wire_json(to_sarif(report)).decode() + "\n")
    elif args.json:
        sys.stdout.write(wire_json(report.as_dict()).decode() + "\n")
    else:
        render_source_report(report, sys.stdout)
    return status


# -- terminal report -------------------------------------------------------------------------

_MAX_ROWS = 40
_MAX_DETAILS = 3
_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
#: Console width when stdout is not a terminal: wide enough that rich never hard-wraps a line
#: (paths, slugs and snippets stay on one greppable line).
_PIPE_WIDTH = 100_000


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _console() -> Any:
    terminal = sys.stdout.isatty()
    return rich_console(highlight=False, soft_wrap=not terminal,
                        width=None if terminal else _PIPE_WIDTH)


def render_report(
    report: LintReport,
    *,
    min_prefix_ratio: float | None = None,
    max_breaks: int | None = None,
    show_all: bool = False,
    console: Any = None,
    failures: list[str] | None = None,
) -> None:
    """Print ``report`` as a rich terminal summary: breaks table, the first breaks in full,
    causes with fixes, findings with fixes, malformed records, and the pass/fail line.

    Args:
        report: The lint report.
        min_prefix_ratio: Threshold to judge against (``None``: no ratio gate).
        max_breaks: Most breaks allowed (``None``: no break gate).
        show_all: List every pair, not only breaks (capped at 40 rows either way).
        console: A ``rich.console.Console`` (default: stdout; not hard-wrapped when stdout is
            not a terminal).
        failures: Why the command fails its gate, when the caller decided it (error
            findings fail the default gate too); default: :meth:`LintReport.gate`.
    """
    from rich.table import Table

    out = console if console is not None else _console()
    s = report.summary
    out.print(f"[bold]stableprompt lint[/bold] {shown(report.capture or '')}")
    formats = shown(", ".join(f"{k} {v}" for k, v in s.wire_formats.items()))
    out.print(f"  requests {s.requests} ({formats}) = conversation starts {s.sessions} + "
              f"compared pairs {s.pairs} · breaks {s.breaks} · expected tail changes "
              f"{s.expected_divergences}")
    if s.problems or s.skipped:
        out.print(f"  not linted: {s.problems} malformed record(s), {s.skipped} non-request "
                  "item(s) skipped")
    out.print(f"  prefix ratio  {_fmt(s.prefix_ratio_mean)} mean · "
              f"{_fmt(s.prefix_ratio_weighted)} weighted by bytes")
    out.print(f"  ceiling       {_fmt(s.ceiling)} mean · {_fmt(s.ceiling_weighted)} weighted "
              "(append-only harness on the same requests)")
    rows = [p for p in report.pairs if show_all or p.is_break]
    if rows:
        table = Table(title="pairs" if show_all else "breaks", title_justify="left")
        for column in ("req", "pred", "lcp B", "ratio", "segment", "path", "cause", "detail"):
            table.add_column(column, overflow="fold")
        for p in rows[:_MAX_ROWS]:
            d = p.divergence
            cause = "" if d is None else d.cause + (" (expected)" if p.expected else "")
            if p.divergences_total > 1:
                cause += f" +{p.divergences_total - 1} more"
            table.add_row(str(p.index), "-" if p.predecessor is None else str(p.predecessor),
                          str(p.lcp_bytes), _fmt(p.prefix_ratio),
                          shown(d.segment) if d else "", shown(d.path) if d else "",
                          cause, shown(d.detail) if d else "")
        out.print(table)
        if len(rows) > _MAX_ROWS:
            out.print(f"  ... {len(rows) - _MAX_ROWS} more (use --json for all)")
    breaks = report.breaks
    for p in breaks[:_MAX_DETAILS]:
        first, *rest = p.describe().split("\n")  # each line escaped, the lines kept
        out.print(f"[bold]request {p.index}[/bold] vs {p.predecessor}: {shown(first)}")
        for line in rest:
            out.print(shown(line))
    if len(breaks) > _MAX_DETAILS:
        out.print(f"  ({len(breaks) - _MAX_DETAILS} more break(s) in the table / --json)")
    if s.causes:
        out.print("[bold]break causes[/bold]")
        for cause, count in s.causes.items():
            out.print(f"  {cause} x{count}: fix: {shown(CAUSE_FIXES.get(cause, ''))}")
    if report.findings:
        out.print("[bold]findings[/bold]")
        for f in report.findings:
            style = _STYLE.get(f.severity, "")
            listed = ", ".join(map(str, f.requests[:8])) + (" ..." if len(f.requests) > 8 else "")
            out.print(f"  [{style}]{f.severity}[/{style}] {f.code}: {shown(f.message)} "
                      f"[dim](requests {listed})[/dim]")
            out.print(f"    fix: {shown(f.fix)}")
    if report.problems:
        out.print(f"[bold]not linted[/bold] ({len(report.problems)} malformed record(s))")
        for problem in report.problems[:_MAX_ROWS]:
            out.print(f"  {shown(str(problem))}")
    if min_prefix_ratio is None and max_breaks is None:
        return
    if failures is None:
        failures = report.gate(min_prefix_ratio, max_breaks=max_breaks)
    checks = []
    if min_prefix_ratio is not None and s.prefix_ratio_mean is not None:
        mean, minimum = format_pair(s.prefix_ratio_mean, min_prefix_ratio)
        checks.append(f"mean prefix ratio {mean} vs minimum {minimum}")
    if max_breaks is not None:
        checks.append(f"breaks {s.breaks} vs maximum {max_breaks}")
    if failures:
        out.print(f"[bold red]FAIL[/bold red] {shown('; '.join(failures))}")
    else:
        out.print(f"[green]PASS[/green] {'; '.join(checks)}")


SUBCOMMAND = Subcommand(
    "lint",
    "check prefix stability of captured requests (JSONL, HAR, directory of JSON), or of "
    "harness source (--source)",
    add_lint_arguments,
    run_lint,
)
