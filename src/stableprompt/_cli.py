"""The ``stableprompt`` command line: a thin dispatcher over self-contained subcommands.

Each subcommand lives next to the code it drives and exposes a :class:`Subcommand` (built
from :mod:`stableprompt._subcommand`, never from this module). To add one, add a line to
:data:`SUBCOMMANDS` (name -> ``"module:attribute"``). Only the module of the command that runs
is imported (every one only for ``stableprompt --help``, a missing or unknown command), and a
module that fails to import leaves the rest of the CLI working. :func:`register` adds one at
run time (plugins, tests).

Errors are one line on stderr, never a traceback: usage errors and bad input (InputError,
LedgerError: arguments, captures, ledger files) exit 2, other failures of the
command (any :class:`~stableprompt.StablePromptError` or ``OSError``) exit 1, Ctrl-C exits 130
and SIGTERM exits 143 after the command's cleanup ran (a started engine is stopped, a ledger
closed: the signal unwinds like Ctrl-C instead of killing the process). With ``--json`` an error
is also one JSON object on stdout, ``{"error": {"code", "message", "exit_status"}}``, so a
consumer parsing stdout never meets plain text.

A closed pipe (``stableprompt lint x | head -1``) is not an error, in text and JSON modes
alike: no traceback, nothing on stderr, and the exit status is the command's own (a lint gate
still decides 0 or 1), never 1 *because of* the pipe. A command whose status is known before
it writes (lint) stores it as ``args.exit_status`` first, so a pipe that closes mid-write
exits with it; stdout is flushed here, so the pipe never breaks at interpreter exit.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

from ._exceptions import InputError, LedgerError, StablePromptError
from ._subcommand import Subcommand, UsageError, redacted_output

__all__ = ["SUBCOMMANDS", "Subcommand", "UsageError", "build_parser", "main", "register"]

PROG = "stableprompt"


#: Subcommand name -> ``"module:attribute"`` of its :class:`Subcommand`.
SUBCOMMANDS: dict[str, str] = {
    "demo": "stableprompt.demo._command:SUBCOMMAND",
    "emulator": "stableprompt.emulator._command:SUBCOMMAND",
    "engine": "stableprompt._engine._command:SUBCOMMAND",
    "ledger": "stableprompt._ledger._command:SUBCOMMAND",
    "lint": "stableprompt._lint._command:SUBCOMMAND",
    "proxy": "stableprompt._proxy._command:SUBCOMMAND",
    "report": "stableprompt._report._command:SUBCOMMAND",
}

_REGISTERED: dict[str, Subcommand] = {}


def register(command: Subcommand) -> None:
    """Add (or replace) a subcommand at run time."""
    _REGISTERED[command.name] = command


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: error: {message}")


def _load(name: str, spec: str) -> Subcommand:
    module_name, _, attribute = spec.partition(":")
    try:
        command = getattr(importlib.import_module(module_name), attribute)
    except Exception as exc:  # a broken optional module must not break the whole CLI
        reason = f"{type(exc).__name__}: {exc}"

        def unavailable(_: argparse.Namespace) -> int:
            raise UsageError(f"{PROG}: error: command {name!r} is unavailable ({reason})")

        return Subcommand(name, f"(unavailable: {reason})", lambda _: None, unavailable)
    if not isinstance(command, Subcommand):
        raise TypeError(f"{spec} is not a Subcommand")
    return command


def _chosen(args: Sequence[str]) -> str | None:
    """The known command ``args`` run, or ``None`` when the full parser is needed (no command,
    an unknown one, or a top-level option such as ``--help`` before it)."""
    for arg in args:
        if arg.startswith("-"):
            return None
        return arg if arg in SUBCOMMANDS or arg in _REGISTERED else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every known subcommand, or with the command ``only`` alone (then only
    its module is imported)."""
    from ._version import __version__

    parser = _Parser(prog=PROG, description="Cache-friendly prompts for LLM agent harnesses, "
                     "with measured prefix-cache hit rates.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if only is not None and only in _REGISTERED:
        commands = {only: _REGISTERED[only]}
    elif only is not None:
        commands = {only: _load(only, SUBCOMMANDS[only])}
    else:
        commands = {name: _load(name, spec) for name, spec in SUBCOMMANDS.items()}
        commands.update(_REGISTERED)
    for name in sorted(commands):
        command = commands[name]
        child = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(child)
        child.set_defaults(_run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Everything a command prints, its error lines included, passes the one redaction pass
    (:func:`~stableprompt._subcommand.redacted_output`): no API key reaches the terminal.
    """
    status = 1
    try:
        with redacted_output(), _sigterm_unwinds():
            status = _main(argv)
    except OSError as exc:  # the last flush of stdout failed: a full disk, a closed pipe
        _drop_stdout()
        if not isinstance(exc, BrokenPipeError) and status == 0:  # else already said
            print(f"{PROG}: error: cannot write the output: {_one_line(str(exc))}",
                  file=sys.stderr)
            return 1
    return status


def _drop_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush of what is still buffered
    cannot fail again (and print a traceback) at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (an embedding program's stream)
        pass


class _Terminated(BaseException):
    """SIGTERM arrived: unwind (``finally`` blocks run), then exit 143. A BaseException, as
    KeyboardInterrupt is: the ``except Exception`` guards that keep a failed ledger write from
    breaking a call (spill and go on) must not take it for a write error."""


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """Turn SIGTERM into :class:`_Terminated` while the command runs (main thread only, and
    only where SIGTERM still has its default action: an embedding program's handler stays)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def unwind(_signum: int, _frame: FrameType | None) -> None:
        raise _Terminated

    signal.signal(signal.SIGTERM, unwind)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args: argparse.Namespace | None = None
    status: int | None = None
    try:
        parser = build_parser(_chosen(args_list))
        args = parser.parse_args(args_list)
        run: Callable[[argparse.Namespace], int] | None = getattr(args, "_run", None)
        if run is None:
            names = ", ".join(sorted({*SUBCOMMANDS, *_REGISTERED}))
            raise UsageError(f"{PROG}: error: a command is required ({names}); see --help")
        status = run(args)
        sys.stdout.flush()  # a closed pipe surfaces here, not at interpreter exit
        return status
    except UsageError as exc:
        return _fail(args, str(exc), None, 2)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        return _fail(args, f"{PROG}: interrupted", "interrupted", 130)
    except _Terminated:
        return _fail(args, f"{PROG}: terminated (SIGTERM)", "terminated", 143)
    except BrokenPipeError:  # output piped into e.g. `head`, which read what it wanted
        _drop_stdout()  # the rest of the output goes nowhere
        return _closed_pipe_status(args, status)
    except (InputError, LedgerError) as exc:  # bad input: arguments, captures, ledger files
        return _fail(args, f"{PROG}: error: {_one_line(str(exc))}", exc.code, 2)
    except (StablePromptError, OSError) as exc:
        code = exc.code if isinstance(exc, StablePromptError) else "os-error"
        return _fail(args, f"{PROG}: error: {_one_line(str(exc))}", code, 1)


def _closed_pipe_status(args: argparse.Namespace | None, status: int | None) -> int:
    """The exit status when the reader closed stdout: a closed pipe is not an error, so it is
    the command's own status (a lint gate's 0/1, bad input's 2), whether the pipe closed
    after the command returned or while it wrote (it then declared the status before
    writing, as ``args.exit_status``); 0 when the command declared none."""
    if status is not None:
        return status
    declared = getattr(args, "exit_status", None)
    return declared if isinstance(declared, int) else 0


def _fail(args: argparse.Namespace | None, line: str, code: str | None, status: int) -> int:
    """Print ``line`` on stderr (and, under ``--json``, the error object on stdout); return
    ``status``."""
    print(line, file=sys.stderr)
    if args is not None and getattr(args, "json", False) is True:
        from ._subcommand import json_text

        prefix = f"{PROG}: error: "
        message = line[len(prefix):] if line.startswith(prefix) else line
        try:
            sys.stdout.write(json_text({"error": {"code": code, "message": message,
                                                  "exit_status": status}}))
            sys.stdout.flush()
        except (BrokenPipeError, OSError):
            pass
    return status


def _one_line(text: str) -> str:
    return " ".join(text.split())
