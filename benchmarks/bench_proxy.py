"""Benchmark: time to first byte added by ``stableprompt proxy`` on loopback.

Three processes on one machine: the emulator (``stableprompt emulator serve``), the proxy
(``stableprompt proxy --upstream <emulator>``, recording into a fresh ledger) and this client.
The client sends streaming Anthropic Messages calls (``stream: true``; a ~1,400-token system
prompt with a cache breakpoint by default, ``--system-tokens`` for larger heads) alternately
straight to the emulator and through the proxy, on keep-alive connections, and measures, per
call, the time from sending to the first body byte (``iter_raw``). Alternating cancels drift;
the first ``--warmup`` pairs are dropped. Reported: median and p99 of both paths and of the
per-pair difference (proxied - direct, in ms), and the whole-call time.

``--no-record`` runs the proxy with recording off (every path passes unrecorded), to split
the added time into forwarding (uvicorn + starlette + httpx) and recording (segmenting and
tokenizing the request inline before it is sent, then attribution and the SQLite write at the
end of the stream).

Run: ``python benchmarks/bench_proxy.py [--calls 200] [--system-tokens 1400] [--no-record]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

KEY = "sk-ant-api03-benchkey-0123456789abcdef"


@contextmanager
def _process(args: list[str], pattern: str) -> Iterator[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "stableprompt", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(pattern, line)
        if match is None:
            raise RuntimeError(f"no URL in {line!r}")
        yield match.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


_RECORDING_OFF = """
import sys
from stableprompt._recording._recorder import Recorder
Recorder.recordable = staticmethod(lambda path, method="POST": False)
from stableprompt._cli import main
sys.exit(main(sys.argv[1:]))
"""


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
            _process(["emulator", "serve", "--port", "0", "--quiet"],
                     r"(http://127\.0\.0\.1:\d+)") as emulator:
        proxy_args = ["proxy", "--upstream", emulator, "--port", "0", "--quiet",
                      "--ledger", str(Path(tmp) / "bench.db")]
        launcher = ["-c", _RECORDING_OFF] if args.no_record else []
        with _proxy(launcher, proxy_args) as proxy, httpx.Client(timeout=30) as client:
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


@contextmanager
def _proxy(launcher: list[str], proxy_args: list[str]) -> Iterator[str]:
    if not launcher:
        with _process(proxy_args, r"stableprompt proxy on (http://127\.0\.0\.1:\d+)") as url:
            yield url
        return
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, *launcher, *proxy_args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stdout is not None
        match = re.search(r"stableprompt proxy on (http://127\.0\.0\.1:\d+)",
                          proc.stdout.readline())
        if match is None:
            raise RuntimeError("the proxy did not start")
        yield match.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
