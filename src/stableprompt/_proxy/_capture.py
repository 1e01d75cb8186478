"""``stableprompt proxy --capture DIR``: every recorded request, as a capture ``lint`` reads.

One JSONL file per proxy run (``DIR/proxy-<UTC time>-<pid>.jsonl``), one line per request to a
known endpoint with a JSON body, in arrival order: ``{"request": <body as JSON text>, "path",
"wire_format", "session", "ts_utc", "headers"}`` (the wrapper shape of ``_lint/_capture``; the
body is kept as its text so ``lint`` sees the bytes that were sent). ``headers`` holds only the
request's allow-listed cache-relevant headers (``_recording._http.cache_headers``:
``anthropic-beta``, ``anthropic-version``, ``openai-beta``, ...; absent for a format without
any), as sent: no other header is ever written (no key, no ``authorization``). Secrets are
scrubbed from every field written (body text, path, session id and those header values: the
request's credential header values, a key reused as a session id included, and key-shaped
strings, :func:`~stableprompt._redact.redact`). A write that fails is
logged once and the call goes on.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from .._canonical import canonical_json
from .._recording._http import cache_headers
from .._redact import redact, secrets_in_headers

__all__ = ["CaptureWriter"]

_log = logging.getLogger("stableprompt.proxy")


class CaptureWriter:
    """Appends captured requests to one JSONL file in ``directory`` (created if missing).

    Thread-safe; nothing here raises after construction.

    Raises:
        OSError: ``directory`` cannot be created.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.path = self.directory / f"proxy-{stamp}-{os.getpid()}.jsonl"
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._failed = False

    def write(self, *, path: str, body: bytes, headers: Any, wire_format: str | None,
              session: str | None) -> None:
        """Append one request (never raises)."""
        try:
            # one set of known secrets for every field: a key is also sent as a session id
            secrets = secrets_in_headers(headers)
            text = redact(body.decode("utf-8", "replace"), secrets=secrets)
            entry: dict[str, Any] = {
                "request": text, "path": redact(path, secrets=secrets),
                "wire_format": wire_format,
                "session": None if session is None else redact(session, secrets=secrets),
                "ts_utc": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            }
            kept = None if wire_format is None else cache_headers(headers, wire_format)
            if kept is not None:
                entry["headers"] = redact(kept, secrets=secrets)
            line = canonical_json(entry) + b"\n"
            with self._lock:
                if self._file is None:
                    self._file = open(self.path, "ab")  # noqa: SIM115 - kept open for the run
                self._file.write(line)
                self._file.flush()
        except Exception as exc:
            if not self._failed:
                self._failed = True
                _log.warning("capture write to %s failed (logged once): %s: %s", self.path,
                             type(exc).__name__, redact(str(exc)))

    def close(self) -> None:
        """Close the file (idempotent)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
