"""The user cache every fetched artifact lives under (BFCL data, the llama.cpp engine), and the
small helpers both fetchers share (:func:`sha256_file`, :func:`pip_reason`, :func:`clip`).

One function, :func:`cache_root`, so every feature agrees on the location::

    $STABLEPROMPT_CACHE_DIR        when set and non-empty
    $XDG_CACHE_HOME/stableprompt   else, when XDG_CACHE_HOME is set and non-empty
    ~/.cache/stableprompt          else

The directory is not created here: each feature creates its own subdirectory when it writes.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

__all__ = ["cache_root", "clip", "pip_reason", "sha256_file"]


def cache_root() -> Path:
    """The stableprompt user cache directory (see the module docstring), read from the
    environment on every call (tests move it with ``STABLEPROMPT_CACHE_DIR``)."""
    explicit = os.environ.get("STABLEPROMPT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "stableprompt"
    return Path.home() / ".cache" / "stableprompt"


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of the file at ``path`` (read in 1 MiB blocks).

    Raises:
        OSError: The file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def clip(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``limit`` characters with "…"."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pip_reason(output: str, limit: int = 200) -> str:
    """The first meaningful line of pip's output (its first ``ERROR:`` line, else the last
    line), clipped to ``limit`` characters, plus the network error pip retried on, if any."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR:").strip() for line in lines if line.startswith("ERROR:")]
    reason = clip(errors[0] if errors else lines[-1] if lines else "no output", limit)
    network = re.search(r"\[Errno -?\d+\] [^\"')\]\n]+|certificate verify failed[^\"')\n]*"
                        r"|Read timed out|timed out", output, flags=re.IGNORECASE)
    if network is not None and network.group(0) not in reason:
        reason += f" (network error: {clip(network.group(0), 100)})"
    return reason
