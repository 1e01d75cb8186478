"""Everything the SDK knows about one wire format, one module per format.

- ``_base``: the stream accumulators' base classes.
- ``_fields``: shared usage-field readers.
- ``_parts``: what a renderer reads (PromptParts protocols) and shared body assembly.
- ``_segmenter``: SegmentedRequest and the generic segment builder.
- ``_request``: ProviderRequest, a rendered body ready to send.
- ``_openai``: what OpenAI Chat and Responses share.
- ``_formats``: the request-format registry: which format a path or body is, dispatch.
- ``_nlohmann``: ``nlohmann::ordered_json::dump()`` reproduced (llama.cpp's JSON text).
- ``_registry``: the usage-dialect registry behind ``stableprompt.providers``.
- ``anthropic``, ``openai_chat``, ``openai_responses``: request formats.
- ``openai_compatible``, ``deepseek``, ``llama_cpp``, ``gemini``, ``bedrock``: usage dialects.
- ``llama_cpp_requests``: llama-server's Anthropic/Responses -> chat completions conversions.
"""
