"""Tests for canonical JSON (the one orjson call site)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stableprompt import CanonicalizationError, canonical_json
from stableprompt._canonical import escape_pointer, pointer_get, unescape_pointer, wire_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def _reorder(value: object) -> object:
    if isinstance(value, dict):
        return {k: _reorder(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reorder(v) for v in value]
    return value


def test_sorted_compact_utf8() -> None:
    """Keys are sorted, output is compact and non-ASCII stays raw UTF-8."""
    assert canonical_json({"b": 1, "a": ["é", 1.5, None]}) == '{"a":["é",1.5,null],"b":1}'.encode()


@given(json_values)
def test_key_order_invariant(value: object) -> None:
    """Any dict insertion order gives the same canonical bytes."""
    assert canonical_json(value) == canonical_json(_reorder(value))


def test_wire_json_keeps_insertion_order() -> None:
    """wire_json keeps the order as received (what providers tokenize)."""
    assert wire_json({"b": 1, "a": 2}) == b'{"b":1,"a":2}'


@pytest.mark.parametrize(
    ("value", "code", "pointer"),
    [
        ({"a": [1, float("nan")]}, "canonical-nan", "/a/1"),
        ({"x": {"y": float("inf")}}, "canonical-nan", "/x/y"),
        ({"a": {1: 2}}, "canonical-key", "/a"),
        ({"s": {1, 2}}, "canonical-set", "/s"),
        ({"b": b"raw"}, "canonical-bytes", "/b"),
        ({"o": object()}, "canonical-type", "/o"),
        ({"big": 2**64}, "canonical-int-range", "/big"),
        ({"a/b": {"c~d": float("nan")}}, "canonical-nan", "/a~1b/c~0d"),
        ({"d": datetime.datetime(2026, 1, 1)}, "canonical-type", "/d"),
    ],
)
def test_rejects_with_pointer(value: object, code: str, pointer: str) -> None:
    """Values without a canonical JSON form raise with a code and a JSON pointer."""
    with pytest.raises(CanonicalizationError) as info:
        canonical_json(value)
    assert info.value.code == code
    assert info.value.pointer == pointer
    assert isinstance(info.value, ValueError)


def test_huge_int_key_is_a_typed_error() -> None:
    """A dict key too long for Python to format (10**5000) is canonical-key, not ValueError."""
    with pytest.raises(CanonicalizationError) as info:
        canonical_json({"a": {10**5000: 1}})
    assert (info.value.code, info.value.pointer) == ("canonical-key", "/a")
    assert "an integer of 16610 bits" in str(info.value)


def test_enum_members_are_their_value() -> None:
    """Enum members serialize as their value, as orjson writes them."""

    class Color(str, enum.Enum):  # noqa: UP042 (a str mixin on purpose)
        RED = "red"

    assert canonical_json({"c": Color.RED}) == b'{"c":"red"}'


def test_rejects_subclasses_and_dataclasses() -> None:
    """str subclasses and dataclasses are not silently coerced."""

    class Name(str):
        pass

    @dataclasses.dataclass
    class Point:
        x: int

    for value in ({"c": Name("x")}, [Point(1)]):
        with pytest.raises(CanonicalizationError) as info:
            canonical_json(value)
        assert info.value.code == "canonical-type"


def test_null_is_not_mistaken_for_nan() -> None:
    """A genuine null passes; only NaN/Infinity hiding as null is rejected."""
    assert canonical_json({"a": None, "b": "null"}) == b'{"a":null,"b":"null"}'


def _holds_nonfinite(value: object) -> bool:
    if isinstance(value, float):
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return any(_holds_nonfinite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_nonfinite(v) for v in value)
    return False


@given(st.recursive(
    st.none() | st.floats() | st.integers(-5, 5) | st.text(max_size=3),
    lambda children: st.lists(children, max_size=4) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=12))
def test_nonfinite_floats_rejected_wherever_they_hide(value: object) -> None:
    """NaN/Infinity anywhere (orjson writes them as null, among genuine nulls) is rejected,
    naming a pointer; values without one serialize (the quick check before the full walk)."""
    if _holds_nonfinite(value):
        with pytest.raises(CanonicalizationError) as info:
            canonical_json(value)
        assert info.value.code == "canonical-nan"
    else:
        assert canonical_json(value)


def test_identical_across_hash_seeds() -> None:
    """Canonical bytes are identical in subprocesses with different PYTHONHASHSEED."""
    code = (
        "import sys;from stableprompt import canonical_json;"
        "sys.stdout.buffer.write(canonical_json({'k'+str(i): {'z': i, 'a': [i, 'x']} "
        "for i in range(50)}))"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                       env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout
        for seed in ("0", "1", "12345")
    }
    assert len(outputs) == 1


def _nest(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [300, 5000])
def test_too_deep_is_a_typed_error(depth: int) -> None:
    """Nesting beyond orjson's 255 levels (or Python's recursion limit) is canonical-depth."""
    with pytest.raises(CanonicalizationError) as info:
        canonical_json(_nest(depth))
    assert info.value.code == "canonical-depth"


def test_cycle_is_a_typed_error() -> None:
    """A self-referencing list is canonical-depth, not a RecursionError."""
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(CanonicalizationError) as info:
        canonical_json(cycle)
    assert info.value.code == "canonical-depth"


def test_lone_surrogate_names_pointer() -> None:
    """A lone surrogate is canonical-surrogate at its JSON pointer."""
    with pytest.raises(CanonicalizationError) as info:
        canonical_json({"a": {"b": "x\ud800"}})
    assert (info.value.code, info.value.pointer) == ("canonical-surrogate", "/a/b")


def test_pointer_get_follows_rfc6901() -> None:
    """The one pointer walker: escaped tokens, array indexes, ``""`` for the whole document,
    and the default for anything the pointer does not name."""
    doc = {"a/b": {"~k": [10, {"x": None}]}, "": 1}
    assert pointer_get(doc, "") is doc
    assert pointer_get(doc, "/a~1b/~0k/0") == 10
    assert pointer_get(doc, "/a~1b/~0k/1/x", "missing") is None
    assert pointer_get(doc, "/") == 1
    for absent in ("/nope", "/a~1b/~0k/2", "/a~1b/~0k/-", "/a~1b/~0k/0/deeper"):
        assert pointer_get(doc, absent) is None
        assert pointer_get(doc, absent, "missing") == "missing"
    for token in ("a/b", "~k", "~1", "/~0/"):
        assert unescape_pointer(escape_pointer(token)) == token
