"""A manual clock for deterministic TTL tests and demos."""

from __future__ import annotations

import threading

from .._exceptions import InputError

__all__ = ["FakeClock"]

DEFAULT_START_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class FakeClock:
    """A clock (seconds since the epoch) that moves only when :meth:`advance` is called.

    Pass it as ``Emulator(clock=FakeClock())``; calling it returns the current time.

    Args:
        start: Initial time in seconds since the epoch (default 2026-01-01T00:00:00Z).
    """

    def __init__(self, start: float = DEFAULT_START_S) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` and return the new time.

        Raises:
            InputError: ``seconds`` is negative or not finite (code ``emulator-clock``).
        """
        if not seconds >= 0 or seconds == float("inf"):
            raise InputError(f"advance() needs a finite number of seconds >= 0, got {seconds!r}",
                             code="emulator-clock")
        with self._lock:
            self._now += seconds
            return self._now
