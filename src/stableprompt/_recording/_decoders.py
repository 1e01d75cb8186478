"""Content-Encoding decoders, in the shape of ``httpx/_decoders.py``.

A :class:`ContentDecoder` is fed the raw bytes of a body in order (:meth:`~ContentDecoder.decode`)
and then :meth:`~ContentDecoder.flush`\\ ed once. One class per coding: identity, ``deflate``
(zlib header, or raw deflate as some servers send), ``gzip``, ``br`` (``brotli`` or
``brotlicffi``) and ``zstd`` (``zstandard``, several frames); :class:`MultiDecoder` undoes a
list of codings. :data:`SUPPORTED_DECODERS` holds the codings whose packages import (the same
packages httpx itself uses: it only advertises ``br``/``zstd`` when they are installed).
Decoding errors are the libraries' own exceptions (``zlib.error``, ...), raised unchanged.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = [
    "SUPPORTED_DECODERS",
    "BrotliDecoder",
    "ContentDecoder",
    "DeflateDecoder",
    "GZipDecoder",
    "IdentityDecoder",
    "MultiDecoder",
    "ZStandardDecoder",
    "decoder_for",
]


def _first_importable(*names: str) -> ModuleType | None:
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


_brotli = _first_importable("brotli", "brotlicffi")
_zstandard = _first_importable("zstandard")


class ContentDecoder:
    """One content coding's incremental decoder: :meth:`decode` each chunk, then :meth:`flush`."""

    def decode(self, data: bytes) -> bytes:
        """The decoded bytes of the next chunk (possibly ``b""`` while input is buffered)."""
        raise NotImplementedError  # pragma: no cover

    def flush(self) -> bytes:
        """The decoded bytes still buffered at the end of the body."""
        raise NotImplementedError  # pragma: no cover


class IdentityDecoder(ContentDecoder):
    """No coding: bytes pass through."""

    def decode(self, data: bytes) -> bytes:
        return data

    def flush(self) -> bytes:
        return b""


class DeflateDecoder(ContentDecoder):
    """``deflate``: zlib-wrapped, or raw deflate (retried once, on the first failure) as some
    servers send it without the zlib header."""

    def __init__(self) -> None:
        self._obj: Any = zlib.decompressobj(zlib.MAX_WBITS)
        self._retried = False

    def decode(self, data: bytes) -> bytes:
        try:
            return bytes(self._obj.decompress(data))
        except zlib.error:
            if self._retried:
                raise
            self._retried = True  # deflate sent without the zlib header
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
            return bytes(self._obj.decompress(data))

    def flush(self) -> bytes:
        return bytes(self._obj.flush())


class GZipDecoder(ContentDecoder):
    """``gzip`` (and ``x-gzip``)."""

    def __init__(self) -> None:
        self._obj: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def decode(self, data: bytes) -> bytes:
        return bytes(self._obj.decompress(data))

    def flush(self) -> bytes:
        return bytes(self._obj.flush())


class BrotliDecoder(ContentDecoder):
    """``br``, with ``brotli`` (``process``) or ``brotlicffi`` (``decompress``)."""

    def __init__(self) -> None:
        if _brotli is None:  # pragma: no cover - only in SUPPORTED_DECODERS when it imports
            raise ImportError("brotli (or brotlicffi) is not installed")
        obj = _brotli.Decompressor()
        self._step = getattr(obj, "process", None) or obj.decompress

    def decode(self, data: bytes) -> bytes:
        return bytes(self._step(data))

    def flush(self) -> bytes:
        return b""


class ZStandardDecoder(ContentDecoder):
    """``zstd`` with ``zstandard``; a body of several frames is decoded frame after frame."""

    def __init__(self) -> None:
        if _zstandard is None:  # pragma: no cover - only in SUPPORTED_DECODERS when it imports
            raise ImportError("zstandard is not installed")
        self._obj: Any = _zstandard.ZstdDecompressor().decompressobj()

    def decode(self, data: bytes) -> bytes:
        assert _zstandard is not None
        out = self._obj.decompress(data)
        while self._obj.eof and self._obj.unused_data:
            rest = self._obj.unused_data
            self._obj = _zstandard.ZstdDecompressor().decompressobj()
            out += self._obj.decompress(rest)
        return bytes(out)

    def flush(self) -> bytes:
        return b""


class MultiDecoder(ContentDecoder):
    """Several codings, applied in the order given (so decoded last one first).

    Args:
        children: One decoder per coding, in the order the codings were applied.
    """

    def __init__(self, children: Sequence[ContentDecoder]) -> None:
        self.children = list(reversed(children))

    def decode(self, data: bytes) -> bytes:
        for child in self.children:
            if not data:
                break
            data = child.decode(data)
        return data

    def flush(self) -> bytes:
        data = b""
        for child in self.children:
            data = (child.decode(data) if data else b"") + child.flush()
        return data


SUPPORTED_DECODERS: Mapping[str, type[ContentDecoder]] = {
    "identity": IdentityDecoder,
    "gzip": GZipDecoder,
    "x-gzip": GZipDecoder,
    "deflate": DeflateDecoder,
    **({"br": BrotliDecoder} if _brotli is not None else {}),
    **({"zstd": ZStandardDecoder} if _zstandard is not None else {}),
}
"""Content codings decodable here -> their decoder class (``br``/``zstd`` only when their
package imports)."""

_PACKAGES = {"br": "brotli (or brotlicffi)", "zstd": "zstandard"}


def decoder_for(content_encoding: str) -> ContentDecoder:
    """The decoder for a ``Content-Encoding`` header value (codings separated by commas, in the
    order applied; ``identity`` and empty entries ignored; any case).

    Raises:
        LookupError: A coding is unknown, or its package is not installed; the message says
            which (and which package to install), ending in ``usage unknown``.
    """
    names = [e.strip().lower() for e in content_encoding.split(",") if e.strip()]
    children: list[ContentDecoder] = []
    for name in reversed(names):  # the last coding applied is decoded (and judged) first
        if name == "identity":
            continue
        cls = SUPPORTED_DECODERS.get(name)
        if cls is None:
            package = _PACKAGES.get(name)
            raise LookupError(
                f"content-encoding {name!r} needs the {package} package to be decoded "
                "(pip install it): usage unknown" if package else
                f"content-encoding {name!r} is not decodable here: usage unknown")
        children.append(cls())
    if not children:
        return IdentityDecoder()
    return children[0] if len(children) == 1 else MultiDecoder(children[::-1])
