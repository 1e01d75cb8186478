"""Tests for ``_wire._nlohmann``: ``nlohmann::ordered_json::dump()`` reproduced byte for byte.

The expected strings were written by the vendored ``json.hpp`` itself (llama.cpp 0c1e570 via
llama-cpp-python 0.3.36, compiled into a 10-line dump program); 200,000 random doubles and
3,000 random documents matched it before these were pinned."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stableprompt import CanonicalizationError
from stableprompt._wire._nlohmann import dump, format_double

#: value -> what nlohmann writes (Python's repr differs on most of the interesting ones).
DOUBLES = [
    (0.1, "0.1"), (1e15, "1e+15"), (1e16, "1e+16"), (1e-5, "1e-05"), (0.0001, "0.0001"),
    (123456789012345.0, "123456789012345.0"), (1234567890123456.0, "1.234567890123456e+15"),
    (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
    (2 / 3, "0.6666666666666666"), (1e21, "1e+21"), (100.0, "100.0"), (-0.0, "-0.0"),
    (-2.5, "-2.5"), (0.30000000000000004, "0.30000000000000004"), (1e-07, "1e-07"),
    (0.0125, "0.0125"), (0.0, "0.0"),
    # Grisu2 is not always shortest: one digit more than Python's repr, as the C++ writes
    (3.481616345211129e68, "3.4816163452111288e+68"),
    (3.502271575057477e-223, "3.5022715750574766e-223"),
]


@pytest.mark.parametrize(("value", "expected"), DOUBLES)
def test_doubles_are_written_as_nlohmann_writes_them(value: float, expected: str) -> None:
    """Fixed notation for decimal exponents -4 < n <= 15, else d.ddde+XX; Grisu2 digits."""
    assert format_double(value) == expected


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_doubles_round_trip(value: float) -> None:
    """Every finite double reads back as itself (Grisu2's guarantee)."""
    text = format_double(value)
    assert float(text) == value and math.copysign(1, float(text)) == math.copysign(1, value)


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_every_bit_pattern_gives_a_number(bits: int) -> None:
    """Denormals, powers of two (the closer lower boundary) and huge values all format."""
    value = struct.unpack("<d", struct.pack("<Q", bits))[0]
    if math.isfinite(value):
        assert float(format_double(value)) == value
    else:
        assert dump(value) == "null"


def test_documents_keep_order_and_escape_only_what_nlohmann_escapes() -> None:
    """Compact, insertion order, raw UTF-8 (U+2028 and DEL too), \\u00xx for other
    controls, integers beyond 64 bits as doubles (the parser's fallback)."""
    doc = {"z": 1, "a": {"y": [True, False, None, {}], "x": []},
           "s": "\x01\x7f\b\t\n\f\r\"\\/é😀\u2028", "n": [18446744073709551615,
                                                          -9223372036854775808,
                                                          18446744073709551616, 1e5]}
    assert dump(doc) == (
        '{"z":1,"a":{"y":[true,false,null,{}],"x":[]},'
        '"s":"\\u0001\x7f\\b\\t\\n\\f\\r\\"\\\\/é😀\u2028",'
        '"n":[18446744073709551615,-9223372036854775808,1.8446744073709552e+19,100000.0]}')


def test_tuples_are_arrays_and_non_finite_doubles_null() -> None:
    """A tuple is a JSON array; NaN and infinities are written as null, as nlohmann does."""
    assert dump((1, float("nan"), float("-inf"))) == "[1,null,null]"


@pytest.mark.parametrize(("value", "code", "pointer"), [
    ({"a": [1, {2}]}, "canonical-type", "/a/1"),
    ({"a": {1: 2}}, "canonical-key", "/a"),
    ({"s": "\ud800"}, "canonical-surrogate", "/s"),
    ([10**400], "canonical-int-range", "/0"),
])
def test_values_without_json_form_name_their_pointer(value: object, code: str,
                                                     pointer: str) -> None:
    """Sets, non-string keys, lone surrogates and integers past the double range raise."""
    with pytest.raises(CanonicalizationError) as info:
        dump(value, "")
    assert (info.value.code, info.value.pointer) == (code, pointer)
