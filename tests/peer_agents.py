"""Tool-calling agents on the peers' own APIs, run inside a peer's virtualenv
(``tests/peer_envs.py``) by ``tests/test_proxy_peers.py``; stdlib plus the peer only.

Usage: ``<venv>/bin/python tests/peer_agents.py PEER WORKLOAD.json BASE_URL``. It prints one
JSON object on stdout: ``{"requests": N, "turns": [{"answer": str, "tool_calls": [id, ...]},
...]}``, where ``requests`` is the number of model calls the peer says it made (Pydantic AI's
``usage.requests``; the loop's own count for LangChain and LiteLLM) and ``tool_calls`` the
call ids the tools were run for, in order.

The workload file (written by the test) holds ``model``, ``system`` (the instructions),
``tools`` (name -> Anthropic ``{"name", "description", "input_schema"}``), ``orders`` (one
list of tool names per user turn: the order the agent passes its tools in on that turn),
``turns`` (``{"user": str, "results": {call id: result text}}``) and ``cache`` (whether the
agent switches on its documented prompt caching; off, it sends no breakpoint at all). Each
agent talks Anthropic Messages to ``BASE_URL`` (the proxy), caching as its docs show:

- ``pydantic_ai``: ``Agent(AnthropicModel(...), instructions=..., tools=[Tool.from_schema
  (...)], model_settings={"cache": True})`` (breakpoints on the last tool and the
  instructions, top-level automatic caching), one ``Agent`` per user turn (its tools in that
  turn's order, as after an MCP reconnect), ``run_sync(user, message_history=...)``;
- ``langchain``: ``ChatAnthropic(...).bind_tools(tools)`` per user turn, invoked in a loop
  (``ToolMessage`` per call) until the answer has no tool calls, ``cache_control`` on the
  system message and ``invoke(..., cache_control=...)`` (sent as top-level automatic caching);
- ``litellm``: ``litellm.completion(model="anthropic/...", api_base=..., tools=[OpenAI
  function tools])`` in the same loop, ``cache_control`` on the system block and
  ``cache_control_injection_points`` for the last message.

No network but loopback: non-loopback connections fail, as under the test suite's guard.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

API_KEY = "sk-ant-api03-peer-agents-0123456789abcdef"
MAX_TOKENS = 1024
EPHEMERAL = {"type": "ephemeral"}

Workload = dict[str, Any]
Result = dict[str, Any]


def guard_network(who: str = "peer agents") -> None:
    """Make every non-loopback TCP connection of this process fail (``who`` names it)."""
    real = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0]
            if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
                raise OSError(f"{who} reach no network but loopback (tried {address!r})")
        return real(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]


def _tools_in_order(work: Workload, turn: int) -> list[dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = work["tools"]
    return [tools[name] for name in work["orders"][turn]]


def pydantic_ai(work: Workload, base_url: str) -> Result:
    from pydantic_ai import Agent, RunContext, Tool  # type: ignore[import-not-found]
    from pydantic_ai.models.anthropic import AnthropicModel  # type: ignore[import-not-found]
    from pydantic_ai.providers.anthropic import (  # type: ignore[import-not-found]
        AnthropicProvider,
    )

    model = AnthropicModel(work["model"],
                           provider=AnthropicProvider(api_key=API_KEY, base_url=base_url))
    results: dict[str, str] = {cid: text for turn in work["turns"]
                               for cid, text in turn["results"].items()}
    ran: list[str] = []

    def run(ctx: RunContext[None], **arguments: Any) -> str:
        ran.append(ctx.tool_call_id)
        return results[ctx.tool_call_id]

    history: list[Any] = []
    requests, turns = 0, []
    for index, turn in enumerate(work["turns"]):
        first = len(ran)
        tools = [Tool.from_schema(run, t["name"], t["description"], t["input_schema"],
                                  takes_ctx=True) for t in _tools_in_order(work, index)]
        agent = Agent(model, instructions=work["system"], tools=tools,
                      model_settings={"cache": work["cache"], "max_tokens": MAX_TOKENS})
        result = agent.run_sync(turn["user"], message_history=history)
        history = result.all_messages()
        requests += result.usage.requests
        turns.append({"answer": result.output, "tool_calls": ran[first:]})
    return {"requests": requests, "turns": turns}


def _loop(work: Workload, call: Callable[[list[dict[str, Any]], Any], Any],
          bind: Callable[[list[dict[str, Any]]], Any], first: Any,
          calls_of: Callable[[Any], list[tuple[str, str]]],
          answer_of: Callable[[Any], str], reply: Callable[[Any, str, str], Any]) -> Result:
    """The hand-written agent loop of LangChain and LiteLLM: per user turn, the tools bound in
    that turn's order, then model calls until one asks for no tool."""
    messages: list[Any] = [first]
    requests, turns = 0, []
    for index, turn in enumerate(work["turns"]):
        tools = bind(_tools_in_order(work, index))
        messages.append(turn["user"])
        ran: list[str] = []
        while True:
            response = call(messages, tools)
            requests += 1
            messages.append(response)
            calls = calls_of(response)
            if not calls:
                break
            for call_id, _name in calls:
                ran.append(call_id)
                messages.append(reply(response, call_id, turn["results"][call_id]))
        turns.append({"answer": answer_of(messages[-1]), "tool_calls": ran})
    return {"requests": requests, "turns": turns}


def langchain(work: Workload, base_url: str) -> Result:
    from langchain_anthropic import ChatAnthropic  # type: ignore[import-not-found]
    from langchain_core.messages import (  # type: ignore[import-not-found]
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )

    llm = ChatAnthropic(model=work["model"], base_url=base_url, api_key=API_KEY,
                        max_tokens=MAX_TOKENS, max_retries=0)

    marker = {"cache_control": EPHEMERAL} if work["cache"] else {}

    def call(messages: list[Any], bound: Any) -> Any:
        sent = [HumanMessage(m) if isinstance(m, str) else m for m in messages]
        return bound.invoke(sent, **marker)

    system = SystemMessage([{"type": "text", "text": work["system"], **marker}])
    return _loop(work, call, llm.bind_tools, system,
                 lambda ai: [(c["id"], c["name"]) for c in ai.tool_calls],
                 lambda ai: str(ai.text), lambda _ai, cid, text: ToolMessage(text,
                                                                             tool_call_id=cid))


def litellm(work: Workload, base_url: str) -> Result:
    import litellm as lite  # type: ignore[import-not-found]

    marker = {"cache_control": EPHEMERAL} if work["cache"] else {}
    points = [{"location": "message", "index": -1}] if work["cache"] else []

    def call(messages: list[Any], tools: Any) -> Any:
        sent = [{"role": "user", "content": m} if isinstance(m, str) else m for m in messages]
        response = lite.completion(
            model=f"anthropic/{work['model']}", api_base=base_url, api_key=API_KEY,
            messages=sent, tools=tools, max_tokens=MAX_TOKENS, num_retries=0,
            **({"cache_control_injection_points": points} if points else {}))
        return response.choices[0].message.model_dump(exclude_none=True)

    def bind(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": t["name"],
                                                  "description": t["description"],
                                                  "parameters": t["input_schema"]}}
                for t in tools]

    system = {"role": "system",
              "content": [{"type": "text", "text": work["system"], **marker}]}
    return _loop(work, call, bind, system,
                 lambda m: [(c["id"], c["function"]["name"]) for c in m.get("tool_calls") or []],
                 lambda m: str(m.get("content") or ""),
                 lambda _m, cid, text: {"role": "tool", "tool_call_id": cid, "content": text})


AGENTS: dict[str, Callable[[Workload, str], Result]] = {
    "pydantic_ai": pydantic_ai, "langchain": langchain, "litellm": litellm}


def main(argv: list[str]) -> int:
    peer, path, base_url = argv
    guard_network()
    work: Workload = json.loads(Path(path).read_text())
    print(json.dumps(AGENTS[peer](work, base_url)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
