"""The user cache root every fetched artifact lives under (BFCL data, the llama.cpp engine).

One function, :func:`cache_root`, so every feature agrees on the location::

    $STABLEPROMPT_CACHE_DIR        when set and non-empty
    $XDG_CACHE_HOME/stableprompt   else, when XDG_CACHE_HOME is set and non-empty
    ~/.cache/stableprompt          else

The directory is not created here: each feature creates its own subdirectory when it writes.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


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
