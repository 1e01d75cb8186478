"""Benchmark: what the proxy's pending journal costs per call (``_ledger/_journal.py``).

With worker-thread recording (the ``stableprompt proxy`` default), each call pays, on the
event loop, for :meth:`Recorder.provisional` (its provisional row), the journal line
(``PendingJournal.append``: prepare, serialize, one ``write(2)``) and, on the worker, the
settle (a ``ftruncate(2)`` when the queue empties). Measured here in-process on a streamed
Anthropic call with a ~1,400-token cached system prompt (the proxy benchmarks' workload),
against a real SQLite ledger, next to what recording the same call costs anyway
(:meth:`Recorder.start` on the loop; :meth:`Recorder.finish` on the worker: usage,
attribution, the ledger commit).

Run: ``python benchmarks/bench_journal.py [--calls 3000]``. Prints per-call medians (us) and
the bytes written per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from stableprompt import Ledger, Recorder
from stableprompt._recording._observer import Observation
from stableprompt._recording._unanalysed import provisional_record
from stableprompt._usage import CacheUsage

SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(200))


def _body(i: int) -> bytes:
    return json.dumps({
        "model": "claude-sonnet-4-6", "max_tokens": 64, "stream": True,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": f"question number {i}"}]}).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    headers = {"x-api-key": "sk-ant-api03-benchkey-0123456789abcdef",
               "x-stableprompt-session": "bench"}
    with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "calls.db") as ledger:
        recorder = Recorder(ledger)
        journal = ledger.pending_journal()
        provisional_us: list[float] = []
        append_us: list[float] = []
        settle_us: list[float] = []
        finish_us: list[float] = []
        start_us: list[float] = []
        sizes: list[int] = []
        for i in range(args.calls):
            body = _body(i)
            ts = time.perf_counter()
            pending = recorder.start("/v1/messages", headers, body, host="api.anthropic.com")
            start_us.append((time.perf_counter() - ts) * 1e6)
            assert pending is not None
            usage = CacheUsage(wire_format="anthropic", input_tokens_total=1500,
                               uncached_tokens=12, cache_read_tokens=1488,
                               cache_write_tokens=0, output_tokens=40,
                               raw={"input_tokens": 12, "cache_read_input_tokens": 1488,
                                    "cache_creation_input_tokens": 0, "output_tokens": 40})
            observation = Observation(status_code=200, usage=usage,
                                      response_id=f"msg_{i:06d}", ttft_ms=12.5)
            t0 = time.perf_counter()
            record = provisional_record(pending, observation, scenario=recorder.scenario,
                                        now=recorder.monotonic())
            t1 = time.perf_counter()
            assert record is not None
            ticket = journal.append(record)
            t2 = time.perf_counter()
            assert ticket is not None
            recorder.finish(pending, Observation(status_code=200, usage=usage,
                                                 response_id=f"msg_{i:06d}", ttft_ms=12.5))
            t3 = time.perf_counter()
            journal.settle(ticket)
            t4 = time.perf_counter()
            sizes.append(len(record.model_dump_json()) + 1)
            provisional_us.append((t1 - t0) * 1e6)
            append_us.append((t2 - t1) * 1e6)
            finish_us.append((t3 - t2) * 1e6)
            settle_us.append((t4 - t3) * 1e6)
        journal.close()
    skip = min(100, args.calls // 10)  # warm-up: tokenizer caches, first file creation

    def median(values: list[float]) -> float:
        return statistics.median(values[skip:])

    print(f"calls: {args.calls} (first {skip} dropped)")
    print(f"journal line: {statistics.median(sizes):.0f} bytes median "
          f"({min(sizes)}-{max(sizes)})")
    print(f"provisional record (loop): {median(provisional_us):.1f} us median")
    print(f"journal append (loop):     {median(append_us):.1f} us median")
    print(f"journal settle (worker):   {median(settle_us):.1f} us median")
    print(f"for scale, Recorder.start of the call (loop): {median(start_us):.1f} us median; "
          f"its finish (worker, attribution + commit): {median(finish_us):.1f} us median")


if __name__ == "__main__":
    main()
