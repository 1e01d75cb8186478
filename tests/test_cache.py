"""Tests for the one user cache root (``_cache.cache_root``) shared by BFCL and the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from stableprompt._cache import cache_root


def test_explicit_variable_wins_then_xdg_then_home(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """STABLEPROMPT_CACHE_DIR beats XDG_CACHE_HOME/stableprompt, which beats ~/.cache, and
    empty values count as unset."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "explicit"
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", "")
    assert cache_root() == tmp_path / "xdg" / "stableprompt"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root() == tmp_path / "home" / ".cache" / "stableprompt"


def test_bfcl_uses_the_shared_root() -> None:
    """The BFCL loader has no cache-root logic of its own."""
    from stableprompt.demo import _bfcl

    assert vars(_bfcl)["cache_root"] is cache_root
    assert not hasattr(_bfcl, "_cache_root")
