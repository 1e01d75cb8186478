"""Shared fixtures: tests reach no network but loopback."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return True  # AF_UNIX paths and the like stay on the machine


def _guarded(real: Any) -> Any:
    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
            raise OSError(f"tests reach no network but loopback (tried {address!r})")
        return real(self, address)

    return connect


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make any non-loopback socket connection fail."""
    monkeypatch.setattr(socket.socket, "connect", _guarded(_real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded(_real_connect_ex))
    yield


@pytest.fixture(scope="session")
def bfcl_demo_workload(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The real BFCL v4 multi-turn workload, fetched once per test session from PyPI into a
    temporary cache (or the user's ``STABLEPROMPT_CACHE_DIR`` / ``STABLEPROMPT_BFCL_WHEEL``);
    skips with the reason when PyPI is unreachable."""
    from stableprompt import WorkloadUnavailableError
    from stableprompt.demo import bfcl_workload

    with pytest.MonkeyPatch.context() as mp:
        if not (os.environ.get("STABLEPROMPT_CACHE_DIR")
                or os.environ.get("STABLEPROMPT_BFCL_WHEEL")):
            mp.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path_factory.mktemp("bfcl-cache")))
        try:
            return bfcl_workload()
        except WorkloadUnavailableError as exc:
            pytest.skip(f"BFCL data unavailable: {exc}")
