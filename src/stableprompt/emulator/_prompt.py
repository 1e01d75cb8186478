"""A request rendered as a chain of blocks: per-block tokens, running totals, prefix hashes.

Each block is the exact bytes the emulator attributes to one provider-level unit (a tool, a
system block, a message content block). Its prefix hash chains every earlier block:
``h_i = SHA-256(h_{i-1} || SHA-256(bytes_i))``, starting from a hash of the request's scope
(provider, API key, model, cache-relevant parameters). Two requests share a cache entry exactly
when they share a prefix hash, i.e. when every byte up to that block boundary is identical.

A chain built with an ``interval`` (GPT-5.5: "implicit breakpoints every 2,048 tokens") also
names the prefix ending at every multiple of ``interval`` tokens, wherever it falls:
``SHA-256(tag || h_{i-1} || SHA-256(token ids of the first n tokens of block i))``. Two requests
share such a :class:`Point` exactly when every block before it is identical and the block
holding it starts with the same ``n`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import sha256

from ._tokens import BlockTokenizer

__all__ = ["Block", "Point", "PromptChain"]

_TAG = b"stableprompt-emulator-prefix-v1\x00"
_POINT_TAG = b"stableprompt-emulator-point-v1\x00"


@dataclass(frozen=True, slots=True)
class Block:
    """One rendered block.

    Attributes:
        where: Location in the request, e.g. ``"system.0"`` or ``"messages.3.content.1"``.
        tokens: Tokens of this block.
        end_tokens: Tokens of the whole prefix ending with this block.
        prefix_hash: Chained hash naming that prefix (the cache key).
        kind: ``"tool"``, ``"system"``, ``"message"``, ``"item"`` or ``"compaction"`` (a
            Responses compaction item); ``"params"`` for a zero-token settings entry of a
            diagnostics fingerprint (``_diagnostics``).
        digest: SHA-256 of this block's bytes alone (independent of the blocks before it).
    """

    where: str
    tokens: int
    end_tokens: int
    prefix_hash: bytes
    kind: str
    digest: bytes = b""


@dataclass(frozen=True, slots=True)
class Point:
    """A prefix ending at a multiple of the chain's ``interval``, inside a block or at its end.

    Attributes:
        end_tokens: Tokens of the prefix (a multiple of the interval).
        prefix_hash: Hash naming that prefix (the cache key); never equal to a block's.
    """

    end_tokens: int
    prefix_hash: bytes


class PromptChain:
    """Accumulates blocks in provider order.

    Args:
        tokenizer: Counts block tokens (cached per block digest).
        scope: Bytes naming everything that makes caches disjoint (provider, key, model, ...).
        interval: Also name the prefix at every multiple of this many tokens (:attr:`points`);
            ``None``: block boundaries only.
    """

    def __init__(
        self, tokenizer: BlockTokenizer, scope: bytes, *, interval: int | None = None
    ) -> None:
        self._tokenizer = tokenizer
        self._hash = sha256(_TAG + scope).digest()
        self.interval = interval
        self.blocks: list[Block] = []
        self.points: list[Point] = []
        self.total_tokens = 0

    def mix(self, data: bytes) -> None:
        """Fold zero-token bytes (cache-relevant parameters) into every later prefix hash."""
        self._hash = sha256(self._hash + b"\x01" + sha256(data).digest()).digest()

    def add(self, data: bytes, *, where: str, kind: str) -> int:
        """Append one block rendered as ``data`` (and its interval points); return its index."""
        digest = sha256(data).digest()
        tokens = self._tokenizer.count_block(data, digest)
        start, parent = self.total_tokens, self._hash
        self.total_tokens += tokens
        self._hash = sha256(parent + digest).digest()
        self.blocks.append(Block(where, tokens, self.total_tokens, self._hash, kind, digest))
        step = self.interval
        if step is not None:
            for end in range(start // step * step + step, self.total_tokens + 1, step):
                inner = self._tokenizer.prefix_digest(data, digest, end - start)
                self.points.append(Point(end, sha256(_POINT_TAG + parent + inner).digest()))
        return len(self.blocks) - 1
