"""An OpenAI Agents SDK session, run inside its virtualenv (``peer_envs.HARNESSES``) by
``tests/test_harness_pypi.py``; stdlib plus the SDK only.

Usage: ``OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 <venv>/bin/python tests/openai_agents_run.py
API``, ``API`` being ``responses`` or ``chat_completions`` (``set_default_openai_api``). The
SDK's own client (``AsyncOpenAI()``, its base URL from ``OPENAI_BASE_URL``) is its default
(``set_default_openai_client``),
tracing is off (``set_tracing_disabled``: its exporter would post to the platform).

The agents: ``assistant`` with three function tools (``write_note``, ``read_note``, ``add``),
a sub-agent ``summarizer`` as a tool (``Agent.as_tool``: a run of its own on generated input)
and a handoff to ``checker`` (which receives the conversation and has ``read_note``). Three
user turns, each ``Runner.run(agent, history + [user message])`` with the history of the
previous turn (``result.to_input_list()``) and the agent the last turn ended with. The model's
answers come from the test's scripted responder.

It prints one JSON object: ``{"finals": [str, ...], "agents": [last agent name per turn],
"notes": {name: text}}``.

No network but loopback: non-loopback connections fail.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from peer_agents import guard_network  # beside this file: on sys.path when run

MODEL = "gpt-5.6"
API_KEY = "sk-emulator-openai-agents-0123456789"
#: The house rules every agent's instructions start with (as real deployments share a style
#: guide): long enough (~1,500 tokens) that every call is above the prefix cache's minimum.
HOUSE_RULES = "\n".join(
    f"Rule {i}: when a request touches note {i % 7} or figure {i * 13 % 97}, answer plainly, "
    f"cite the note by name, keep arithmetic exact, and never invent a note that was not "
    f"written; if unsure, read the note first." for i in range(1, 61))
TURNS = ("[task:one] write note a as alpha, read it back and add 2 and 3",
         "[task:two] summarize the notes",
         "[task:three] read note a and hand over to the checker")


async def session(api: str) -> dict[str, Any]:
    from agents import (  # type: ignore[import-not-found]
        Agent,
        Runner,
        function_tool,
        set_default_openai_api,
        set_default_openai_client,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    set_default_openai_client(AsyncOpenAI(api_key=API_KEY, max_retries=0), use_for_tracing=False)
    set_default_openai_api(api)
    notes: dict[str, str] = {}

    @function_tool  # type: ignore[untyped-decorator]
    def write_note(name: str, text: str) -> str:
        """Write a note.

        Args:
            name: The note's name.
            text: What the note says.
        """
        notes[name] = text
        return f"note {name} written"

    @function_tool  # type: ignore[untyped-decorator]
    def read_note(name: str) -> str:
        """Read a note.

        Args:
            name: The note's name.
        """
        return notes.get(name, f"no note {name}")

    @function_tool  # type: ignore[untyped-decorator]
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first.
            b: The second.
        """
        return a + b

    summarizer = Agent(name="summarizer", model=MODEL, tools=[read_note],
                       instructions=f"{HOUSE_RULES}\n\nYou summarize notes in one line. "
                                    "[agent:summarizer]")
    checker = Agent(name="checker", model=MODEL, tools=[read_note],
                    handoff_description="Checks the notes.",
                    instructions=f"{HOUSE_RULES}\n\nYou check notes and say whether they are "
                                 "sound. [agent:checker]")
    assistant = Agent(name="assistant", model=MODEL, handoffs=[checker],
                      instructions=f"{HOUSE_RULES}\n\nYou keep notes and do arithmetic. "
                                   "[agent:assistant]",
                      tools=[write_note, read_note, add,
                             summarizer.as_tool("summarize_notes", "Summarize the notes.")])
    history: list[Any] = []
    agent: Any = assistant
    finals, agents = [], []
    for text in TURNS:
        result = await Runner.run(agent, [*history, {"role": "user", "content": text}],
                                  max_turns=8)
        history = result.to_input_list()
        agent = result.last_agent
        finals.append(str(result.final_output))
        agents.append(agent.name)
    return {"finals": finals, "agents": agents, "notes": notes}


def main(argv: list[str]) -> int:
    (api,) = argv
    guard_network("the agents")
    print(json.dumps(asyncio.run(session(api))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
