"""The shared workload: a 40-tool head and turns of (user question, tool call, tool result).

Plain stdlib, so the peers' virtualenvs run the same file: ``write(path, turns)`` stores the
workload as JSON; ``read(path)`` loads it. Each turn is ~1 KB on the wire (Anthropic shape).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SYSTEM = "You are helpful. " * 50
SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "description": "x" * 200},
                                           "b": {"type": "integer"}}, "required": ["a"]}
TOOLS = [{"name": f"tool_{i}", "description": f"Tool number {i} does things.",
          "input_schema": SCHEMA} for i in range(40)]


def turn(i: int) -> dict[str, Any]:
    """Turn ``i``: the user's question, the assistant's tool call, the tool's result."""
    return {"user": f"question {i} " + "lorem ipsum " * 20,
            "call": {"id": f"c{i}", "name": "tool_1", "arguments": {"a": "q" * 100, "b": i}},
            "result": "result " * 60}


def write(path: Path, turns: int) -> None:
    path.write_text(json.dumps({"system": SYSTEM, "tools": TOOLS,
                                "turns": [turn(i) for i in range(turns)]}))


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data
