"""Lint on a capture whose head changes every request, as a ratio to the parse-only pass over
the same file, beside the same ratio on the stable capture (issue 30 item 5's acceptance).

Both captures are ``lint.py``'s (``build_capture``; ``clock=True``: ``Current time: ...`` at
the start of every session's ~10 KB system prompt, which also mentions an API key and a URL,
so the secret patterns run on its snippets). Each pass is one whole ``lint_capture`` or
orjson-parse-only pass; the passes alternate, best of ``--rounds`` each (the machine is
shared: the best is the least disturbed; ``--cpu`` times them in CPU time of this process,
``time.process_time``, which waiting for the other jobs does not count). No pyperf needed:

    PYTHONPATH=src python benchmarks/lint_clock.py [--requests 1000] [--rounds 3] [--cpu]
        [--order history-last|claude-code]

``--order claude-code`` writes the bodies in Claude Code's key order (the history second,
the system prompt and the tools after it, as real Claude Code traffic) instead of the history
last.

Prints one Markdown table; the numbers go to ``RESULTS.md`` by hand.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from lint import KEY_ORDERS, SESSIONS, _parse, build_capture

from stableprompt._lint._linter import lint_capture


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu", action="store_true", help="CPU time, not wall time")
    parser.add_argument("--order", choices=sorted(KEY_ORDERS), default="history-last",
                        help="the top-level members' order in every body")
    args = parser.parse_args(argv)
    clock_of = time.process_time if args.cpu else time.perf_counter
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for clock in (False, True):
            path = Path(work) / f"capture-{'clock' if clock else 'stable'}.jsonl"
            size = build_capture(path, requests=args.requests, sessions=SESSIONS, clock=clock,
                                 order=args.order)
            best = {"parse": float("inf"), "lint": float("inf")}
            for _ in range(args.rounds):
                for name in ("parse", "lint"):
                    start = clock_of()
                    if name == "parse":
                        _parse(path)
                    else:
                        lint_capture(path)
                    best[name] = min(best[name], clock_of() - start)
            summary = lint_capture(path).summary
            rows.append((clock, size, best, summary.breaks))
    print(f"{args.requests:,} requests, {SESSIONS} sessions; {platform.machine()}, Python "
          f"{platform.python_version()}; best of {args.rounds} alternating passes"
          f"{' (CPU time)' if args.cpu else ''}; key order {args.order}; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| capture | MB | parse-only s | lint s | lint / parse-only (target >= 0.50) | breaks |")
    print("|---|---|---|---|---|---|")
    for clock, size, best, breaks in rows:
        name = "clock in every system prompt" if clock else "stable heads (lint.py's)"
        print(f"| {name} | {size / 1e6:.0f} | {best['parse']:.2f} | {best['lint']:.2f} | "
              f"{best['parse'] / best['lint']:.3f} | {breaks} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
