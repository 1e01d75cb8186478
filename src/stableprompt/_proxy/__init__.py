"""``stableprompt proxy``: a recording reverse proxy for any harness, in any language.

- ``_headers``: hop-by-hop header filtering, the access-token check, the proxy's error bodies.
- ``_capture``: the ``--capture DIR`` writer (JSONL request captures that ``stableprompt lint``
  reads).
- ``_app``: the ASGI application (starlette): forwards every request through an
  :class:`~stableprompt._recording._transport.AsyncRecordingTransport`, so each call is
  recorded exactly as the transport records it.
- ``_server``: running it on uvicorn, in the foreground or on a background thread (tests).
- ``_command``: the subcommand (arguments, the loopback-or-token rule).
"""
