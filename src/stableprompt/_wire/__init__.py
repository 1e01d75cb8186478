"""Everything the SDK knows about one wire format, one module per format.

- ``_base``: StreamAccumulator base and what every format shares.
- ``_fields``: shared usage-field readers.
- ``_segmenter``: SegmentedRequest and segmenting any request body into cache-order segments.
- ``_routing``: which format a path or body is.
- ``_registry``: the registry behind ``stableprompt.providers``' dispatching functions.
- ``anthropic``, ``openai_chat``, ``openai_responses``: request formats.
- ``openai_compatible``, ``deepseek``, ``llama_cpp``, ``gemini``, ``bedrock``: usage dialects.
"""
