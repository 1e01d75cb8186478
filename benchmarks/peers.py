"""pyperf benchmark of a peer library's Anthropic request building, run in the peer's own
virtualenv (``benchmarks/run.py`` creates them) on the workload file of ``workload.py``.

Each value is one request built from the conversation at turn N (the peer's native message
objects, made beforehand and not timed), the way the peer does it every turn, plus
``json.dumps`` of the result (the bytes a client then sends; the peers' SDKs serialize with
the json module):

- ``pydantic_ai``: ``AnthropicModel._map_message`` (messages and system; pydantic-ai
  2.68 ``models/anthropic/__init__.py``) on ``ModelRequest`` / ``ModelResponse`` history;
- ``litellm``: ``AnthropicConfig.transform_request`` (``llms/anthropic/chat/transformation.py``)
  on OpenAI-format messages with the tools as ``optional_params``;
- ``langchain``: ``langchain_anthropic.chat_models._format_messages`` on ``BaseMessage``s.

Usage: ``<venv>/bin/python benchmarks/peers.py --peer litellm --workload W.json -o out.json``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyperf

sys.path.insert(0, str(Path(__file__).parent))
import workload

TURNS = (10, 100, 1000)


def _pydantic_ai(data: dict[str, Any], n: int) -> Callable[[], object]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    model = AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(api_key="x"))
    messages: list[Any] = []
    pending: list[Any] = [SystemPromptPart(data["system"])]
    for t in data["turns"][:n]:
        messages.append(ModelRequest(parts=[*pending, UserPromptPart(t["user"])]))
        messages.append(ModelResponse(parts=[ToolCallPart(t["call"]["name"], t["call"]["arguments"],
                                                          tool_call_id=t["call"]["id"])]))
        pending = [ToolReturnPart(t["call"]["name"], t["result"], tool_call_id=t["call"]["id"])]
    messages.append(ModelRequest(parts=pending))
    params = ModelRequestParameters()
    loop = asyncio.new_event_loop()

    def build() -> object:
        system, mapped = loop.run_until_complete(model._map_message(messages, params, {}))
        return json.dumps({"system": system, "messages": mapped}, default=str)
    return build


def _litellm(data: dict[str, Any], n: int) -> Callable[[], object]:
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig

    config = AnthropicConfig()
    messages: list[dict[str, Any]] = [{"role": "system", "content": data["system"]}]
    for t in data["turns"][:n]:
        call = t["call"]
        messages.append({"role": "user", "content": t["user"]})
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": call["id"], "type": "function", "function": {
                "name": call["name"], "arguments": json.dumps(call["arguments"])}}]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": t["result"]})
    tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                               "parameters": t["input_schema"]}}
             for t in data["tools"]]

    def build() -> object:
        body = config.transform_request(
            model="claude-sonnet-4-5", messages=copy.copy(messages),
            optional_params={"max_tokens": 1024, "tools": tools}, litellm_params={},
            headers={})
        return json.dumps(body, default=str)
    return build


def _langchain(data: dict[str, Any], n: int) -> Callable[[], object]:
    from langchain_anthropic.chat_models import _format_messages
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    messages: list[Any] = [SystemMessage(data["system"])]
    for t in data["turns"][:n]:
        call = t["call"]
        messages.append(HumanMessage(t["user"]))
        messages.append(AIMessage("", tool_calls=[{"name": call["name"], "args": call["arguments"],
                                                   "id": call["id"]}]))
        messages.append(ToolMessage(t["result"], tool_call_id=call["id"]))

    def build() -> object:
        system, formatted = _format_messages(messages, model="claude-sonnet-4-5")
        return json.dumps({"system": system, "messages": formatted}, default=str)
    return build


PEERS = {"pydantic_ai": _pydantic_ai, "litellm": _litellm, "langchain": _langchain}
_BUILT: dict[int, Callable[[], object]] = {}


def bench(loops: int, peer: str, path: str, n: int) -> float:
    if n not in _BUILT:
        _BUILT[n] = PEERS[peer](workload.read(Path(path)), n)
    build = _BUILT[n]
    start = time.perf_counter()
    for _ in range(loops):
        build()
    return time.perf_counter() - start


def main() -> None:
    def forward(cmd: list[str], args: Any) -> None:  # workers get the same peer and file
        cmd.extend(["--peer", args.peer, "--workload", args.workload])

    runner = pyperf.Runner(add_cmdline_args=forward)
    runner.argparser.add_argument("--peer", choices=sorted(PEERS), required=True)
    runner.argparser.add_argument("--workload", required=True)
    args = runner.parse_args()
    for n in TURNS:
        runner.bench_time_func(f"peer-{args.peer}/{n}", bench, args.peer, args.workload, n)


if __name__ == "__main__":
    main()
