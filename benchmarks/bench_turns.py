"""Per-turn cost of render + body bytes + request fingerprint at turns 10/100/1000.

For each wire format, a conversation (40 tools, 3 messages per turn) is grown to N turns;
then each timed step appends one turn (a user question, a tool call, its result), renders
with a fresh tail value, takes the body bytes and the request fingerprint. The baselines
rebuild the same body from its dict the naive way: ``json.dumps(body, sort_keys=True)`` +
SHA-256, and ``orjson.dumps(body, OPT_SORT_KEYS)`` + SHA-256, measured in the same run.
``1 copy`` is the time to copy the body once into a new buffer: a floor for any renderer
that returns fresh ``bytes``. Medians over the timed turns.

Run: ``PYTHONPATH=src python benchmarks/bench_turns.py [--steps 30]``. Plain Python for now
(a later step moves benchmarks onto pyperf / pytest-benchmark).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from stableprompt import Conversation, PromptBuilder, ProviderRequest, RenderedPrompt, Tool

FORMATS: dict[str, Callable[[RenderedPrompt], ProviderRequest]] = {
    "anthropic": lambda r: r.to_anthropic(model="claude-sonnet-4-5", max_tokens=1024),
    "openai-chat": lambda r: r.to_openai_chat(model="gpt-5.6", prompt_cache_key=True),
    "openai-responses": lambda r: r.to_openai_responses(model="gpt-5.6"),
}


def _conversation() -> Conversation:
    schema = {"type": "object", "properties": {"a": {"type": "string", "description": "x" * 200},
                                                "b": {"type": "integer"}}, "required": ["a"]}
    tools = [Tool(f"tool_{i}", f"Tool number {i} does things.", schema) for i in range(40)]
    head = (PromptBuilder(tokenizer=None).system("You are helpful. " * 50).tools(tools)
            .tail_slot("now").freeze())
    return head.conversation()


def _turn(conv: Conversation, i: int) -> None:
    conv.user(f"question {i} " + "lorem ipsum " * 20)
    conv.assistant(None, tool_calls=[{"id": f"c{i}", "name": "tool_1",
                                      "arguments": {"a": "q" * 100, "b": i}}])
    conv.tool_result(f"c{i}", "result " * 60)


def _median(step: Callable[[], object], steps: int) -> float:
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _naive(body: dict[str, Any], steps: int) -> tuple[float, float, float]:
    content = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return (
        _median(lambda: bytearray(content), steps),  # one copy of the body: the floor
        _median(lambda: hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest(),
                steps),
        _median(lambda: hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS))
                .hexdigest(), steps),
    )


def run(turns: tuple[int, ...], steps: int) -> None:
    print(f"{'format':17} {'turn':>5} {'ours ms':>9} {'json.dumps ms':>14} {'orjson ms':>10} "
          f"{'x json.dumps':>13} {'x orjson':>9} {'body MB':>8} {'1 copy ms':>10}")
    for name, request in FORMATS.items():
        conv = _conversation()
        done = 0
        for n in turns:
            while done < n - steps:
                _turn(conv, done)
                done += 1
            request(conv.render(tail={"now": "warm"})).fingerprint  # noqa: B018 (warm)
            times = []
            size = 0
            body: dict[str, Any] = {}
            for step in range(steps):
                _turn(conv, done)  # appending is not timed: it is the new content
                done += 1
                start = time.perf_counter()
                req = request(conv.render(tail={"now": str(done)}))
                req.content  # noqa: B018
                req.fingerprint  # noqa: B018
                times.append(time.perf_counter() - start)
                size = len(req.content)
                if step == steps - 1:
                    body = json.loads(req.content)
                # The request is dropped before the next turn, as a client that sent it does
                # (the baselines drop theirs too): a 1 MB body kept alive while the next one
                # is allocated costs fresh pages (~0.5 ms here), whoever builds it.
                del req
            ours = statistics.median(times)
            copy, dumps, fast = _naive(body, steps)
            print(f"{name:17} {n:5} {ours * 1e3:9.3f} {dumps * 1e3:14.3f} {fast * 1e3:10.3f} "
                  f"{dumps / ours:13.1f} {fast / ours:9.1f} {size / 1e6:8.2f} "
                  f"{copy * 1e3:10.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15,
                        help="timed turns per point (medians are reported)")
    parser.add_argument("--turns", type=int, nargs="*", default=[10, 100, 1000])
    args = parser.parse_args()
    run(tuple(args.turns), args.steps)


if __name__ == "__main__":
    main()
