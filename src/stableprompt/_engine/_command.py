"""``stableprompt engine build | serve | stop | status``: the real llama.cpp engine.

* ``build`` builds ``llama-server`` once into the user cache (minutes; reused afterwards)
  and prints the binary's path and the time it took;
* ``serve`` starts a detached server on the tiny model (building and writing it first when
  needed), records it in ``<cache>/llama/server.json`` and prints its base URL;
* ``stop`` stops the recorded server (exit 0 with a message when there is none);
* ``status`` prints the recorded server and whether it answers ``/health``, or says none; its
  exit status follows the LSB init-script convention: 0 healthy, 1 a stale record (the process
  is gone), 3 no server recorded, 4 running but not answering ``/health`` (still starting, or
  wedged), so ``stableprompt engine status || stableprompt engine serve`` works in scripts.

``--json`` prints one JSON object instead (:func:`~stableprompt._subcommand.json_text`).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .._exceptions import EngineError
from .._subcommand import Subcommand, int_arg, json_text

__all__ = ["SUBCOMMAND"]

_port = int_arg("a port number", 0, 65535, "port must be 0..65535")
_positive = int_arg("an integer", 1, None, "must be >= 1")
_cache_ram = int_arg("an integer", -1, None, "must be >= -1 (-1: no limit, 0: off)")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build", help="build llama-server from the llama.cpp sdist (once, into the user cache)",
        description="Fetch llama-cpp-python==0.3.36's sdist from PyPI (hash-checked) and build "
        "its vendored llama.cpp's llama-server with CMake + Ninja into the user cache. Needs "
        "cmake, ninja and a C++ compiler (Debian: cmake ninja-build g++). Reuses an existing "
        "binary.")
    build.add_argument("--jobs", type=_positive, default=None, metavar="N",
                       help="parallel compile jobs (default: the CPU count)")
    serve = actions.add_parser(
        "serve", help="start a detached llama-server on a tiny model and print its base URL",
        description="Start llama-server on 127.0.0.1 with a tiny random-weight model (one slot, "
        "no host prompt cache: the cache is the previous request), record it in "
        "<cache>/llama/server.json and print its base URL. Stop it with 'stableprompt engine "
        "stop'.")
    serve.add_argument("--template", default="qwen2.5",
                       help="chat template: qwen2.5 (default), mistral-nemo, hermes-3, or a "
                       ".jinja path")
    serve.add_argument("--port", type=_port, default=0,
                       help="TCP port on 127.0.0.1 (default 0: a free one)")
    serve.add_argument("--ctx-size", type=_positive, default=16384, metavar="N",
                       help="context size in tokens (default 16384)")
    serve.add_argument("--slots", type=_positive, default=1, metavar="N",
                       help="parallel slots (default 1)")
    serve.add_argument("--cache-ram", type=_cache_ram, default=0, metavar="MIB",
                       help="host-memory prompt cache in MiB (default 0: off; -1: no limit)")
    serve.add_argument("--threads", type=_positive, default=2, metavar="N",
                       help="CPU threads (default 2)")
    actions.add_parser("stop", help="stop the server 'engine serve' started",
                       description="Stop the server recorded in <cache>/llama/server.json "
                       "(SIGTERM, then SIGKILL; only a llama-server process is signalled).")
    actions.add_parser("status", help="show the server 'engine serve' started, if any",
                       description="Show the server recorded in <cache>/llama/server.json and "
                       "whether it answers GET /health. Exit status: 0 healthy, 1 stale record "
                       "(process gone), 3 none recorded, 4 running but not answering /health.")
    for child in actions.choices.values():
        child.add_argument("--json", action="store_true", help="print one JSON object")


def _emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    print(json_text(data) if args.json else text, end="" if args.json else "\n", flush=True)


def _build(args: argparse.Namespace) -> int:
    from ._build import build_server, server_binary

    cached = server_binary().is_file()
    if not cached and not args.json:
        print("building llama-server (a few minutes, once)...", file=sys.stderr, flush=True)
    started = time.monotonic()
    binary = build_server(jobs=args.jobs)
    elapsed_s = time.monotonic() - started
    _emit(args, {"binary": str(binary), "built": not cached, "elapsed_s": round(elapsed_s, 3)},
          f"{binary} ({'reused' if cached else 'built'} in {elapsed_s:.1f} s)")
    return 0


def _healthy(base_url: str) -> bool:
    import httpx

    try:
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            return client.get(f"{base_url}/health").status_code == 200
    except httpx.HTTPError:
        return False


def _serve(args: argparse.Namespace) -> int:
    from ._build import server_binary
    from ._model import check_template
    from ._server import is_llama_server, read_state, serve, write_state

    running = read_state()
    if running is not None and is_llama_server(running.pid, port=running.port):
        raise EngineError(f"an engine server is already running at {running.base_url} (pid "
                          f"{running.pid}). Fix: stableprompt engine stop",
                          code="engine-start-failed")
    check_template(args.template)  # a wrong file fails alone, before "building"
    if not server_binary().is_file():
        print("building llama-server (a few minutes, once)...", file=sys.stderr, flush=True)
    server = serve(template=args.template, port=args.port, ctx_size=args.ctx_size,
                   threads=args.threads, slots=args.slots, cache_ram_mib=args.cache_ram)
    write_state(server)
    if args.json:
        _emit(args, server.to_json(), "")
    else:
        print(server.base_url, flush=True)
        print(f"llama-server pid {server.pid}, model {server.model_path}, log "
              f"{server.log_path}; stop it with: stableprompt engine stop", file=sys.stderr)
    return 0


def _stop(args: argparse.Namespace) -> int:
    from ._server import clear_state, read_state, stop

    server = read_state()
    if server is None:
        _emit(args, {"stopped": False, "server": None}, "no engine server is recorded")
        return 0
    try:
        stopped = stop(server)
    except EngineError as exc:
        if exc.code != "engine-stop-refused":
            raise
        clear_state()
        raise EngineError(f"{exc.message}; the stale record was removed",
                          code=exc.code) from exc
    clear_state()
    _emit(args, {"stopped": stopped, "server": server.to_json()},
          f"stopped llama-server pid {server.pid} ({server.base_url})" if stopped else
          f"llama-server pid {server.pid} was not running; record removed")
    return 0


def _status(args: argparse.Namespace) -> int:
    from ._server import is_llama_server, read_state

    server = read_state()
    if server is None:
        _emit(args, {"running": False, "server": None}, "no engine server is recorded")
        return 3
    running = is_llama_server(server.pid, port=server.port)
    healthy = running and _healthy(server.base_url)
    state = "healthy" if healthy else "running, not answering /health" if running else (
        "not running (stale record: 'stableprompt engine stop' removes it)")
    _emit(args, {"running": running, "healthy": healthy, "server": server.to_json()},
          f"{server.base_url} pid {server.pid}: {state}\n  model {server.model_path}\n"
          f"  template {server.template}\n  log {server.log_path}")
    return 0 if healthy else 4 if running else 1


def _run(args: argparse.Namespace) -> int:
    action = {"build": _build, "serve": _serve, "stop": _stop, "status": _status}
    return action[args.action](args)


SUBCOMMAND = Subcommand(
    name="engine",
    help="build and run the real llama.cpp engine (llama-server on a tiny model)",
    add_arguments=_add_arguments,
    run=_run,
)
