"""Tests for Tool / ToolSet: canonical, order-invariant bytes, validation errors, repair."""

from __future__ import annotations

import copy
import pickle
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from pydantic import BaseModel, Field, TypeAdapter

from stableprompt import (
    Conversation,
    DuplicateToolError,
    PromptBuilder,
    ProviderRequest,
    RenderedPrompt,
    Repair,
    Tool,
    ToolError,
    ToolNameError,
    ToolSchemaError,
    ToolSet,
)
from stableprompt._canonical import loads, wire_json
from stableprompt._prompt._tool_schema import _fast_valid, properties_orders, schema_json

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies ---------------------------------------------------------------------------------

# Property names deliberately include keyword look-alikes: they must be treated as names.
_prop_names = st.one_of(
    st.sampled_from(["required", "type", "enum", "properties", "items", "anyOf", "a/b", "x~y"]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=8),
)
_text = st.text(max_size=12)


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    base = st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer", "number", "boolean"])},
        optional={
            "description": _text,
            "title": _text,
            "enum": st.lists(st.text(max_size=5), min_size=1, max_size=5, unique=True),
            "default": st.one_of(st.integers(-5, 5), st.text(max_size=5), st.none()),
            "examples": st.lists(st.integers(-3, 3), max_size=3),
            "x-vendor": st.dictionaries(st.sampled_from(["b", "a", "c"]), st.integers(0, 3)),
        },
    )
    return base


def _object(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        props = draw(st.dictionaries(_prop_names, children, max_size=4))
        schema: dict[str, Any] = {"type": "object", "properties": props}
        names = list(props)
        if names:
            schema["required"] = draw(st.lists(st.sampled_from(names), unique=True))
        if draw(st.booleans()):
            schema["additionalProperties"] = draw(st.booleans())
        if draw(st.booleans()):
            schema["description"] = draw(_text)
        return schema

    return build()


def _array(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"type": st.just("array"), "items": children})


def _any_of(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"anyOf": st.lists(children, min_size=1, max_size=3)})


_schema = st.recursive(
    _leaf(),
    lambda inner: st.one_of(_object(inner), _array(inner), _any_of(inner)),
    max_leaves=12,
)
_top_schema = _object(_schema)


@st.composite
def _tool_dicts(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(
        st.lists(
            st.text(alphabet="abcXYZ_-019", min_size=1, max_size=10),
            min_size=1,
            max_size=5,
            unique=True,
        )
    )
    return [
        {"name": n, "description": draw(_text), "input_schema": draw(_top_schema)} for n in names
    ]


def _shuffle_dict(d: dict[str, Any], rnd: random.Random) -> dict[str, Any]:
    keys = list(d)
    rnd.shuffle(keys)
    return {k: d[k] for k in keys}


def _reorder(node: Any, rnd: random.Random, *, properties: bool = False) -> Any:
    """Shuffle dict key order everywhere and permute schema-keyword ``required`` arrays, keeping
    order-bearing arrays (enum, anyOf, examples) as they are, and ``properties`` maps in their
    order unless ``properties`` (their order is meaning: what a model writes)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            value = {n: _reorder(s, rnd, properties=properties) for n, s in value.items()}
            if properties:
                value = _shuffle_dict(value, rnd)
        elif key in ("items", "additionalProperties"):
            value = _reorder(value, rnd, properties=properties)
        elif key == "anyOf":
            value = [_reorder(s, rnd, properties=properties) for s in value]
        elif key == "required":
            value = rnd.sample(value, len(value))
        elif isinstance(value, dict):
            value = _shuffle_dict(value, rnd)  # e.g. x-vendor: plain JSON data
        out[key] = value
    return _shuffle_dict(out, rnd)


# --- property tests -----------------------------------------------------------------------------


@SETTINGS
@given(tools=_tool_dicts(), rnd=st.randoms(use_true_random=False))
def test_any_permutation_and_key_order_gives_identical_bytes(
    tools: list[dict[str, Any]], rnd: random.Random
) -> None:
    """Permuting tools, shuffling keys at every level (but ``properties`` names) and permuting
    ``required`` keeps bytes."""
    reference = ToolSet.from_dicts(tools)
    shuffled = [
        _shuffle_dict({**t, "input_schema": _reorder(t["input_schema"], rnd)}, rnd)
        for t in rnd.sample(tools, len(tools))
    ]
    other = ToolSet.from_dicts(shuffled)
    assert other.canonical_bytes == reference.canonical_bytes
    assert other.digest == reference.digest
    assert other == reference
    assert reference.names == tuple(sorted(t["name"] for t in tools))


@SETTINGS
@given(tools=_tool_dicts(), rnd=st.randoms(use_true_random=False))
def test_properties_order_is_kept_and_is_part_of_the_bytes(
    tools: list[dict[str, Any]], rnd: random.Random
) -> None:
    """``properties`` names keep the order given (it is what a model writes: OpenAI Structured
    Outputs follow the schema's key order), so reordering them gives other bytes, and the
    canonical schema lists them in the order given at every level."""
    for tool in tools:
        schema = tool["input_schema"]
        shuffled = _reorder(schema, rnd, properties=True)
        a = Tool.from_dict(tool)
        b = Tool.from_dict({**tool, "input_schema": shuffled})
        assert properties_orders(a.input_schema) == properties_orders(schema)
        assert properties_orders(b.input_schema) == properties_orders(shuffled)
        assert (a == b) == (properties_orders(schema) == properties_orders(shuffled))


@SETTINGS
@given(tools=_tool_dicts())
def test_canonical_bytes_equal_canonical_json_of_dicts(tools: list[dict[str, Any]]) -> None:
    """Tool and ToolSet bytes equal canonical_json of their canonical dicts, and round-trip."""
    toolset = ToolSet.from_dicts(tools)
    assert toolset.canonical_bytes == b"[" + b",".join(t.canonical_bytes for t in toolset) + b"]"
    for tool in toolset:
        assert tool.schema_bytes == schema_json(tool.input_schema)
        assert loads(tool.canonical_bytes) == tool.to_dict()
        assert wire_json(tool.to_dict()) == tool.canonical_bytes
        assert Tool.from_dict(tool.to_anthropic()) == tool
        assert Tool.from_dict(tool.to_openai_chat()) == tool
        assert Tool.from_dict(tool.to_openai_responses()) == tool
        assert pickle.loads(pickle.dumps(tool)) == tool


@SETTINGS
@given(schema=_top_schema)
def test_fast_validator_never_accepts_what_jsonschema_rejects(schema: dict[str, Any]) -> None:
    """The fast meta-validation path is sound: it accepts only schemas jsonschema accepts."""
    mutated = copy.deepcopy(schema)
    mutated["minLength"] = -1  # invalid: must be refused by both
    for candidate, valid in ((schema, True), (mutated, False)):
        assert Draft202012Validator(Draft202012Validator.META_SCHEMA).is_valid(candidate) is valid
        if _fast_valid(candidate):
            assert valid


@SETTINGS
@given(
    values=st.lists(st.text(max_size=4), min_size=2, max_size=6, unique=True),
    rnd=st.randoms(use_true_random=False),
)
def test_enum_order_is_kept(values: list[str], rnd: random.Random) -> None:
    """enum is order-bearing: a different order gives different bytes, the same order the same."""
    permuted = rnd.sample(values, len(values))

    def tool(enum: list[str]) -> Tool:
        schema = {"type": "object", "properties": {"unit": {"type": "string", "enum": enum}}}
        return Tool("t", None, schema)

    assert tool(values).input_schema["properties"]["unit"]["enum"] == values
    assert (tool(values) == tool(permuted)) is (values == permuted)


def test_any_of_order_is_kept() -> None:
    """anyOf is order-bearing: swapping two branches changes the bytes."""
    a, b = {"type": "string"}, {"type": "integer"}

    def tool(branches: list[dict[str, Any]]) -> Tool:
        return Tool("t", None, {"type": "object", "properties": {"v": {"anyOf": branches}}})

    assert tool([a, b]).canonical_bytes != tool([b, a]).canonical_bytes
    assert tool([a, b]).input_schema["properties"]["v"]["anyOf"] == [a, b]


def test_set_like_arrays_sorted_only_where_they_are_keywords() -> None:
    """required / dependentRequired / type lists are sorted; a property named "required" is not
    a keyword and its enum keeps its order."""
    schema = {
        "type": "object",
        "properties": {
            "required": {"type": "string", "enum": ["z", "a"]},
            "type": {"type": ["string", "null", "integer"]},
            "b": {"type": "object", "properties": {"y": {}, "x": {}}, "required": ["y", "x"]},
        },
        "required": ["type", "required", "b"],
        "dependentRequired": {"b": ["type", "required"]},
    }
    out = Tool("t", None, schema).input_schema
    assert out["required"] == ["b", "required", "type"]
    assert out["dependentRequired"] == {"b": ["required", "type"]}
    assert out["properties"]["required"]["enum"] == ["z", "a"]
    assert out["properties"]["type"]["type"] == ["integer", "null", "string"]
    assert out["properties"]["b"]["required"] == ["x", "y"]
    assert list(out) == sorted(out)  # keys come back sorted
    assert schema["required"] == ["type", "required", "b"]  # the caller's dict is untouched


def test_tool_is_immutable_and_views_are_copies() -> None:
    """Tools reject attribute writes; mutating returned dicts does not change the tool."""
    tool = Tool("t", "d", {"type": "object", "properties": {"a": {"type": "string"}}})
    before = tool.canonical_bytes
    tool.input_schema["properties"]["a"]["type"] = "integer"
    tool.to_dict()["name"] = "x"
    tool.to_anthropic()["input_schema"]["type"] = "array"
    assert tool.canonical_bytes == before
    with pytest.raises(AttributeError):
        tool.name = "x"  # type: ignore[misc]
    toolset = ToolSet([tool])
    with pytest.raises(AttributeError):
        toolset._tools = ()


# --- golden bytes ------------------------------------------------------------------------------

# Moved by sp2 (issue 26 item 7): get_weather's ``properties`` keep their authored order
# ("unit", "city"), no longer sorted; every other key is still sorted.
GOLDEN_BYTES = (
    b'[{"description":"Get the weather for a city.","input_schema":{"properties":{"unit":'
    b'{"enum":["celsius","fahrenheit"],"type":"string"},"city":{"description":"City name.",'
    b'"type":"string"}},"required":["city","unit"],"type":"object"},"name":"get_weather"},'
    b'{"description":"Search the web.","input_schema":{"properties":{"q":{"type":"string"}},'
    b'"required":["q"],"type":"object"},"name":"search","strict":true}]'
)
GOLDEN_DIGEST = "3dca6d10ba8840e5c8a38102516e833f7241ca84390f562d5dbc716b66daab14"


def _golden_tools() -> list[Tool]:
    weather = Tool(
        "get_weather",
        "Get the weather for a city.",
        {
            "type": "object",
            "required": ["unit", "city"],
            "properties": {
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "city": {"type": "string", "description": "City name."},
            },
        },
    )
    search = Tool(
        "search",
        "Search the web.",
        {"properties": {"q": {"type": "string"}}, "required": ["q"], "type": "object"},
        strict=True,
    )
    return [search, weather]


def test_golden_bytes_and_digest() -> None:
    """A small tool set renders to pinned bytes and digest (a change needs a new version tag)."""
    toolset = ToolSet(_golden_tools())
    assert toolset.canonical_bytes == GOLDEN_BYTES
    assert toolset.digest == GOLDEN_DIGEST
    assert toolset.names == ("get_weather", "search")
    assert ToolSet(reversed(_golden_tools())).canonical_bytes == GOLDEN_BYTES


# --- provider shapes ---------------------------------------------------------------------------


def test_provider_shapes_match_sdk_types() -> None:
    """to_anthropic / to_openai_chat / to_openai_responses give the SDKs' field names."""
    import anthropic.types
    from openai.types.chat import ChatCompletionFunctionToolParam
    from openai.types.responses import FunctionToolParam

    search = ToolSet(_golden_tools())["search"]
    schema = {"properties": {"q": {"type": "string"}}, "required": ["q"], "type": "object"}
    anthropic_shape = {
        "name": "search",
        "description": "Search the web.",
        "input_schema": schema,
        "strict": True,
    }
    chat_shape = {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web.",
            "parameters": schema,
            "strict": True,
        },
    }
    responses_shape = {
        "type": "function",
        "name": "search",
        "description": "Search the web.",
        "parameters": schema,
        "strict": True,
    }
    assert search.to_anthropic() == anthropic_shape
    assert search.to_openai_chat() == chat_shape
    assert search.to_openai_responses() == responses_shape
    assert TypeAdapter(anthropic.types.ToolParam).validate_python(anthropic_shape)
    assert TypeAdapter(ChatCompletionFunctionToolParam).validate_python(chat_shape)
    assert TypeAdapter(FunctionToolParam).validate_python(responses_shape)
    plain = ToolSet(_golden_tools())["get_weather"]
    assert "strict" not in plain.to_openai_responses()
    assert "strict" not in plain.to_openai_chat()["function"]
    assert ToolSet(_golden_tools()).to_anthropic() == [
        t.to_anthropic() for t in ToolSet(_golden_tools())
    ]
    nodesc = Tool("n", None, {"type": "object"})
    assert nodesc.to_dict() == {"input_schema": {"type": "object"}, "name": "n"}
    assert "description" not in nodesc.to_openai_chat()["function"]


def test_from_dict_accepts_every_shape() -> None:
    """Anthropic, OpenAI Chat, OpenAI Responses and BFCL shapes build the same tool."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    shapes = [
        {"name": "s", "description": "d", "input_schema": schema},
        {"name": "s", "description": "d", "input_schema": schema, "type": "custom"},
        {"type": "function", "function": {"name": "s", "description": "d", "parameters": schema}},
        {"type": "function", "name": "s", "description": "d", "parameters": schema},
        {"name": "s", "description": "d", "parameters": schema},
    ]
    tools = [Tool.from_dict(s) for s in shapes]
    assert all(t == tools[0] for t in tools)
    assert tools[0].canonical_bytes == (
        b'{"description":"d","input_schema":{"properties":{"q":{"type":"string"}},'
        b'"type":"object"},"name":"s"}'
    )


# --- errors ------------------------------------------------------------------------------------

_OK = {"type": "object", "properties": {"city": {"type": "string"}}}


@pytest.mark.parametrize("name", ["bad name", "", "x" * 65, "émoji", "trailing\n"])
def test_bad_name_raises(name: str) -> None:
    """A name breaking ^[a-zA-Z0-9_-]{1,64}$ raises ToolNameError naming the tool."""
    with pytest.raises(ToolNameError) as info:
        Tool(name, "d", _OK)
    assert info.value.code == "tool-name-invalid"
    assert info.value.tool == name
    assert info.value.segment == f"tool:{name}"


def test_dotted_name_hints_repair_and_repair_renames() -> None:
    """A dotted name raises with a repair hint; repair=True renames it and records the fix."""
    with pytest.raises(ToolNameError, match=r"repair=True") as info:
        Tool.from_dict({"name": "api.weather", "parameters": _OK})
    assert info.value.code == "tool-name-invalid"
    tool = Tool.from_dict({"name": "api.weather", "parameters": _OK}, repair=True)
    assert tool.name == "api_weather"
    assert tool.repairs == (Repair("api_weather", None, "api.weather", "api_weather", "name-dot"),)


def test_duplicate_names_raise() -> None:
    """Two tools with one name raise DuplicateToolError naming it."""
    with pytest.raises(DuplicateToolError) as info:
        ToolSet([Tool("a", "x", _OK), Tool("b", "y", _OK), Tool("a", "z", _OK)])
    assert info.value.code == "tool-duplicate"
    assert info.value.tool == "a"


def test_invalid_schema_names_tool_and_pointer() -> None:
    """An invalid JSON Schema raises ToolSchemaError with tool and the JSON pointer of the fault."""
    schema = {"type": "object", "properties": {"city": {"type": "strng"}}}
    with pytest.raises(ToolSchemaError) as info:
        Tool("get_weather", "d", schema)
    assert (info.value.code, info.value.tool, info.value.pointer) == (
        "tool-schema-invalid",
        "get_weather",
        "/properties/city/type",
    )
    bad_count = {"type": "object", "properties": {"a/b": {"type": "string", "minLength": -1}}}
    with pytest.raises(ToolSchemaError) as info:
        Tool("t", "d", bad_count)
    assert info.value.pointer == "/properties/a~1b/minLength"
    with pytest.raises(ToolSchemaError) as info:
        Tool("t", "d", {"type": "object", "$ref": 3})  # slow path keyword, wrong type
    assert (info.value.code, info.value.pointer) == ("tool-schema-invalid", "/$ref")


def test_duplicate_required_entry_raises() -> None:
    """A name listed twice in required raises, pointing at the second occurrence."""
    schema = {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b", "a"]}
    with pytest.raises(ToolSchemaError) as info:
        Tool("t", "d", schema)
    assert (info.value.code, info.value.tool, info.value.pointer) == (
        "tool-schema-invalid",
        "t",
        "/required/2",
    )


@pytest.mark.parametrize(
    ("schema", "code"),
    [
        ({"type": "array", "items": {}}, "tool-schema-not-object"),
        ({"type": ["object", "null"]}, "tool-schema-not-object"),
        ({"properties": {}}, "tool-schema-nonstandard"),
    ],
)
def test_top_level_must_be_object(schema: dict[str, Any], code: str) -> None:
    """A top level other than "type": "object" raises at pointer /type."""
    with pytest.raises(ToolSchemaError) as info:
        Tool("t", "d", schema)
    assert (info.value.code, info.value.tool, info.value.pointer) == (code, "t", "/type")


def test_nan_in_schema_raises_with_pointer() -> None:
    """NaN has no canonical JSON form: ToolSchemaError with code canonical-nan and pointer."""
    schema = {"type": "object", "properties": {"x": {"type": "number", "maximum": float("nan")}}}
    with pytest.raises(ToolSchemaError) as info:
        Tool("t", "d", schema)
    assert (info.value.code, info.value.tool, info.value.pointer) == (
        "canonical-nan",
        "t",
        "/properties/x/maximum",
    )


def test_schema_not_a_dict_and_bad_description() -> None:
    """A non-dict schema and a non-str description raise typed errors naming the tool."""
    with pytest.raises(ToolSchemaError) as info:
        Tool("t", "d", [1])  # type: ignore[arg-type]
    assert (info.value.code, info.value.pointer) == ("tool-schema-invalid", "")
    with pytest.raises(ToolError) as info2:
        Tool("t", 3, _OK)  # type: ignore[arg-type]
    assert (info2.value.code, info2.value.tool) == ("tool-description-invalid", "t")


def test_untyped_function_parameter_raises() -> None:
    """from_function on an unannotated parameter names the tool and parameter pointer."""

    def lookup(city: str, days) -> None:  # type: ignore[no-untyped-def]
        """Look up."""

    with pytest.raises(ToolSchemaError) as info:
        Tool.from_function(lookup)
    assert (info.value.code, info.value.tool, info.value.pointer) == (
        "tool-param-untyped",
        "lookup",
        "/properties/days",
    )

    def variadic(*names: str) -> None:
        """V."""

    with pytest.raises(ToolSchemaError) as info:
        Tool.from_function(variadic)
    assert (info.value.code, info.value.pointer) == ("tool-param-unsupported", "/properties/names")


def test_docstring_documenting_unknown_parameter_raises() -> None:
    """An Args: entry for a parameter that does not exist is an error, not silently dropped."""

    def f(a: int) -> None:
        """F.

        Args:
            a: A.
            b: Not a parameter.
        """

    with pytest.raises(ToolSchemaError) as info:
        Tool.from_function(f)
    assert (info.value.code, info.value.pointer) == ("tool-docstring-mismatch", "/properties/b")


@pytest.mark.parametrize(
    "d",
    [
        {"description": "no name", "parameters": _OK},
        {"type": "function"},
        {"type": "web_search"},
        {"name": "x", "input_schema": _OK, "type": "function"},
        {"name": "x", "input_schema": _OK, "cache_control": {"type": "ephemeral"}},
        {"type": "function", "function": {"name": "x", "parameters": _OK}, "extra": 1},
        ["not", "a", "dict"],
    ],
)
def test_unknown_dict_shape_raises(d: Any) -> None:
    """A dict of no known shape, or with unsupported keys, raises ToolError tool-shape-unknown."""
    with pytest.raises(ToolError) as info:
        Tool.from_dict(d)
    assert info.value.code == "tool-shape-unknown"


def test_bfcl_dict_type_without_repair_raises_with_hint() -> None:
    """BFCL's "type": "dict" raises tool-schema-nonstandard at its pointer, hinting repair=True."""
    d = {
        "name": "f",
        "description": "d",
        "parameters": {"type": "object", "properties": {"opts": {"type": "dict"}}},
    }
    with pytest.raises(ToolSchemaError, match=r"repair=True") as info:
        Tool.from_dict(d)
    assert (info.value.code, info.value.tool, info.value.pointer) == (
        "tool-schema-nonstandard",
        "f",
        "/properties/opts/type",
    )
    with pytest.raises(ToolSchemaError) as info:
        Tool.from_dict({"name": "f", "description": "d"})
    assert (info.value.code, info.value.pointer) == ("tool-schema-nonstandard", "")


# --- repair ------------------------------------------------------------------------------------


def test_repair_records_every_fix() -> None:
    """repair=True fixes each non-standard form and records one Repair per fix, in walk order."""
    d: dict[str, Any] = {
        "name": "calc.add",
        "description": "Add.",
        "parameters": {
            "properties": {
                "a": {"type": "float", "required": True},
                "b": {"type": "int", "optional": True},
                "c": {"type": "integer "},
                "d": {"type": "tuple", "items": {"type": "any"}},
                "e": {"type": "dict", "properties": {"f": {"type": "bool"}}, "required": ["f"]},
                "g": {"type": "str", "required": False},
                "required": {"type": "String"},
                "h": {"type": ["list", "null"]},
            },
            "required": ["c"],
        },
        "response": {"type": "dict", "properties": {}},
    }
    tool = Tool.from_dict(d, repair=True)
    assert tool.name == "calc_add"
    assert tool.repairs == (
        Repair("calc_add", None, {"type": "dict", "properties": {}}, None, "response-dropped"),
        Repair("calc_add", None, "calc.add", "calc_add", "name-dot"),
        Repair("calc_add", "/properties/a/type", "float", "number", "type-float"),
        Repair("calc_add", "/properties/a/required", True, None, "required-bool"),
        Repair("calc_add", "/properties/b/type", "int", "integer", "type-int"),
        Repair("calc_add", "/properties/b/optional", True, None, "optional-removed"),
        Repair("calc_add", "/properties/c/type", "integer ", "integer", "type-spelling"),
        Repair("calc_add", "/properties/d/type", "tuple", "array", "type-tuple"),
        Repair("calc_add", "/properties/d/items/type", "any", None, "type-any"),
        Repair("calc_add", "/properties/e/type", "dict", "object", "type-dict"),
        Repair("calc_add", "/properties/e/properties/f/type", "bool", "boolean", "type-bool"),
        Repair("calc_add", "/properties/g/type", "str", "string", "type-str"),
        Repair("calc_add", "/properties/g/required", False, None, "required-bool"),
        Repair("calc_add", "/properties/required/type", "String", "string", "type-spelling"),
        Repair("calc_add", "/properties/h/type/0", "list", "array", "type-list"),
        Repair("calc_add", "/type", None, "object", "type-missing"),
    )
    schema = tool.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["a", "c"]
    assert schema["properties"]["a"] == {"type": "number"}
    assert schema["properties"]["b"] == {"type": "integer"}
    assert schema["properties"]["d"] == {"type": "array", "items": {}}
    assert schema["properties"]["e"]["properties"]["f"] == {"type": "boolean"}
    assert schema["properties"]["h"]["type"] == ["array", "null"]
    assert ToolSet([tool]).repairs == tool.repairs
    untouched: Any = d["parameters"]
    assert untouched["properties"]["a"] == {"type": "float", "required": True}


def test_repair_is_a_no_op_on_standard_schemas() -> None:
    """A standard schema gives the same tool and no repairs with repair=True."""
    plain = Tool.from_dict({"name": "t", "parameters": _OK})
    repaired = Tool.from_dict({"name": "t", "parameters": _OK}, repair=True)
    assert repaired == plain
    assert repaired.repairs == ()
    missing = Tool.from_dict({"type": "function", "name": "t"}, repair=True)
    assert missing.input_schema == {"properties": {}, "type": "object"}
    assert missing.repairs == (
        Repair("t", "", None, {"type": "object", "properties": {}}, "parameters-missing"),
    )


# --- constructors ------------------------------------------------------------------------------


class Address(BaseModel):
    street: str
    zip_code: str = Field(description="Postal code.")


class CreateUser(BaseModel):
    """Create a user account."""

    name: str = Field(description="Full name.")
    role: Literal["admin", "user"] = "user"
    address: Address | None = None


def test_from_pydantic_keeps_pydantic_schema() -> None:
    """from_pydantic uses model_json_schema() as emitted and the docstring as description,
    which is not sent a second time inside the schema (issue 14, item 7)."""
    tool = Tool.from_pydantic(CreateUser)
    assert tool.name == "CreateUser"
    assert tool.description == "Create a user account."
    emitted = CreateUser.model_json_schema()
    assert emitted["description"] == tool.description
    assert tool.input_schema == {k: v for k, v in emitted.items() if k != "description"}
    assert tool.input_schema["$defs"]["Address"]["required"] == ["street", "zip_code"]
    assert tool.input_schema["required"] == ["name"]
    renamed = Tool.from_pydantic(Address, name="set_address", description="Set it.")
    assert (renamed.name, renamed.description) == ("set_address", "Set it.")
    with pytest.raises(ToolError) as info:
        Tool.from_pydantic(dict)
    assert info.value.code == "tool-invalid"


def test_from_function_builds_schema_from_signature_and_docstring() -> None:
    """from_function: required = no default; docstring summary and Args become descriptions."""

    def get_weather(city: str, days: int = 1, unit: Literal["c", "f"] = "c") -> str:
        """Get the weather forecast
        for a city.

        Longer notes that are not part of the description.

        Args:
            city: City name, e.g.
                "Paris".
            days (int): Number of days.

        Returns:
            The forecast.
        """
        return city

    tool = Tool.from_function(get_weather)
    assert tool.name == "get_weather"
    assert tool.description == "Get the weather forecast for a city."
    assert tool.input_schema == {
        "additionalProperties": False,
        "properties": {
            "city": {"description": 'City name, e.g. "Paris".', "title": "City", "type": "string"},
            "days": {
                "default": 1,
                "description": "Number of days.",
                "title": "Days",
                "type": "integer",
            },
            "unit": {"default": "c", "enum": ["c", "f"], "title": "Unit", "type": "string"},
        },
        "required": ["city"],
        "type": "object",
    }
    assert Tool.from_function(get_weather, name="wx", description="W.").name == "wx"


def test_type_list_holding_objects_is_a_typed_schema_error() -> None:
    """A ``"type"`` list with a dict or list in it (reachable from JSON) is a ToolSchemaError at
    that pointer, not ``TypeError: unhashable`` (issue 9 #10)."""
    for bad in ([{"x": 1}, "string"], ["string", ["x"]]):
        with pytest.raises(ToolSchemaError) as info:
            Tool("t", "d", {"type": "object", "properties": {"a": {"type": bad}}})
        assert info.value.code == "tool-schema-invalid"
        assert info.value.pointer == "/properties/a/type"


def test_deep_or_circular_schemas_are_typed_depth_errors() -> None:
    """A schema nested ~1,000 levels deep, or cyclic, is ``tool-schema-depth`` with the pointer
    where the walk stopped, never a RecursionError (issue 9 #11)."""
    deep: dict[str, Any] = {"type": "object"}
    node = deep
    for _ in range(1000):
        node["properties"] = {"a": {"type": "object"}}
        node = node["properties"]["a"]
    cyclic: dict[str, Any] = {"type": "object", "properties": {}}
    cyclic["properties"]["a"] = cyclic
    for schema in (deep, cyclic):
        with pytest.raises(ToolSchemaError) as info:
            Tool("t", "d", schema)
        assert info.value.code == "tool-schema-depth"
        assert (info.value.pointer or "").startswith("/properties/a/properties/a")
    with pytest.raises(ToolSchemaError) as info:
        Tool.from_dict(orjson.loads(
            b'{"name":"t","input_schema":' + b'{"type":"object","properties":{"a":' * 400
            + b"{}" + b"}}" * 400 + b"}"))
    assert info.value.code == "tool-schema-depth"


def test_hostile_mappings_and_wrong_containers_are_typed() -> None:
    """A Mapping whose methods raise (as a schema or a tool dict), a non-iterable given to
    ToolSet / from_dicts, and an empty ``type`` list are typed errors (review findings)."""
    from collections.abc import Iterator, Mapping

    class Bad(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            raise RuntimeError("boom")

        def __iter__(self) -> Iterator[str]:
            raise RuntimeError("boom")

        def __len__(self) -> int:
            return 1

    for build in (lambda: Tool("t", "d", Bad()), lambda: Tool.from_dict(Bad()),
                  lambda: ToolSet.from_dicts([Bad()])):
        with pytest.raises(ToolError) as info:
            build()
        assert info.value.code == "tool-input-unreadable"
    for build in (lambda: ToolSet.from_dicts(5), lambda: ToolSet(5)):  # type: ignore[arg-type]
        with pytest.raises(ToolError) as info:
            build()
        assert info.value.code == "tool-shape-unknown"
    with pytest.raises(ToolSchemaError) as schema_info:
        Tool("t", "d", {"type": "object", "properties": {"a": {"type": []}}})
    assert (schema_info.value.code, schema_info.value.pointer) == (
        "tool-schema-invalid", "/properties/a/type")


_CAPTURES = Path(__file__).parent / "fixtures" / "stabilize"


@pytest.mark.filterwarnings("ignore::stableprompt.BreakpointWarning")  # a short head
def test_strict_tool_from_the_openai_sdk_keeps_its_field_order_in_every_render() -> None:
    """A ``strict: true`` tool the official openai SDK wrote (``pydantic_function_tool``,
    fields ``reasoning, confidence, answer``: the order Structured Outputs generate them in)
    keeps that ``properties`` order in the Tool and in every wire render, with every other
    key sorted; the builder's head stays byte-stable across renders."""
    body = loads((_CAPTURES / "openai_strict_tool.json").read_bytes())
    sent = body["tools"][0]
    tool = Tool.from_dict(sent)
    order = ("reasoning", "confidence", "answer")
    assert tuple(tool.input_schema["properties"]) == order
    assert tool.strict is True
    assert list(tool.input_schema) == sorted(tool.input_schema)
    chat = tool.to_openai_chat()
    assert tuple(chat["function"]["parameters"]["properties"]) == order
    head = PromptBuilder().system("You answer arithmetic questions.").tools([tool]).freeze()
    renders: list[Callable[[RenderedPrompt], ProviderRequest]] = [
        lambda r: r.to_openai_chat(model="gpt-5.6"),
        lambda r: r.to_gemini(model="gemini-2.5-pro"),
        lambda r: r.to_openai_responses(model="gpt-5.6"),
        lambda r: r.to_anthropic(model="claude-opus-5", max_tokens=64)]
    for render in renders:
        conversation = Conversation(head)
        conversation.user("What is 17 * 23?")
        first = render(conversation.render()).content
        again = render(conversation.render()).content
        assert first == again
        data = first.decode()
        at = [data.index(f'"{name}":{{') for name in order]
        assert at == sorted(at), data
    # the same tool with its fields sorted is another tool (the model would write
    # "answer" before "reasoning")
    resorted = dict(sent["function"]["parameters"])
    resorted["properties"] = dict(sorted(resorted["properties"].items()))
    other = Tool.from_dict({**sent, "function": {**sent["function"], "parameters": resorted}})
    assert other != tool and other.digest != tool.digest
