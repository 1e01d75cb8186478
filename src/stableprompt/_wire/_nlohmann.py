"""``nlohmann::ordered_json::dump()`` in Python: the text llama.cpp writes for a JSON value.

llama-server's request conversions turn some JSON values into text with ``dump()`` (the
Anthropic ``tool_use.input`` becomes the chat ``arguments`` string), and a chat template that
renders the arguments string shows exactly those bytes. Python's ``json``/orjson write the same
values differently (``1e15`` vs ``1e+15``, ``1e-05``, escapes), so this module reproduces the
vendored library (llama.cpp 0c1e570 via llama-cpp-python 0.3.36, ``vendor/nlohmann/json.hpp``):

- compact: no spaces, ``,`` and ``:`` separators; object keys in insertion order;
- strings as UTF-8, escaping only ``"``, ``\\``, ``\\b \\f \\n \\r \\t`` and the other controls
  below U+0020 as ``\\u00xx`` (lowercase hex; ``serializer::dump_escaped``, ensure_ascii off);
- integers in decimal; doubles with Grisu2 (``dtoa_impl::grisu2``: round-trips, shortest in
  nearly all cases, but not always) laid out by ``format_buffer``: fixed notation for decimal
  exponents -4 < n <= 15, else ``d.ddde+XX`` (two exponent digits at least), ``.0`` on
  integral values; non-finite doubles as ``null``. An integer outside the 64-bit range is
  a double there (the parser's fallback), so it is written as one.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

from .._exceptions import CanonicalizationError
from ._fields import child

__all__ = ["dump", "format_double"]

_MASK64 = (1 << 64) - 1
_ALPHA, _GAMMA = -60, -32

#: ``dtoa_impl::get_cached_power_for_binary_exponent``: (f, e, k) with c = f * 2^e ~= 10^k.
_CACHED_POWERS: tuple[tuple[int, int, int], ...] = (
    (0xAB70FE17C79AC6CA, -1060, -300), (0xFF77B1FCBEBCDC4F, -1034, -292),
    (0xBE5691EF416BD60C, -1007, -284), (0x8DD01FAD907FFC3C, -980, -276),
    (0xD3515C2831559A83, -954, -268), (0x9D71AC8FADA6C9B5, -927, -260),
    (0xEA9C227723EE8BCB, -901, -252), (0xAECC49914078536D, -874, -244),
    (0x823C12795DB6CE57, -847, -236), (0xC21094364DFB5637, -821, -228),
    (0x9096EA6F3848984F, -794, -220), (0xD77485CB25823AC7, -768, -212),
    (0xA086CFCD97BF97F4, -741, -204), (0xEF340A98172AACE5, -715, -196),
    (0xB23867FB2A35B28E, -688, -188), (0x84C8D4DFD2C63F3B, -661, -180),
    (0xC5DD44271AD3CDBA, -635, -172), (0x936B9FCEBB25C996, -608, -164),
    (0xDBAC6C247D62A584, -582, -156), (0xA3AB66580D5FDAF6, -555, -148),
    (0xF3E2F893DEC3F126, -529, -140), (0xB5B5ADA8AAFF80B8, -502, -132),
    (0x87625F056C7C4A8B, -475, -124), (0xC9BCFF6034C13053, -449, -116),
    (0x964E858C91BA2655, -422, -108), (0xDFF9772470297EBD, -396, -100),
    (0xA6DFBD9FB8E5B88F, -369, -92), (0xF8A95FCF88747D94, -343, -84),
    (0xB94470938FA89BCF, -316, -76), (0x8A08F0F8BF0F156B, -289, -68),
    (0xCDB02555653131B6, -263, -60), (0x993FE2C6D07B7FAC, -236, -52),
    (0xE45C10C42A2B3B06, -210, -44), (0xAA242499697392D3, -183, -36),
    (0xFD87B5F28300CA0E, -157, -28), (0xBCE5086492111AEB, -130, -20),
    (0x8CBCCC096F5088CC, -103, -12), (0xD1B71758E219652C, -77, -4),
    (0x9C40000000000000, -50, 4), (0xE8D4A51000000000, -24, 12),
    (0xAD78EBC5AC620000, 3, 20), (0x813F3978F8940984, 30, 28),
    (0xC097CE7BC90715B3, 56, 36), (0x8F7E32CE7BEA5C70, 83, 44),
    (0xD5D238A4ABE98068, 109, 52), (0x9F4F2726179A2245, 136, 60),
    (0xED63A231D4C4FB27, 162, 68), (0xB0DE65388CC8ADA8, 189, 76),
    (0x83C7088E1AAB65DB, 216, 84), (0xC45D1DF942711D9A, 242, 92),
    (0x924D692CA61BE758, 269, 100), (0xDA01EE641A708DEA, 295, 108),
    (0xA26DA3999AEF774A, 322, 116), (0xF209787BB47D6B85, 348, 124),
    (0xB454E4A179DD1877, 375, 132), (0x865B86925B9BC5C2, 402, 140),
    (0xC83553C5C8965D3D, 428, 148), (0x952AB45CFA97A0B3, 455, 156),
    (0xDE469FBD99A05FE3, 481, 164), (0xA59BC234DB398C25, 508, 172),
    (0xF6C69A72A3989F5C, 534, 180), (0xB7DCBF5354E9BECE, 561, 188),
    (0x88FCF317F22241E2, 588, 196), (0xCC20CE9BD35C78A5, 614, 204),
    (0x98165AF37B2153DF, 641, 212), (0xE2A0B5DC971F303A, 667, 220),
    (0xA8D9D1535CE3B396, 694, 228), (0xFB9B7CD9A4A7443C, 720, 236),
    (0xBB764C4CA7A44410, 747, 244), (0x8BAB8EEFB6409C1A, 774, 252),
    (0xD01FEF10A657842C, 800, 260), (0x9B10A4E5E9913129, 827, 268),
    (0xE7109BFBA19C0C9D, 853, 276), (0xAC2820D9623BF429, 880, 284),
    (0x80444B5E7AA7CF85, 907, 292), (0xBF21E44003ACDD2D, 933, 300),
    (0x8E679C2F5E44FF8F, 960, 308), (0xD433179D9C8CB841, 986, 316),
    (0x9E19DB92B4E31BA9, 1013, 324),
)


def _mul(xf: int, yf: int) -> int:
    """``diyfp::mul``: the upper 64 bits of the 128-bit product, rounded half up."""
    return (xf * yf + (1 << 63)) >> 64


def _normalize(f: int, e: int) -> tuple[int, int]:
    shift = 64 - f.bit_length()
    return f << shift, e - shift


def _grisu2(value: float) -> tuple[str, int]:
    """Digits and decimal exponent with ``value == int(digits) * 10**exponent`` (value > 0)."""
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    big_e, big_f = bits >> 52, bits & ((1 << 52) - 1)
    vf, ve = (big_f, -1074) if big_e == 0 else (big_f + (1 << 52), big_e - 1075)
    # compute_boundaries: m+ = v + ulp/2, m- = v - ulp/2 (or ulp/4 below a power of two)
    plus_f, plus_e = _normalize(2 * vf + 1, ve - 1)
    minus_f, minus_e = (4 * vf - 1, ve - 2) if big_f == 0 and big_e > 1 else (2 * vf - 1, ve - 1)
    minus_f <<= minus_e - plus_e
    w_f, _ = _normalize(vf, ve)
    # get_cached_power_for_binary_exponent (C division truncates toward zero)
    f = _ALPHA - plus_e - 1
    k = int(f * 78913 / (1 << 18)) + (1 if f > 0 else 0)
    c_f, c_e, c_k = _CACHED_POWERS[(300 + k + 7) // 8]
    e = c_e + plus_e + 64
    m_plus = _mul(plus_f, c_f) - 1
    m_minus = _mul(minus_f, c_f) + 1
    w = _mul(w_f, c_f)
    return _digit_gen(m_minus, w, m_plus, e, -c_k)


def _digit_gen(m_minus: int, w: int, m_plus: int, e: int, exponent: int) -> tuple[str, int]:
    """``dtoa_impl::grisu2_digit_gen`` on significands sharing binary exponent ``e``."""
    delta = m_plus - m_minus
    dist = m_plus - w
    shift = -e
    one_f = 1 << shift
    p1 = m_plus >> shift
    p2 = m_plus & (one_f - 1)
    digits: list[int] = []
    pow10 = 10 ** (len(str(p1)) - 1)
    n = len(str(p1))
    while n > 0:
        d, p1 = divmod(p1, pow10)
        digits.append(d)
        n -= 1
        rest = (p1 << shift) + p2
        if rest <= delta:
            return _round(digits, dist, delta, rest, pow10 << shift), exponent + n
        pow10 //= 10
    m = 0
    while True:
        p2 *= 10
        digits.append(p2 >> shift)
        p2 &= one_f - 1
        m += 1
        delta = (delta * 10) & _MASK64
        dist = (dist * 10) & _MASK64
        if p2 <= delta:
            break
    return _round(digits, dist, delta, p2, one_f), exponent - m


def _round(digits: list[int], dist: int, delta: int, rest: int, ten_k: int) -> str:
    """``dtoa_impl::grisu2_round``: step the last digit down toward ``w`` while allowed."""
    while (rest < dist and delta - rest >= ten_k
           and (rest + ten_k < dist or dist - rest > rest + ten_k - dist)):
        digits[-1] -= 1
        rest += ten_k
    return "".join(map(str, digits))


def format_double(value: float) -> str:
    """A double as ``nlohmann::detail::to_chars`` + ``format_buffer`` write it (finite only;
    ``dump`` writes ``null`` for NaN and infinities)."""
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    value = abs(value)
    if value == 0:
        return sign + "0.0"
    digits, exponent = _grisu2(value)
    k = len(digits)
    n = k + exponent
    if k <= n <= 15:
        body = digits + "0" * (n - k) + ".0"
    elif 0 < n <= 15:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -4 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        e = n - 1
        body = f"{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    return sign + body


_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r",
            0x22: '\\"', 0x5C: "\\\\"}
_TABLE = {**{c: f"\\u{c:04x}" for c in range(0x20)}, **_ESCAPES}


def _dump(value: Any, pointer: str, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise CanonicalizationError(
                f"cannot serialize: lone surrogate at character {exc.start} is not UTF-8",
                code="canonical-surrogate", pointer=pointer) from exc
        out.append(f'"{value.translate(_TABLE)}"')
    elif isinstance(value, int):
        if -(2**63) <= value < 2**64:
            out.append(str(value))
        else:  # the parser reads an integer beyond 64 bits as a double
            try:
                _dump(float(value), pointer, out)
            except OverflowError as exc:
                raise CanonicalizationError(
                    "cannot serialize: integer beyond the double range (llama-server's parser "
                    "rejects it as a number overflow)", code="canonical-int-range",
                    pointer=pointer) from exc
    elif isinstance(value, float):
        out.append(format_double(value) if math.isfinite(value) else "null")
    elif isinstance(value, Mapping):
        out.append("{")
        for index, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise CanonicalizationError(f"cannot serialize: non-string key {key!r}",
                                            code="canonical-key", pointer=pointer)
            if index:
                out.append(",")
            _dump(key, pointer, out)
            out.append(":")
            _dump(item, child(pointer, key), out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _dump(item, child(pointer, index), out)
        out.append("]")
    else:
        raise CanonicalizationError(f"cannot serialize: {type(value).__name__} is not a JSON "
                                    "type", code="canonical-type", pointer=pointer)


def dump(value: Any, pointer: str = "") -> str:
    """``value`` (decoded JSON) as ``nlohmann::ordered_json::dump()`` writes it.

    Args:
        value: ``dict``/Mapping (insertion order kept), ``list``/``tuple``, ``str``, ``int``,
            ``float``, ``bool``, ``None``.
        pointer: JSON pointer of ``value`` in its document (prefix of error pointers).

    Raises:
        CanonicalizationError: a value with no JSON form (``canonical-type``,
            ``canonical-key``, ``canonical-surrogate``, ``canonical-int-range``), at its
            pointer.
    """
    out: list[str] = []
    try:
        _dump(value, pointer, out)
    except RecursionError as exc:
        raise CanonicalizationError("cannot serialize: nesting too deep or circular",
                                    code="canonical-depth", pointer=pointer) from exc
    return "".join(out)
