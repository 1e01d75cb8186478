"""The ordering contract: tools, head, append-only history, tail, rendered prompt.

- ``_tool_schema``: JSON Schema canonicalization, repair and validation of tool parameters.
- ``_tools``: Tool and ToolSet (canonical form, canonical order).
- ``_messages``: Message and ToolCall (one conversation turn, canonical bytes once).
- ``_builder``: PromptBuilder, PinnedHead (frozen head) and Conversation (append-only history).
- ``_rendered``: RenderedPrompt (segments, bytes, fingerprints, token counts).
- ``_compaction``: CacheEvent, CompactionPlan and plan_compaction (tail-only summarization).
- ``_advice``: CompactionAdvice (compaction priced at the call: tokens, turn rate, USD) and
  the turns a conversation observes.
"""
