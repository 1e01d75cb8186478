"""The kit every ``stableprompt <command>`` is built from: the command, its errors, its
argument types and its output files.

A feature's ``_command.py`` builds a :class:`Subcommand` from this module and never imports
``stableprompt._cli``, so the dispatcher loads only the command that runs.
:class:`UsageError` is bad command-line input (exit 2, one line on stderr); :func:`int_arg`
builds range-checked integer ``type=`` functions.

Output files are checked before the work and written after:
``stableprompt report --html PATH`` and ``stableprompt demo`` check their output paths when
the arguments are parsed (:func:`output_file_arg`, :func:`output_dir_arg`: by trying to create
a file there, leaving nothing behind), so a bad path fails at once, naming the option, and not
after minutes of work; then they write with :func:`write_text` and print :func:`json_text`.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ._redact import redact, scrubbed_entries, scrubbed_items

__all__ = [
    "JSON_HELD_CHARS",
    "LazyJsonArray",
    "LazyJsonObject",
    "Subcommand",
    "UsageError",
    "int_arg",
    "json_text",
    "output_dir_arg",
    "output_dir_problem",
    "output_file_arg",
    "output_file_problem",
    "same_file",
    "seconds_arg",
    "shown",
    "write_scrubbed_json",
    "write_text",
]


@dataclass(frozen=True)
class Subcommand:
    """One ``stableprompt <name>`` command.

    Attributes:
        name: The word after ``stableprompt``.
        help: One-line description for ``stableprompt --help``.
        add_arguments: Adds the command's arguments (or nested subparsers) to its parser.
        run: Runs the command with the parsed namespace; returns the exit status.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """Bad command-line input; the message is the whole one-line report (exit status 2)."""


def int_arg(noun: str, low: int, high: int | None, bounds: str) -> Callable[[str], int]:
    """An argparse ``type`` parsing an integer in ``low..high`` (``None``: no upper bound).

    Errors read ``not {noun}: 'x'`` and ``{bounds}, got 5`` (``argparse.ArgumentTypeError``).
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{bounds}, got {value}")
        return value

    return parse


def seconds_arg(*, zero: bool) -> Callable[[str], float]:
    """An argparse ``type`` parsing a finite number of seconds, ``> 0`` (or ``>= 0`` when
    ``zero``): ``nan`` and ``inf`` are refused (a NaN interval would busy-poll, a NaN deadline
    never pass)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(
                f"must be a finite number {'>= 0' if zero else '> 0'}, got {text!r}")
        return value

    return parse


class _RedactingStream:
    """A text stream that scrubs key-shaped strings (:func:`~stableprompt._redact.redact`)
    from every line before it reaches ``target``. Lines are held until their newline (a key
    is never split across two writes) or until :meth:`flush`."""

    def __init__(self, target: TextIO) -> None:
        self._target = target
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        head, newline, rest = self._pending.rpartition("\n")
        if newline:
            self._target.write(redact(head + newline))
            self._pending = rest
        return len(text)

    def flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, ""
            self._target.write(redact(pending))
        self._target.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...
        return getattr(self._target, name)


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """Scrub API keys from everything a command prints on stdout and stderr (captures, ledger
    rows, provider errors and request logs can all carry one): the one redaction pass of the
    CLI's terminal output; :func:`write_text` does the same for output files."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _RedactingStream(streams[0]), _RedactingStream(streams[1])
    try:
        yield
    finally:
        try:
            with contextlib.suppress(BrokenPipeError):  # a closed pipe was already handled
                sys.stdout.flush()
            sys.stderr.flush()
        finally:
            sys.stdout, sys.stderr = streams


_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e"
                       "\u2066-\u2069]")
"""Characters a terminal acts on instead of showing: C0 controls (escape, carriage return,
newline, tab, bell, ...), DEL, C1 controls (``\\x9b`` is a CSI on some terminals), line and
paragraph separators, and the bidirectional marks and overrides that reorder a line."""


def shown(value: object, *, markup: bool = True) -> str:
    """``value`` as text that prints literally on a terminal: the one helper for every
    string from a ledger, a capture or a request (model, session id, scenario, paths, error
    messages, snippets) that reaches the terminal.

    Each of :data:`_CONTROLS` becomes its Python escape (``\\x1b``, ``\\r``, ``\\n``,
    ``\\u202e``), so ``\\x1b[2J`` or an OSC 8 hyperlink shows as text and does nothing; with
    ``markup`` (text that rich renders: ``console.print``, table cells and titles) rich
    markup is escaped too (:func:`rich.markup.escape`), so ``[bold]``, ``[/]`` (a
    ``MarkupError`` otherwise) and ``[link=...]`` print as typed. ``markup=False`` for
    plain ``print`` and log lines.
    """
    text = _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"),
                         str(value))
    if not markup:
        return text
    from rich.markup import escape

    return escape(text)


def rich_console(**options: Any) -> Any:
    """A ``rich.console.Console`` (``options`` as rich takes them) whose closed-pipe handling
    raises :class:`BrokenPipeError` for the dispatcher to handle (rich's own exits 1), and
    that never turns ``:name:`` codes into emoji (a ledger string ``sc:smile:`` prints as
    typed; :func:`shown` escapes markup, not emoji codes)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return _Console(**{"emoji": False, **options})


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, creating parent directories; key-shaped strings
    are scrubbed (:func:`~stableprompt._redact.redact`), as on the terminal.

    Raises:
        OSError: The file cannot be written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(redact(text), encoding="utf-8")


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(os.curdir)  # pragma: no cover - "." and "/" always exist


def _probe_directory(directory: Path, target: Path) -> str | None:
    """Create and delete a temporary file in ``directory`` (``target`` or its nearest existing
    ancestor); the OS's reason when it fails."""
    try:
        fd, name = tempfile.mkstemp(prefix=".stableprompt-probe-", dir=directory)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if directory == target:
            return f"cannot create files in {str(directory)!r} ({reason})"
        return (f"cannot create {str(target)!r}: files cannot be created in "
                f"{str(directory)!r} ({reason})")
    os.close(fd)
    os.unlink(name)
    return None


def output_file_problem(path: Path) -> str | None:
    """Why :func:`write_text` could not write ``path``, or ``None`` when it can.

    Checked by trying: an existing file is opened for appending (not truncated); a missing
    one is created and deleted again (in its nearest existing ancestor when parent
    directories are missing, as :func:`write_text` creates them). Nothing is left behind.
    """
    if path.is_dir():
        return f"{str(path)!r} is a directory"
    if os.path.lexists(path) and not path.exists():
        return f"{str(path)!r} is a dangling symbolic link"
    if path.exists():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NONBLOCK", 0)))
        except OSError as exc:
            return f"cannot write {str(path)!r} ({exc.strerror or exc})"
        return None
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        return f"cannot create {str(path)!r}: {str(base)!r} is not a directory"
    if base != path.parent:
        return _probe_directory(base, path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return f"cannot create {str(path)!r} ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(path)
    return None


def output_dir_problem(path: Path) -> str | None:
    """Why files could not be written into directory ``path`` (created if missing), or
    ``None`` when they can. Checked by creating and deleting a temporary file."""
    if os.path.lexists(path):
        if not path.is_dir():
            return f"{str(path)!r} exists and is not a directory"
        return _probe_directory(path, path)
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        return f"cannot create {str(path)!r}: {str(base)!r} is not a directory"
    return _probe_directory(base, path)


def _checked_path(text: str, problem_of: Callable[[Path], str | None]) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("the path is empty")
    path = Path(text)
    problem = problem_of(path)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return path


def output_file_arg(text: str) -> Path:
    """argparse ``type=`` for an output file: checked before the command runs (so a bad
    ``--html PATH`` fails at once, naming the option, not after the work).

    Raises:
        argparse.ArgumentTypeError: Empty, or see :func:`output_file_problem`.
    """
    return _checked_path(text, output_file_problem)


def output_dir_arg(text: str) -> Path:
    """argparse ``type=`` for an output directory (see :func:`output_file_arg`).

    Raises:
        argparse.ArgumentTypeError: Empty, or see :func:`output_dir_problem`.
    """
    return _checked_path(text, output_dir_problem)



def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name the same file (resolving links; for missing files, by path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


JSON_HELD_CHARS = 1 << 22
"""Characters of a :func:`write_scrubbed_json` document held in memory until it is complete;
past this it is written to a temporary file first (and copied to stdout once complete)."""


def write_scrubbed_json(data: Any) -> None:
    """Print ``data`` as :func:`json_text` does, its strings scrubbed where they are
    (:func:`~stableprompt._redact.scrub_json_in_place`, which modifies ``data``) instead of
    by scanning the printed text: the text is encoded in chunks and written past
    :func:`redacted_output`'s stream (lines already pending there are flushed first), so a
    large output is neither held whole nor scanned whole.

    Nothing reaches stdout until the whole document is made: it is held in memory up to
    :data:`JSON_HELD_CHARS` characters, beyond that in an unnamed temporary file (the
    system's temporary directory, ``TMPDIR``; deleted when closed, or when the process
    dies), then copied. So when making it fails partway (``report --json`` whose temporary
    spill file fails while the sessions are read), stdout holds no truncated document, and
    the command line's error object (``_cli``) is the one JSON document printed.

    Raises:
        ValueError: ``data`` holds NaN or Infinity (as :func:`json_text`).
        OSError: The temporary file cannot be written (its disk full).
    """
    import json

    from ._redact import scrub_json_in_place

    scrub_json_in_place(data)
    encoder = json.JSONEncoder(indent=2, ensure_ascii=False, allow_nan=False)
    with tempfile.SpooledTemporaryFile(JSON_HELD_CHARS, mode="w+", encoding="utf-8",
                                       newline="") as held:
        batch: list[str] = []
        size = 0
        for chunk in encoder.iterencode(data):
            batch.append(chunk)
            size += len(chunk)
            if size >= 1 << 16:
                held.write("".join(batch))
                batch, size = [], 0
        held.write("".join(batch) + "\n")
        held.seek(0)
        stream = sys.stdout
        stream.flush()
        target = stream._target if isinstance(stream, _RedactingStream) else stream
        while text := held.read(1 << 16):
            target.write(text)


class LazyJsonObject(dict[str, Any]):
    """A JSON object whose entries are made as :func:`write_scrubbed_json` encodes it (e.g.
    the report's sessions, read from a temporary file: never all in memory). Only for
    encoding with ``indent`` (the json module's Python encoder, which asks ``len()`` then
    ``items()``): it holds nothing itself, so ``dict(obj)``, ``==`` or C-accelerated
    ``json.dumps`` see it empty.

    Args:
        items: Makes ``(key, value)`` in order (called once per encoding).
        keys: Makes the keys in the same order, without the values.
        length: How many entries ``items`` makes.
    """

    def __init__(self, items: Callable[[], Iterator[tuple[str, Any]]],
                 keys: Callable[[], Iterator[str]], length: int) -> None:
        super().__init__()
        self._items, self._keys, self._length = items, keys, length
        self._scrub = False

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[str]:
        return self._keys()

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        """The entries as they are made (scrubbed after :meth:`scrub_later`)."""
        return scrubbed_entries(self._keys, self._items) if self._scrub else self._items()

    def scrub_later(self) -> None:
        """Scrub the entries as they are made (``_redact.scrub_json_in_place``)."""
        self._scrub = True


class LazyJsonArray(list[Any]):
    """A JSON array whose items are made as :func:`write_scrubbed_json` encodes it (as
    :class:`LazyJsonObject`: only for encoding; ``items`` called once per encoding, making
    ``length`` items)."""

    def __init__(self, items: Callable[[], Iterator[Any]], length: int) -> None:
        super().__init__()
        self._items, self._length = items, length
        self._scrub = False

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[Any]:
        return scrubbed_items(self._items()) if self._scrub else self._items()

    def scrub_later(self) -> None:
        """Scrub the items as they are made (``_redact.scrub_json_in_place``)."""
        self._scrub = True


def json_text(data: Any) -> str:
    """Pretty JSON text (2-space indent, keys in insertion order, which is deterministic) with
    a final newline."""
    import json

    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
