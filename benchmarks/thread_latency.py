"""Wall time of an agent-loop call with a 20 ms upstream: recording off, inline, in thread.

What ``suite.py``'s ``record-thread/*`` figures leave out: the recorder's thread competes with
the caller for the GIL. Here each mode runs its own conversation from turn ``--turns``
(default 1,000: a ~1.3 MB Anthropic body): per call, render the next turn (as an agent loop
does) and send it, over an ``httpx.MockTransport`` whose handler sleeps ``--upstream-ms``
(default 20; a sleep releases the GIL, as a socket wait does) and answers a Messages JSON
body. Modes:

- ``off``: the same bytes through a plain ``httpx.Client`` + ``orjson.loads`` of the answer
  (a client that records nothing);
- ``inline``: ``AnthropicClient`` (recording in the caller's thread, the default);
- ``thread``: ``AnthropicClient(record_in_thread=True)``.

The modes run in alternating blocks of ``--block`` calls (the recorder's thread flushed,
untimed, at the end of each block, so its work never lands on another mode), ``--calls`` per
mode in all. Printed per mode: median and p99 of the send's wall time, of render + send (the
loop's step: in thread mode the previous call's finishing overlaps this render), and of the
CPU time on the caller's thread during the send (``time.thread_time``); and for inline and
thread the difference to ``off`` of those medians and p99s. ``--json`` writes the raw values.

    PYTHONPATH=src python benchmarks/thread_latency.py [--turns 1000] [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).parent))
import suite

from stableprompt import AnthropicClient, Recorder

URL = "http://upstream.test/v1/messages"
KEY = "sk-ant-api03-latency-0123456789"


def _upstream(delay_s: float) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        time.sleep(delay_s)
        return httpx.Response(200, content=suite._response(request.content),
                              headers={"content-type": "application/json"})
    return httpx.MockTransport(answer)


def _sender(mode: str, delay_s: float) -> tuple[Callable[[Any], Any], Callable[[], None]]:
    """``(send(request), flush())`` of one mode."""
    if mode == "off":
        plain = httpx.Client(transport=_upstream(delay_s))

        def send_plain(request: Any) -> Any:
            response = plain.post(URL, content=request.content, headers={
                "x-api-key": KEY, "anthropic-version": "2023-06-01",
                "content-type": "application/json"})
            return orjson.loads(response.content)
        return send_plain, lambda: None
    client = AnthropicClient(KEY, base_url="http://upstream.test",
                             recorder=Recorder(tokenizer="cl100k_base", keep_records=100),
                             transport=_upstream(delay_s), max_retries=0,
                             record_in_thread=mode == "thread")

    def flush() -> None:
        client.flush()
    return client.send, flush


def _quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--upstream-ms", type=float, default=20.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    modes = ("off", "inline", "thread")
    senders = {mode: _sender(mode, args.upstream_ms / 1000.0) for mode in modes}
    steppers: dict[str, Callable[[], Any]] = {}
    for mode in modes:  # one conversation each (the stepper cache is per turns and format)
        suite._STATE.pop(f"anthropic/{args.turns}", None)
        steppers[mode] = suite._stepper(args.turns)
    got: dict[str, dict[str, list[float]]] = {
        m: {"send": [], "step": [], "cpu": []} for m in modes}
    for mode in modes:  # warm: tokenizer loaded, lineage seen
        send, flush = senders[mode]
        for _ in range(5):
            send(steppers[mode]())
        flush()
    for _ in range(max(1, args.calls // args.block)):
        for mode in modes:
            send, flush = senders[mode]
            for _ in range(args.block):
                begin = time.perf_counter()
                request = steppers[mode]()
                request.content  # noqa: B018 (rendered bytes, as the client sends them)
                sent = time.perf_counter()
                cpu = time.thread_time()
                send(request)
                got[mode]["cpu"].append(time.thread_time() - cpu)
                end = time.perf_counter()
                got[mode]["send"].append(end - sent)
                got[mode]["step"].append(end - begin)
            flush()
    print(f"turn {args.turns}, upstream {args.upstream_ms:g} ms, {args.calls} calls per mode "
          f"(ms: median / p99)")
    print(f"{'mode':8} {'send':>16} {'render+send':>16} {'caller CPU':>16}")
    for mode in modes:
        cells = [_quantiles(got[mode][k]) for k in ("send", "step", "cpu")]
        print(f"{mode:8} " + " ".join(f"{m * 1e3:7.3f} / {p * 1e3:6.3f}" for m, p in cells))
    base = {k: _quantiles(got["off"][k]) for k in ("send", "step", "cpu")}
    for mode in ("inline", "thread"):
        cells = [_quantiles(got[mode][k]) for k in ("send", "step", "cpu")]
        print(f"+{mode:7} " + " ".join(
            f"{(m - b[0]) * 1e3:7.3f} / {(p - b[1]) * 1e3:6.3f}"
            for (m, p), b in zip(cells, base.values(), strict=True)))
    if args.json is not None:
        args.json.write_text(json.dumps({"turns": args.turns, "upstream_ms": args.upstream_ms,
                                         "values_s": got}))


if __name__ == "__main__":
    main()
