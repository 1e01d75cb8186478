"""Which ledger backend a ``Ledger(target)`` names: a path or a URL.

``postgresql://`` or ``postgres://`` (PostgreSQL), ``sqlite:///relative`` /
``sqlite:////absolute`` or a plain path (SQLite). Any other ``scheme://`` is a
:class:`LedgerError` (code ``ledger-url-scheme``), never a file or folder named after the URL.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .._exceptions import LedgerError
from ._backend import Backend
from ._postgres import PostgresBackend, redact_url
from ._sqlite import SqliteBackend

__all__ = ["backend_for", "check_target", "is_url", "shown_target"]

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` is written as a URL (``scheme://...``) rather than a path."""
    return isinstance(target, str) and _URL.match(target) is not None


def shown_target(target: str | os.PathLike[str]) -> str:
    """How output names a ledger target: a URL with its password redacted, a path as given."""
    return redact_url(target) if isinstance(target, str) and is_url(target) else os.fspath(target)


def check_target(target: str) -> str:
    """``target`` when it names a backend :func:`backend_for` supports (nothing is opened).

    Raises:
        LedgerError: As :func:`backend_for` (``ledger-url-scheme``, ``ledger-url``).
    """
    match = _URL.match(target)
    if match is not None and match.group(1).lower() not in ("postgresql", "postgres",
                                                              "sqlite"):
        backend_for(target, busy_timeout_s=0, spill_dir=None)  # raises the scheme error
    return target


def backend_for(target: str | os.PathLike[str], *, busy_timeout_s: float,
                spill_dir: str | os.PathLike[str] | None) -> Backend:
    """The backend of ``Ledger(target)``.

    Args:
        target: A path, ``sqlite:///relative/path`` or ``sqlite:////absolute/path`` (as
            SQLAlchemy writes them), or
            ``postgresql://user:password@host:port/dbname?...`` (also ``postgres://``).
        busy_timeout_s: Lock wait (SQLite) / connect timeout (PostgreSQL), seconds.
        spill_dir: Where a PostgreSQL ledger keeps its spill files and journals.

    Raises:
        LedgerError: An unsupported URL scheme (code ``ledger-url-scheme``) or a malformed
            PostgreSQL URL (``ledger-url``); the message shows no password.
    """
    match = _URL.match(target) if isinstance(target, str) else None
    if match is None:
        return SqliteBackend(Path(os.path.abspath(os.fspath(target))),
                             busy_timeout_s=busy_timeout_s)
    assert isinstance(target, str)
    scheme = match.group(1).lower()
    if scheme in ("postgresql", "postgres"):
        return PostgresBackend(target, busy_timeout_s=busy_timeout_s, spill_dir=spill_dir)
    if scheme == "sqlite":
        rest = target[match.end():]
        if not rest.startswith("/") or len(rest) < 2:
            raise LedgerError(f"sqlite URL {target!r} needs a path: sqlite:///relative/path "
                              "or sqlite:////absolute/path", code="ledger-url")
        return SqliteBackend(Path(os.path.abspath(rest[1:])), busy_timeout_s=busy_timeout_s)
    raise LedgerError(
        f"unsupported ledger URL scheme {scheme + '://'!r} in {redact_url(target)!r}: a "
        "ledger is a SQLite file path "
        "(or sqlite:///path) or a PostgreSQL URL (postgresql://user@host:5432/dbname)",
        code="ledger-url-scheme",
    )


