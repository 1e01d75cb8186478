"""Paired render benchmark: ours and the naive rebuilds interleaved turn by turn, one process.

``PYTHONPATH=src python benchmarks/paired.py`` (a few seconds; ``run.py`` runs it and writes
its table; needs the ``bench`` extra, as ``suite.py`` does). The pyperf suite (``suite.py``)
measures ``render/<format>/<N>`` and the ``naive-*`` baselines in separate worker processes,
one benchmark after the other, so a change of the shared machine's speed between the two
(this VM's moved ~2x within a session) moves their ratio. Here each round appends one turn
(not timed), then times, back to back on the same data:

- ours: ``conv.render()`` + ``to_<format>()`` + ``content`` + ``fingerprint`` (as ``suite.py``);
- ``naive-orjson``: that request's body dict (parsed from its bytes, not timed) serialized
  whole with ``orjson.dumps(OPT_SORT_KEYS)`` + SHA-256;
- ``naive-json``: the same with ``json.dumps(sort_keys=True)`` + SHA-256;

the two baselines in alternating order. So each operation runs right after the others'
allocations (a parse and two serializations of a ~1.4 MB body at turn 1,000: ~16 MB of
objects and buffers; ~1.4 MB at turn 10), as an agent loop does other work between renders:
the render under cache pressure. A round's ratio is a baseline's time over ours in that
round; the figures are the median of the per-round ratios, their 10th percentile (nearest
rank) and the medians of the times. The garbage collector stays on, as in ``suite.py``.

The turns timed are those of ``suite.py``'s cells: each block of ``--block`` timed rounds
starts from a new conversation of ``N`` turns and ``--warmups`` untimed rounds, so a row
labelled ``N`` times turns ``N + warmups + 1`` to ``N + warmups + block`` (with the defaults,
turns 1,011-1,020 for ``N`` = 1,000; ``suite.py``'s cells, 10 warmups and 5 values per
process, time turns 1,011-1,015).

Prints JSON: ``{"<format>/<N>": {"ours_ms", "orjson_ms", "json_ms", "x_orjson", "x_json",
"x_orjson_p10", "rounds", "turns"}}`` (``turns``: the first and last turn timed).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parent))
import suite


def _time(op: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = op()
    return time.perf_counter() - start, out


def paired(fmt: str, turns: int, rounds: int, warmups: int, block: int) -> dict[str, Any]:
    """``rounds`` timed rounds of one format at ``turns`` turns, in blocks of ``block`` (each
    from a new conversation, after ``warmups`` untimed rounds)."""
    render = suite.FORMATS[fmt]
    times: dict[str, list[float]] = {"ours": [], "orjson": [], "json": []}
    ratios: dict[str, list[float]] = {"orjson": [], "json": []}
    order = (("orjson", suite.naive_orjson), ("json", suite.naive_json))
    while len(times["ours"]) < rounds:
        conv, done = suite._conversation(turns)

        def ours(conv: Any = conv, done: list[int] = done) -> Any:
            return suite.render_turn(conv, render, str(done[0]))

        for i in range(warmups + min(block, rounds - len(times["ours"]))):
            suite._grow(conv, done[0])  # the new content: not timed
            done[0] += 1
            took, req = _time(ours)
            body = orjson.loads(req.content)
            del req  # dropped before the baselines, as a client that sent it does
            got = {name: _time(functools.partial(op, body))[0]
                   for name, op in (order if i % 2 else order[::-1])}
            if i < warmups:
                continue
            times["ours"].append(took)
            for name, value in got.items():
                times[name].append(value)
                ratios[name].append(value / took)
    ordered = sorted(ratios["orjson"])
    return {"ours_ms": statistics.median(times["ours"]) * 1e3,
            "orjson_ms": statistics.median(times["orjson"]) * 1e3,
            "json_ms": statistics.median(times["json"]) * 1e3,
            "x_orjson": statistics.median(ratios["orjson"]),
            "x_json": statistics.median(ratios["json"]),
            "x_orjson_p10": ordered[max(0, math.ceil(len(ordered) * 0.1) - 1)],
            "rounds": rounds, "turns": [turns + warmups + 1, turns + warmups + block]}


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=_positive, default=60, help="timed rounds per row")
    parser.add_argument("--block", type=_positive, default=10,
                        help="timed rounds per conversation")
    parser.add_argument("--warmups", type=int, default=10, help="untimed rounds per block")
    parser.add_argument("--turns", type=_positive, nargs="+", default=list(suite.TURNS))
    args = parser.parse_args()
    out = {f"{fmt}/{n}": paired(fmt, n, args.rounds, args.warmups, args.block)
           for n in args.turns for fmt in suite.FORMATS}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
