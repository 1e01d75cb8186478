"""The garbage collector and the ``record_in_thread`` caller's path (issue 10's p99 target):
``PYTHONPATH=src python benchmarks/gc_tail.py`` (about 1 minute; not run by ``run.py``).

The collector stays on and untouched: this measures what it does, it does not change it.
For each caller path of ``suite.py``'s ``record-thread/*`` cells (``client``, ``transport``,
``client-journal``) at turn ``--turns``, the same calls as that benchmark (the worker
drained between the caller's parts), ``--calls`` of them after 5 warm-up calls:

- ``net tracked``: how many more objects the collector tracks after each caller part
  (``gc.get_count()[0]`` after minus before, median): what a call adds to the count that
  triggers a collection, and what a collection then has to look at;
- ``collections in timed``: collections (by generation) that ran inside the caller's timed
  parts (``gc.callbacks``), against those that ran anywhere in the process meanwhile, and
  the median time of one, by generation (what a collection costs when it lands in a call);
- then one full collection's time (median of 7 ``gc.collect()``) over the conversation
  alone and after a ``Recorder`` recorded ``--calls`` calls of it, and what the recorder's
  memory (``CallMemory``: predecessor index, lineage segments, token memo) holds for the
  collector to traverse (tracked objects, references; the largest holders).

Prints JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import suite
from suite import _HEADERS, _response, _stepper

from stableprompt import Ledger, Recorder
from stableprompt._recording._deferred import DeferredRecorder


class _Collections:
    """``gc.callbacks`` hook: collections by generation, inside the timed parts or not."""

    def __init__(self) -> None:
        self.timed = False
        self.inside: Counter[int] = Counter()
        self.anywhere: Counter[int] = Counter()
        self.inside_ms: list[float] = []
        self.ms: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        generation, took = info["generation"], (time.perf_counter() - self._start) * 1e3
        self.anywhere[generation] += 1
        self.ms[generation].append(took)
        if self.timed:
            self.inside[generation] += 1
            self.inside_ms.append(took)


def caller_path(path: str, turns: int, calls: int) -> dict[str, Any]:
    """The caller's parts of ``calls`` calls on ``path`` (module docstring)."""
    suite._STATE.clear()  # a conversation of its own, from turn ``turns``
    gc.collect()
    folder = tempfile.TemporaryDirectory()
    ledger = Ledger(Path(folder.name) / "calls.db") if path == "client-journal" else None
    recorder = Recorder(ledger, tokenizer="cl100k_base", keep_records=100)
    deferred = DeferredRecorder(recorder, decode=False)
    step = _stepper(turns)
    seen = _Collections()
    net: dict[str, list[int]] = {"start": [], "close": []}
    times: list[float] = []
    for i in range(5 + calls):
        if i == 5:
            gc.callbacks.append(seen)
        content = step().content
        response = _response(content)
        answer = {"content-type": "application/json", "content-length": str(len(response))}
        recorder.flush()
        count, seen.timed = gc.get_count()[0], True
        began = time.perf_counter()
        pending = deferred.start("/v1/messages", _HEADERS, content, rendered=path != "transport")
        took = time.perf_counter() - began
        seen.timed = False
        net["start"].append(gc.get_count()[0] - count)
        assert pending is not None
        recorder.flush()  # the request's flight: its analysis runs
        count, seen.timed = gc.get_count()[0], True
        began = time.perf_counter()
        observer = deferred.observe(pending, status_code=200, headers=answer,
                                    content_encoding="")
        observer.feed(response)
        observer.close()
        took += time.perf_counter() - began
        seen.timed = False
        net["close"].append(gc.get_count()[0] - count)
        if i >= 5:
            times.append(took * 1e3)
        del pending, observer  # freed before the next call's counts
    gc.callbacks.remove(seen)
    recorder.close()
    if ledger is not None:
        ledger.close()
    folder.cleanup()
    times.sort()
    return {
        "calls": calls,
        "net_tracked_start": statistics.median(net["start"][5:]),
        "net_tracked_close": statistics.median(net["close"][5:]),
        "median_ms": round(statistics.median(times), 3),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3),
        "collections_in_timed": dict(seen.inside),
        "collections_in_timed_ms": [round(ms, 3) for ms in seen.inside_ms],
        "collections_anywhere": dict(seen.anywhere),
        "collection_median_ms": {generation: round(statistics.median(took), 3)
                                 for generation, took in seen.ms.items() if took},
    }


def _full_collection_ms() -> float:
    runs = []
    for _ in range(7):
        began = time.perf_counter()
        gc.collect()
        runs.append(time.perf_counter() - began)
    return round(statistics.median(runs) * 1e3, 2)


def _held(root: object) -> dict[str, Any]:
    """Tracked objects and references reachable from ``root`` (types, modules and functions
    not followed), by type, and the largest containers."""
    seen: set[int] = set()
    objects: Counter[str] = Counter()
    references: Counter[str] = Counter()
    largest: list[tuple[int, str]] = []
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or not gc.is_tracked(obj) or isinstance(
                obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        inner = gc.get_referents(obj)
        objects[type(obj).__name__] += 1
        references[type(obj).__name__] += len(inner)
        if len(inner) >= 1000:
            largest.append((len(inner), type(obj).__name__))
        stack.extend(inner)
    largest.sort(reverse=True)
    return {"tracked": sum(objects.values()), "references": sum(references.values()),
            "by_type": {name: [objects[name], n] for name, n in references.most_common(6)},
            "largest": [f"{name} of {n}" for n, name in largest[:6]],
            "containers_of_1000_or_more": len(largest)}


def memory(turns: int, calls: int) -> dict[str, Any]:
    """A full collection over the conversation alone, then with a recorder's memory."""
    suite._STATE.clear()
    gc.collect()
    step = _stepper(turns)
    for _ in range(calls):
        step()
    alone = {"tracked": len(gc.get_objects()), "full_collection_ms": _full_collection_ms()}
    recorder = Recorder(tokenizer="cl100k_base")  # keep_records: the default
    deferred = DeferredRecorder(recorder, decode=False)
    for _ in range(calls):
        content = step().content
        response = _response(content)
        pending = deferred.start("/v1/messages", _HEADERS, content, rendered=True)
        assert pending is not None
        observer = deferred.observe(pending, status_code=200, headers={
            "content-type": "application/json"}, content_encoding="")
        observer.feed(response)
        observer.close()
        recorder.flush()
    recorded = {"tracked": len(gc.get_objects()), "full_collection_ms": _full_collection_ms(),
                "memory": _held(recorder._memory)}
    recorder.close()
    return {"turn": turns, "calls": calls, "conversation_alone": alone,
            "with_recorder": recorded}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    out: dict[str, Any] = {"gc_threshold": gc.get_threshold(),
                           "memory": memory(args.turns, args.calls)}  # first: a clean heap
    for path in ("client", "transport", "client-journal"):
        out[path] = caller_path(path, args.turns, args.calls)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
