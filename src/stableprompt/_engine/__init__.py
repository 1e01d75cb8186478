"""The real engine: llama.cpp's ``llama-server``, built from source, serving a tiny model.

A private, independent tool (like :mod:`stableprompt.emulator`, it imports only the core
modules): :mod:`._build` fetches the llama.cpp source from PyPI and builds the server once into
the user cache, :mod:`._model` writes a deterministic random-weight GGUF with a real chat
template, :mod:`._server` starts and stops servers, and :mod:`._command` is
``stableprompt engine``. The public door to it is :func:`stableprompt.testing.llama_server`.
Facts about the engine's cache and usage reporting: ``shared/reference/ENGINES.md``.
"""
