"""stableprompt's provider clients (L4): they send the exact rendered bytes and record every
call.

- ``_clients``: ``AnthropicClient``, ``OpenAIClient``, ``OpenAICompatibleClient`` and their
  async variants: preparing a request, retries, the recording transport underneath.
- ``_events``: ``EventStream`` / ``AsyncEventStream``, a streamed response's events.
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
