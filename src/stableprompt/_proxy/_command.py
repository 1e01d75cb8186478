"""``stableprompt proxy``: the recording reverse proxy, in the foreground until SIGTERM/Ctrl-C.

Safety: it binds loopback only, unless ``--host`` names another address *and* an access
token is given (``--access-token``, else ``$STABLEPROMPT_PROXY_TOKEN``, at least 16
characters; then every request must carry it); API keys pass through to
the upstream and are never stored or printed (ledger rows, captures and log lines are
scrubbed). uvicorn and starlette come with the ``proxy`` extra
(``pip install 'stableprompt[proxy]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .._subcommand import (
    Subcommand,
    UsageError,
    int_arg,
    output_dir_arg,
    output_file_arg,
    seconds_arg,
    shown,
)
from ._headers import TOKEN_HEADER

if TYPE_CHECKING:
    from .._economics._cache_policy import CachePolicy
    from .._ledger._usage_record import UsageRecord

__all__ = ["SUBCOMMAND"]

_PROG = "stableprompt proxy"
TOKEN_ENV = "STABLEPROMPT_PROXY_TOKEN"
"""Environment variable read for the access token when ``--access-token`` is not given."""
MIN_TOKEN_CHARS = 16
_port = int_arg("a port number", 0, 65535, "port must be 0..65535")
_positive = int_arg("an integer", 1, None, "must be >= 1")


def _upstream(text: str) -> str:
    scheme, _, rest = text.partition("://")
    if scheme not in ("http", "https") or not rest.strip("/"):
        raise argparse.ArgumentTypeError(
            f"must be an http(s):// base URL, e.g. https://api.anthropic.com, got {text!r}")
    return text


def _ledger_arg(text: str) -> Path | str:
    """``--ledger``: a PostgreSQL (or ``sqlite:///``) URL as given, else an output file path
    checked now; an unsupported ``scheme://`` is refused, never taken for a folder."""
    from .._exceptions import LedgerError
    from .._ledger._target import check_target, is_url

    if not is_url(text):
        return output_file_arg(text)
    try:
        return check_target(text)
    except LedgerError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--upstream", type=_upstream, required=True, metavar="URL",
                        help="base URL requests go to (https://api.anthropic.com, "
                        "https://api.openai.com, http://127.0.0.1:8080, ...)")
    parser.add_argument("--port", type=_port, default=8788,
                        help="TCP port (0 picks a free one; default 8788)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1); a non-loopback address "
                        f"requires an access token (--access-token or {TOKEN_ENV})")
    parser.add_argument("--access-token", metavar="TOKEN", default=None,
                        help="require this token (at least 16 characters) on every request, "
                        "in the x-stableprompt-token header or the Proxy-Authorization "
                        "header (scheme Bearer); never forwarded. Default: the "
                        f"{TOKEN_ENV} environment variable (which ps does not show); this "
                        "flag wins over it")
    parser.add_argument("--ledger", type=_ledger_arg, default=Path("stableprompt.db"),
                        metavar="PATH|URL", help="SQLite ledger file (default "
                        "./stableprompt.db) or PostgreSQL URL (postgresql://user@host:5432/db; "
                        "several proxies on several hosts can write one)")
    parser.add_argument("--capture", type=output_dir_arg, default=None, metavar="DIR",
                        help="also write every recorded request to DIR/proxy-*.jsonl "
                        "(for stableprompt lint)")
    parser.add_argument("--provider", default=None,
                        help="provider family behind the upstream (vllm, llama-cpp, ...); "
                        "default: inferred from its host")
    parser.add_argument("--max-body-bytes", type=_positive, default=None, metavar="N",
                        help="largest request body accepted, else 413 (default 32 MiB)")
    parser.add_argument("--max-concurrency", type=_positive, default=None, metavar="N",
                        help="requests in flight (streams included) at most; one more gets a "
                        "JSON 503 (default 256). Open connections, idle and half-open ones "
                        "included, are capped at 4xN (lower if the open-file limit, ulimit -n, "
                        "requires): one more closes the connection waiting longest for its "
                        "request headers")
    parser.add_argument("--header-timeout", type=seconds_arg(zero=False), default=None,
                        metavar="S",
                        help="close a connection that has not sent a request's complete "
                        "headers S seconds after it opened, or after the first byte of its "
                        "next request (default 10; against clients holding connections "
                        "open without a request)")
    parser.add_argument("--body-timeout", type=seconds_arg(zero=False), default=30.0,
                        metavar="S",
                        help="longest silence between two chunks of a request body before "
                        "it is refused with 408 and recorded (default 30; against clients "
                        "trickling a body to hold a --max-concurrency slot)")
    parser.add_argument("--shutdown-timeout", type=_positive, default=30, metavar="S",
                        help="on SIGTERM, wait at most S seconds for calls in flight "
                        "(default 30); calls still running then are cut, one warning each, "
                        "their rows kept (verdict unknown, incomplete)")
    parser.add_argument("--stabilize", action="store_true",
                        help="sort tools by name and write their schemas in canonical key "
                        "order before forwarding; give an OpenAI request without "
                        "prompt_cache_key its head's key (only when the provider is OpenAI: "
                        "--provider openai or the api.openai.com host), an Anthropic request "
                        "without any "
                        "breakpoint a head and an end-of-history one (meaning unchanged; "
                        "requests already in that form pass byte-identical); each rewrite is "
                        "noted on the ledger row")
    parser.add_argument("--cache-policy", default=None, metavar="FILE",
                        help="with --stabilize: a cache policy (JSON, CachePolicy.from_file) "
                        "whose head and history TTLs (request kind main) the Anthropic "
                        "breakpoints get: the ones --stabilize places, and the client's own "
                        "markers without a ttl (markers with a ttl keep it; longer TTLs stay "
                        "before shorter ones); rewrites are noted on the ledger row. Its "
                        "keep_alive is not used here (the proxy sends nothing on its own)")
    parser.add_argument("--diagnostics", action="store_true",
                        help="ask the provider why each request missed its cache (Anthropic "
                        "diagnostics.previous_message_id with its beta header, OpenAI Responses "
                        "prompt_cache_options.comparison_response_id), compared with the call "
                        "our attribution compares with; the answer is joined to our verdict on "
                        "the row. Adds members to the bodies sent (the prompt is unchanged) "
                        "and makes each request wait for the rows still being recorded")
    parser.add_argument("--record-inline", action="store_true",
                        help="finish recording on the event loop instead of a worker thread "
                        "(the default thread keeps order and runs every queued row on "
                        "shutdown)")
    parser.add_argument("--workers", type=_positive, default=1, metavar="N",
                        help="serve with N worker processes on the same address (Linux "
                        "SO_REUSEPORT: each connection, and so each keep-alive "
                        "conversation on it, stays with one worker), each recording into the "
                        "one ledger, read as shared: a call's predecessor stored by another "
                        "worker is found once its row is stored. Limits (--max-concurrency, "
                        "connections) apply per worker. Default 1: one process. Not with "
                        "--diagnostics")
    parser.add_argument("--quiet", action="store_true", help="no per-call log lines")


def _line(method: str, path: str, status: int, record: UsageRecord | None) -> None:
    text = f"{method} {path} {status}"
    if record is not None:
        text += (f" {record.wire_format} {record.verdict} in={record.input_tokens_total} "
                 f"read={record.cache_read_tokens} write={record.cache_write_tokens}")
        cause = record.verdict_detail.get("cause")
        if cause:
            text += f" cause={cause}"
        stabilized = record.verdict_detail.get("stabilized")
        if isinstance(stabilized, list) and stabilized:
            text += f" stabilized={','.join(map(str, stabilized))}"
    print(shown(text, markup=False), flush=True)  # the path is the client's: literal


def _token(args: argparse.Namespace) -> str | None:
    """The access token: ``--access-token``, else ``$STABLEPROMPT_PROXY_TOKEN`` (an empty
    value counts as unset), else ``None``.

    Raises:
        UsageError: The token is shorter than 16 characters, or holds whitespace or a
            non-printable character (naming where it came from, never the token).
    """
    token: str | None = args.access_token
    source = "--access-token"
    if token is None:
        token, source = os.environ.get(TOKEN_ENV) or None, TOKEN_ENV
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise UsageError(f"{_PROG}: error: {source} must be at least {MIN_TOKEN_CHARS} "
                         f"characters (got {len(token)})")
    if token is not None and (token != token.strip() or any(c.isspace() for c in token)
                              or not token.isprintable()):
        # HTTP trims header values: such a token could never match, every request a 401
        raise UsageError(f"{_PROG}: error: {source} must be printable, without whitespace")
    return token


WORKERS_REFUSE = {"diagnostics": "--diagnostics"}
"""Options refused with ``--workers`` above 1 (attribute: flag): ``--diagnostics`` makes a
request wait for the rows its process is still recording, which another worker's are not."""


def _check_workers(args: argparse.Namespace) -> None:
    """``--workers N`` above 1 is possible here and with the other options given.

    Raises:
        UsageError: The platform has no load-balancing ``SO_REUSEPORT`` or no ``fork``
            (only Linux has both), or an option of :data:`WORKERS_REFUSE` is given (naming
            each).
    """
    if args.workers == 1:
        return
    if not sys.platform.startswith("linux") or not hasattr(socket, "SO_REUSEPORT") \
            or not hasattr(os, "fork"):
        raise UsageError(f"{_PROG}: error: --workers {args.workers} needs Linux (SO_REUSEPORT "
                         f"spreading connections over the workers, and fork); this is "
                         f"{sys.platform}: use --workers 1")
    given = [flag for name, flag in WORKERS_REFUSE.items() if getattr(args, name)]
    if given:
        raise UsageError(f"{_PROG}: error: --workers {args.workers} cannot be combined with "
                         f"{', '.join(given)}: it makes each request wait for the rows its "
                         "own process is still recording, and the previous turn may be on "
                         "another worker; use --workers 1 with it")


def _cache_policy(args: argparse.Namespace) -> CachePolicy | None:
    """``--cache-policy FILE`` read and checked, ``None`` without it.

    Raises:
        UsageError: ``--cache-policy`` without ``--stabilize``.
        PolicyError: the file is unreadable or not a valid policy, or names a TTL the
            upstream's provider family does not offer for breakpoints (code
            ``cache-policy``), or asks for an explicit head cache, Gemini's (code
            ``cache-policy-explicit-cache``); naming the file, exit 2 as other bad input.
    """
    if args.cache_policy is None:
        return None
    if not args.stabilize:
        raise UsageError(f"{_PROG}: error: --cache-policy sets the TTLs of the breakpoints "
                         "--stabilize places: add --stabilize (or drop --cache-policy)")
    from .._economics._cache_policy import CachePolicy, refuse_explicit_cache
    from .._exceptions import PolicyError
    from .._policy import TTL_LABELS_S, cache_rules

    policy = CachePolicy.from_file(args.cache_policy)
    try:
        refuse_explicit_cache(policy, "the proxy's stabilizer (it places breakpoints)")
    except PolicyError as exc:
        raise PolicyError(f"{args.cache_policy}: {exc.message}", code=exc.code) from exc
    if _upstream_provider(args) != "anthropic":
        return policy  # Anthropic Messages bodies only get breakpoints: nothing to check
    offered = cache_rules("anthropic", "").ttls_s
    choice = policy.for_kind("main")
    for where, label in (("head", choice.head), ("history", choice.history)):
        if label is not None and TTL_LABELS_S[label] not in offered:
            ttls = ", ".join(k for k, v in TTL_LABELS_S.items() if v in offered)
            raise PolicyError(f"{args.cache_policy}: {where} TTL {label!r} is not one "
                              f"Anthropic breakpoints take ({ttls})", code="cache-policy")
    return policy


def _upstream_provider(args: argparse.Namespace) -> str:
    """The upstream's provider family (``--provider``, else its host), ``"anthropic"`` when
    neither says (a local emulator, a gateway)."""
    import httpx

    from .._wire._formats import known_provider

    return known_provider(httpx.URL(args.upstream).host, args.provider) or "anthropic"


def _policy_shown(args: argparse.Namespace, policy: CachePolicy) -> str:
    """The banner's words for ``--cache-policy``: its label, and that it does nothing when
    the upstream is not Anthropic (only Anthropic Messages breakpoints get its TTLs)."""
    provider = _upstream_provider(args)
    if provider == "anthropic":
        return f"cache policy {policy.label()}"
    return (f"cache policy {policy.label()} (no effect on a {provider} upstream: only "
            "Anthropic Messages breakpoints get its TTLs)")


def _banner(host: str, port: int, *, upstream: str, where: str, token: bool) -> str:
    """Where clients point (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``) and what they send;
    for an all-interfaces bind (``0.0.0.0``, ``::``) the address to use is this machine's,
    not the bind address. Never the token itself."""
    from ._server import base_url

    url = base_url(host, port)
    try:
        everywhere = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        everywhere = False
    if everywhere:
        client = f"http://<this machine's address, e.g. {socket.gethostname()}>:{port}"
        hint = (f"all interfaces; clients use {client} as ANTHROPIC_BASE_URL "
                f"(OPENAI_BASE_URL: the same + /v1)")
    else:
        hint = f"ANTHROPIC_BASE_URL={url} OPENAI_BASE_URL={url}/v1"
    if token:
        hint += (f"; every request must send header {TOKEN_HEADER.decode()}: <the access "
                 f"token>")
    return f"stableprompt proxy on {url} -> {upstream} ({where}); {hint}"


def _run(args: argparse.Namespace) -> int:
    from ._server import is_loopback

    _check_workers(args)
    token = _token(args)
    cache_policy = _cache_policy(args)
    if not is_loopback(args.host) and not token:
        raise UsageError(
            f"{_PROG}: error: --host {args.host} is not a loopback address: anyone who can "
            f"reach it could use your API keys through the proxy; pass --access-token TOKEN "
            f"(or set {TOKEN_ENV}) too (every request must then carry it), or bind 127.0.0.1")
    try:
        from ._app import (
            DEFAULT_HEADER_TIMEOUT_S,
            DEFAULT_MAX_BODY_BYTES,
            DEFAULT_MAX_CONCURRENCY,
            ProxyApp,
            ProxyConfig,
            recover,
            upstream_name,
        )
        from ._capture import CaptureWriter
        from ._server import BACKLOG, bind, server_for
        from ._workers import bind_workers, supervise
    except ImportError as exc:
        raise UsageError(f"{_PROG}: error: the proxy needs the proxy extra "
                         f"(pip install 'stableprompt[proxy]'): {exc}") from None
    from .._ledger._ledger import Ledger
    from .._ledger._target import shown_target
    from .._recording._recorder import Recorder
    from .._tokens import get_tokenizer

    if isinstance(args.ledger, Path) and args.ledger.is_file() \
            and args.ledger.stat().st_size > 0:
        Ledger(args.ledger, read_only=True).close()  # not a ledger: refused now (exit 2),
        # not on the first call (which would spill every row)
    try:
        socks = ([bind(args.host, args.port)] if args.workers == 1
                 else bind_workers(args.host, args.port, args.workers))
    except OSError as exc:
        print(f"stableprompt: error: cannot listen on {args.host}:{args.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        config = ProxyConfig(args.upstream, access_token=token,
                             max_body_bytes=args.max_body_bytes or DEFAULT_MAX_BODY_BYTES,
                             provider=args.provider, stabilize=args.stabilize,
                             cache_policy=cache_policy,
                             record_in_thread=not args.record_inline,
                             max_concurrency=args.max_concurrency or DEFAULT_MAX_CONCURRENCY,
                             header_timeout_s=args.header_timeout or DEFAULT_HEADER_TIMEOUT_S,
                             body_timeout_s=args.body_timeout)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    upstream = upstream_name(config)
    host, port = socks[0].getsockname()[:2]

    def banner(captures: str | None) -> None:
        where = (f"ledger {shown_target(args.ledger)}"
                 f"{f', captures {captures}' if captures else ''}"
                 f"{f', {_policy_shown(args, cache_policy)}' if cache_policy else ''}"
                 f"{f', {args.workers} workers' if args.workers > 1 else ''}")
        print(_banner(host, port, upstream=upstream, where=where, token=token is not None),
              flush=True)

    def serve(sock: socket.socket, ready: Callable[[], None] | None) -> int:
        """One proxy process serving on ``sock``: its own ledger connection, recorder,
        capture file and app; ``ready()`` (a worker) or the banner (one process) once it
        listens. Returns 0 after a graceful stop."""
        ledger = Ledger(args.ledger, shared=True if ready is not None else None)
        capture = None
        try:
            capture = None if args.capture is None else CaptureWriter(args.capture)
            app = ProxyApp(config, recorder=Recorder(ledger, provider=args.provider,
                                                     diagnostics=args.diagnostics),
                           capture=capture, on_call=None if args.quiet else _line)
            server = server_for(app, shutdown_timeout_s=args.shutdown_timeout,
                                log_config=uvicorn_logging())
            if ready is None:
                with contextlib.suppress(Exception):  # metadata only: never stop the proxy
                    ledger.set_meta("backend", f"stableprompt proxy -> {app.upstream_name}")
                app.recover()  # rows an earlier run spilled, or had queued when it was killed
            with contextlib.suppress(Exception):  # load the encoding now, not on first call
                get_tokenizer(app.recorder.tokenizer_name).count("warm-up")
            if ready is None:
                banner(None if capture is None else str(capture.path))
            else:
                sock.listen(BACKLOG)  # connections hashed here now wait for this worker
                ready()
            server.run(sockets=[sock])
        finally:
            sock.close()
            if capture is not None:
                capture.close()
            ledger.close()
        return 0

    if args.workers == 1:
        return serve(socks[0], None)
    ledger = Ledger(args.ledger)
    try:
        with contextlib.suppress(Exception):  # metadata only: never stop the proxy
            ledger.set_meta("backend", f"stableprompt proxy -> {upstream}")
        recover(ledger)  # once, before any worker writes: rows earlier runs left outside
    finally:
        ledger.close()
    captures = (None if args.capture is None
                else f"{Path(args.capture).resolve()}/proxy-*.jsonl (one file per worker)")
    return supervise(socks, serve, lambda: banner(captures))


_CUT_LINES = frozenset({"ASGI callable returned without completing response.",
                        "ASGI callable returned without starting response."})


def _not_a_cut_line(record: logging.LogRecord) -> bool:
    """Drops uvicorn's line for a response the app ended incomplete: the app only does that
    for a body it cut, and has logged its own line naming the call (``response body cut
    short``, ``cut METHOD PATH at shutdown``)."""
    return not (record.name == "uvicorn.error" and record.msg in _CUT_LINES)


class _LiteralFormatter(logging.Formatter):
    """Log lines shown literally (:func:`~stableprompt._subcommand.shown`): a request path
    or an upstream's error text holding terminal escapes or line breaks prints them as
    visible escapes (a traceback, appended after the message, keeps its lines)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return shown(super().formatMessage(record), markup=False)


def uvicorn_logging() -> dict[str, object]:
    """uvicorn's log config, warnings and errors only, on stderr (which the CLI redacts),
    each line shown literally (``_LiteralFormatter``); uvicorn's duplicate line for a body
    the app cut is left out (``_not_a_cut_line``)."""
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"plain": {"()": _LiteralFormatter,
                                 "fmt": "stableprompt proxy: %(levelname)s %(message)s"}},
        "filters": {"cut": {"()": lambda: _not_a_cut_line}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain",
                                "stream": "ext://sys.stderr", "filters": ["cut"]}},
        "loggers": {"uvicorn": {"handlers": ["stderr"], "level": "WARNING",
                                "propagate": False},
                    "stableprompt": {"handlers": ["stderr"], "level": "WARNING",
                                     "propagate": False}},
    }


SUBCOMMAND = Subcommand(
    name="proxy",
    help="recording reverse proxy: point any harness at it (ANTHROPIC_BASE_URL, "
    "OPENAI_BASE_URL) and every LLM call gets a ledger row",
    add_arguments=_add_arguments,
    run=_run,
)
