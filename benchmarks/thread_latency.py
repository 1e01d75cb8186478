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

``--stream-events N`` answers an Anthropic stream of ``N`` text deltas instead (off: the
plain client reads it with the same SSE parser and ``orjson.loads`` per event, as
``EventStream`` does); ``--ledger`` gives the recorders a ledger (a temporary directory): in
thread, calls are then journaled and the response observed as it arrives.

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
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).parent))
import suite

from stableprompt import AnthropicClient, Ledger, Recorder
from stableprompt._sse import SSEParser

URL = "http://upstream.test/v1/messages"
_CLOSE: list[Callable[[], None]] = []  # the clients, closed before their ledgers' directory
KEY = "sk-ant-api03-latency-0123456789"


def _stream(content: bytes, events: int) -> list[bytes]:
    """An Anthropic stream of ``events`` text deltas (usage plausible for ``content``), in
    chunks of about 1 KB."""
    usage = orjson.loads(suite._response(content))["usage"]
    parts = [("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [], "usage": {**usage, "output_tokens": 1}}})]
    parts += [("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
        "type": "text_delta", "text": "some words "}})] * events
    parts += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                 "usage": {"output_tokens": events}}),
              ("message_stop", {"type": "message_stop"})]
    raw = b"".join(b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
                   for name, data in parts)
    return [raw[i:i + 1024] for i in range(0, len(raw), 1024)]


def _upstream(delay_s: float, events: int) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        time.sleep(delay_s)
        if events:
            return httpx.Response(200, content=iter(_stream(request.content, events)),
                                  headers={"content-type": "text/event-stream"})
        return httpx.Response(200, content=suite._response(request.content),
                              headers={"content-type": "application/json"})
    return httpx.MockTransport(answer)


def _sender(mode: str, delay_s: float, events: int, ledger: Ledger | None
            ) -> tuple[Callable[[Any], Any], Callable[[], None]]:
    """``(send(request), flush())`` of one mode."""
    if mode == "off":
        plain = httpx.Client(transport=_upstream(delay_s, events))
        headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01",
                   "content-type": "application/json"}

        def send_plain(request: Any) -> Any:
            if not events:
                return orjson.loads(plain.post(URL, content=request.content,
                                               headers=headers).content)
            parser, seen = SSEParser(), []
            with plain.stream("POST", URL, content=request.content, headers=headers) as got:
                for chunk in got.iter_bytes():
                    seen.extend(orjson.loads(e.data) for e in parser.feed(chunk))
            return seen
        return send_plain, lambda: None
    client = AnthropicClient(KEY, base_url="http://upstream.test",
                             recorder=Recorder(ledger, tokenizer="cl100k_base",
                                               keep_records=100),
                             transport=_upstream(delay_s, events), max_retries=0,
                             record_in_thread=mode == "thread")
    _CLOSE.extend((client.close, client.recorder.close))
    if events:
        def send_stream(request: Any) -> Any:
            with client.send(request, stream=True) as got:
                return list(got)
        return send_stream, client.flush
    return client.send, client.flush


def _quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--upstream-ms", type=float, default=20.0)
    parser.add_argument("--stream-events", type=int, default=0)
    parser.add_argument("--ledger", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    modes = ("off", "inline", "thread")
    folder = tempfile.TemporaryDirectory()
    senders = {mode: _sender(mode, args.upstream_ms / 1000.0, args.stream_events, Ledger(
        Path(folder.name) / f"{mode}.db") if args.ledger and mode != "off" else None)
        for mode in modes}
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
    answer = (f"a stream of {args.stream_events} deltas" if args.stream_events
              else "a JSON body")
    print(f"turn {args.turns}, upstream {args.upstream_ms:g} ms then {answer}, "
          f"{'with' if args.ledger else 'without'} a ledger, {args.calls} calls per mode "
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
    for close in _CLOSE:
        close()
    folder.cleanup()
    if args.json is not None:
        args.json.write_text(json.dumps({"turns": args.turns, "upstream_ms": args.upstream_ms,
                                         "stream_events": args.stream_events,
                                         "ledger": args.ledger, "values_s": got}))


if __name__ == "__main__":
    main()
