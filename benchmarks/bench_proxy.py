"""Benchmark: time to first byte added by ``stableprompt proxy`` on loopback.

Three processes on one machine: the emulator (``stableprompt emulator serve``), the proxy
(``stableprompt proxy --upstream <emulator>``, recording into a fresh ledger) and this client.
The client sends streaming Anthropic Messages calls (``stream: true``; a ~1,400-token system
prompt with a cache breakpoint by default, ``--system-tokens`` for larger heads) alternately
straight to the emulator and through the proxy, on keep-alive connections, and measures, per
call, the time from sending to the first body byte (``iter_raw``). Alternating cancels drift;
the first ``--warmup`` pairs are dropped. Reported: median and p99 of both paths and of the
per-pair difference (proxied - direct, in ms), and the whole-call time.

``--no-record`` runs the proxy with no request analysed (``_processes.RECORDING_OFF``), to split
the added time into forwarding (uvicorn + starlette + httpx) and recording (segmenting and
tokenizing the request inline before it is sent, then attribution and the SQLite write at the
end of the stream).

Run: ``python benchmarks/bench_proxy.py [--calls 200] [--system-tokens 1400] [--no-record]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from _processes import CLI, RECORDING_OFF, started

KEY = "sk-ant-api03-benchkey-0123456789abcdef"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _call(client: httpx.Client, url: str, body: bytes) -> tuple[float, float]:
    start = time.perf_counter()
    with client.stream("POST", url, content=body, headers={
            "content-type": "application/json", "x-api-key": KEY,
            "anthropic-version": "2023-06-01"}) as response:
        chunks = response.iter_raw()
        next(chunks)
        first = time.perf_counter()
        for _ in chunks:
            pass
    return (first - start) * 1000.0, (time.perf_counter() - start) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="measured calls per path")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--system-tokens", type=int, default=1400)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    system = " ".join(f"rule {i}: keep the prefix stable." for i in range(args.system_tokens // 9))
    body = json.dumps({
        "model": "claude-sonnet-4-6", "max_tokens": 16, "stream": True,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi"}]}).encode()
    with tempfile.TemporaryDirectory() as tmp, \
            started(["emulator", "serve", "--port", "0", "--quiet"],
                     r"(http://127\.0\.0\.1:\d+)") as emulator:
        proxy_args = ["proxy", "--upstream", emulator, "--port", "0", "--quiet",
                      "--ledger", str(Path(tmp) / "bench.db")]
        launcher = RECORDING_OFF if args.no_record else CLI
        with started(proxy_args, r"stableprompt proxy on (http://127\.0\.0\.1:\d+)",
                     launcher) as proxy, httpx.Client(timeout=30) as client:
            direct: list[tuple[float, float]] = []
            proxied: list[tuple[float, float]] = []
            for i in range(args.warmup + args.calls):
                d = _call(client, f"{emulator}/v1/messages", body)
                p = _call(client, f"{proxy}/v1/messages", body)
                if i >= args.warmup:
                    direct.append(d)
                    proxied.append(p)
    added = [p[0] - d[0] for d, p in zip(direct, proxied, strict=True)]
    result: dict[str, Any] = {
        "calls_per_path": args.calls, "request_bytes": len(body),
        "recording": not args.no_record,
        "ttfb_direct_ms": {"median": statistics.median(d[0] for d in direct),
                           "p99": _pct([d[0] for d in direct], 0.99)},
        "ttfb_proxied_ms": {"median": statistics.median(p[0] for p in proxied),
                            "p99": _pct([p[0] for p in proxied], 0.99)},
        "ttfb_added_ms": {"median": statistics.median(added), "p99": _pct(added, 0.99)},
        "call_direct_ms_median": statistics.median(d[1] for d in direct),
        "call_proxied_ms_median": statistics.median(p[1] for p in proxied),
    }
    print(json.dumps(result, indent=2, default=lambda v: round(v, 3)))
    print(json.dumps({k: ({kk: round(vv, 3) for kk, vv in v.items()} if isinstance(v, dict)
                          else round(v, 3) if isinstance(v, float) else v)
                      for k, v in result.items()}))


if __name__ == "__main__":
    main()
