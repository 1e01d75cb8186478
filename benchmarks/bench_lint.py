"""Benchmark: ``stableprompt lint`` on 1,000 captured requests of ~100 KB each.

Target (issue 5): under 10 s on 2 cores. The capture is synthetic but shaped like agent traffic:
10 interleaved Anthropic sessions (no session ids, so predecessors are found by prefix
matching), each with a ~40 KB head (30 tools with JSON schemas + a system prompt with cache
breakpoints) and a history that starts at ~30 KB (a resumed conversation) and grows by one
tool call + result per turn. Three kinds of breaks are injected so that cause analysis runs:
a clock in the system prompt of one session, a tool reorder in another, a rewritten tool result
in a third. The timing covers reading the JSONL file, parsing, segmenting, predecessor search,
diffs and findings (not writing the capture).

Run: ``python benchmarks/bench_lint.py [--requests 1000] [--sessions 10] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from stableprompt._lint._linter import lint_capture


def _tools(n: int) -> list[dict[str, Any]]:
    tools = []
    for i in range(n):
        props = {
            f"field_{j}": {"type": "string", "description": f"Parameter {j} of tool {i}: " +
                           "describes what the value means and which forms it accepts. " * 3}
            for j in range(6)
        }
        tools.append({"name": f"tool_{i:02d}", "description": f"Tool number {i}. " * 20,
                      "input_schema": {"type": "object", "properties": props,
                                       "required": sorted(props)[:2]}})
    return tools


def _turn(session: int, turn: int, pad: int) -> list[dict[str, Any]]:
    call = f"toolu_{session:02d}_{turn:04d}"
    return [
        {"role": "assistant", "content": [
            {"type": "text", "text": f"Looking at step {turn}."},
            {"type": "tool_use", "id": call, "name": f"tool_{turn % 30:02d}",
             "input": {"field_0": f"value {turn}", "field_1": "x"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call,
             "content": f"result of call {turn} in session {session}: " + "ok " * pad}]},
    ]


def build_capture(path: Path, *, requests: int, sessions: int) -> int:
    """Write the synthetic capture; return its size in bytes."""
    tools = _tools(30)
    system_text = "You are a careful coding agent. Follow the repository conventions. " * 150
    turns = requests // sessions
    histories: list[list[dict[str, Any]]] = []
    for s in range(sessions):
        history: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "text", "text": f"Task {s}: fix the bug."}]}]
        for t in range(35):  # resumed conversation: ~30 KB of history already
            history.extend(_turn(s, -t - 1, 120))
        histories.append(history)
    size = 0
    with path.open("w") as out:
        for t in range(turns):
            for s in range(sessions):
                history = histories[s]
                history.extend(_turn(s, t, 20))
                system: list[dict[str, Any]] = [{"type": "text", "text": system_text},
                          {"type": "text", "text": f"Session {s} rules.",
                           "cache_control": {"type": "ephemeral"}}]
                session_tools = tools
                if s == 1:  # a clock in the system prompt: volatile-token every turn
                    clock = f"2026-11-30T{t // 60:02d}:{t % 60:02d}Z"
                    system[1]["text"] = f"Session 1 rules. Now: {clock}"
                if s == 2 and t % 25 == 24:  # an occasional tool reorder (a new one each time)
                    shift = t // 25 + 1
                    session_tools = tools[shift:] + tools[:shift]
                messages = copy.copy(history)
                if s == 3 and t % 20 == 19:  # a rewritten (trimmed) earlier tool result
                    at = 4 * (t // 20 + 1)
                    block = copy.deepcopy(messages[at])
                    block["content"][0]["content"] = block["content"][0]["content"].rstrip()
                    messages[at] = block
                last = copy.deepcopy(messages[-1])
                last["content"][-1]["cache_control"] = {"type": "ephemeral"}
                messages[-1] = last
                body = {"model": "claude-sonnet-4-5", "max_tokens": 1024,
                        "tools": session_tools, "system": system, "messages": messages}
                line = json.dumps(body, separators=(",", ":")) + "\n"
                size += len(line)
                out.write(line)
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.jsonl"
        size = build_capture(path, requests=args.requests, sessions=args.sessions)
        times = []
        report = None
        for _ in range(args.repeat):
            start = time.perf_counter()
            report = lint_capture(path)
            times.append(time.perf_counter() - start)
        assert report is not None
        s = report.summary
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"requests: {s.requests}  capture: {size / 1e6:.1f} MB "
              f"(mean {size / s.requests / 1e3:.0f} KB/request)  sessions found: {s.sessions}")
        print(f"breaks: {s.breaks} {dict(s.causes)}  prefix ratio mean "
              f"{s.prefix_ratio_mean:.4f}  ceiling {s.ceiling:.4f}")
        print(f"findings: {[f.code for f in report.findings]}")
        print(f"lint time: median {statistics.median(times):.2f} s, min {min(times):.2f} s "
              f"over {args.repeat} runs ({os.cpu_count()} cores); peak RSS {rss_mb:.0f} MB")


if __name__ == "__main__":
    main()
