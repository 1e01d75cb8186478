"""Paired render benchmark: ours and the naive rebuilds interleaved turn by turn, one process.

``PYTHONPATH=src python benchmarks/paired.py`` (about 1 minute; ``run.py`` runs it and writes
its table). The pyperf suite (``suite.py``) measures ``render/<format>/<N>`` and the
``naive-*`` baselines in separate worker processes, one benchmark after the other, so a
change of the shared machine's speed between the two (this VM's moved ~2x within a session)
moves their ratio. Here each round appends one turn (not timed), then times, back to back on
the same data:

- ours: ``conv.render()`` + ``to_<format>()`` + ``content`` + ``fingerprint`` (as ``suite.py``);
- ``naive-orjson``: that request's body dict (parsed from its bytes, not timed) serialized
  whole with ``orjson.dumps(OPT_SORT_KEYS)`` + SHA-256;
- ``naive-json``: the same with ``json.dumps(sort_keys=True)`` + SHA-256;

the two baselines in alternating order. A round's ratio is a baseline's time over ours in
that round; the figure is the median of the per-round ratios (and the medians of the times).
The garbage collector stays on, as in ``suite.py``. Each format and turn count has its own
conversation and ``--warmups`` rounds before ``--rounds`` timed ones.

Prints JSON: ``{"<format>/<N>": {"ours_ms", "orjson_ms", "json_ms", "x_orjson", "x_json",
"x_orjson_p10", "rounds"}}`` (``x_orjson_p10``: the 10th percentile of the per-round ratios).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parent))
import suite


def _naive_orjson(body: Any) -> None:
    hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _naive_json(body: Any) -> None:
    hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _time(op: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = op()
    return time.perf_counter() - start, out


def paired(fmt: str, turns: int, rounds: int, warmups: int) -> dict[str, Any]:
    """``rounds`` timed rounds (after ``warmups``) of one format at ``turns`` turns."""
    conv, done = suite._conversation(turns)
    render = suite.FORMATS[fmt]

    def ours() -> Any:
        req = render(conv.render(tail={"now": str(done[0])}))
        req.content  # noqa: B018
        req.fingerprint  # noqa: B018
        return req

    times: dict[str, list[float]] = {"ours": [], "orjson": [], "json": []}
    ratios: dict[str, list[float]] = {"orjson": [], "json": []}
    for i in range(warmups + rounds):
        suite._grow(conv, done[0])  # the new content: not timed
        done[0] += 1
        took, req = _time(ours)
        body = orjson.loads(req.content)
        del req  # dropped before the baselines, as a client that sent it does
        order = (("orjson", _naive_orjson), ("json", _naive_json))
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
            "x_orjson_p10": ordered[len(ordered) // 10],
            "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--warmups", type=int, default=5)
    parser.add_argument("--turns", type=int, nargs="*", default=list(suite.TURNS))
    args = parser.parse_args()
    out = {f"{fmt}/{n}": paired(fmt, n, args.rounds, args.warmups)
           for n in args.turns for fmt in suite.FORMATS}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
