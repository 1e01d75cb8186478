"""``stableprompt lint --source`` on a ~100k-line tree, against ``ast.parse`` alone (issue 28
item 4).

The tree is the installed source of ``pydantic``, ``rich`` and ``httpx`` (about 94k lines in
~300 files; whatever versions the interpreter has), linted as three paths in one call, as a
project would be. Each repetition times, in the same process:

- ``parse``: read every ``*.py`` file and ``ast.parse`` it (the floor any AST linter pays);
- ``lint``: ``lint_source(paths)``: reading, parsing, indexing, the taint rounds, the
  structure checks and suppressions.

The minimum of ``--repeat`` runs is reported, with the ratio and lines per second. Run:
``python benchmarks/bench_source_lint.py [--repeat 3] [--package NAME ...]``; it prints one
JSON object (append the numbers to ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

from stableprompt._lint._source import SourceConfig, lint_source

PACKAGES = ("pydantic", "rich", "httpx")


def _roots(names: list[str]) -> list[Path]:
    roots = []
    for name in names:
        module = importlib.import_module(name)
        roots.append(Path(module.__file__ or "").parent)
    return roots


def _parse_all(roots: list[Path]) -> int:
    lines = 0
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            source = path.read_text(encoding="utf-8")
            ast.parse(source, filename=str(path))
            lines += source.count("\n")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--package", action="append", default=None,
                        help=f"package whose installed source to lint (default {PACKAGES})")
    args = parser.parse_args()
    roots = _roots(args.package or list(PACKAGES))
    parse_s, lint_s = [], []
    lines = files = findings = 0
    for _ in range(args.repeat):
        start = time.perf_counter()
        lines = _parse_all(roots)
        parse_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        report = lint_source(roots, config=SourceConfig())
        lint_s.append(time.perf_counter() - start)
        files, findings = report.files, len(report.findings)
    best_parse, best_lint = min(parse_s), min(lint_s)
    print(json.dumps({
        "packages": {p.name: str(p) for p in roots},
        "files": files, "lines": lines, "findings": findings,
        "parse_s": round(best_parse, 3), "lint_s": round(best_lint, 3),
        "lint_over_parse": round(best_lint / best_parse, 2),
        "lines_per_s": round(lines / best_lint),
        "python": sys.version.split()[0], "machine": platform.machine(),
        "cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2),
    }, indent=2))


if __name__ == "__main__":
    main()
