"""``stableprompt emulator serve``: run the provider emulator in the foreground."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._exceptions import InputError
from .._subcommand import Subcommand, UsageError, int_arg
from ._responders import ScriptedResponder, load_script

__all__ = ["SUBCOMMAND"]


_port = int_arg("a port number", 0, 65535, "port must be 0..65535")
_positive = int_arg("an integer", 1, None, "must be >= 1")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve", help="serve the emulated endpoints on loopback until Ctrl-C",
        description="Serve POST /v1/messages, /v1/chat/completions and /v1/responses on "
        "loopback with documented prefix-cache accounting. An emulator, not a provider.")
    serve.add_argument("--port", type=_port, default=8787,
                       help="TCP port (0 picks a free one; default 8787)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="loopback address to bind (default 127.0.0.1)")
    output = serve.add_mutually_exclusive_group()
    output.add_argument("--echo", action="store_true",
                        help="answer with the last user text (the default)")
    output.add_argument("--script", type=Path, metavar="PATH",
                        help="JSON array of turns {text, tool_calls:[{name, arguments}]}, "
                        "served in order and cycled")
    serve.add_argument("--capacity-entries", type=_positive, default=100_000, metavar="N",
                       help="LRU limit on cache entries (default 100000)")
    serve.add_argument("--capacity-tokens", type=_positive, default=None, metavar="N",
                       help="LRU limit on the sum of cached prefix lengths in tokens")
    serve.add_argument("--quiet", action="store_true", help="no per-request log lines")


def _run(args: argparse.Namespace) -> int:
    from ._server import Emulator, RequestRecord

    responder = None
    if args.script is not None:
        try:
            data = args.script.read_bytes()
        except OSError as exc:
            raise UsageError(f"stableprompt emulator serve: error: cannot read script "
                             f"{str(args.script)!r}: {exc.strerror or exc}") from None
        responder = ScriptedResponder(load_script(data), cycle=True)

    def log(record: RequestRecord) -> None:
        usage = (f" in={record.input_tokens_total} read={record.cache_read_tokens} "
                 f"write={record.cache_write_tokens} out={record.output_tokens}"
                 if record.input_tokens_total is not None else f" {record.error_message}")
        print(f"#{record.seq} {record.method} {record.path} {record.status}{usage}", flush=True)

    try:
        emulator = Emulator(host=args.host, port=args.port, responder=responder,
                            capacity_entries=args.capacity_entries,
                            capacity_tokens=args.capacity_tokens,
                            on_request=None if args.quiet else log)
    except InputError as exc:
        raise UsageError(f"stableprompt emulator serve: error: {exc.message}") from None

    def banner(emu: Emulator) -> None:
        print(f"stableprompt emulator (an emulator, not a real provider) listening on "
              f"{emu.base_url} — Anthropic base_url={emu.base_url}, "
              f"OpenAI base_url={emu.openai_base_url}", flush=True)

    try:
        emulator.serve_forever(on_ready=banner)
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"stableprompt: error: cannot listen on {args.host}:{args.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


SUBCOMMAND = Subcommand(
    name="emulator",
    help="run the loopback provider emulator (Anthropic + OpenAI wire, prefix caching)",
    add_arguments=_add_arguments,
    run=_run,
)
