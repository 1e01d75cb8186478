"""Benchmark: 50 concurrent streaming clients through ``stableprompt proxy`` for 30 s.

Three processes: the emulator (``stableprompt emulator serve``, its echo responder answers
with the last user text), the proxy (recording into a fresh ledger) and this client, which runs
``--clients`` asyncio tasks, each sending streaming Anthropic Messages calls back to back for
``--seconds``, first straight to the emulator, then through the proxy. Every call asks a unique
question (``client 7 call 12``), so a lost or mixed-up response is caught: the streamed text
must be exactly that question. Reported per phase: calls, failures, mix-ups, time to first
body byte (median, p99, ms; each client's first call, which also opens its connection, is left
out) and, for the proxy, the ledger rows written (one per call).

``--think-ms T`` makes each client wait ``T`` ms after each answer before its next call (its
tool run; the emulator answers at once, where a model takes seconds), so the offered load is at
most ``clients * 1000 / T`` calls per second: the added time to first byte of a proxy that is not
saturated. Without it every client calls back to back: the three processes share the machine's
cores and the figure is the proxy's saturated throughput.

``--workers N`` runs the proxy with N worker processes (``proxy --workers N``, one shared
ledger; every row is still counted).

``--no-record`` runs the proxy with recording off, to split the cost into forwarding and
recording; ``--record-inline`` finishes recording on the event loop (``proxy
--record-inline``) instead of the proxy's worker thread.

Run: ``python benchmarks/bench_proxy_load.py [--clients 50] [--seconds 30] [--no-record]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from _processes import CLI, RECORDING_OFF, started

KEY = "sk-ant-api03-loadbench-0123456789abcdef"
SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))


def _text(sse: bytes) -> str:
    out = []
    for line in sse.decode().splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            if event.get("type") == "content_block_delta":
                out.append(event["delta"].get("text", ""))
    return "".join(out)


async def _client(index: int, url: str, deadline: float, stats: dict[str, Any],
                  think_s: float) -> None:
    async with httpx.AsyncClient(timeout=60) as client:
        call = 0
        if think_s:  # paced clients start spread over one think time, not in one burst
            await asyncio.sleep(think_s * index / stats["clients"])
        while time.monotonic() < deadline:
            question = f"client {index} call {call}"
            body = {"model": "claude-sonnet-4-6", "max_tokens": 32, "stream": True,
                    "system": [{"type": "text", "text": SYSTEM,
                                "cache_control": {"type": "ephemeral"}}],
                    "messages": [{"role": "user", "content": question}]}
            start = time.perf_counter()
            try:
                async with client.stream("POST", f"{url}/v1/messages", json=body, headers={
                        "x-api-key": KEY, "anthropic-version": "2023-06-01"}) as response:
                    chunks = response.aiter_raw()
                    first = await chunks.__anext__()
                    if call:  # a client's first call also opens its connection: not counted
                        stats["ttfb"].append((time.perf_counter() - start) * 1000.0)
                    data = first + b"".join([chunk async for chunk in chunks])
                if response.status_code != 200:
                    stats["failed"] += 1
                elif _text(data) != question:
                    stats["mixed"] += 1
                stats["calls"] += 1
            except Exception:
                stats["failed"] += 1
            call += 1
            if think_s:
                await asyncio.sleep(think_s)


async def _phase(url: str, clients: int, seconds: float, think_s: float) -> dict[str, Any]:
    stats: dict[str, Any] = {"calls": 0, "failed": 0, "mixed": 0, "ttfb": [],
                             "clients": clients}
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(_client(i, url, deadline, stats, think_s) for i in range(clients)))
    stats["calls_per_s"] = round(stats["calls"] / seconds, 1)
    ttfb = sorted(stats.pop("ttfb"))
    stats["ttfb_ms"] = {"median": round(statistics.median(ttfb), 2),
                        "p99": round(ttfb[min(len(ttfb) - 1, round(0.99 * (len(ttfb) - 1)))],
                                     2)} if ttfb else None
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--think-ms", type=float, default=0.0,
                        help="each client waits this long after each answer (default: none)")
    parser.add_argument("--no-record", action="store_true",
                        help="proxy analysing no request (each call gets its unanalysed row only)")
    parser.add_argument("--skip-direct", action="store_true")
    parser.add_argument("--workers", type=int, default=1,
                        help="proxy --workers N (default 1: one process)")
    parser.add_argument("--record-inline", action="store_true",
                        help="proxy --record-inline (finish recording on the event loop)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            started(["emulator", "serve", "--port", "0", "--quiet"],
                     r"(http://127\.0\.0\.1:\d+)") as emulator:
        ledger = Path(tmp) / "load.db"
        direct = None if args.skip_direct else asyncio.run(
            _phase(emulator, args.clients, args.seconds, args.think_ms / 1000.0))
        with started(["proxy", "--upstream", emulator, "--port", "0", "--quiet",
                       "--ledger", str(ledger),
                       "--workers", str(args.workers),
                       *(["--record-inline"] if args.record_inline else [])],
                      r"stableprompt proxy on (http://127\.0\.0\.1:\d+)",
                      RECORDING_OFF if args.no_record else CLI
                      ) as proxy:
            proxied = asyncio.run(_phase(proxy, args.clients, args.seconds,
                                         args.think_ms / 1000.0))
        conn = sqlite3.connect(ledger)
        try:
            proxied["ledger_rows"] = conn.execute("SELECT count(*) FROM calls").fetchone()[0]
        finally:
            conn.close()
    load = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({"load_avg_1_5_15_at_end": load, "clients": args.clients,
                      "seconds": args.seconds, "think_ms": args.think_ms,
                      "workers": args.workers, "recording": not args.no_record,
                      "record_inline": args.record_inline,
                      "direct": direct, "proxied": proxied}))


if __name__ == "__main__":
    main()
