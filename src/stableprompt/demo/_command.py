"""``stableprompt demo``: the scenarios on a real multi-turn tool workload, against the emulator
or the real engine (``--provider llama-server``).

Output: a header that says what the backend is (our loopback emulator, or llama.cpp's
llama-server), then the per-scenario table (calls, input tokens, cache read, cache write, hit
rate, ceiling, share of the ceiling, agreement, cost) and the verdict table; llama-server runs
have one row per scenario and endpoint (``stableprompt/chat``) and add the engine's prefill
table (cold vs warm milliseconds) and the template findings. ``--json`` prints the same as
JSON instead (see :meth:`DemoResult.to_json`). A progress bar goes to stderr when it is a
terminal (never with ``--json``); in a log or a pipe an engine run says each finished row on
stderr instead; so do the engine's build and start notices.

Exit status: 0, or 1 when an engine row measured nothing because the engine refused its every
call (e.g. a chat template that demands alternating roles): the output is still printed, and
one stderr line names the rows and the first refusal. SIGTERM stops a started engine before
exiting (143; see :mod:`stableprompt._cli`).

Output paths (``--ledger``, ``--html``, ``--capture``) and ``--model`` are checked while the
arguments are parsed, so a bad one fails at once with a one-line usage error naming the option
and the path, before the workload is fetched or any scenario runs; so is ``--cache-policy
FILE`` (a :class:`~stableprompt.CachePolicy` as JSON, :meth:`~stableprompt.CachePolicy.from_file`),
read and checked against the provider before anything runs (exit 2, naming the file). Under a
policy the demo runs the scenarios built on the SDK (:attr:`Scenario.takes_policy`: the naive
ones place their own breakpoints, so a policy cannot apply to them and they are not run), and
a policy with ``keep_alive`` sends its pings (see :func:`~stableprompt.demo.run_demo`).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._economics._cache_policy import CachePolicy
from .._exceptions import InputError, WorkloadUnavailableError
from .._policy import cache_rules
from .._report._html import html_report
from .._report._text import (
    ceiling_notes,
    estimate_notes,
    keepalive_lines,
    make_console,
    print_tables,
    server_diagnosis_notes,
)
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
from ._engine_report import engine_lines, finding_lines, print_engine_tables
from ._engine_run import ENDPOINTS, TEMPLATES, base_url_problem
from ._run import (
    BACKEND_NOTE,
    DEFAULT_MODELS,
    DEFAULT_SESSIONS,
    DEMO_START_S,
    ENGINE_PROVIDER,
    DemoResult,
    check_cache_policy,
    describe_workload,
    new_ledger_problem,
    run_demo,
)
from ._scenarios import PROVIDER_WIRES, SCENARIOS, scenario_names
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


def _base_url(text: str) -> str:
    problem = base_url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", choices=sorted(DEFAULT_MODELS), default="anthropic",
                        help="anthropic, openai: the wire format and cache rules to emulate "
                        "(default anthropic); llama-server: the real engine (llama.cpp), "
                        "started on a tiny model unless --base-url is given")
    parser.add_argument("--base-url", type=_base_url, metavar="URL",
                        help="llama-server only: use the server at URL (e.g. "
                        "http://127.0.0.1:8080) instead of starting one; predictions are "
                        "exact only for a server run with -np 1 --cache-ram 0 (and "
                        "--slot-save-path DIR, so the demo can erase its slot between rows)")
    parser.add_argument("--endpoint", choices=(*ENDPOINTS, "all"), metavar="|".join(
                        (*ENDPOINTS, "all")),
                        help="llama-server: the endpoint(s) to send to: chat "
                        "(/v1/chat/completions), responses (/v1/responses), messages "
                        "(/v1/messages) or all (default); openai: chat (default) or "
                        "responses, the emulator's wire")
    parser.add_argument("--template", choices=TEMPLATES, metavar="|".join(TEMPLATES),
                        help="llama-server only, without --base-url: the tiny model's chat "
                        "template (default qwen2.5: append-stable; mistral-nemo and hermes-3 "
                        "re-render earlier turns)")
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
    parser.add_argument("--cache-policy", metavar="FILE",
                        help="a cache policy (JSON: CachePolicy.from_file; e.g. "
                        '{"head": "1h", "history": "1h"} or {"keep_alive": {"interval_s": '
                        '270, "max_pings": 14}}) for the scenarios built on the SDK, which '
                        "are the ones run (the naive ones place their own breakpoints); "
                        "with keep_alive the pings are sent (emulator: anthropic, openai "
                        "GPT-5.6+)")


def _workload(args: argparse.Namespace) -> Workload:
    if args.workload == "synthetic":
        return synthetic_workload().select(args.sessions)
    try:
        return bfcl_workload().select(args.sessions)
    except WorkloadUnavailableError as exc:
        raise WorkloadUnavailableError(
            f"{exc.message} Or run `stableprompt demo --workload synthetic` for our small "
            "bundled synthetic workload.", code=exc.code) from exc


_OPENAI_ENDPOINTS = {"chat": "openai-chat", "responses": "openai-responses"}
"""``--endpoint`` with ``--provider openai``: the wire the emulator demo sends."""


def _check_engine_options(args: argparse.Namespace) -> None:
    """The llama-server options need ``--provider llama-server`` (and ``--template`` a
    started engine); ``--endpoint`` also applies to ``--provider openai`` (chat or
    responses).

    Raises:
        UsageError: One of them is given without it.
    """
    if args.provider == "openai" and args.endpoint is not None:
        if args.endpoint not in _OPENAI_ENDPOINTS:
            raise UsageError(f"stableprompt demo: error: argument --endpoint: "
                             f"{args.endpoint!r} is not an OpenAI endpoint of the emulator "
                             f"demo; choose {' or '.join(_OPENAI_ENDPOINTS)}")
        endpoint = None
    else:
        endpoint = args.endpoint
    given = [(option, value) for option, value in (("--base-url", args.base_url),
                                                   ("--endpoint", endpoint),
                                                   ("--template", args.template))
             if value is not None]
    if args.provider != ENGINE_PROVIDER and given:
        option, value = given[0]
        raise UsageError(f"stableprompt demo: error: argument {option}: {value!r} applies to "
                         f"--provider {ENGINE_PROVIDER} only, not {args.provider}")
    if args.template is not None and args.base_url is not None:
        raise UsageError("stableprompt demo: error: argument --template: the server at "
                         f"{args.base_url} uses its own model's template; --template picks "
                         "the template of the engine the demo starts (omit --base-url)")


def _cache_policy(args: argparse.Namespace
                  ) -> tuple[CachePolicy | None, tuple[str, ...] | None]:
    """``--cache-policy FILE`` read and checked against the provider and its SDK scenarios:
    ``(policy, scenario names to run)``, ``(None, None)`` without it.

    Raises:
        PolicyError: the file is unreadable, not JSON or not a valid policy (code
            ``cache-policy``, naming the file; exit 2).
        InputError: the run cannot follow the policy (code ``demo-cache-policy``, naming
            the file and why; exit 2).
    """
    if args.cache_policy is None:
        return None, None
    policy = CachePolicy.from_file(args.cache_policy)
    provider = args.provider
    scenarios = [s for s in SCENARIOS if provider in s.providers and s.takes_policy]
    model = args.model or DEFAULT_MODELS[provider]
    wire = _OPENAI_ENDPOINTS.get(args.endpoint or "") if provider == "openai" else None
    try:
        check_cache_policy(policy, scenarios, provider, model, wire=wire)
    except InputError as exc:
        raise InputError(f"argument --cache-policy: {args.cache_policy}: {exc.message}",
                         code=exc.code) from exc
    return policy, tuple(s.name for s in scenarios)


def header_lines(result: DemoResult) -> list[str]:
    """The lines printed above the tables: backend, provider, model, workload."""
    if result.engine is not None:
        engine = result.engine
        endpoints = ", ".join(f"{e} ({path})" for e, path in (
            ("chat", "/v1/chat/completions"), ("responses", "/v1/responses"),
            ("messages", "/v1/messages")) if e in engine.endpoints)
        return [
            f"Backend: {engine.backend_note}.",
            f"Provider: {ENGINE_PROVIDER} via {endpoints}; model id {result.model} (a "
            f"single-model server ignores it); one-token cache granularity, the last prompt "
            f"token always recomputed; every call decodes at most {engine.max_tokens} token"
            f"{'s' if engine.max_tokens != 1 else ''}.",
            f"Workload: {describe_workload(result.workload)}",
            f"Machine: {engine.machine}.",
        ]
    policy = cache_rules(result.provider, result.model)
    minimum = (f"minimum cacheable prompt {policy.min_cacheable_tokens:,} tokens"
               + (f", reads reported in {policy.granularity_tokens}-token steps"
                  if policy.granularity_tokens > 1 else "")
               + (" (model not in the policy table: conservative default)"
                  if policy.conservative else ""))
    default = result.wire in (None, PROVIDER_WIRES.get(result.provider))
    wire = "" if default else f" ({result.wire})"
    lines = [
        f"Backend: {BACKEND_NOTE}",
        f"Provider: {result.provider} wire format{wire}; model {result.model} ({minimum}).",
        f"Workload: {describe_workload(result.workload)}",
    ]
    if result.cache_policy is not None:
        lines.append(f"Cache policy: {result.cache_policy.label()}, followed by the SDK "
                     "scenarios (the naive ones place their own breakpoints: not run).")
    return lines


def _engine_notes(result: DemoResult) -> list[str]:
    engine = result.engine
    assert engine is not None
    scenarios = {row.scenario for row in engine.rows}
    lines = [
        "hit rate = cache read / input tokens, as the engine reported them; ceiling = the best "
        "an append-only harness could read on the same calls; agreement = calls whose "
        "predicted cache reads (the engine's own /apply-template + /tokenize of the request, "
        "against what its slot holds: the previous request and the tokens it generated) "
        "equal the reported ones exactly.",
        "The random-weight model's replies are noise: each request is sent to the engine (that "
        "is what is measured), the transcript takes the scripted assistant turn; tool-call "
        "ids are 9 alphanumeric characters (Mistral's templates demand it).",
    ]
    lines.extend(ceiling_notes(result.report))
    template = engine.template or "the server's own"
    lines.extend(f"{s.name}: {s.engine_predicts}" for s in SCENARIOS if s.name in scenarios)
    if engine.template != "qwen2.5":
        lines.append(f"(those are Qwen2.5's; with {template} the template's own order and "
                     "re-rendering decide: see the template findings)")
    skipped: dict[str, list[str]] = {}
    for name, endpoint, _why in engine.skipped:
        skipped.setdefault(name, []).append(endpoint)
    lines.extend(f"{name}: messages only (its mistake is an Anthropic breakpoint; not run on "
                 f"{', '.join(endpoints)})" for name, endpoints in skipped.items())
    lines.extend(engine_lines(engine))
    return lines


def note_lines(result: DemoResult) -> list[str]:
    """The lines printed under the tables: definitions and predictions (the table printers
    add the cost source and pricing notes themselves)."""
    if result.engine is not None:
        return _engine_notes(result)
    start = datetime.fromtimestamp(DEMO_START_S, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        "hit rate = cache read / input tokens; ceiling = the best an append-only harness could "
        "read on the same calls (each call: the whole previous request of its session, floored "
        "to the cache granularity, 0 below the minimum); agreement = calls whose predicted "
        "cache reads equal the reported ones within the granularity (or, for a prediction "
        "resting on our token estimate, within its allowance: see below); calls are dated by "
        f"the demo clock (from {start}).",
        *ceiling_notes(result.report),
        *estimate_notes(result.report),
        *server_diagnosis_notes(result.report),
        *keepalive_lines(result.report),
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
    _check_engine_options(args)
    policy, policy_names = _cache_policy(args)
    workload = _workload(args)
    engine = args.provider == ENGINE_PROVIDER
    names = policy_names or (None if engine else scenario_names(args.provider))
    progress_cb: Any = None
    progress: Any = None
    from rich.console import Console

    stderr = Console(stderr=True, highlight=False, emoji=False)
    if not args.json and stderr.is_terminal:  # no bar in logs and pipes
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        progress = Progress(TextColumn("{task.description:<30}"), BarColumn(),
                            MofNCompleteColumn(), console=stderr, transient=True)
        tasks: dict[str, Any] = {}

        def progress_cb(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = progress.add_task(name, total=total)
            progress.update(tasks[name], completed=done)

        progress.start()
    elif not args.json and engine:  # a long run in a log or pipe: one line per finished row
        def progress_cb(name: str, done: int, total: int) -> None:
            if done == total:
                stderr.print(f"{name}: {total} calls done", markup=False, soft_wrap=True)
    options: dict[str, Any] = {}
    if args.provider == "openai" and args.endpoint is not None:
        options = {"wire": _OPENAI_ENDPOINTS[args.endpoint]}
    if engine:
        options = {"base_url": args.base_url, "template": args.template,
                   "endpoints": None if args.endpoint in (None, "all") else [args.endpoint],
                   "notice": lambda text: stderr.print(text, markup=False, soft_wrap=True)}
    try:
        result = run_demo(workload, provider=args.provider, model=args.model,
                          ledger_path=args.ledger, capture_dir=args.capture, scenarios=names,
                          progress=progress_cb, cache_policy=policy, **options)
    finally:
        if progress is not None:
            progress.stop()
    header, notes = header_lines(result), note_lines(result)
    if args.ledger is not None:
        notes.append(f"ledger kept at {args.ledger} (stableprompt report {args.ledger})")
    if args.capture is not None:
        notes.append(f"request bodies written to {args.capture}/<scenario>"
                     f"{'.<endpoint>' if engine else ''}.jsonl")
    if args.html is not None:
        extra = [] if result.engine is None else finding_lines(result.engine)
        write_text(args.html, html_report(result.report, title="stableprompt demo",
                                          intro=header, notes=[*notes, *extra]))
        notes.append(f"HTML report written to {args.html}")
    failed = _refused_rows(result)
    if args.json:
        sys.stdout.write(json_text(result.to_json()))
        return _exit_status(failed, stderr)
    console = make_console(sys.stdout)
    for line in header:
        console.print(line)
    console.print()
    title = f"stableprompt demo: {result.provider}, {result.model}"
    if result.engine is not None:
        print_tables(result.report, title=title, file=sys.stdout)
        print_engine_tables(result.engine, console)
        for line in notes:
            console.print(line, markup=False)
    else:
        print_tables(result.report, title=title, file=sys.stdout, notes=notes)
    console.print(f"({result.elapsed_s:.1f} s)")
    return _exit_status(failed, stderr)


def _refused_rows(result: DemoResult) -> list[str]:
    """Rows whose every call the engine refused (measured nothing), with the first refusal."""
    if result.engine is None:
        return []
    return [f"{row.name} ({row.first_refusal})" for row in result.engine.rows if row.all_refused]


def _exit_status(failed: list[str], stderr: Any) -> int:
    """1 when a row measured nothing (its every call was refused), else 0."""
    if not failed:
        return 0
    stderr.print(f"stableprompt demo: error: the engine refused every call of {len(failed)} "
                 f"row{'s' if len(failed) != 1 else ''}, which measured nothing: "
                 f"{'; '.join(failed)}", markup=False, soft_wrap=True)
    return 1


SUBCOMMAND = Subcommand(
    name="demo",
    help="run harness scenarios on the BFCL multi-turn workload against the loopback emulator "
    "or a real llama-server",
    add_arguments=_add_arguments,
    run=_run,
)
