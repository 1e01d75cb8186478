"""No full cyclic-GC passes while ``lint_capture`` runs (restored after, thread-safe); also
around ``stableprompt report``'s one pass (``_report._command``: its per-call ceilings only
grow, and each full pass over a million calls' worth frees nothing).

Why: lint keeps every request's segments and the digest indexes until the report (pairing
runs after the last request is read), so the objects it holds only grow; CPython runs a full
collection each time the long-lived objects grew by a quarter, and each one walks all of
them and finds nothing to free (measured on ``benchmarks/lint.py``: six full passes, about a
quarter of lint's time). Young collections (generations 0 and 1) still run, so short-lived
cycles are freed as usual; what survives them waits for the first full collection after
lint returns.

This changes the process's GC thresholds for the duration, which is global state: it is set
by the first of any concurrent lint runs and restored (to what it was before) by the last,
in ``finally``.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_full_collections"]

_NEVER = 1 << 30
"""A generation-2 threshold no run reaches (young collections between full ones)."""

_lock = threading.Lock()
_active = 0
_saved: tuple[int, int, int] = (0, 0, 0)


@contextmanager
def no_full_collections() -> Iterator[None]:
    """Within the block, the cyclic GC collects generations 0 and 1 only; the thresholds
    (:func:`gc.get_threshold`) are put back when the last concurrent block exits."""
    global _active, _saved
    with _lock:
        if not _active:
            _saved = gc.get_threshold()
            gc.set_threshold(_saved[0], _saved[1], _NEVER)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if not _active:
                gc.set_threshold(*_saved)
