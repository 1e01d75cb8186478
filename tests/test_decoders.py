"""Tests for the content-encoding decoders (``_recording/_decoders``)."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import zlib

import brotli  # type: ignore[import-untyped]
import pytest
import zstandard

from stableprompt._recording._decoders import (
    SUPPORTED_DECODERS,
    DeflateDecoder,
    IdentityDecoder,
    MultiDecoder,
    decoder_for,
)

BODY = b'{"usage": {"input_tokens": 3000}}' * 50


def _chunked(data: bytes, size: int = 7) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def _decode(encoding: str, data: bytes) -> bytes:
    decoder = decoder_for(encoding)
    return b"".join(decoder.decode(chunk) for chunk in _chunked(data)) + decoder.flush()


@pytest.mark.parametrize(("encoding", "encode"), [
    ("gzip", gzip.compress),
    ("x-gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("br", brotli.compress),
    ("zstd", zstandard.ZstdCompressor().compress),
    ("identity", bytes),
    ("", bytes),
])
def test_each_coding_decodes_in_small_chunks(encoding: str, encode: object) -> None:
    """Every supported coding decodes a body fed in 7-byte chunks to the original bytes."""
    assert callable(encode)
    assert _decode(encoding, encode(BODY)) == BODY


def test_raw_deflate_and_several_zstd_frames_decode() -> None:
    """deflate without the zlib header (as some servers send) is retried as raw deflate, and a
    zstd body of two frames decodes to both."""
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    assert _decode("deflate", raw.compress(BODY) + raw.flush()) == BODY
    frame = zstandard.ZstdCompressor().compress
    assert _decode("zstd", frame(BODY) + frame(BODY)) == BODY * 2


def test_stacked_codings_are_undone_last_first() -> None:
    """``gzip, br`` (gzip applied first) is decoded by a MultiDecoder, brotli first."""
    decoder = decoder_for("gzip, br")
    assert isinstance(decoder, MultiDecoder)
    data = brotli.compress(gzip.compress(BODY))
    assert _decode("GZip, identity, br", data) == BODY
    assert isinstance(decoder_for("identity"), IdentityDecoder)
    assert isinstance(decoder_for("deflate"), DeflateDecoder)


def test_unknown_codings_raise_lookup_errors_naming_them() -> None:
    """An unknown coding raises LookupError naming it (the observer's reason)."""
    with pytest.raises(LookupError, match="'compress' is not decodable here: usage unknown"):
        decoder_for("gzip, compress")


def test_table_holds_only_codings_whose_package_imports() -> None:
    """With brotli and brotlicffi not importable, ``br`` is not supported and asking for it
    names the package to install."""
    code = (
        "import sys; sys.modules['brotli'] = sys.modules['brotlicffi'] = None\n"
        "from stableprompt._recording._decoders import SUPPORTED_DECODERS, decoder_for\n"
        "assert 'br' not in SUPPORTED_DECODERS and 'zstd' in SUPPORTED_DECODERS\n"
        "try:\n    decoder_for('br')\nexcept LookupError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ)).stdout
    assert out.strip() == ("content-encoding 'br' needs the brotli (or brotlicffi) package to "
                           "be decoded (pip install it): usage unknown")
    assert {"gzip", "deflate", "br", "zstd"} <= set(SUPPORTED_DECODERS)
