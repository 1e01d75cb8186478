"""stableprompt's provider clients (L4): they send the exact rendered bytes and record every
call.

- ``_clients``: ``AnthropicClient``, ``OpenAIClient``, ``OpenAICompatibleClient`` and their
  async variants: preparing a request, retries, the recording transport underneath.
- ``_events``: ``EventStream`` / ``AsyncEventStream``, a streamed response's events.
- ``_keepalive``: ``KeepAliveScheduler`` / ``AsyncKeepAliveScheduler``: opt-in keep-alive pings
  of idle conversations, recorded as such.
- ``_keepalive_ping``: the smallest request that reads a request's cached prefix.
"""

from ._clients import (
    ANTHROPIC_VERSION,
    DIAGNOSTICS_BETA,
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    AsyncOpenAICompatibleClient,
    OpenAIClient,
    OpenAICompatibleClient,
    retry_after_s,
)
from ._events import RECORD_WAIT_S, AsyncEventStream, EventStream

__all__ = ["ANTHROPIC_VERSION", "DIAGNOSTICS_BETA", "RECORD_WAIT_S", "AnthropicClient",
           "AsyncAnthropicClient", "AsyncEventStream", "AsyncOpenAIClient",
           "AsyncOpenAICompatibleClient", "EventStream", "OpenAIClient", "OpenAICompatibleClient",
           "retry_after_s"]
