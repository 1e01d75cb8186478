"""The ``stableprompt`` command line: a thin dispatcher over self-contained subcommands.

Each subcommand lives next to the code it drives and exposes a :class:`Subcommand` (built
from :mod:`stableprompt._subcommand`, never from this module). To add one, add a line to
:data:`SUBCOMMANDS` (name -> ``"module:attribute"``). Only the module of the command that runs
is imported (every one only for ``stableprompt --help``, a missing or unknown command), and a
module that fails to import leaves the rest of the CLI working. :func:`register` adds one at
run time (plugins, tests).

Errors are one line on stderr, never a traceback: usage errors and bad input (InputError,
LedgerError: arguments, captures, ledger files) exit 2, other failures of the
command (any :class:`~stableprompt.StablePromptError` or ``OSError``) exit 1, Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
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
    "lint": "stableprompt._lint._command:SUBCOMMAND",
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
    with redacted_output():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(_chosen(args_list))
        args = parser.parse_args(args_list)
        run: Callable[[argparse.Namespace], int] | None = getattr(args, "_run", None)
        if run is None:
            names = ", ".join(sorted({*SUBCOMMANDS, *_REGISTERED}))
            raise UsageError(f"{PROG}: error: a command is required ({names}); see --help")
        return run(args)
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`, which read what it wanted:
        devnull = os.open(os.devnull, os.O_WRONLY)  # stop quietly, not an error
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (InputError, LedgerError) as exc:  # bad input: arguments, captures, ledger files
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except (StablePromptError, OSError) as exc:
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 1


def _one_line(text: str) -> str:
    return " ".join(text.split())
