"""A loopback provider emulator with exact-prefix caching. It is an emulator, not a provider.

:class:`Emulator` serves ``POST /v1/messages`` (Anthropic Messages),
``POST /v1/chat/completions`` and ``POST /v1/responses`` (OpenAI) on 127.0.0.1, JSON or SSE,
so the official SDKs can talk to it unchanged. It runs no model: assistant turns come from a
*responder* (scripted turns, or an echo of the last user text), token counts come from
tiktoken cl100k for every model, and ids are counter-based, so runs are deterministic.

What it emulates faithfully is the providers' *documented* prefix-cache accounting: the
request is rendered to blocks in the provider's order from the JSON as received (key order
included), hashed as a chain, and cache reads/writes follow Anthropic's breakpoint rules
(20-block lookback, 4 breakpoints, per-model minimums, 5 m / 1 h TTLs refreshed on read,
entries visible once the writing response has started) or OpenAI's automatic prefix caching
(minimums, 128-token reporting before GPT-5.6, an entry every 2,048 tokens on GPT-5.5,
``cache_write_tokens`` from GPT-5.6). The rules and their sources are in the docstrings of
``_anthropic`` and ``_openai``. Asked for reasoning (Anthropic ``thinking``, a Responses
``reasoning`` effort), answers carry a signed thinking block or a reasoning item, checked
when sent back as the providers document (``_reasoning``). Every response carries the header
``x-stableprompt-emulator: 1``; numbers measured against it describe the documented rules,
not a provider's real cache (which is best-effort and may miss more).

It accepts every top-level field of today's SDKs (and Codex's ``client_metadata``), keeping
those outside the cache key out of it; Anthropic mid-conversation ``role: "system"``
messages and tool changes are checked and cached as documented (``_system_messages``); asked
for cache diagnostics (Anthropic ``diagnostics.previous_message_id``, OpenAI Responses
``prompt_cache_options.comparison_response_id``), it compares its own block chains and
answers the documented reason types (``_diagnostics``).

Limits, and where the emulator is approximate:

* request bodies up to 32 MiB, Anthropic's documented request size (a 413 above, in the
  provider's shape), for every endpoint; bodies must be sent as ``application/json``;
* output-token limits (``max_tokens``, ``max_completion_tokens``, ``max_output_tokens``) must
  be integers up to 128,000 for every model, an emulator limit (``_checks.MAX_OUTPUT_TOKENS``);
* runs of more than 4,096 characters without whitespace (or of whitespace) are tokenized in
  4,096-character pieces, keeping tokenization linear; token counts of such runs are
  approximate (``_tokens``).

Example::

    with Emulator(clock=FakeClock()) as emu:
        client = anthropic.Anthropic(base_url=emu.base_url, api_key="emulator")
        openai_client = openai.OpenAI(base_url=emu.openai_base_url, api_key="emulator")
        ...
        emu.advance(301)  # the 5-minute entries expire
        print(emu.stats())

Command line: ``stableprompt emulator serve --port 8787``.
"""

from ._clock import FakeClock
from ._responders import (
    AssistantTurn,
    Responder,
    ScriptedResponder,
    ToolCall,
    echo_responder,
    last_user_text,
    load_script,
)
from ._server import Emulator, EmulatorStats, RequestRecord
from ._store import StoreStats

__all__ = [
    "AssistantTurn",
    "Emulator",
    "EmulatorStats",
    "FakeClock",
    "RequestRecord",
    "Responder",
    "ScriptedResponder",
    "StoreStats",
    "ToolCall",
    "echo_responder",
    "last_user_text",
    "load_script",
]
