"""pyperf: ``lint_capture`` throughput as a ratio to an orjson-parse-only pass over the same
capture file, in the same run (issue 10 item 4; see ``benchmarks/README.md``).

The capture (written by ``run.py``, or by ``--write``) is synthetic but shaped like agent
traffic: 10 interleaved Anthropic sessions without session ids (so predecessors are found by
prefix matching), each with a ~40 KB head (30 tools with JSON schemas + a system prompt with
cache breakpoints) and a history that starts at ~30 KB (a resumed conversation) and grows by
one tool call + result per turn; the end-of-history breakpoint moves every turn. Three kinds
of breaks are injected so that cause analysis runs: a clock in the system prompt of one
session (its head changes every turn), a tool reorder in another, a rewritten tool result in
a third. Each value is one whole pass over the file (``--loops 1``):

- ``lint-parse``: read the JSONL file and ``orjson.loads`` every line (the baseline), read
  through the same 1 MiB buffer ``lint_capture`` reads with (with Python's default 8 KiB
  buffer, gathering each ~110 KB line costs the baseline ~0.1 s more: measured, not given);
- ``lint``: ``lint_capture(path)``: reading, parsing, segmenting (reused across the requests
  of a conversation), predecessor search, diffs and findings;
- ``lint-noreuse``: ``lint_capture(path, reuse=False)``: every request segmented whole (the
  path before issue 10 item 4, for the before/after ratio).

``build_capture(..., clock=True)`` writes the same traffic with a clock at the start of every
session's system prompt (every request's head changes): ``lint_clock.py`` times that one.

Run through ``benchmarks/run.py``; alone: ``python benchmarks/lint.py --write C.jsonl`` then
``python benchmarks/lint.py --capture C.jsonl -o out.json``.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from stableprompt._lint._capture import READ_BUFFER_BYTES
from stableprompt._lint._linter import lint_capture

REQUESTS, SESSIONS = 1000, 10


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


KEY_ORDERS = {
    # the history last (this benchmark's capture since issue 10)
    "history-last": ("model", "max_tokens", "tools", "system", "messages"),
    # Claude Code's (tests/fixtures/harness/claude-code-2.1.332.jsonl.gz and
    # claude_code_turn.json: model, messages, system, tools, metadata, max_tokens, thinking,
    # ...): the history second, the system prompt and the tools after it
    "claude-code": ("model", "messages", "system", "tools", "max_tokens"),
}


def build_capture(path: Path, *, requests: int, sessions: int, clock: bool = False,
                  order: str = "history-last") -> int:
    """Write the synthetic capture; return its size in bytes. ``clock``: every session's
    system prompt starts with the time of the request (``Current time: ...``, as the demo's
    ``clock-in-system``), so every request's head differs from its predecessor's at the
    start of the ~10 KB system text (the capture of issue 30's lint measurement). ``order``:
    the top-level members' order, a key of ``KEY_ORDERS`` (the same bodies either way)."""
    keys = KEY_ORDERS[order]
    tools = _tools(30)
    system_text = ("You are a careful coding agent. Follow the repository conventions. " * 75
                   + "Read the API key from the environment, never print keys or tokens; "
                   "docs at https://docs.example.com/agents. " * 4
                   + "You are a careful coding agent. Follow the repository conventions. " * 75)
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
                if clock:  # the head changes every request, at its first text
                    stamp = f"2026-11-30T{t // 60:02d}:{t % 60:02d}:{s:02d}Z"
                    system[0]["text"] = f"Current time: {stamp}\n\n{system_text}"
                if s == 1:  # a clock in the system prompt: volatile-token every turn
                    now = f"2026-11-30T{t // 60:02d}:{t % 60:02d}Z"
                    system[1]["text"] = f"Session 1 rules. Now: {now}"
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
                fields = {"model": "claude-sonnet-4-5", "max_tokens": 1024,
                          "tools": session_tools, "system": system, "messages": messages}
                body = {key: fields[key] for key in keys}
                line = json.dumps(body, separators=(",", ":")) + "\n"
                size += len(line)
                out.write(line)
    return size


def _parse(path: Path) -> int:
    count = 0
    with path.open("rb", buffering=READ_BUFFER_BYTES) as handle:
        for line in handle:
            if line.strip():
                orjson.loads(line)
                count += 1
    return count


def _timed(loops: int, op: Any) -> float:
    total = 0.0
    for _ in range(loops):
        start = time.perf_counter()
        op()
        total += time.perf_counter() - start
    return total


def bench_parse(loops: int, path: Path) -> float:
    return _timed(loops, lambda: _parse(path))


def bench_lint(loops: int, path: Path, reuse: bool) -> float:
    return _timed(loops, lambda: lint_capture(path, reuse=reuse))


def main() -> None:
    import pyperf  # here: lint_clock.py imports this module without pyperf

    if sys.argv[1:2] == ["--write"]:  # write the capture and say what it holds
        path = Path(sys.argv[2])
        size = build_capture(path, requests=REQUESTS, sessions=SESSIONS)
        s = lint_capture(path).summary
        print(json.dumps({"requests": s.requests, "size_bytes": size, "sessions": s.sessions,
                          "breaks": s.breaks, "causes": s.causes}))
        return
    def forward(cmd: list[str], args: Any) -> None:  # to pyperf's worker processes
        cmd.extend(["--capture", str(args.capture)])

    runner = pyperf.Runner(add_cmdline_args=forward)
    runner.argparser.add_argument("--capture", required=True, type=Path)
    args = runner.parse_args()
    runner.metadata["capture_bytes"] = str(args.capture.stat().st_size)
    runner.bench_time_func("lint-parse", bench_parse, args.capture)
    runner.bench_time_func("lint", bench_lint, args.capture, True)
    runner.bench_time_func("lint-noreuse", bench_lint, args.capture, False)


if __name__ == "__main__":
    main()
